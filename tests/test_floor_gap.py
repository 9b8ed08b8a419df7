"""Floors the weekly job tightens, pure: the untested releases between the last broken run and the
first clean one after it, on the bug's window (retire/verdicts/floorgap.py)."""

from __future__ import annotations

from packaging.version import Version

from retire.evidence.values import ExecutionEvidence
from retire.history.reading import read_runs
from retire.history.window import Window
from retire.verdicts.floorgap import floor_gap

RELEASES = [Version(f"0.8.{i}") for i in range(8)]


def _run(outcome: str, version: str, lane: str = "floor") -> ExecutionEvidence:
    return ExecutionEvidence(
        "liger_flce",
        lane,
        "without",
        outcome,
        (("liger-kernel", version),),
        "h100-1",
        "NVIDIA H100",
        "2026-06-01T10:00:00+00:00",
    )


def _history(*runs: ExecutionEvidence) -> Window | None:
    """The bug's window the one reading (retire.history) makes of these runs."""
    return read_runs(runs, "liger-kernel")


def test_the_releases_nobody_ran_between_last_broken_and_first_clean_are_the_gap():
    """0.8.1 broken, 0.8.5 clean, 0.8.2 … 0.8.4 never run: the floor 0.8.5 may not be minimal."""
    history = _history(_run("bug-reproduced", "0.8.1"), _run("fix-validated", "0.8.5", "gpu"))
    gap = floor_gap(history, "liger-kernel", RELEASES)
    assert gap is not None
    assert (gap.last_broken, gap.first_clean) == (Version("0.8.1"), Version("0.8.5"))
    assert gap.untested == (Version("0.8.2"), Version("0.8.3"), Version("0.8.4"))
    assert "0.8.1 reproduced the bug and 3 release(s)" in gap.describe()


def test_no_gap_when_the_floor_is_proven_minimal_or_not_proven_at_all():
    minimal = _history(_run("bug-reproduced", "0.8.4"), _run("fix-validated", "0.8.5"))
    assert floor_gap(minimal, "liger-kernel", RELEASES) is None
    # a bug at or above the oldest clean run: no floor is proven, nothing to tighten
    regressed = _history(
        _run("bug-reproduced", "0.8.1"),
        _run("fix-validated", "0.8.5", "a"),
        _run("bug-reproduced", "0.8.6", "b"),
    )
    assert floor_gap(regressed, "liger-kernel", RELEASES) is None
    # no broken run below it: the floor rests on the oldest clean run alone
    clean = _history(_run("fix-validated", "0.8.5"))
    assert floor_gap(clean, "liger-kernel", RELEASES) is None
    # the releases in between were all run (a bisection's runs count)
    closed = _history(
        _run("bug-reproduced", "0.8.1"),
        *(_run("fix-validated", f"0.8.{i}", f"bisect{i}") for i in (2, 3, 4, 5)),
    )
    assert floor_gap(closed, "liger-kernel", RELEASES) is None
