"""Verdicts that understand windows (issue 34 item 2), pure: the `reproducer-clean` floor is the
first clean release after the last broken one, read from the bug's window (retire.history: every
record, the bug winning where runs disagree). A culprit's or bisection's clean run below the window
places a lane before it and never lowers the floor, never makes a conflict; a clean run between
broken ones is a real conflict and keeps the shim; proposed floors still need a clean run inside
them, and a broken run there still blocks retirement. The evidence is built as the gather builds
it: the latest run per lane and host (retire.probes.records.history) and the window of every
record."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

from packaging.version import Version

from retire.evidence.validation import ValidationRecord
from retire.evidence.values import Release, ReleaseFile, ReleaseList
from retire.history.reading import read
from retire.lanes.model import Lane
from retire.probes.records import history
from retire.verdicts.model import ShimEvidence, Verdict
from retire.verdicts.rules import decide
from shims.manifest import parse_manifest
from tests.support.reportshop import record
from tests.support.retirement import NOW, REPRODUCER_CLEAN, manifest_toml

SHIM = "toy"
_MINUTES = itertools.count()
VERSION_FLOOR = '\n[[retirement.conditions]]\nkind = "version-floor"\nversion = ">=1.4"\n'


def _run(lane: str, version: str, outcome: str, host: str = "ci-1") -> ValidationRecord:
    when = f"2026-06-01T{next(_MINUTES) // 60:02d}:{next(_MINUTES) % 60:02d}:00+00:00"
    return record(SHIM, lane, "without", outcome, when, host=host, version=version)


BUG, CLEAN = "bug-reproduced", "fix-validated"
UPLOADED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RELEASES = ReleaseList(
    "toylib",
    "http://index/simple",
    tuple(
        Release(Version(f"1.{i}"), (ReleaseFile(f"toylib-1.{i}-py3-none-any.whl", UPLOADED),))
        for i in range(9)
    ),
)


def _culprit_flow() -> list[ValidationRecord]:
    """Lane cpu clean on 1.0; bumped to 1.3, broken; the culprit's runs (the old lock on 1.0
    clean, 1.1 clean, 1.2 broken, 1.3 broken) under bisect:cpu; the lane moved past the fix to
    1.4, clean."""
    return [
        _run("cpu", "1.0", CLEAN),
        _run("cpu", "1.3", BUG),
        _run("bisect:cpu", "1.0", CLEAN),
        _run("bisect:cpu", "1.3", BUG),
        _run("bisect:cpu", "1.1", CLEAN),
        _run("bisect:cpu", "1.2", BUG),
        _run("cpu", "1.4", CLEAN),
    ]


def _verdict(
    runs: list[ValidationRecord],
    *,
    conditions: str = REPRODUCER_CLEAN,
    locks: dict[str, str] | None = None,
) -> Verdict:
    manifest = parse_manifest(
        manifest_toml(SHIM, conditions, status="not-applicable"), Path("/p/toy/manifest.toml")
    )
    locks = locks or {"cpu": "1.4"}
    lanes = [
        Lane(name=name, python="3.12", platform="linux", requirements=("toylib",), shims=(SHIM,))
        for name in locks
    ]
    evidence = ShimEvidence(
        locks={name: {"toylib": version} for name, version in locks.items()},
        releases={"toylib": RELEASES},
        execution=history(runs, SHIM),
        window=read(runs, SHIM, "toylib"),
    )
    return decide(manifest, lanes, evidence, now=NOW)


def _conflicts(verdict: Verdict) -> list[str]:
    return [f.text for f in verdict.flags if f.kind == "conflict"]


def test_the_culprits_clean_run_below_the_window_never_lowers_the_floor():
    verdict = _verdict(_culprit_flow())
    assert verdict.decision == "retire", verdict.why
    assert [str(f) for f in verdict.floors] == ["toylib>=1.4"]
    assert _conflicts(verdict) == []
    [condition] = verdict.conditions
    assert condition.state == "holds" and condition.floor is not None
    assert "the first clean release after 1.3" in condition.why
    assert verdict.window is not None and verdict.window.first_fixed == "1.4"


def test_a_lane_on_the_clean_release_before_the_window_is_not_needed_while_the_bug_lasts():
    runs = _culprit_flow()[:-1]
    verdict = _verdict(runs, locks={"cpu": "1.3", "old": "1.0"})
    assert verdict.decision == "keep"
    steps = {lane.lane: (lane.step, lane.window) for lane in verdict.lane_verdicts}
    assert steps == {"cpu": ("keep", "inside"), "old": ("not-needed", "before")}
    assert _conflicts(verdict) == []


def test_a_clean_release_between_broken_ones_is_a_real_conflict_and_keeps():
    """Broken after a clean run above the window: the runs disagree, the shim stays, a person
    is told which release ran clean between broken ones."""
    runs = [
        _run("cpu", "1.0", CLEAN),
        _run("bisect", "1.2", BUG),
        _run("bisect", "1.4", CLEAN),
        _run("bisect", "1.6", BUG),
        _run("cpu", "1.8", CLEAN),
    ]
    verdict = _verdict(runs, locks={"cpu": "1.8"})
    assert verdict.decision == "keep", verdict.why
    [condition] = verdict.conditions
    assert condition.state == "fails" and "disagree" in condition.why
    assert any(
        "1.4 ran clean without the shim between broken releases" in t for t in _conflicts(verdict)
    )


def test_a_release_both_broken_and_clean_counts_as_broken_and_is_flagged():
    runs = [
        _run("cpu", "1.0", CLEAN),
        _run("gpu", "1.3", BUG, host="h100-1"),
        _run("cpu", "1.3", CLEAN),
        _run("cpu", "1.4", CLEAN),
    ]
    verdict = _verdict(runs)
    # the bug wins on 1.3: the floor is the next clean release, and the disagreement is said
    assert verdict.decision == "retire" and [str(f) for f in verdict.floors] == ["toylib>=1.4"]
    [flag] = _conflicts(verdict)
    assert "toylib 1.3: BUG_REPRODUCED (lane gpu on h100-1)" in flag and "bug wins" in flag


def test_proposed_floors_still_need_a_clean_run_inside_them_and_a_bug_there_blocks():
    # a version floor below the window's fix and the reproducer: the highest floor, the
    # reproducer's 1.4, proven by the lane's clean run (the culprit's broken 1.2 and 1.3 lie
    # below it, not inside)
    low = VERSION_FLOOR.replace(">=1.4", ">=1.1")
    both = _verdict(_culprit_flow(), conditions=low + REPRODUCER_CLEAN)
    assert both.decision == "retire" and [str(f) for f in both.floors] == ["toylib>=1.4"]
    # the version floor alone, and a run inside it that reproduced the bug: keep, a conflict
    runs = [
        _run("cpu", "1.2", BUG),
        _run("cpu", "1.4", CLEAN, host="ci-2"),
        _run("gpu", "1.5", BUG, host="h100-1"),
        _run("nightly", "1.6", CLEAN, host="ci-3"),
    ]
    blocked = _verdict(runs, conditions=VERSION_FLOOR, locks={"cpu": "1.6"})
    assert blocked.decision == "keep", blocked.why
    assert any("inside the new floor reproduces the bug" in t for t in _conflicts(blocked))
