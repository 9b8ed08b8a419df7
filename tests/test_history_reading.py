"""The one reading of validation records into a bug's window (retire.history.reading), and where a
release stands against it: docs/verdicts.md, "Windows", as a truth table; then the rule when runs
disagree (the bug wins, and every disagreement is a flag), commit runs ordered by a mirror,
bisection and culprit runs counted like any other, and — with Hypothesis — the fixed edge of any
monotone window is the first clean release after the last broken one, whatever clean runs lie
before the window.

Each row of the table is a set of recorded runs (release → outcome) and the place each probed
release gets; the invariants below the table hold in every row: a place other than unknown rests
on a run that proves it, and before is never after.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from retire.evidence.validation import ValidationRecord
from retire.history.edge import EdgeKind, EdgeState, Place
from retire.history.reading import CommitOrder, read
from retire.history.window import DisagreementKind
from retire.mirrors.history import Commit
from tests.support.reportshop import record
from tests.support.windows import by_link

SHIM = "toylib_add"
WHEN = "2026-03-01T00:00:00+00:00"
_MINUTES = itertools.count()


def _runs(
    states: dict[str, str], *, host: str = "ci-box", lane: str = "bisect"
) -> list[ValidationRecord]:
    outcome = {"bug": "bug-reproduced", "clean": "fix-validated", "skip": "skipped"}
    return [
        record(SHIM, lane, "without", outcome[state], WHEN, host=host, version=version)
        for version, state in states.items()
    ]


def _on_commit(outcome: str, version: str, commit: str) -> ValidationRecord:
    when = f"2026-03-02T00:{next(_MINUTES) % 60:02d}:00+00:00"
    made = record(SHIM, "bisect", "without", outcome, when, version=version)
    host = {**made.host, "revisions": {"toylib": f"file:///mirror.git@{commit}"}}
    return ValidationRecord(**{**made.to_json(), "host": host, "record_id": ""})


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
    window = read(_runs(states), SHIM, "toylib")
    got = {v: window.place(v) if window is not None else U for v in PROBED}
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


def test_a_bug_on_any_host_outweighs_a_clean_run_of_the_same_release_and_says_so():
    runs = [
        *_runs({"1.0": "clean", "1.2": "bug"}),
        *_runs({"1.0": "bug"}, host="h100-1"),
    ]
    window = read(runs, SHIM, "toylib")
    assert window is not None
    assert window.broken == ("1.0", "1.2") and window.clean == ()
    assert window.place("1.0") == IN
    assert window.place("0.9") == U
    # the disagreement is a flag on the window, never a silent choice
    [split] = window.disagreements
    assert split.kind == DisagreementKind.SPLIT and split.items == ("1.0",)
    assert "lane bisect on h100-1" in split.text and "the bug wins" in split.text
    assert window.to_json()["disagreements"] == [split.text]


def test_the_bug_wins_whichever_run_is_newer():
    """The newest run of a release no longer decides: a later clean run on a release that
    reproduced the bug leaves it broken (and flagged); the fix is the next clean release."""
    older_bug = [
        record(SHIM, "gpu", "without", "bug-reproduced", WHEN, version="1.5"),
        record(SHIM, "gpu", "without", "bug-reproduced", WHEN, version="1.6"),
        record(SHIM, "gpu", "without", "fix-validated", "2026-04-01T00:00:00+00:00", version="1.6"),
        record(SHIM, "cpu", "without", "fix-validated", WHEN, version="1.8"),
    ]
    window = read(older_bug, SHIM, "toylib")
    assert window is not None
    assert (window.last_broken, window.first_fixed) == ("1.6", "1.8")
    assert [d.items for d in window.disagreements] == [("1.6",)]


def test_clean_between_broken_is_not_monotone_and_flagged():
    window = read(_runs(TABLE["two-windows"][0]), SHIM, "toylib")
    assert window is not None and not window.monotone
    [flag] = window.disagreements
    assert flag.kind == DisagreementKind.NOT_MONOTONE and flag.items == ("1.3",)
    assert "between broken releases (1.2 … 1.4)" in flag.text


def test_runs_with_the_shim_other_shims_and_commit_builds_do_not_count_as_releases():
    runs = [
        *_runs({"1.0": "clean", "1.2": "bug"}),
        record(SHIM, "gpu", "with", "bug-reproduced", WHEN, version="0.9"),
        record("other", "gpu", "without", "bug-reproduced", WHEN, version="0.9"),
        # a build of a commit (a local version label) is placed by a mirror, not as a release
        record(SHIM, "gpu", "without", "bug-reproduced", WHEN, version="0.9+abc1234"),
        # a local label that is no commit is a build of the release
        record(SHIM, "gpu", "without", "fix-validated", WHEN, version="1.0+cu121"),
    ]
    window = read(runs, SHIM, "toylib")
    assert window is not None and window.broken == ("1.2",) and window.clean == ("1.0",)
    assert window.place("0.9") == B
    assert window.source.commit_runs == 1 and window.source.records == 4


def test_the_window_says_its_edges():
    window = read(_runs(TABLE["window"][0]), SHIM, "toylib")
    assert window is not None
    assert window.introduced.evidence() == "the bug came in after 1.0 (clean), by 1.2 (broken)"
    assert window.fixed.evidence() == "fixed after 1.4 (broken), by 1.6 (clean)"
    assert window.line() == "introduced in 1.2 (last clean 1.0); fixed in 1.6 (last broken 1.4)"
    still = read(_runs({"1.3": "bug"}), SHIM, "toylib")
    assert still is not None
    said = "the bug reproduced on 1.3; no older release was run clean"
    assert still.introduced.evidence() == said
    assert still.fixed.evidence() == "still broken at the newest release run, 1.3"
    assert still.to_json()["broken"] == ["1.3"]
    assert still.fixed.state == EdgeState.OPEN and still.first_fixed is None
    assert read([], SHIM, "toylib") is None


def test_bisection_and_culprit_runs_count_and_say_where_the_window_came_from():
    """A culprit search records under lane bisect:<lane>, a window bisection under bisect: both
    are evidence like a lane's run, and the window says how many of its records they are."""
    runs = [
        *_runs({"1.0": "clean", "1.1": "clean", "1.2": "bug"}, lane="bisect:cpu"),
        *_runs({"1.0": "clean"}, lane="cpu", host="ci-1"),
        *_runs({"1.4": "clean"}, lane="cpu", host="ci-1"),
    ]
    window = read(runs, SHIM, "toylib")
    assert window is not None
    assert (window.introduced.before, window.introduced.after) == ("1.1", "1.2")
    assert (window.last_broken, window.first_fixed) == ("1.2", "1.4")
    assert window.source.describe() == (
        "read from 5 record(s) on 2 host(s) (ci-1, ci-box), 3 of them bisection or culprit runs"
    )
    # the clean runs before the window place a lane on 1.0 before it, never lower the floor
    assert window.place("1.0") == B and window.first_fixed == "1.4"


