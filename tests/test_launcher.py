"""Launcher isolation for real: a fork server in a real interpreter (this one, or a lane's venv
built by uv from a loopback index) runs the reproducers, and every outcome, exit code and detail
is the one a fresh interpreter per run gives."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from retire.runs.launcher import Launcher, common_environment, preload_of
from retire.runs.reproduce import run_reproducer
from shims.errors import InputError
from shims.manifest import load_manifest, parse_manifest
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.wheels import build_wheel
from tests.test_runs import CRASHING_REPRODUCER

#: A stand-in for torch: costly to import (it says how often it was), with module state a run can
#: leak.
HEAVY = """
import os, time
log = os.environ.get("HEAVY_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()}\\n")
time.sleep(float(os.environ.get("HEAVY_SLEEP", "0")))
STATE = []
"""
#: Fails when an earlier run's leak is visible: its own mutation must die with its fork.
LEAKY_REPRODUCER = """
from shims import reproducer

def check(with_shim):
    import heavypkg, toylib
    seen = list(heavypkg.STATE)
    heavypkg.STATE.append("dirty")
    toylib.LEAKED = True
    if seen:
        raise RuntimeError(f"state leaked from another run: {seen}")
    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
EXITING_REPRODUCER = """
import sys
print("no protocol here")
sys.exit("a message instead of a code")
"""
#: Hangs, after starting a grandchild that would outlive a kill of the child alone.
HANGING_REPRODUCER = """
import os, subprocess, sys, time
from shims import reproducer

def check(with_shim):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["GRANDCHILD_LOG"], "w") as handle:
        handle.write(str(child.pid))
    time.sleep(600)

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
#: Kills the launcher that forked it (a crash of the launcher in the middle of a run).
LAUNCHER_KILLER = """
import os, signal
from shims import reproducer

def check(with_shim):
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
        if b"shims.launcher" in handle.read():
            os.kill(os.getppid(), signal.SIGKILL)
    import toylib
    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
PRELOAD = '\npreload = ["heavypkg", "toylib"]\n'


def _shim(
    root: Path,
    shim_id: str,
    reproducer: str = shimtree.TOY_REPRODUCER,
    *,
    timeout: int = 60,
    **options,
):
    text = (
        shimtree.manifest_text(shim_id, **options).replace("timeout = 60", f"timeout = {timeout}")
        + PRELOAD
    )
    return load_manifest(
        shimtree.write_shim(root, shim_id, manifest=text, reproducer=reproducer) / "manifest.toml"
    )


@pytest.fixture
def tree(tmp_path):
    root, site = tmp_path / "shims", tmp_path / "site"
    shimtree.write_target(site)
    (site / "heavypkg.py").write_text(textwrap.dedent(HEAVY))
    env = shimtree.subprocess_env(
        tmp_path,
        root,
        site,
        HEAVY_LOG=str(tmp_path / "heavy.log"),
        GRANDCHILD_LOG=str(tmp_path / "grandchild.pid"),
    )
    return root, env, tmp_path


def _same(record) -> tuple:
    """What must not depend on the isolation: outcome, sentinel, exit code, detail, host stamp."""
    return (
        record.outcome,
        record.sentinel,
        record.exit_code,
        record.detail,
        record.host,
        record.versions,
    )


@pytest.mark.slow
def test_forked_runs_match_fresh_interpreters_and_stay_isolated(tree):
    root, env, tmp = tree
    manifests = [
        _shim(root, "toy"),
        _shim(root, "toy_leaky", LEAKY_REPRODUCER),
        _shim(root, "toy_crash", CRASHING_REPRODUCER),
        _shim(root, "toy_exit", EXITING_REPRODUCER),
    ]
    with Launcher(sys.executable, preload_of(manifests), env, targets=["toylib"]) as launcher:
        assert launcher.alive and launcher.preloaded == (
            "shims.reproducer",
            "argparse",
            "shims.child",
            "heavypkg",
            "toylib",
        )
        # the target was imported before any shim: patched later
        assert launcher.targets_loaded == ("toylib",)
        forked = [
            launcher.run(m, mode, env=env)
            for m in manifests
            for mode in ("without", "with", "without")
        ]
        assert launcher.runs == len(forked) and launcher.fallback is None
    fresh = [
        run_reproducer(m, mode, env=env)
        for m in manifests
        for mode in ("without", "with", "without")
    ]
    assert [_same(r) for r in forked] == [_same(r) for r in fresh]
    outcomes = [r.outcome for r in forked]
    # no patch, no leak survives a run
    assert outcomes[:6] == ["bug-reproduced", "fix-validated", "bug-reproduced"] * 2
    assert outcomes[6:] == ["crashed"] * 6
    assert forked[9].detail == "exit code 1 and no single sentinel line"
    assert (
        "a message instead of a code" in forked[9].output_tail
        and "no protocol here" in forked[9].output_tail
    )
    # activated on the module the launcher had imported
    assert "# shim toy: applied" in forked[1].output_tail
    # heavypkg: imported once by the launcher, then by each fresh interpreter that needs it
    # (toy_leaky's 3).
    assert len((tmp / "heavy.log").read_text().split()) == 1 + 3


