"""The informed commit search: the touching commits first, the edge confirmed by its predecessor,
the full search whenever it is not — never another commit than the full search's."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from retire.bisect.informed import TouchedSpan, informed_edge
from retire.bisect.prober import OneAtATime, Progress, stopping
from retire.bisect.search import CandidateRun, Limits, State
from retire.bisect.window import EdgeState, locate_edge
from retire.history.edge import CommitSearch

KINDS = ("introduced", "fixed")


class Toy(OneAtATime):
    """A history whose commit ``edge`` (an index into items; ``len(items)`` is ``after``) is the
    first of the new state; ``masked`` commits show ``unknown`` or ``not-applicable`` instead."""

    def __init__(
        self, n: int, edge: int, kind: str, masked: dict[int, State] | None = None
    ) -> None:
        self.items = tuple(f"c{i:03d}" for i in range(n))
        self.edge, self.kind, self.masked = edge, kind, dict(masked or {})
        self.asked: list[str] = []
        self.cache: dict[str, CandidateRun] = {}

    def truth(self, i: int) -> State:
        new = i >= self.edge
        broken = new if self.kind == "introduced" else not new
        return State.BROKEN if broken else State.FIXED

    def run(self, item: str, /) -> CandidateRun:
        self.asked.append(item)
        i = self.items.index(item)
        state = self.masked.get(i, self.truth(i))
        return CandidateRun(item, state, str(state))

    def cached(self, item: str, /) -> CandidateRun | None:
        return self.cache.get(item)

    def span(self, touching: set[int]) -> TouchedSpan:
        named = frozenset(self.items[i] if i < len(self.items) else "after" for i in touching)
        return TouchedSpan(self.kind, "before", self.items, "after", named)

    def full(self):
        return locate_edge(self.items, self, kind=self.kind, before="before", after="after")


@st.composite
def histories(draw, masks: bool = False):
    n = draw(st.integers(min_value=0, max_value=60))
    edge = draw(st.integers(min_value=0, max_value=n))
    kind = draw(st.sampled_from(KINDS))
    touching = draw(st.sets(st.integers(min_value=0, max_value=n)))
    masked = {}
    if masks and n:
        picks = draw(st.sets(st.integers(min_value=0, max_value=n - 1), max_size=6))
        masked = {i: draw(st.sampled_from((State.UNKNOWN, State.NOT_APPLICABLE))) for i in picks}
    return Toy(n, edge, kind, masked), touching


@settings(max_examples=400, deadline=None)
@given(histories())
def test_the_answer_is_the_full_searchs_over_random_histories_and_touching_sets(case):
    toy, touching = case
    informed = informed_edge(toy.span(touching), toy)
    full = Toy(len(toy.items), toy.edge, toy.kind).full()
    assert informed.edge == full.edge
    assert informed.edge.state == EdgeState.FOUND
    expected = toy.items[toy.edge] if toy.edge < len(toy.items) else "after"
    assert informed.edge.after == expected
    # every run is accounted for, none asked twice
    assert len(toy.asked) == len(set(toy.asked)) == len(informed.runs)
    k = toy.span(touching).touching_count
    if toy.edge in touching:
        assert informed.how == CommitSearch.TOUCHING
        assert len(informed.runs) <= math.ceil(math.log2(k)) + 2


@settings(max_examples=400, deadline=None)
@given(histories(masks=True))
def test_with_commits_that_cannot_be_told_a_found_edge_is_never_a_wrong_commit(case):
    toy, touching = case
    limits = Limits(max_unknown=8, max_not_applicable=8)
    informed = informed_edge(toy.span(touching), toy, limits=limits)
    twin = Toy(len(toy.items), toy.edge, toy.kind, toy.masked)
    full = locate_edge(
        twin.items, twin, kind=toy.kind, before="before", after="after", limits=limits
    )
    if informed.edge.state == EdgeState.FOUND:
        index = {item: i for i, item in enumerate(toy.items)} | {
            "before": -1,
            "after": len(toy.items),
        }
        lo, hi = index[informed.edge.before], index[informed.edge.after]
        # the old side's state, the new side's, and nothing between but not-applicable commits
        assert lo < toy.edge <= hi
        assert all(toy.masked.get(i) == State.NOT_APPLICABLE for i in range(lo + 1, hi))
        if full.edge.state == EdgeState.FOUND:
            assert full.edge == informed.edge


def test_the_edge_at_a_touching_commit_takes_log_k_plus_the_confirmation():
    # 40 commits, 6 of them touch; the fix is the 4th touching one
    toy = Toy(40, 21, "fixed")
    touching = {3, 9, 14, 21, 30, 36}
    found = informed_edge(toy.span(touching), toy)
    assert found.how == CommitSearch.TOUCHING and found.edge.after == toy.items[21]
    assert found.edge.before == toy.items[20]
    # the predecessor, untouched, confirmed it
    assert toy.items[20] in toy.asked
    assert len(found.runs) <= math.ceil(math.log2(6)) + 2
    assert "6 of 41 commits touch" in found.note
    # the full search over the same history takes more
    assert len(Toy(40, 21, "fixed").full().runs) > len(found.runs)


class Told(Progress):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[str] = []

    def ran(self, step: int, run: CandidateRun) -> None:
        self.told.append(run.version)


def test_an_edge_at_a_commit_that_touches_nothing_falls_back_and_says_so():
    toy = Toy(40, 17, "introduced")
    progress = Told()
    found = informed_edge(toy.span({3, 9, 30}), toy, progress=progress)
    # every run told once, the touching search's too, though the full search took them as known
    assert progress.told == toy.asked == [run.version for run in found.runs]
    assert found.how == CommitSearch.FELL_BACK
    assert found.edge.after == toy.items[17] and found.edge.state == EdgeState.FOUND
    assert "is not at a commit that touches the target's files" in found.note
    assert "searched every first-parent commit of the range (41)" in found.note


def test_no_touching_commit_is_the_full_search_from_the_start():
    toy = Toy(12, 5, "fixed")
    found = informed_edge(toy.span(set()), toy)
    assert found.how == CommitSearch.UNINFORMED and found.edge.after == toy.items[5]
    assert found.note.startswith("no commit in the range touches")


def test_answers_at_hand_cost_no_run():
    toy = Toy(30, 12, "fixed")
    touching = {2, 12, 25}
    first = informed_edge(toy.span(touching), toy)
    toy.cache = {
        run.version: CandidateRun(run.version, run.state, run.outcome, cached=True)
        for run in first.runs
    }
    toy.asked.clear()
    again = informed_edge(toy.span(touching), toy)
    assert again.edge == first.edge and toy.asked == []
    assert all(run.cached for run in again.runs)


def test_a_budget_stops_the_search_and_the_edge_says_why():
    toy = Toy(30, 12, "fixed")

    def stop():
        return "budget spent" if len(toy.asked) >= 1 else None

    found = informed_edge(toy.span({2, 12, 25}), toy, progress=stopping(stop))
    assert found.edge.state != EdgeState.FOUND and "budget spent" in found.edge.note
    assert len(toy.asked) == 1
