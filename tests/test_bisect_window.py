"""A bug's window on an ordered history, pure: both edges found by a search over item states,
with or without evidence of a broken item, over crash zones, within bounded runs."""

from __future__ import annotations

import math

import pytest

from retire.bisect.prober import prober_of, stopping
from retire.bisect.search import CandidateRun, Limits
from retire.bisect.window import locate_window, spread
from retire.history.edge import EdgeState, Place


def _probe(states: dict[str, str], asked: list[str]):
    """A prober of ``states`` that logs what it ran in ``asked``."""

    def probe(item: str) -> CandidateRun:
        asked.append(item)
        return CandidateRun(item, states[item], "crashed" if states[item] == "unknown" else "ran")

    return prober_of(probe)


def _states(n: int, introduced: int, fixed: int, crash_below: int = 0) -> dict[str, str]:
    """Items 0 … n-1: crashing below ``crash_below``, broken in [introduced, fixed), else clean."""
    return {
        str(i): "unknown" if i < crash_below else "broken" if introduced <= i < fixed else "fixed"
        for i in range(n)
    }


def test_spread_takes_every_index_once_middle_first_newer_first():
    for n in range(1, 70):
        order = spread(n)
        assert sorted(order) == list(range(n)), n
    assert spread(16)[:3] == [8, 12, 4]


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 21, 34])
def test_from_a_known_broken_item_both_edges_are_found_in_log_runs(n):
    """Every window on every history up to 34 items, its oldest, middle and newest broken item
    as the evidence: both edges right, and at most ceil(log2 n) conclusive runs per edge plus
    the newest end."""
    bound = 2 * math.ceil(math.log2(n)) + 1 if n > 1 else 1
    for introduced in range(n):
        for fixed in range(introduced + 1, n + 1):
            states = _states(n, introduced, fixed)
            for evidence in {introduced, (introduced + fixed) // 2, fixed - 1}:
                asked: list[str] = []
                w = locate_window(
                    list(states), _probe(states, asked), known_broken=str(evidence)
                ).window
                assert len(asked) <= bound, (n, introduced, fixed, evidence, asked)
                assert w.seen
                if fixed < n:
                    assert (w.fixed.state, w.fixed.before, w.fixed.after) == (
                        EdgeState.FOUND,
                        str(fixed - 1),
                        str(fixed),
                    )
                else:
                    assert w.fixed.state == EdgeState.OPEN and w.fixed.after is None
                if introduced > 0:
                    assert (w.introduced.state, w.introduced.before, w.introduced.after) == (
                        EdgeState.FOUND,
                        str(introduced - 1),
                        str(introduced),
                    )
                else:
                    assert w.introduced.state == EdgeState.OPEN


def test_with_no_evidence_the_newest_then_a_spread_sample_finds_the_window():
    """35 releases, the newest clean, the bug in 21 … 25 only: a threshold search would call the
    newest and an old clean release 'no transition'; the sample finds a broken one, then both
    edges."""
    states = _states(35, 21, 26)
    asked: list[str] = []
    w = locate_window(list(states), _probe(states, asked)).window
    assert w.seen and asked[0] == "34"
    assert (w.introduced.before, w.introduced.after) == ("20", "21")
    assert (w.fixed.before, w.fixed.after) == ("25", "26")
    assert len(asked) <= 1 + 8 + 2 * math.ceil(math.log2(35))
    assert "window" not in w.line() and w.line() == (
        "introduced in 21 (last clean 20); fixed in 26 (last broken 25)"
    )


def test_a_crash_zone_below_the_window_is_stepped_over_and_told_from_clean():
    """Releases older than 12 crash under today's dependencies (unknown, never read as clean):
    the sample looks above the crashes first, and the edges are found above them."""
    states = _states(35, 20, 24, crash_below=12)
    asked: list[str] = []
    w = locate_window(list(states), _probe(states, asked), limits=Limits(max_unknown=4)).window
    assert w.seen, w.reason
    assert (w.introduced.state, w.introduced.after, w.fixed.after) == (EdgeState.FOUND, "20", "24")
    assert not any(states[a] == "broken" for a in asked if int(a) < 12)


def test_a_window_that_starts_in_the_crash_zone_is_unpinned_and_says_so():
    states = _states(20, 0, 8, crash_below=5)
    w = locate_window(list(states), _probe(states, []), known_broken="6").window
    assert w.fixed.state == EdgeState.FOUND and w.fixed.after == "8"
    assert w.introduced.state == EdgeState.UNPINNED and w.introduced.before is None
    assert w.introduced.after == "5" and "could not be told" in w.introduced.note
    # a lane on 3 may or may not need the shim: never guessed
    assert w.place("3") == Place.UNKNOWN and w.place("6") == Place.INSIDE


def test_nothing_found_says_what_ran_and_what_was_never_tried():
    """A one-release window the sample misses: not a bare 'no transition' — the runs, and the
    stretches no run reached (what `--since` or a lane run on the shop's release would decide)."""
    states = _states(40, 33, 34)
    asked: list[str] = []
    w = locate_window(list(states), _probe(states, asked), sample=4).window
    assert not w.seen and len(asked) == 5
    assert w.reason.startswith("no item reproduced the bug: ran 39 clean, 19 clean")
    assert "at most 4 older item(s)" in w.reason
    # the stretch holding the window is listed as never tried
    assert any(int(a) <= 33 <= int(b) for a, b in w.untried)
    assert w.place("33") == Place.UNKNOWN


def test_still_broken_at_the_newest_is_an_open_fixed_edge():
    states = _states(10, 4, 10)
    w = locate_window(list(states), _probe(states, [])).window
    assert w.fixed.state == EdgeState.OPEN and "still broken at the newest, 9" in w.fixed.note
    assert w.introduced.after == "4"


def test_a_lane_is_placed_before_inside_or_after_the_window():
    versions = [f"1.{i}" for i in range(10)]
    states = dict(zip(versions, _states(10, 3, 6).values(), strict=True))
    w = locate_window(versions, _probe(states, []), known_broken="1.4").window
    assert [w.place(v) for v in ("1.1", "1.2", "1.3", "1.5", "1.6", "1.9")] == [
        Place.BEFORE,
        Place.BEFORE,
        Place.INSIDE,
        Place.INSIDE,
        Place.AFTER,
        Place.AFTER,
    ]
    # releases not in the history: PEP 440 order; between two edge items is never guessed
    assert (
        w.place("1.4.1") == Place.INSIDE
        and w.place("1.5.1") == Place.UNKNOWN
        and w.place("2.0") == Place.AFTER
    )
    assert w.place("1.2.5") == Place.UNKNOWN and w.place("junk") == Place.UNKNOWN


def test_a_budget_stops_the_search_and_the_edge_says_why():
    states = _states(30, 10, 20)
    asked: list[str] = []
    budget = iter(range(100))

    def stop():
        return "the budget of 3 runs is spent" if next(budget) >= 3 else None

    w = locate_window(
        list(states), _probe(states, asked), known_broken="15", progress=stopping(stop)
    ).window
    assert w.fixed.state == EdgeState.UNPINNED and "budget" in w.fixed.note
    assert w.fixed.between