@pytest.mark.slow
def test_a_timeout_kills_the_whole_process_group(tree):
    root, env, tmp = tree
    manifest = _shim(root, "toy_hang", HANGING_REPRODUCER, timeout=1)
    with Launcher(sys.executable, ["heavypkg"], env) as launcher:
        began = time.monotonic()
        record = launcher.run(manifest, "without", env=env)
        took = time.monotonic() - began
        # the launcher serves on
        after = launcher.run(_shim(root, "toy"), "without", env=env)
    assert (
        record.outcome == "timeout"
        and record.detail == "killed after 1 s"
        and record.exit_code == -signal.SIGKILL
    )
    assert 1 <= took < 5
    assert after.outcome == "bug-reproduced"
    grandchild = int((tmp / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while (
        Path(f"/proc/{grandchild}").exists()
        and _state(grandchild) != "Z"
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert not Path(f"/proc/{grandchild}").exists() or _state(grandchild) == "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


@pytest.mark.slow
def test_a_dead_launcher_falls_back_to_one_interpreter_per_run(tree):
    root, env, _ = tree
    killer, toy = _shim(root, "toy_killer", LAUNCHER_KILLER), _shim(root, "toy")
    notes = []
    with Launcher(sys.executable, ["heavypkg"], env, say=notes.append) as launcher:
        # kills the launcher mid-run: run again, fresh
        first = launcher.run(killer, "with", env=env)
        second = launcher.run(toy, "without", env=env)
        assert not launcher.alive and launcher.runs == 0
    assert first.outcome == "fix-validated" and second.outcome == "bug-reproduced"
    assert "the launcher died during toy_killer with" in launcher.fallback
    assert notes and "the remaining runs use one interpreter each (--isolation process)" in notes[0]


@pytest.mark.slow
def test_a_preload_that_initialises_cuda_is_refused(tree):
    root, env, tmp = tree
    fake = tmp / "fake-torch"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def is_initialized():\n"
        "        import os\n        return os.environ.get('FAKE_CUDA') == '1'\n"
    )
    manifest = _shim(root, "toy")
    env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + str(fake)}
    with Launcher(sys.executable, ["torch"], {**env, "FAKE_CUDA": "1"}) as refused:
        record = refused.run(manifest, "without", env=env)
    assert "initialised CUDA" in refused.fallback and record.outcome == "bug-reproduced"
    with Launcher(sys.executable, ["torch", "no_such_module"], env) as served:
        assert (
            served.alive
            and served.preloaded[-1:] == ("torch",)
            and "ModuleNotFoundError" in served.failed["no_such_module"]
        )
        assert served.run(manifest, "with", env=env).outcome == "fix-validated"


#: A stand-in for torch's fork poisoning, which needs a GPU to happen for real (seen on an H100:
#: Megatron-Core asks torch.cuda.is_available() at import; through the CUDA runtime, that installs
#: torch's fork handler and every forked child fails "Cannot re-initialize CUDA in forked
#: subprocess").
FORK_POISONING_TORCH = """
import os
_poisoned_in = None

class _C:
    @staticmethod
    def _cuda_isInBadFork():
        return _poisoned_in is not None and os.getpid() != _poisoned_in

class cuda:
    @staticmethod
    def is_initialized():
        return False

    @staticmethod
    def _device_count_nvml():
        return int(os.environ.get("FAKE_GPUS", "1"))

    @staticmethod
    def is_available():
        global _poisoned_in
        if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1":  # the CUDA runtime, not NVML
            _poisoned_in = os.getpid()
        return True
"""


@pytest.mark.slow
def test_a_preload_that_asks_for_cuda_leaves_forks_usable_or_is_refused(tree):
    root, env, tmp = tree
    fake = tmp / "fake-torch"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FORK_POISONING_TORCH)
    (fake / "asks_for_cuda.py").write_text("import torch\nAVAILABLE = torch.cuda.is_available()\n")
    manifest = _shim(root, "toy")
    env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + str(fake)}
    # The launcher's preloads ask NVML: forks stay usable and the launcher serves.
    with Launcher(sys.executable, ["torch", "asks_for_cuda"], env) as served:
        assert served.alive and served.preloaded[-2:] == ("torch", "asks_for_cuda"), served.fallback
        assert served.run(manifest, "with", env=env).outcome == "fix-validated"
    # Forced through the CUDA runtime, the fork check catches it: refused, and the runs still
    # happen.
    forced = {**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "0"}
    with Launcher(sys.executable, ["torch", "asks_for_cuda"], forced) as refused:
        record = refused.run(manifest, "without", env=env)
    assert "unable to use CUDA in a fork" in refused.fallback and record.outcome == "bug-reproduced"
    # A host without a GPU loses nothing in a poisoned fork (seen on CI's CPU host): served.
    for no_gpu in ("0", "-1"):
        with Launcher(
            sys.executable, ["torch", "asks_for_cuda"], {**forced, "FAKE_GPUS": no_gpu}
        ) as cpu_only:
            assert cpu_only.alive, cpu_only.fallback
            assert cpu_only.run(manifest, "with", env=env).outcome == "fix-validated"


