"""The front door for real: nox, the project's own noxfile, on a temporary project whose lanes
resolve against the loopback index."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from retire.evidence import validation
from tests.conftest import ROOT, subprocess_env
from tests.support import shimtree
from tests.support.wheels import build_wheel

LANE = """
# A CPU lane of the toy stack.
[lane]
python = "3.11"
requirements = ["toylib=={version}"]
shims = ["toy"]
{extra}
[lane.indexes.main]
url = "@MAIN@"
default = true
"""


@pytest.fixture(scope="module")
def toy_wheels(universe):
    root = universe["root"] / "nox-toylib"
    for version, source in (("1.0", shimtree.BUGGY_TARGET), ("1.1", shimtree.FIXED_TARGET)):
        wheel = build_wheel(root, "toylib", version, files={"toylib.py": textwrap.dedent(source)})
        if universe["main"].index.find(wheel.name) is None:
            universe["main"].index.add(wheel, "2026-01-01")
    return universe


@pytest.fixture
def nox_project(project, toy_wheels):
    shutil.copy(ROOT / "noxfile.py", project.root / "noxfile.py")
    shimtree.write_shim(project.root / "shims", "toy")
    project.write("old", LANE.format(version="1.0", extra=""))
    project.write("new", LANE.format(version="1.1", extra=""))
    project.write("gpu", LANE.format(version="1.0", extra="needs-cuda = true"))
    return project


def nox(project, *args, timeout=600):
    # One stream, in order: nox's own lines and patchlane's output interleave as a user sees them.
    proc = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(project.root / "noxfile.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=project.root,
        timeout=timeout,
        # this checkout's engine, not the one installed (the noxfile copied puts its own folder,
        # the project, first on sys.path)
        env=subprocess_env(),
    )
    proc.stderr = ""
    return proc


@pytest.mark.slow
def test_nox_lists_one_tagged_session_per_lane(nox_project):
    proc = nox(nox_project, "--list", "--json")
    assert proc.returncode == 0, proc.stdout
    listing = proc.stdout[proc.stdout.index("[") :]
    sessions = {s["session"]: s["tags"] for s in json.loads(listing) if s["name"] == "lane"}
    assert sessions == {
        "lane(name='gpu')": ["gpu"],
        "lane(name='new')": ["cpu"],
        "lane(name='old')": ["cpu"],
    }


@pytest.mark.slow
def test_nox_lock_then_lane_runs_the_matrix(nox_project):
    p = nox_project
    locked = nox(p, "-s", "lock")
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert p.lock_file("old").exists() and p.lock_file("new").exists()
    check = nox(p, "-s", "lock", "--", "--check")
    assert check.returncode == 0 and "3 of 3 locks match" in check.stdout + check.stderr

    ran = nox(p, "-s", "lane")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out
    # One session per lane, then the summary of this invocation.
    for name in ("old", "new", "gpu"):
        assert f"Session lane(name='{name}') was successful" in out
    summary = out[out.index("Running session summary") :]
    assert "needed" in summary and "upstream-fixed" in summary and "gpu: skipped" in summary
    # the lane × shim table: once per `nox -s lane`, by the summary session
    tables = [line for line in out.splitlines() if re.match(r"shim +(old|new|gpu)\b", line)]
    assert len(tables) == 1, out
    records = validation.load(p.root / "validation" / "manifest.jsonl")
    assert {(r.lane, r.mode, r.outcome) for r in records} >= {
        ("old", "without", "bug-reproduced"),
        ("old", "with", "fix-validated"),
        ("new", "without", "fix-validated"),
    }
    # one nox invocation, one run id
    assert len({r.run for r in records}) == 1


@pytest.mark.slow
def test_nox_selects_lanes_by_session_name_and_by_posargs(nox_project):
    p = nox_project
    assert nox(p, "-s", "lock").returncode == 0
    one = nox(p, "-s", "lane(name='new')")
    assert one.returncode == 0, one.stdout + one.stderr
    assert "lane(name='old')" not in one.stdout + one.stderr
    filtered = nox(p, "-s", "lane", "--", "old")
    out = filtered.stdout + filtered.stderr
    assert filtered.returncode == 0, out
    assert "Session lane(name='new') skipped: not selected (old)" in out
    # the table: shims down, the one lane across
    assert re.search(r"^toy +needed$", out, re.MULTILINE), out


@pytest.mark.slow
@pytest.mark.parametrize("session", ["lanes", "lane"])
def test_nox_reports_bad_lane_files_in_one_line_and_fails(nox_project, session):
    (nox_project.root / "lanes" / "bad.toml").write_text(
        "[lane]\npython = 3.12\nrequirements = []\n"
    )
    proc = nox(nox_project, "-s", session)
    # the default session must fail too, not skip: CI stays red
    assert proc.returncode != 0
    assert "lanes/bad.toml: lane.python: expected a string" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_nox_runs_lanes_in_parallel_and_the_summary_after_them(nox_project):
    """`nox -j N` runs each session in its own process with --no-dependencies, where nox refuses
    notify(): the lanes must still run, and `-s lane summary -j N` must print the table after
    them."""
    p = nox_project
    assert nox(p, "-s", "lock").returncode == 0
    parallel = nox(p, "-s", "lane", "-j", "2")
    out = parallel.stdout
    assert parallel.returncode == 0, out
    assert "notify" not in out and out.count("was successful") >= 3
    table = nox(p, "-s", "lane", "summary", "-j", "2")
    out = table.stdout
    assert table.returncode == 0, out
    # the table comes last: the summary ran after every lane
    summary = out[out.rindex("shim ") :]
    assert "needed" in summary and "upstream-fixed" in summary and "gpu: skipped" in summary
    records = validation.load(p.root / "validation" / "manifest.jsonl")
    # two invocations, each lane of one run under one id
    assert len({r.run for r in records}) == 2


@pytest.mark.slow
def test_nox_says_an_unknown_lane_in_one_line_and_blames_no_other_lane(nox_project):
    # issue 36: it was "Session lane(name='gpu') aborted: unknown lane …" and a "skipped: see the
    # error above" for every other lane
    proc = nox(nox_project, "-s", "lane", "--", "nosuchlane")
    out = proc.stdout
    assert proc.returncode != 0
    said = [line for line in out.splitlines() if "nosuchlane" in line]
    assert said == [
        "nox > lane: unknown lane 'nosuchlane' — known lanes: gpu, new, old (no lane ran)"
    ], out
    assert "aborted" not in out and "skipped" not in out and "summary" not in out, out


@pytest.mark.slow
def test_nox_lists_every_session_with_a_whole_sentence(nox_project):
    # `nox -l` shows a docstring's first line: it ended mid-word for bump ("`--cooldown")
    proc = nox(nox_project, "--list")
    described = dict(
        re.fullmatch(r"[*-] (\w+)(?:\(.*?\))?(?: \[\w+\])? -> (.*)", line).groups()
        for line in proc.stdout.splitlines()
        if line.startswith(("* ", "- "))
    )
    for name in ("bump", "lane", "lanes", "lock", "retire", "summary"):
        text = described[name]
        assert text.endswith(".") and text.count("`") % 2 == 0, (name, text)
        assert text.count("(") == text.count(")"), (name, text)