# -- commit runs, ordered by a mirror --------------------------------------------------------------


def _commits(n: int, prefix: str = "c") -> tuple[Commit, ...]:
    return tuple(
        Commit(f"{prefix}{i:039x}", f"change {i} (#{i + 10})", "2026-01-01T00:00:00Z", i + 10)
        for i in range(n)
    )


BETWEEN = _commits(6)
ORDER = CommitOrder(("1.5", "1.6"), ("v1.5", "v1.6"), "b" * 40, BETWEEN)
RELEASES = {"1.4": "bug", "1.5": "bug", "1.6": "clean", "1.8": "clean"}


def test_commit_runs_ordered_by_a_mirror_pin_the_fix_commit():
    runs = [
        *_runs(RELEASES),
        _on_commit("bug-reproduced", "1.5", BETWEEN[2].sha),
        _on_commit("fix-validated", "1.5", BETWEEN[3].sha),
    ]
    window = read(
        runs, SHIM, "toylib", orders=(ORDER,), mirror=by_link("https://git.example/toylib")
    )
    assert window is not None
    span = window.fixed.commits
    assert span is not None and span.state == EdgeState.FOUND
    assert window.fix_commit == BETWEEN[3] and span.before == BETWEEN[2].sha
    # an open introduced edge says only where the runs began: left out of the line
    assert window.line() == (
        f'fixed in 1.6 (last broken 1.5), by {BETWEEN[3].short} "change 3 (#13)" (#13)'
    )
    assert "commits ordered by the mirror of https://git.example/toylib" in (
        window.source.describe()
    )
    # commit runs are never runs of the release their version label names
    assert window.told == read(_runs(RELEASES), SHIM, "toylib").told  # type: ignore[union-attr]
    # without the mirror's order the commits cannot be placed: the answer stays at the releases
    bare = read(runs, SHIM, "toylib")
    assert bare is not None and bare.fixed.commits is None and bare.fix_commit is None


