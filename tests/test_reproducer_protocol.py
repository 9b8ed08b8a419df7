"""The reproducer protocol end to end: real reproducers in real subprocesses, read back by the
engine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from retire.evidence.validation import dumps
from retire.runs.reproduce import run_reproducer
from shims.manifest import load_manifest
from shims.reproducer import HOST_PREFIX, host_stamp, parse_output
from tests.support.shimtree import manifest_text, subprocess_env, write_shim, write_target


@pytest.fixture
def lane_env(tmp_path: Path):
    """A toy "lane": toylib 1.0 (buggy) on the path; returns (root, site, env)."""
    root, site = tmp_path / "shims", tmp_path / "site"
    write_target(site)
    env = subprocess_env(tmp_path, root, site)
    # run_reproducer must find a shim outside the catalogue itself
    del env["PATCHLANE_SHIMS_PATH"]
    return root, site, env


def _shim(root: Path, shim_id: str, body: str, **options) -> object:
    reproducer = "from shims import reproducer\n" + body
    return load_manifest(
        write_shim(root, shim_id, reproducer=reproducer, **options) / "manifest.toml"
    )


@pytest.mark.slow
def test_both_modes_prove_bug_and_fix(lane_env):
    root, _site, env = lane_env
    manifest = load_manifest(write_shim(root, "toy_add") / "manifest.toml")

    without = run_reproducer(manifest, "without", env=env, lane="toy-lane")
    assert (without.outcome, without.sentinel, without.exit_code) == (
        "bug-reproduced",
        "BUG_REPRODUCED",
        10,
    )
    assert without.lane == "toy-lane" and without.mode == "without"
    assert without.versions == {"toylib": "1.0"}
    assert without.host["hostname"] and without.host["python"]
    assert without.host["gpu"] is None or isinstance(without.host["gpu"], str)

    with_shim = run_reproducer(manifest, "with", env=env)
    assert (with_shim.outcome, with_shim.sentinel, with_shim.exit_code) == (
        "fix-validated",
        "FIX_VALIDATED",
        0,
    )
    assert "# shim toy_add: applied" in with_shim.output_tail
    assert with_shim.record_id != without.record_id


def test_upstream_fixed_validates_without_the_shim(lane_env):
    root, site, env = lane_env
    write_target(site, "def add(a, b):\n    return a + b\n", version="1.1")
    manifest = load_manifest(write_shim(root, "toy_add") / "manifest.toml")
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "fix-validated" and record.versions == {"toylib": "1.1"}


def test_skip_is_exit_77_with_its_reason(lane_env):
    root, _, env = lane_env
    manifest = _shim(
        root,
        "toy_skip",
        """
def check(with_shim):
    raise reproducer.Skip("needs a Hopper GPU\\nnot this host")
reproducer.run("toy_skip", check)
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    assert (record.outcome, record.sentinel, record.exit_code) == ("skipped", "SKIPPED", 77)
    assert record.detail == "needs a Hopper GPU not this host"


def test_require_cuda_skips_on_a_cpu_host(lane_env):
    root, _, env = lane_env
    manifest = _shim(
        root,
        "toy_cuda",
        """
def check(with_shim):
    reproducer.require_cuda(min_cc="9.0")
    return reproducer.FIX_VALIDATED
reproducer.run("toy_cuda", check, packages=["torch"])
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    if record.host.get("gpu"):
        pytest.skip("this host has a CUDA GPU")
    assert record.outcome == "skipped"
    assert record.detail in ("torch is not installed", "no CUDA device")


def test_a_crash_is_recorded_with_its_traceback(lane_env):
    root, _, env = lane_env
    manifest = _shim(
        root,
        "toy_crash",
        """
def check(with_shim):
    raise KeyError("lost the plot")
reproducer.run("toy_crash", check)
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "crashed" and record.exit_code == 1 and record.sentinel is None
    assert "KeyError: 'lost the plot'" in record.output_tail
    # the stamp came out before the crash
    assert record.host["hostname"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "detail"),
    [
        # Sentinel and exit code disagree.
        (
            "print('PATCHLANE-HOST {}'); print('FIX_VALIDATED'); raise SystemExit(10)",
            "printed FIX_VALIDATED but exited 10",
        ),
        # No host stamp on line 1.
        (
            (
                "print('hello'); print('PATCHLANE-HOST {}'); print('BUG_REPRODUCED'); raise "
                "SystemExit(10)"
            ),
            "no PATCHLANE-HOST stamp",
        ),
        # Two different sentinels.
        (
            "print('PATCHLANE-HOST {}'); print('BUG_REPRODUCED'); print('FIX_VALIDATED')",
            "no single sentinel",
        ),
        # check() returning garbage is a crash, not a pass.
        ("reproducer.run('toy_proto', lambda with_shim: 'OK')", "no single sentinel"),
    ],
)
def test_protocol_violations_are_crashes(lane_env, body, detail):
    root, _, env = lane_env
    manifest = _shim(root, "toy_proto", body + "\n")
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "crashed"
    assert detail in record.detail


