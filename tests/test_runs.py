"""Lane runs for real: envs built from locks by uv against the loopback index, reproducers run in
both modes, every outcome produced by a real library whose bug moves across releases."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from retire.evidence import validation
from retire.lanes import lanefile
from retire.runs import envs
from retire.runs import lanerun as runs
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.wheels import build_wheel

CUDA_REPRODUCER = """
from shims import reproducer

def check(with_shim):
    reproducer.require_cuda("9.0")
    return reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
CRASHING_REPRODUCER = """
from shims import reproducer

def check(with_shim):
    import toylib
    return toylib.no_such_function()

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
HANGING_REPRODUCER = """
import time
from shims import reproducer

def check(with_shim):
    time.sleep(600)

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.fixture(scope="module")
def toy_index(universe):
    """toylib on the main loopback index: 1.0 buggy, 1.1 fixed, 2.0 buggy with a new signature."""
    root = universe["root"] / "toylib"
    for version, source, when in [
        ("1.0", shimtree.BUGGY_TARGET, "2026-01-05"),
        ("1.1", shimtree.FIXED_TARGET, "2026-02-05"),
        ("2.0", shimtree.RESHAPED_TARGET, "2026-03-05"),
    ]:
        wheel = build_wheel(root, "toylib", version, files={"toylib.py": textwrap.dedent(source)})
        universe["main"].index.add(wheel, when)
    return universe


def lane(python="3.11", reqs='"toylib==1.0"', shims='["toy"]', extra=""):
    return f"""
[lane]
python = "{python}"
requirements = [{reqs}]
shims = {shims}
{extra}
[lane.indexes.main]
url = "@MAIN@"
default = true
"""


@pytest.fixture
def toy_project(project, toy_index):
    shims_root = project.root / "shims"
    shimtree.write_shim(shims_root, "toy")
    shimtree.write_shim(shims_root, "toy_cuda", reproducer=CUDA_REPRODUCER)
    shimtree.write_shim(shims_root, "toy_crash", reproducer=CRASHING_REPRODUCER)
    shimtree.write_shim(
        shims_root,
        "toy_hang",
        reproducer=HANGING_REPRODUCER,
        manifest=shimtree.manifest_text("toy_hang").replace("timeout = 60", "timeout = 2"),
    )
    return project


@pytest.mark.slow
def test_every_outcome_for_real(toy_project, capsys):
    p = toy_project
    p.write("old", lane(shims='["toy", "toy_cuda", "toy_crash", "toy_hang"]'))
    p.write("fixed", lane(reqs='"toylib==1.1"'))
    p.write("reshaped", lane(reqs='"toylib==2.0"'))
    p.write("gpu", lane(extra="needs-cuda = true"))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    # -v: the pytest view has a line per lane, shim and mode
    code, out, _ = run_cli(p.root, "run", "-v", "--jobs", "3", "--run-id", "t1", capsys=capsys)
    # a broken shim, a crash and a timeout fail the run
    assert code == 1

    summary = json.loads((p.root / ".patchlane/runs/t1/old.json").read_text())
    outcomes = {s["shim"]: s["outcome"] for s in summary["shims"]}
    assert outcomes == {
        "toy": "needed",
        "toy_cuda": "skipped",
        "toy_crash": "crashed",
        "toy_hang": "timeout",
    }
    assert (
        json.loads((p.root / ".patchlane/runs/t1/fixed.json").read_text())["shims"][0]["outcome"]
        == "upstream-fixed"
    )
    assert (
        json.loads((p.root / ".patchlane/runs/t1/reshaped.json").read_text())["shims"][0]["outcome"]
        == "shim-broken"
    )
    gpu = json.loads((p.root / ".patchlane/runs/t1/gpu.json").read_text())
    assert gpu["status"] == "skipped" and "needs a CUDA host" in gpu["why"]

    # The report reads like pytest, and the table at the end has one word per lane × shim.
    assert "lane[reshaped]::toy::with-shim FAILED" in out
    assert "shim broken: the bug still reproduces with the shim applied" in out
    assert "lane[fixed]::toy::without-shim XFAIL" in out
    assert "lane[old]::toy::with-shim PASSED" in out
    table = out[out.rindex("shim ") :]
    assert "toy_hang" in table and "timeout" in table and "upstream-fixed" in table

    records = validation.load(p.root / "validation/manifest.jsonl")
    mine = [r for r in records if r.run == "t1"]
    old_toy = {r.mode: r for r in mine if r.lane == "old" and r.shim == "toy"}
    assert (
        old_toy["without"].sentinel == "BUG_REPRODUCED"
        and old_toy["with"].sentinel == "FIX_VALIDATED"
    )
    # the lane's interpreter ran it
    assert old_toy["without"].host["python"].startswith("3.11")
    assert old_toy["without"].environment["installed"] == {"toylib": "1.0"}
    assert old_toy["without"].environment["kind"] == "full"
    # nothing recorded for the skipped lane
    assert {r.lane for r in mine} == {"old", "fixed", "reshaped"}
    hang = next(r for r in mine if r.shim == "toy_hang")
    assert hang.outcome == "timeout"


