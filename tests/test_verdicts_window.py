"""`patchlane verdicts --json` reads the shim's window from the recorded runs: each lane that
carries the shim is placed before, inside or after it, and a lane before the window is told so
(not-needed: the shim stays listed, nothing retires) — end to end on a project built in tmp,
against a loopback index (docs/verdicts.md, "Windows")."""

from __future__ import annotations

import json

import pytest

from retire.commands import main as cli
from tests.support.index import IndexServer
from tests.support.probing import toylib_index
from tests.support.retirement import REPRODUCER_CLEAN, Project
from tests.test_json_schemas import check

SHIM = "toy_window"


def _lock(p: Project, lane: str, version: str) -> None:
    lock = p.root / "locks" / lane / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n'
        f'\n[[packages]]\nname = "toylib"\nversion = "{version}"\n'
    )


@pytest.fixture
def project(tmp_path):
    with IndexServer(toylib_index(tmp_path / "wheels")) as index:
        p = Project(tmp_path / "project")
        p.shim(SHIM, REPRODUCER_CLEAN, status="not-applicable")
        # old: toylib 1.0, before the window; mid: 1.1, never run, between the clean 1.0 and the
        # broken 1.2 (not placed); new: 1.2, inside it
        for lane, version in (("old", "1.0"), ("mid", "1.1"), ("new", "1.2")):
            p.lane(lane, [SHIM], index_url=index.url)
            _lock(p, lane, version)
        # lane new ran clean on 1.0 before it moved to 1.2: its latest run is the bug, but the
        # older one still places the window's lower edge
        p.run(SHIM, "fix-validated", "1.0", lane="new", when="2026-02-01T00:00:00.000000+00:00")
        p.run(SHIM, "bug-reproduced", "1.2", lane="new")
        yield p


def test_verdicts_json_places_each_lane_against_the_recorded_window(project, capsys):
    assert cli(["verdicts", "--root", str(project.root), "--json", "--no-resolve", SHIM]) == 0
    document = json.loads(capsys.readouterr().out)
    check("verdicts", document)
    (row,) = document
    # the bug reproduces on the newest release run: the shim stays in the repository
    assert row["verdict"] == "keep"
    said = {key: row["window"][key] for key in ("broken", "clean", "introduced", "fixed")}
    assert said == {
        "broken": ["1.2"],
        "clean": ["1.0"],
        "introduced": "the bug came in after 1.0 (clean), by 1.2 (broken)",
        "fixed": "still broken at the newest release run, 1.2",
    }
    # where it came from, and no disagreement among the runs
    assert row["window"]["source"] == "read from 2 record(s) on 1 host(s) (ci-1)"
    assert row["window"]["disagreements"] == [] and row["window"]["first_fixed"] is None
    lanes = {lane["lane"]: lane for lane in row["lane_verdicts"]}
    assert {name: (lane["step"], lane["window"]) for name, lane in lanes.items()} == {
        "old": ("not-needed", "before"),
        "mid": ("keep", "unknown"),
        "new": ("keep", "inside"),
    }
    old = lanes["old"]
    assert old["locked"] == "toylib 1.0"
    assert old["why"] == (
        "not needed here now: toylib 1.0 is before the window — the bug came in after 1.0 "
        "(clean), by 1.2 (broken); the shim stays listed while the lane may move into the window"
    )


def test_the_text_output_names_the_lane_before_the_window(project, capsys):
    assert cli(["verdicts", "--root", str(project.root), "--no-resolve", SHIM]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.split()[:2] == ["lane", "old"])
    assert line.split()[2] == "not-needed" and "before the window" in line


def test_no_broken_run_places_nothing(project, capsys):
    # only clean runs on record: the window is not seen; no lane is before it
    project.validation.write_text("")
    project.run(SHIM, "fix-validated", "1.0", lane="old")
    project.run(SHIM, "fix-validated", "1.2", lane="new")
    assert cli(["verdicts", "--root", str(project.root), "--json", "--no-resolve", SHIM]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["window"]["broken"] == []
    assert {lane["window"] for lane in row["lane_verdicts"]} == {"unknown"}
    assert "not-needed" not in {lane["step"] for lane in row["lane_verdicts"]}


def test_a_plan_file_keeps_each_lanes_place(project, capsys):
    """`retire --plan` reads lane verdicts back as `verdicts --json` prints them: the place and the
    not-needed step survive."""
    from retire.branches.dropplan import lane_verdict_from_dict

    assert cli(["verdicts", "--root", str(project.root), "--json", "--no-resolve", SHIM]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    for lane in row["lane_verdicts"]:
        again = lane_verdict_from_dict(lane)
        assert again.to_json() == lane
    old = next(lane for lane in row["lane_verdicts"] if lane["lane"] == "old")
    assert lane_verdict_from_dict(old).window == "before"
    assert lane_verdict_from_dict(old).step == "not-needed"