@pytest.mark.slow
def test_a_hanging_reproducer_is_killed_at_its_timeout(lane_env, tmp_path: Path):
    root, _, env = lane_env
    pid_file = tmp_path / "child.pid"
    manifest = _shim(
        root,
        "toy_hang",
        f"""
import subprocess, sys, time
def check(with_shim):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    open({str(pid_file)!r}, "w").write(str(child.pid))
    print("about to hang", flush=True)
    time.sleep(120)
reproducer.run("toy_hang", check)
""",
    )
    began = time.monotonic()
    record = run_reproducer(manifest, "without", env=env, timeout=3)
    assert time.monotonic() - began < 30
    assert record.outcome == "timeout"
    assert record.detail == "killed after 3 s"
    assert 2.5 <= record.duration_s < 30
    # partial output survives the kill
    assert "about to hang" in record.output_tail
    # The whole process group went: the grandchild it started is gone too.
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            # a zombie is dead, just unreaped
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_manifest_timeout_is_the_default(lane_env):
    root, _, env = lane_env
    text = manifest_text("toy_slow").replace("timeout = 60", "timeout = 1.5")
    manifest = load_manifest(
        write_shim(
            root,
            "toy_slow",
            manifest=text,
            reproducer="import time\nprint('PATCHLANE-HOST {}', flush=True)\ntime.sleep(60)\n",
        )
        / "manifest.toml"
    )
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "timeout" and record.detail == "killed after 1.5 s"
    # the stamp {} parsed, but carries nothing
    assert record.host == {}


def test_secret_env_values_never_reach_the_record(lane_env, monkeypatch):
    """The reproducer never gets HF_TOKEN (retire.core.childenv); one that learns it anyway (a
    server echoed it) cannot put it into the record."""
    root, _, env = lane_env
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    manifest = _shim(
        root,
        "toy_secret",
        """
import os
def check(with_shim):
    print("token is", os.environ.get("HF_TOKEN", "absent"), "hf_supersecretvalue")
    return reproducer.BUG_REPRODUCED
reproducer.run("toy_secret", check)
""",
    )
    record = run_reproducer(manifest, "without", env={**env, "HF_TOKEN": "hf_supersecretvalue"})
    assert record.outcome == "bug-reproduced"
    assert "hf_supersecretvalue" not in dumps(record)
    assert "token is absent <redacted>" in record.output_tail


