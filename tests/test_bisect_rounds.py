"""The k-ary search, pure: with ``width`` candidates run at once per round, the threshold search,
the window search and the sample give the answers one run at a time gives, in fewer rounds, and
never start more runs than a budget has left."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.bisect.budget import Budget, Meter
from retire.bisect.prober import OneAtATime, Progress
from retire.bisect.search import CandidateRun, Limits, Status, find_boundary, split_points
from retire.bisect.window import locate_edge, locate_window

#: Tolerances no history here reaches: answers compare without a limit cutting one search short.
WIDE = Limits(max_unknown=1000, max_not_applicable=1000)


class Rounds(OneAtATime):
    """A prober of ``width`` over fixed states that logs every round (one run alone, or a
    batch)."""

    def __init__(self, states: dict[str, str], width: int = 1) -> None:
        self.states, self.width = states, width
        self.rounds: list[list[str]] = []

    def _run(self, item: str) -> CandidateRun:
        state = self.states[item]
        return CandidateRun(item, state, "crashed" if state == "unknown" else "ran")

    def run(self, item: str, /) -> CandidateRun:
        self.rounds.append([item])
        return self._run(item)

    def run_round(self, items, /) -> list[CandidateRun]:
        self.rounds.append(list(items))
        return [self._run(item) for item in items]

    @property
    def runs(self) -> int:
        return sum(len(r) for r in self.rounds)


def _threshold(n: int, first_fixed: int, na_below: int = 0) -> dict[str, str]:
    """Items 0 … n-1: not applicable below ``na_below``, broken below ``first_fixed``, else
    fixed."""
    return {
        str(i): "not-applicable" if i < na_below else "broken" if i < first_fixed else "fixed"
        for i in range(n)
    }


def _window(n: int, introduced: int, fixed: int) -> dict[str, str]:
    return {str(i): "broken" if introduced <= i < fixed else "fixed" for i in range(n)}


def test_split_points_cut_the_interval_into_equal_parts():
    assert split_points(-1, 99, list(range(99)), 1) == [49]
    assert split_points(-1, 99, list(range(99)), 3) == [24, 49, 74]
    # fewer untested than asked: all of them
    assert split_points(-1, 3, [0, 2], 4) == [0, 2]


def test_a_round_runs_width_candidates_spread_over_the_interval():
    """100 releases fixed from 37, width 4: the newest end alone, then rounds of four that split
    the open interval into five parts; the answer in far fewer rounds than one at a time."""
    versions = [str(i) for i in range(100)]
    wide = Rounds(_threshold(100, 37), width=4)
    out = find_boundary(versions, wide)
    assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == ("36", "37")
    assert wide.rounds[0] == ["99"]
    assert wide.rounds[1] == ["19", "39", "59", "79"]
    assert all(len(r) <= 4 for r in wide.rounds)
    narrow = Rounds(_threshold(100, 37))
    one = find_boundary(versions, narrow)
    assert (one.last_broken, one.first_fixed) == (out.last_broken, out.first_fixed)
    assert all(len(r) == 1 for r in narrow.rounds)
    # log5 vs log2 of the 99 boundaries below the newest end
    assert len(wide.rounds) <= 1 + math.ceil(math.log(100, 5)) + 1 < len(narrow.rounds)


class _OneOnly(Rounds):
    def run_round(self, items, /) -> list[CandidateRun]:
        raise AssertionError(f"a round of {list(items)} at width 1")


def test_width_one_never_runs_a_round():
    versions = [str(i) for i in range(20)]
    probe = _OneOnly(_threshold(20, 7))
    out = find_boundary(versions, probe)
    assert out.first_fixed == "7" and all(len(r) == 1 for r in probe.rounds)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 70).flatmap(
        lambda n: st.tuples(
            st.just(n), st.integers(0, n), st.integers(0, n), st.integers(2, 7), st.booleans()
        )
    )
)
def test_the_threshold_answer_is_the_same_at_any_width(case):
    """Random monotone histories (not applicable old releases, broken, then fixed): width k
    gives width 1's answer, and no round runs more than k."""
    n, first_fixed, na_below, width, evidence = case
    na_below = min(na_below, first_fixed)
    versions = [str(i) for i in range(n)]
    known_broken = "0" if evidence and na_below == 0 else None
    answers = []
    for w in (1, width):
        probe = Rounds(_threshold(n, first_fixed, na_below), width=w)
        out = find_boundary(versions, probe, known_broken=known_broken, limits=WIDE)
        assert all(len(r) <= w for r in probe.rounds)
        answers.append((out.status, out.last_broken, out.first_fixed, out.broken_here))
    assert answers[0] == answers[1]


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(0, n - 1),
            st.integers(0, n),
            st.integers(2, 6),
            st.sampled_from(["none", "oldest", "newest"]),
        )
    )
)
def test_the_window_is_the_same_at_any_width(case):
    """Random windows [introduced, fixed) with or without a known broken item: both edges as width
    1 finds them, whether or not the sample (up to ``width`` a round) reaches the broken ones."""
    n, introduced, fixed, width, evidence = case
    fixed = max(fixed, introduced + 1)
    history = [str(i) for i in range(n)]
    known_broken = {"none": None, "oldest": introduced, "newest": fixed - 1}[evidence]
    windows = []
    for w in (1, width):
        probe = Rounds(_window(n, introduced, fixed), width=w)
        window = locate_window(
            history,
            probe,
            known_broken=None if known_broken is None else str(min(known_broken, n - 1)),
            limits=WIDE,
            sample=5,
        ).window
        assert all(len(r) <= w for r in probe.rounds)
        windows.append(
            (window.seen, window.introduced, window.fixed)
            if window.seen
            else (window.seen, window.untried)
        )
    assert windows[0] == windows[1]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(2, 80),
    st.integers(0, 80),
    st.integers(1, 12),
    st.integers(2, 6),
    st.sampled_from(["threshold", "window", "edge"]),
)
def test_a_round_never_starts_more_runs_than_the_budget_has_left(n, cut, runs, width, search):
    """A Meter of ``runs`` fresh runs, as the weekly bisections keep it: the search at any width
    makes at most that many, and each round at most what was left when it started."""
    meter = Meter(Budget(runs=runs))
    lefts: list[int] = []
    states = _window(n, 0, min(cut, n - 1) or 1) if search == "window" else _threshold(n, cut)

    class Metered(Rounds):
        def run_round(self, items, /) -> list[CandidateRun]:
            lefts.append(runs - meter.runs)
            return super().run_round(items)

    probe = Metered(states, width)
    hooks = {"progress": Progress(meter), "limits": WIDE}
    items = [str(i) for i in range(n)]
    if search == "threshold":
        find_boundary(items, probe, **hooks)
    elif search == "window":
        locate_window(items, probe, sample=n, **hooks)
    else:
        kind = "fixed" if cut else "introduced"
        locate_edge(items, probe, kind=kind, before="a", after="b", **hooks)
    assert probe.runs == meter.runs <= runs
    batches = [r for r in probe.rounds if len(r) > 1]
    assert all(len(r) <= left for r, left in zip(batches, lefts, strict=True))