def test_the_launcher_environment_is_what_every_run_shares():
    assert common_environment(
        [{"A": "1", "B": "2", "C": "3"}, {"A": "1", "B": "x"}, {"A": "1", "C": "3"}]
    ) == {"A": "1"}
    assert common_environment([]) == {}


def test_preload_is_validated_and_documented(tmp_path):
    text = shimtree.manifest_text("toy")
    assert parse_manifest(
        text + '\npreload = ["torch", "megatron.core", "torch"]\n', "shims/toy/manifest.toml"
    ).reproducer.preload == ("torch", "megatron.core")
    with pytest.raises(InputError) as bad:
        parse_manifest(text + '\npreload = ["megatron-core"]\n', "shims/toy/manifest.toml")
    assert "reproducer.preload[0]" in str(bad.value) and "megatron.core" in str(bad.value)
    docs = (Path(__file__).resolve().parents[1] / "docs" / "shims.md").read_text()
    assert "| `preload` |" in docs


# ---------------------------------------------------------------------------------------------
# A lane built by uv: `patchlane run --isolation process` and `--isolation launcher` agree


@pytest.fixture
def heavy_project(project, universe):
    wheels, index = universe["root"] / "heavy", universe["main"].index
    for name, files, when in [
        ("heavypkg", {"heavypkg.py": textwrap.dedent(HEAVY)}, "2026-01-02"),
        ("toylib", {"toylib.py": textwrap.dedent(shimtree.BUGGY_TARGET)}, "2026-01-05"),
    ]:
        # the index lives for the session
        if index.find(f"{name}-1.0-py3-none-any.whl") is None:
            index.add(build_wheel(wheels, name, "1.0", files=files), when)
    root = project.root / "shims"
    for shim_id, reproducer, timeout in [
        ("toy", shimtree.TOY_REPRODUCER, 60),
        ("toy_leaky", LEAKY_REPRODUCER, 60),
        ("toy_crash", CRASHING_REPRODUCER, 60),
    ]:
        _shim(root, shim_id, reproducer, timeout=timeout)
    project.write(
        "heavy",
        """
[lane]
python = "3.11"
requirements = ["toylib==1.0", "heavypkg==1.0"]
shims = ["toy", "toy_leaky", "toy_crash"]
[lane.indexes.main]
url = "@MAIN@"
default = true
""",
    )
    return project


@pytest.mark.slow
def test_lane_outcomes_are_the_same_in_both_isolations(
    heavy_project, tmp_path, monkeypatch, capsys
):
    p = heavy_project
    monkeypatch.setenv("HEAVY_LOG", str(tmp_path / "heavy.log"))
    # lane code sees only the allow-list and these
    monkeypatch.setenv("PATCHLANE_PASS_ENV", "HEAVY_LOG")
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    summaries = {}
    for isolation in ("process", "launcher"):
        (tmp_path / "heavy.log").write_text("")
        # The default where the lane's shims declare preloads is the launcher.
        flags = ["--isolation", isolation] if isolation == "process" else []
        code, _out, _err = run_cli(p.root, "run", *flags, "--run-id", isolation, capsys=capsys)
        # a crash fails the run, in either isolation
        assert code == 1
        summaries[isolation] = json.loads(
            (p.root / f".patchlane/runs/{isolation}/heavy.json").read_text()
        )
        imports = len((tmp_path / "heavy.log").read_text().split())
        # toy_leaky's two runs import it: once in all
        assert imports == (1 if isolation == "launcher" else 2)
    assert (
        summaries["launcher"]["isolation"] == "launcher"
        and summaries["process"]["isolation"] == "process"
    )
    assert summaries["launcher"]["shims"] == summaries["process"]["shims"]
    assert {s["shim"]: s["outcome"] for s in summaries["launcher"]["shims"]} == {
        "toy": "needed",
        "toy_leaky": "needed",
        "toy_crash": "crashed",
    }
    from retire.evidence import validation

    records = validation.load(p.root / "validation/manifest.jsonl")
    by_run = {
        iso: {(r.shim, r.mode): _same(r) for r in records if r.run == iso}
        for iso in ("process", "launcher")
    }
    # no with-run after a crash
    assert by_run["launcher"] == by_run["process"] and len(by_run["launcher"]) == 5
    # the lane's interpreter ran it
    assert by_run["launcher"][("toy", "without")][4]["python"].startswith("3.11")