def test_secrets_are_redacted_in_skip_reasons_and_across_the_tail_cut(lane_env, monkeypatch):
    root, _, env = lane_env
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    manifest = _shim(
        root,
        "toy_secret_skip",
        """
def check(with_shim):
    print("x" * 3990 + "hf_supersecretvalue")  # the secret straddles the kept tail's start
    raise reproducer.Skip("cannot log in with hf_supersecretvalue")
reproducer.run("toy_secret_skip", check)
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "skipped"
    assert "supersecret" not in dumps(record) and "secretvalue" not in dumps(record)
    assert record.detail == "cannot log in with <redacted>"


def test_an_interpreter_that_does_not_exist_is_a_crash(lane_env):
    root, _, env = lane_env
    manifest = load_manifest(write_shim(root, "toy_add") / "manifest.toml")
    record = run_reproducer(manifest, "without", env=env, python="/nonexistent/python")
    assert record.outcome == "crashed" and record.exit_code is None
    assert "could not start /nonexistent/python" in record.detail


def test_mode_is_validated(lane_env):
    root, _, env = lane_env
    manifest = load_manifest(write_shim(root, "toy_add") / "manifest.toml")
    with pytest.raises(ValueError, match="mode must be one of without, with"):
        run_reproducer(manifest, "sideways", env=env)


def test_parse_output():
    stamp = HOST_PREFIX + json.dumps({"python": "3.11.7", "gpu": None})
    assert parse_output(f"{stamp}\nnoise\nBUG_REPRODUCED\nmore noise\n") == (
        {"python": "3.11.7", "gpu": None},
        "BUG_REPRODUCED",
        None,
    )
    assert parse_output(f"{stamp}\nSKIPPED: no CUDA device\r\n") == (
        {"python": "3.11.7", "gpu": None},
        "SKIPPED",
        "no CUDA device",
    )
    assert parse_output(f"{stamp}\nthe BUG_REPRODUCED word inside a line\n")[1] is None
    # twice: off the protocol
    assert parse_output(f"{stamp}\nFIX_VALIDATED\nFIX_VALIDATED\n")[1] is None
    assert parse_output(f"{stamp}\nSKIPPED: a\nSKIPPED: a\n")[1] is None
    # U+2028 does not end a line
    assert parse_output(f"{stamp}\nnoise\u2028FIX_VALIDATED\n")[1] is None
    assert parse_output("PATCHLANE-HOST " + "[" * 100_000 + "\nFIX_VALIDATED\n") == (
        None,
        "FIX_VALIDATED",
        None,
    )
    assert parse_output(f"{stamp}\nFIX_VALIDATED\nMEMORY_SAVE_VERIFIED\n")[1] is None
    assert parse_output(f"warning first\n{stamp}\nFIX_VALIDATED\n")[0] is None
    assert parse_output("PATCHLANE-HOST {not json\nFIX_VALIDATED\n") == (
        None,
        "FIX_VALIDATED",
        None,
    )
    assert parse_output("") == (None, None, None)


def test_host_stamp_is_json_and_names_versions():
    stamp = host_stamp(["packaging", "surely-not-installed-dist"])
    assert set(stamp) >= {
        "python",
        "platform",
        "gpu",
        "compute_capability",
        "driver",
        "packages",
        "hostname",
    }
    assert stamp["packages"]["surely-not-installed-dist"] is None
    assert stamp["packages"]["packaging"]
    json.dumps(stamp)
    if stamp["gpu"] is None:
        assert stamp["compute_capability"] is None


@pytest.mark.slow
def test_the_reproducer_runs_standalone(lane_env):
    """What a person types: `python shims/<id>/reproduce.py --mode with`, exit code and all."""
    import subprocess
    import sys

    root, _, env = lane_env
    folder = write_shim(root, "toy_add")
    env = {**env, "PATCHLANE_SHIMS_PATH": str(root)}
    result = subprocess.run(
        [sys.executable, str(folder / "reproduce.py"), "--mode", "with"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first.startswith(HOST_PREFIX) and rest[-1] == "FIX_VALIDATED"
    bad = subprocess.run(
        [sys.executable, str(folder / "reproduce.py"), "--mode", "maybe"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "invalid choice: 'maybe'" in bad.stderr


@pytest.mark.slow
def test_with_mode_of_a_disabled_shim_is_skipped_not_a_bug(lane_env):
    root, _, env = lane_env
    manifest = load_manifest(write_shim(root, "toy_add") / "manifest.toml")
    record = run_reproducer(manifest, "with", env={**env, "PATCHLANE_SHIMS_DISABLE": "toy_add"})
    assert record.outcome == "skipped"
    assert record.detail == "shim toy_add is disabled here (listed in PATCHLANE_SHIMS_DISABLE)"


def test_with_mode_of_a_shim_that_cannot_load_is_a_crash_not_a_bug(lane_env):
    root, _, env = lane_env
    folder = write_shim(root, "toy_add")
    manifest = load_manifest(folder / "manifest.toml")
    (folder / "manifest.toml").write_text(
        manifest_text("toy_add").replace('kind = "reproducer-clean"', 'kind = "x"')
    )
    record = run_reproducer(manifest, "with", env=env)
    assert record.outcome == "crashed"
    assert "shim toy_add could not be activated" in record.output_tail
    assert "unknown kind 'x'" in record.output_tail


@pytest.mark.slow
def test_require_returns_the_module_or_skips_with_the_exact_reason(lane_env):
    root, _, env = lane_env
    manifest = _shim(
        root,
        "toy_require",
        """
def check(with_shim):
    toylib = reproducer.require("toylib")
    print("# add:", toylib.add(2, 2))
    reproducer.require("toylib.no_such_part", dist="toylib")
    return reproducer.FIX_VALIDATED
reproducer.run("toy_require", check, packages=["toylib"])
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    assert (record.outcome, record.exit_code) == ("skipped", 77)
    # the module came back and was used
    assert "# add: 0" in record.output_tail
    assert record.detail == (
        "toylib.no_such_part is not importable with toylib 1.0: "
        "No module named 'toylib.no_such_part'; 'toylib' is not a package"
    )

    absent = _shim(
        root,
        "toy_absent",
        """
def check(with_shim):
    reproducer.require("surely_not_installed.core", dist="surely-not-installed")
    return reproducer.FIX_VALIDATED
reproducer.run("toy_absent", check)
""",
    )
    record = run_reproducer(absent, "without", env=env)
    assert (record.outcome, record.detail) == ("skipped", "surely-not-installed is not installed")


def test_require_outside_run_still_follows_the_protocol(lane_env):
    root, _, env = lane_env
    manifest = _shim(
        root,
        "toy_prologue",
        """
core = reproducer.require("surely_not_installed", packages=["toylib"])  # at import, before run()
reproducer.run("toy_prologue", lambda with_shim: reproducer.FIX_VALIDATED)
""",
    )
    record = run_reproducer(manifest, "without", env=env)
    assert (record.outcome, record.sentinel, record.exit_code) == ("skipped", "SKIPPED", 77)
    assert record.detail == "surely_not_installed is not installed"
    assert record.host["packages"] == {"toylib": "1.0", "surely_not_installed": None}
