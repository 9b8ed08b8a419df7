"""The one placer of lanes (retire.history.place): a release lane by the release it locks, a
revision lane by the ancestry answers for its locked commit — against the commits that made the
window's edges, then against the mirror's release tags — each with the clause that says so. What
the answers do not pin is unknown. (Both readers' end-to-end placements:
tests/test_verdicts_window.py for `patchlane verdicts`, tests/test_bisect_history.py for
`patchlane bisect`.)"""

from __future__ import annotations

import pytest

from retire.evidence.values import Ancestry
from retire.history.edge import Place
from retire.history.place import Target, place
from retire.history.reading import CommitOrder, read
from retire.mirrors.history import Commit
from tests.support.reportshop import record
from tests.support.windows import by_link
from tests.test_history_reading import _on_commit, _runs

SHIM = "toylib_add"
REPO = "https://git.example/acme/toylib"
INTRO = Commit("1" * 40, "Rework add() (#33)", "2026-01-01", 33)
FIX = Commit("2" * 40, "Fix add() (#63)", "2026-01-02", 63)
LANE = "e" * 40


def _window():
    """Clean 1.0 … 1.2, broken 1.3 … 1.5, clean 1.6 …; both edges pinned in the commits."""
    states = {"1.0": "clean", "1.2": "clean", "1.3": "bug", "1.5": "bug", "1.6": "clean"}
    runs = [
        *_runs(states),
        _on_commit("bug-reproduced", "1.2", INTRO.sha),
        _on_commit("fix-validated", "1.5", FIX.sha),
    ]
    orders = (
        CommitOrder(("1.2", "1.3"), ("v1.2", "v1.3"), "a" * 40, (INTRO, Commit("3" * 40, "", ""))),
        CommitOrder(("1.5", "1.6"), ("v1.5", "v1.6"), "b" * 40, (FIX, Commit("4" * 40, "", ""))),
    )
    window = read(runs, SHIM, "toylib", orders=orders, mirror=by_link(REPO))
    assert window is not None and window.pinned_commits() == (INTRO.sha, FIX.sha)
    return window


@pytest.mark.parametrize(
    ("version", "where", "says"),
    [
        (
            "1.0",
            Place.BEFORE,
            "toylib 1.0 is before the window — the bug came in after 1.2 (clean), by 1.3 (broken)",
        ),
        (
            "1.4",
            Place.INSIDE,
            (
                "toylib 1.4 is inside the window (the bug came in after 1.2 "
                "(clean), by 1.3 (broken); fixed after 1.5 (broken), by 1.6 (clean))"
            ),
        ),
        (
            "1.7",
            Place.AFTER,
            "toylib 1.7 is after the window — fixed after 1.5 (broken), by 1.6 (clean)",
        ),
        (
            "1.2.5",
            Place.UNKNOWN,
            "toylib 1.2.5 is not placed against the window (the runs do not pin it)",
        ),
        ("junk", Place.UNKNOWN, "toylib junk is not a release"),
    ],
)
def test_a_release_lane_by_the_release_it_locks(version, where, says):
    placed = place(_window(), Target("rel", "toylib", version))
    assert (placed.place, placed.says, placed.locked) == (where, says, f"toylib {version}")


def test_a_lane_without_the_target_or_without_a_window_is_not_placed():
    assert place(_window(), Target("x", "toylib")).place == Place.UNKNOWN
    unread = place(None, Target("x", "toylib", "1.0"))
    assert unread.place == Place.UNKNOWN and "no window on record" in unread.says


@pytest.mark.parametrize(
    ("contains", "ancestry", "where", "says"),
    [
        # at or past the fix commit: after, whatever the tags say
        (((FIX.sha, True),), None, Place.AFTER, f"at or past the fix {FIX.short}"),
        # without the commit that brought the bug in: before
        (((INTRO.sha, False), (FIX.sha, False)), None, Place.BEFORE, f"before {INTRO.short}"),
        # with it, without the fix: inside
        (((INTRO.sha, True), (FIX.sha, False)), None, Place.INSIDE, f"before the fix {FIX.short}"),
        # no commit answers: the release tags decide — part of 1.1 (before the window)
        (
            (),
            Ancestry(REPO, LANE, ("v1.0", "1.0"), ("v1.1", "1.1")),
            Place.BEFORE,
            "(part of release 1.1) is before the window",
        ),
        # contains 1.7: after
        (
            (),
            Ancestry(REPO, LANE, ("v1.7", "1.7"), None),
            Place.AFTER,
            "(contains release 1.7) is after the window",
        ),
        # part of 1.5 and contains 1.3: inside
        (
            (),
            Ancestry(REPO, LANE, ("v1.3", "1.3"), ("v1.5", "1.5")),
            Place.INSIDE,
            "is inside the window",
        ),
        # left the release line after 1.0: not placed
        ((), Ancestry(REPO, LANE, ("v1.0", "1.0"), None), Place.UNKNOWN, "is not placed"),
    ],
)
def test_a_revision_lane_by_the_ancestry_of_its_commit(contains, ancestry, where, says):
    target = Target("dev", "toylib", "1.5", LANE, ancestry, contains)
    placed = place(_window(), target)
    assert placed.place == where and says in placed.says, placed.says
    assert placed.locked == f"toylib @ {LANE[:10]}" and placed.commit == LANE


def test_a_revision_lane_past_a_fix_on_its_branch_is_after_and_says_which():
    branch = (Commit("5" * 40, "Tidy", "2026"), Commit("6" * 40, "Fix add() (#92)", "2026", 92))
    order = CommitOrder(("1.5", "main"), ("v1.5", "refs/heads/main"), "b" * 40, branch, "main")
    runs = [
        *_runs({"1.2": "clean", "1.3": "bug", "1.5": "bug"}),
        _on_commit("bug-reproduced", "1.5", branch[0].sha),
        _on_commit("fix-validated", "1.5", branch[1].sha),
    ]
    window = read(runs, SHIM, "toylib", orders=(order,), mirror=by_link(REPO))
    assert window is not None and window.branch_fix is not None
    placed = place(window, Target("dev", "toylib", None, LANE, contains=((branch[1].sha, True),)))
    assert placed.place == Place.AFTER
    assert placed.says.endswith("fixed on main at 666666666666 (#92), in no release yet")
    behind = place(window, Target("dev", "toylib", None, LANE, contains=((branch[1].sha, False),)))
    assert behind.place == Place.INSIDE
    # a release lane inside the window hears of it
    rel = place(window, Target("rel", "toylib", "1.5"))
    assert rel.place == Place.INSIDE and rel.says.endswith("(#92), in no release yet")
    assert rel.sentence().endswith(": the shim is needed")


def test_a_window_not_seen_places_no_commit():
    window = read(
        [record(SHIM, "cpu", "without", "fix-validated", "2026", version="1.0")], SHIM, "toylib"
    )
    placed = place(window, Target("dev", "toylib", None, LANE, contains=((FIX.sha, True),)))
    assert placed.place == Place.UNKNOWN and "not seen" in placed.says
