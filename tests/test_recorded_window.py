"""A shim's window on its target's releases from the recorded runs (retire.evidence.window), and
where a lane's release stands against it: docs/verdicts.md, "Windows", as a truth table.

Each row is a set of recorded runs (release → outcome) and the place each probed release gets;
the invariants below the table hold in every row: a place other than unknown rests on a run that
proves it, and before is never after.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from retire.evidence.validation import ValidationRecord
from retire.evidence.window import Place, recorded_window
from tests.support.reportshop import record

SHIM = "toylib_add"
WHEN = "2026-03-01T00:00:00+00:00"


def _runs(states: dict[str, str], *, host: str = "ci-box") -> list[ValidationRecord]:
    outcome = {"bug": "bug-reproduced", "clean": "fix-validated", "skip": "skipped"}
    return [
        record(SHIM, "bisect", "without", outcome[state], WHEN, host=host, version=version)
        for version, state in states.items()
    ]


B, IN, A, U = Place.BEFORE, Place.INSIDE, Place.AFTER, Place.UNKNOWN
PROBED = ("0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.0")
# (recorded runs, the place of each PROBED release)
TABLE = {
    # a whole window: clean 1.0, broken 1.2 … 1.4, clean 1.6; 1.1 and 1.5 were never run
    "window": (
        {"1.0": "clean", "1.2": "bug", "1.3": "bug", "1.4": "bug", "1.6": "clean"},
        (B, B, U, IN, IN, IN, U, A, A),
    ),
    # adjacent runs pin both edges
    "pinned": (
        {"1.1": "clean", "1.2": "bug", "1.4": "bug", "1.5": "clean"},
        (B, B, B, IN, IN, IN, A, A, A),
    ),
    # no clean run below the bug: the introduced edge is open, nothing is before
    "open-below": ({"1.2": "bug", "1.5": "clean"}, (U, U, U, IN, U, U, A, A, A)),
    # still broken at the newest run: nothing is after, and above it is not placed
    "open-above": ({"1.0": "clean", "1.3": "bug"}, (B, B, U, U, IN, U, U, U, U)),
    # no run reproduced the bug: the window is not seen, nothing is placed
    "not-seen": ({"1.0": "clean", "1.6": "clean"}, (U,) * 9),
    # a skipped run proves nothing
    "skips": ({"1.0": "skip", "1.2": "bug", "1.6": "skip"}, (U, U, U, IN, U, U, U, U, U)),
    # clean between broken releases (two windows): the stretch between is not placed
    "two-windows": (
        {"1.0": "clean", "1.2": "bug", "1.3": "clean", "1.4": "bug", "2.0": "clean"},
        (B, B, U, IN, U, IN, U, U, A),
    ),
    "nothing": ({}, (U,) * 9),
}


@pytest.mark.parametrize("name", TABLE)
def test_places_from_recorded_runs(name):
    states, places = TABLE[name]
    window = recorded_window(_runs(states), SHIM, "toylib")
    got = {v: window.place(Version(v)) for v in PROBED}
    assert got == dict(zip(PROBED, places, strict=True))
    # invariants: before rests on a clean run at or above it, below every broken one; after on a
    # clean run at or below it, above every broken one; inside never on a clean run
    broken = [Version(v) for v, s in states.items() if s == "bug"]
    clean = [Version(v) for v, s in states.items() if s == "clean"]
    for text, place in got.items():
        version = Version(text)
        if place == B:
            assert any(version <= c < min(broken) for c in clean)
        if place == A:
            assert any(max(broken) < c <= version for c in clean)
        if place == IN:
            assert version not in clean


def test_a_bug_on_any_host_outweighs_a_clean_run_of_the_same_release():
    runs = [
        *_runs({"1.0": "clean", "1.2": "bug"}),
        *_runs({"1.0": "bug"}, host="h100-1"),
    ]
    window = recorded_window(runs, SHIM, "toylib")
    assert window.broken == (Version("1.0"), Version("1.2")) and window.clean == ()
    assert window.place(Version("1.0")) == IN
    assert window.place(Version("0.9")) == U


def test_runs_with_the_shim_other_shims_and_commit_builds_do_not_count():
    runs = [
        *_runs({"1.0": "clean", "1.2": "bug"}),
        record(SHIM, "gpu", "with", "bug-reproduced", WHEN, version="0.9"),
        record("other", "gpu", "without", "bug-reproduced", WHEN, version="0.9"),
        # a build of a commit (a local version label) is placed by ancestry, not as a release
        record(SHIM, "gpu", "without", "bug-reproduced", WHEN, version="0.9+abc1234"),
    ]
    window = recorded_window(runs, SHIM, "toylib")
    assert window.broken == (Version("1.2"),)
    assert window.place(Version("0.9")) == B


def test_the_window_says_its_edges():
    window = recorded_window(_runs(TABLE["window"][0]), SHIM, "toylib")
    assert window.introduced() == "the bug came in after 1.0 (clean), by 1.2 (broken)"
    assert window.fixed() == "fixed after 1.4 (broken), by 1.6 (clean)"
    still = recorded_window(_runs({"1.3": "bug"}), SHIM, "toylib")
    assert still.introduced() == "the bug reproduced on 1.3; no older release was run clean"
    assert still.fixed() == "still broken at the newest release run, 1.3"
    assert still.to_json()["broken"] == ["1.3"]