def test_a_round_stays_within_the_tolerance_for_unknowns():
    """Everything below the newest end crashes: width 6 with a tolerance of 3 unknowns runs three,
    as one at a time does, and says why it stopped."""
    versions = [str(i) for i in range(40)]
    states = dict.fromkeys(versions, "unknown") | {"39": "fixed"}
    for width in (1, 6):
        probe = Rounds(states, width)
        out = find_boundary(versions, probe, known_broken="0", limits=Limits(max_unknown=3))
        assert probe.runs == 1 + 3, width
        assert out.status == Status.UNPINNED and "could not be told" in out.reason


@pytest.mark.parametrize("which", ["releases", "window"])
def test_bisect_and_bisect_window_take_the_probers_width(tmp_path, which):
    """A prober that runs rounds (``width``, ``run_round``, as retire.bisect.sidebyside's) is
    searched in rounds by both bisections, with the answer of one at a time."""
    from retire import bisect
    from retire.bisect.transitions import bisect_window
    from shims.manifest import load_manifest
    from tests.support.shimtree import write_shim

    manifest = load_manifest(write_shim(tmp_path, "toylib_add") / "manifest.toml")
    versions = [f"1.{i}" for i in range(30)]
    runner = Rounds({v: "broken" if i < 17 else "fixed" for i, v in enumerate(versions)}, 3)
    job = bisect.BisectJob(manifest.id, bisect.Bounds(known_broken="1.0"))
    search = bisect.bisect if which == "releases" else bisect_window
    result = search(manifest, versions, job, prober=runner)
    assert (result.last_broken, result.first_fixed) == ("1.16", "1.17")
    assert max(len(r) for r in runner.rounds) == 3