def test_an_unpinned_commit_edge_names_its_range_never_a_commit():
    runs = [
        *_runs(RELEASES),
        _on_commit("bug-reproduced", "1.5", BETWEEN[1].sha),
        _on_commit("fix-validated", "1.5", BETWEEN[4].sha),
    ]
    window = read(runs, SHIM, "toylib", orders=(ORDER,))
    assert window is not None
    span = window.fixed.commits
    assert span is not None and span.state == EdgeState.UNPINNED and span.commit is None
    assert span.between == (BETWEEN[2].sha, BETWEEN[3].sha) and span.after == BETWEEN[4].sha
    assert window.fix_commit is None
    assert "fixed in v1.5..v1.6, not pinned (one of " in window.line()


def test_commit_runs_that_disagree_are_flagged_and_the_bug_wins():
    runs = [
        *_runs(RELEASES),
        _on_commit("fix-validated", "1.5", BETWEEN[1].sha),
        _on_commit("bug-reproduced", "1.5", BETWEEN[3].sha),
        _on_commit("fix-validated", "1.5", BETWEEN[4].sha),
        _on_commit("bug-reproduced", "1.5", BETWEEN[4].sha),
    ]
    window = read(runs, SHIM, "toylib", orders=(ORDER,))
    assert window is not None
    kinds = {d.kind: d.items for d in window.disagreements}
    assert kinds == {
        DisagreementKind.SPLIT: (BETWEEN[4].sha,),
        DisagreementKind.NOT_MONOTONE: (BETWEEN[1].sha,),
    }
    # the bug wins on commit 4: the fix is commit 5, pinned
    assert window.fix_commit == BETWEEN[5]


def test_a_fix_on_a_followed_branch_in_no_release():
    branch = _commits(4, "d")
    order = CommitOrder(("1.5", "main"), ("v1.5", "refs/heads/main"), "b" * 40, branch, "main")
    runs = [
        *_runs({"1.4": "bug", "1.5": "bug"}),
        _on_commit("bug-reproduced", "1.5", branch[0].sha),
        _on_commit("fix-validated", "1.5", branch[1].sha),
    ]
    window = read(
        runs, SHIM, "toylib", orders=(order,), mirror=by_link("https://git.example/toylib")
    )
    assert window is not None and window.fixed.state == EdgeState.OPEN
    fix = window.branch_fix
    assert fix is not None and fix.commit == branch[1] and fix.branch == "main"
    assert fix.describe() == f"fixed on main at {branch[1].short} (#11), in no release yet"
    assert window.fix_commit == branch[1] and window.first_fixed is None
    # a newer release ran clean: the fix is a release's, not the branch's
    released = read([*runs, *_runs({"1.6": "clean"})], SHIM, "toylib", orders=(order,))
    assert released is not None and released.branch_fix is None


# -- the floor of any monotone window ------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=24),
    data=st.data(),
)
def test_the_fixed_edge_is_the_first_clean_after_the_last_broken(n, data):
    """Random monotone windows [introduced, fixed) over n releases, each release run or not, and
    random extra clean runs before the window (a culprit's old lock, an old lane run): the fixed
    edge's clean side is always the first clean release run after the last broken one, and no
    clean run before the window lowers it."""
    introduced = data.draw(st.integers(min_value=0, max_value=n - 2))
    fixed = data.draw(st.integers(min_value=introduced + 1, max_value=n - 1))
    releases = [f"1.{i}" for i in range(n)]
    ran = data.draw(st.sets(st.integers(min_value=0, max_value=n - 1)))
    ran |= {data.draw(st.integers(min_value=introduced, max_value=fixed - 1))}
    states = {releases[i]: "bug" if introduced <= i < fixed else "clean" for i in sorted(ran)}
    extra = data.draw(st.sets(st.integers(min_value=0, max_value=max(introduced - 1, 0))))
    runs = _runs(states) + [
        r
        for i in sorted(extra)
        if i < introduced
        for r in _runs({releases[i]: "clean"}, lane="bisect:cpu", host="culprit-box")
    ]
    window = read(runs, SHIM, "toylib")
    assert window is not None and window.seen and window.monotone
    last_broken = max(i for i in ran if introduced <= i < fixed)
    after = [i for i in ran if i > last_broken and i >= fixed]
    assert window.last_broken == releases[last_broken]
    assert window.first_fixed == (releases[min(after)] if after else None)
    for i in extra:
        if i < introduced:
            assert window.place(releases[i]) == Place.BEFORE
    assert window.edge(EdgeKind.FIXED) is window.fixed