@pytest.mark.slow
def test_clean_run_exits_zero_and_reuses_the_env(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    p.write("fixed", lane(reqs='"toylib==1.1"'))
    run_cli(p.root, "lock", capsys=capsys)
    assert run_cli(p.root, "run", "--no-record", capsys=capsys)[0] == 0
    python = p.root / ".patchlane/envs/old/bin/python"
    inode = python.resolve().stat().st_ino
    code, out, _ = run_cli(p.root, "run", "old", "--no-record", capsys=capsys)
    assert code == 0 and "needed" in out
    # the venv was re-synced, not rebuilt
    assert python.resolve().stat().st_ino == inode
    assert not (p.root / "validation/manifest.jsonl").exists()


@pytest.mark.slow
def test_tampered_lock_refuses_to_install(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    p.write("other", lane(reqs='"toylib==1.1"'))
    run_cli(p.root, "lock", capsys=capsys)
    lock = p.lock_file("old")
    text = lock.read_text()
    start = text.index('sha256 = "') + len('sha256 = "')
    lock.write_text(text[:start] + ("0" if text[start] != "0" else "1") + text[start + 1 :])
    code, out, _ = run_cli(
        p.root, "run", "-v", "--no-record", "--envs-dir", str(p.root / "fresh-envs"), capsys=capsys
    )
    assert code == 1
    # Its provenance no longer covers its content: refused before uv runs (with the digest
    # recomputed too, uv's own hash check refuses it: tests/test_lock_integrity.py).
    assert "old: build-failed" in out and "the lock is tampered" in out
    # the other lane still ran
    assert "lane[other]::toy::without-shim XFAIL" in out


@pytest.mark.slow
def test_stale_lock_is_refused_with_the_fix(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    run_cli(p.root, "lock", capsys=capsys)
    p.write("old", lane(reqs='"toylib==1.0", "helper"'))
    code, out, _ = run_cli(p.root, "run", "--no-record", capsys=capsys)
    assert code == 1 and "the lock is stale" in out and "nox -s lock -- old" in out


@pytest.mark.slow
def test_overlay_installs_only_what_the_lock_changes(toy_project, tmp_path, capsys):
    p = toy_project
    # A "GPU image": an interpreter whose site-packages already has toylib 1.0 and helper 1.5.
    base = tmp_path / "base"
    from retire.core import uv

    assert uv.run(["venv", "-q", "--python", "3.11", str(base)]).returncode == 0
    assert (
        uv.run(
            [
                "pip",
                "install",
                "-q",
                "--python",
                str(base / "bin/python"),
                "--default-index",
                p.universe["main"].url,
                "toylib==1.0",
                "helper==1.5",
            ],
            without_indexes=True,
        ).returncode
        == 0
    )
    p.write("fixed", lane(reqs='"toylib==1.1", "helper==1.5"'))
    run_cli(p.root, "lock", capsys=capsys)
    [fixed] = lanefile.load_lanes(p.root / "lanes")
    env = envs.build(
        fixed, p.lock_file("fixed"), p.root / ".patchlane/envs", overlay=str(base / "bin/python")
    )
    assert env.kind == "overlay"
    # helper 1.5 comes from the base
    assert env.synced == ("toylib",)
    assert env.installed["toylib"] == "1.1" and env.base["toylib"] == "1.0"
    # The base is itself a venv (as GPU images' pythons often are): its packages must be visible
    # behind the overlay's own.
    probe = subprocess.run(
        [
            str(env.python),
            "-c",
            "import helper, toylib; print(helper.__version__, toylib.__version__)",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.stdout.split() == ["1.5", "1.1"], probe.stderr
    assert env.installed["helper"] == "1.5"
    code, _out, _ = run_cli(
        p.root, "run", "--overlay", str(base / "bin/python"), "--run-id", "ov", capsys=capsys
    )
    assert code == 0
    [record] = [
        r
        for r in validation.load(p.root / "validation/manifest.jsonl")
        if r.run == "ov" and r.mode == "without"
    ]
    assert record.outcome == "fix-validated"
    assert record.environment["kind"] == "overlay" and record.environment["base"] == {
        "toylib": "1.0"
    }


def test_judge_is_total():
    def rec(mode, outcome):
        sentinel = {
            "bug-reproduced": "BUG_REPRODUCED",
            "fix-validated": "FIX_VALIDATED",
            "skipped": "SKIPPED",
        }.get(outcome)
        return validation.ValidationRecord(
            shim="s",
            mode=mode,
            lane="l",
            host={},
            versions={},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=0,
            duration_s=0.1,
            started_at="2026-01-01T00:00:00",
        )

    assert runs.judge(rec("without", "bug-reproduced"), rec("with", "fix-validated"))[0] == "needed"
    assert (
        runs.judge(rec("without", "fix-validated"), rec("with", "fix-validated"))[0]
        == "upstream-fixed"
    )
    assert (
        runs.judge(rec("without", "bug-reproduced"), rec("with", "bug-reproduced"))[0]
        == "shim-broken"
    )
    assert runs.judge(rec("without", "skipped"), None)[0] == "skipped"
    assert runs.judge(rec("without", "bug-reproduced"), rec("with", "crashed"))[0] == "crashed"
    assert runs.judge(rec("without", "timeout"), None)[0] == "timeout"
    assert runs.judge(None, None)[0] == "crashed"


def test_validation_merge_from_two_hosts(tmp_path, capsys):
    def rec(host, shim, started):
        return validation.ValidationRecord(
            shim=shim,
            mode="without",
            lane="l",
            host={"hostname": host},
            versions={},
            sentinel="BUG_REPRODUCED",
            outcome="bug-reproduced",
            exit_code=10,
            duration_s=1.0,
            started_at=started,
        )

    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "merged.jsonl"
    shared = rec("gpu-1", "x", "2026-11-01T00:00:00")
    validation.append(a, [shared, rec("gpu-1", "y", "2026-11-01T00:01:00")])
    validation.append(b, [shared, rec("cpu-7", "x", "2026-11-01T00:00:30")])
    assert (
        run_cli(tmp_path, "validation", "merge", str(a), str(b), "-o", str(out), capsys=capsys)[0]
        == 0
    )
    merged = validation.load(out)
    # the shared record once, nothing lost
    assert len(merged) == 3
    assert [r.started_at for r in merged] == sorted(r.started_at for r in merged)
    run_cli(tmp_path, "validation", "merge", str(a), str(b), "-o", str(out), capsys=capsys)
    # merging again adds nothing
    assert len(validation.load(out)) == 3


def test_validation_merge_into_the_manifest_by_relative_paths(tmp_path, capsys, monkeypatch):
    """As docs/offline.md says it: `validation merge validation/manifest.jsonl carried.jsonl -o
    validation/manifest.jsonl` from the project's root writes the project's manifest, never
    validation/validation/manifest.jsonl."""
    (tmp_path / "lanes").mkdir()
    (tmp_path / "validation").mkdir()
    record = validation.ValidationRecord(
        shim="x",
        mode="without",
        lane="l",
        host={"hostname": "gpu-1"},
        versions={},
        sentinel="BUG_REPRODUCED",
        outcome="bug-reproduced",
        exit_code=10,
        duration_s=1.0,
        started_at="2026-11-01T00:00:00",
    )
    validation.append(tmp_path / "carried.jsonl", [record])
    (tmp_path / "validation" / "manifest.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    manifest = "validation/manifest.jsonl"
    merged = run_cli(tmp_path, "validation", "merge", manifest, "carried.jsonl", "-o", manifest)
    assert merged[0] == 0
    assert len(validation.load(tmp_path / manifest)) == 1
    assert not (tmp_path / "validation" / "validation").exists()


def test_the_callers_python_path_never_leaks_into_a_base_description(tmp_path, monkeypatch):
    # A GPU host's wrapper that puts carried packages on PYTHONPATH must not have them recorded
    # as the base image's own versions (nor cut out of the overlay).
    carried = tmp_path / "carried"
    shimtree.write_target(carried, name="carriedpkg", version="9.9")
    monkeypatch.setenv("PYTHONPATH", str(carried))
    described = envs.describe(sys.executable)
    assert "carriedpkg" not in described["packages"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "without,with_shim,fails",
    [
        # judged skipped
        ("skipped", "bug-reproduced", False),
        # judged skipped; a policy shim's mitigation in effect
        ("skipped", "fix-validated", False),
        # judged upstream-fixed
        ("fix-validated", "bug-reproduced", False),
        # judged shim-broken
        ("bug-reproduced", "bug-reproduced", True),
        # judged needed
        ("bug-reproduced", "fix-validated", False),
    ],
)
def test_the_pytest_report_fails_exactly_when_the_judged_outcome_fails(without, with_shim, fails):
    from retire.runs import suite

    sentinels = {
        "bug-reproduced": "BUG_REPRODUCED",
        "fix-validated": "FIX_VALIDATED",
        "skipped": "SKIPPED",
    }

    def rec(mode, outcome):
        return validation.ValidationRecord(
            shim="s",
            mode=mode,
            lane="l",
            host={},
            versions={},
            sentinel=sentinels[outcome],
            outcome=outcome,
            exit_code=0,
            duration_s=0.1,
            started_at="2026-01-01T00:00:00",
        )

    a, b = rec("without", without), rec("with", with_shim)
    outcome, why = runs.judge(a, b)
    lane = runs.LaneRun("l", "ran", ("s",), shims=(runs.ShimRun("l", "s", outcome, why, a, b),))
    assert lane.failed is fails
    assert (suite.report([lane], verbose=False) != 0) is fails