# ---------------------------------------------------------------------------------------------
# Bisection: the base imported once, each candidate's fork sees only the candidate's toylib

BISECT_REPRODUCER = """
from shims import reproducer

def check(with_shim):
    import heavypkg, toylib
    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.fixture(scope="module")
def toylib_series(tmp_path_factory):
    from tests.support.index import IndexServer, PackageIndex

    folder, index = tmp_path_factory.mktemp("series"), PackageIndex()
    # add() fixed from 1.3
    for i in range(5):
        source = (
            f'__version__ = "1.{i}"\n\ndef add(a, b):\n    return a {"+" if i >= 3 else "-"} b\n'
        )
        index.add(
            build_wheel(folder, "toylib", f"1.{i}", files={"toylib/__init__.py": source}),
            f"2026-01-{10 + i}",
        )
    with IndexServer(index) as server:
        yield server


@pytest.mark.slow
def test_bisection_forks_each_candidate_from_one_base(tmp_path, toylib_series):
    from retire import bisect
    from retire.runs.isolation import Isolation

    # the base's heavy dependency; the target comes from the candidates
    site = tmp_path / "base-site"
    site.mkdir()
    (site / "heavypkg.py").write_text(textwrap.dedent(HEAVY))
    # a preload that imports the target itself
    (site / "drags.py").write_text("import toylib\n")
    log = tmp_path / "heavy.log"
    env = {**shimtree.subprocess_env(tmp_path, tmp_path / "shims", site), "HEAVY_LOG": str(log)}
    # preload = ["heavypkg", "toylib"]
    manifest = _shim(tmp_path / "shims", "toy", BISECT_REPRODUCER)
    versions = [f"1.{i}" for i in range(5)]
    results = {}
    for isolation in ("process", "launcher"):
        log.write_text("")
        results[isolation] = bisect.bisect(
            manifest,
            versions,
            bisect.BisectJob(
                manifest.id,
                index=toylib_series.url,
                env=env,
                work_dir=tmp_path / "work",
                isolation=Isolation(isolation),
            ),
        )
        imports = len(log.read_text().split())
        assert imports == (1 if isolation == "launcher" else results[isolation].runs)
    steps = {
        iso: [(p.version, p.state, p.outcome, p.detail) for p in r.probes]
        for iso, r in results.items()
    }
    assert steps["launcher"] == steps["process"]
    assert (results["launcher"].last_broken, results["launcher"].first_fixed) == ("1.2", "1.3")
    # several candidates, one import of the base
    assert results["launcher"].runs >= 3

    from retire.bisect.runner import OverlayRunner, inspect_base

    runner = OverlayRunner(
        manifest,
        inspect_base(sys.executable, "toylib"),
        bisect.BisectJob(manifest.id, index=toylib_series.url, env=env, work_dir=tmp_path / "work"),
    )
    # the target is never preloaded
    assert runner.preload == ("heavypkg",) and runner.isolation == "launcher"
    old = str(shimtree.write_target(tmp_path / "old").parent)
    dragging = OverlayRunner(
        replace_preload(manifest, ("drags",)),
        inspect_base(sys.executable, "toylib"),
        bisect.BisectJob(
            manifest.id,
            index=toylib_series.url,
            env={**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + old},
            work_dir=tmp_path / "work",
        ),
    )
    try:
        dragging.run("1.3")
        assert "imported the target toylib, which a candidate must replace" in dragging.note
    finally:
        dragging.close()


def replace_preload(manifest, preload):
    from dataclasses import replace

    return replace(manifest, reproducer=replace(manifest.reproducer, preload=preload))
