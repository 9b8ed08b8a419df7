"""The commit search informed by what the shim touches, pure: the commits that change the target's
files first, then the edge confirmed by its neighbour, and the full search whenever it is not.

Between two adjacent releases most first-parent commits never touch the target's module (37
commits between Liger-Kernel's v0.8.1 and v0.8.2, a handful in the fused-linear-cross-entropy
files). :func:`informed_edge` binary-searches only the ``k`` commits of the range that touch the
target (:mod:`retire.mirrors.touching` reads them) for the step from the older side's state to the
newer's, then *confirms* it: the first-parent predecessor of the commit it found (any commit,
touching or not) must still show the older state. A confirmed edge is exact — a commit of the new
state whose predecessor shows the old one — whatever touched what. When the confirmation fails
(the change came from a commit that touches none of those files: a build file, a dependency, a
module the target imports), the search falls back to :func:`retire.bisect.window.locate_edge`
over every first-parent commit of the range, narrowed by what is already known, and says so; so
is it when nothing in the range touches the target. The answer is never another commit than the
full search's: ``tests/test_bisect_informed.py`` holds it to that over random histories and
random touching sets, and ``bench/informed.py`` counts the runs (at most ``⌈log2 k⌉ + 2`` when the
edge is at a touching commit).

It asks a :class:`~retire.bisect.prober.Prober` (its cache first, for free) and tells a
:class:`~retire.bisect.prober.Progress` each run it consulted, once, whose budget is asked before
each fresh run, as the full search does. The touching commits are asked one at a time; a prober
of width above 1 runs the fall-back's rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retire.bisect.prober import Progress, Starting, starting
from retire.bisect.search import (
    BROKEN,
    FIXED,
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    Limits,
    State,
    narrow,
)
from retire.bisect.window import locate_edge
from retire.history.edge import CommitSearch, Edge, EdgeKind, EdgeState

if TYPE_CHECKING:
    from retire.bisect.prober import Prober

__all__ = ["InformedSearch", "TouchedSpan", "informed_edge"]

_LIMITS = Limits()


@dataclass(frozen=True)
class TouchedSpan:
    """One edge's commits: ``items`` strictly between ``before`` (the older release's commit,
    known to be on the old side) and ``after`` (the newer release's, known on the new side),
    oldest first on the first-parent chain; ``touching`` the commits of ``items`` and ``after``
    that change the target's files. ``kind``: ``introduced`` (clean → broken) or ``fixed``."""

    kind: EdgeKind
    before: str
    items: tuple[str, ...]
    after: str
    touching: frozenset[str] = frozenset()

    @property
    def touching_count(self) -> int:
        return sum(1 for item in (*self.items, self.after) if item in self.touching)


@dataclass(frozen=True)
class InformedSearch:
    """The edge, every run that placed it (in the order consulted), and how: ``note`` is the
    sentence that says so."""

    edge: Edge
    runs: tuple[CandidateRun, ...]
    how: CommitSearch
    note: str


@dataclass
class _Informed:
    span: TouchedSpan
    prober: Prober
    known: Mapping[str, CandidateRun]
    limits: Limits
    progress: Progress
    states: dict[int, CandidateRun] = field(default_factory=dict)
    order: list[CandidateRun] = field(default_factory=list)

    @property
    def low(self) -> State:
        return FIXED if self.span.kind == "introduced" else BROKEN

    @property
    def high(self) -> State:
        return BROKEN if self.span.kind == "introduced" else FIXED

    def ask(self, i: int) -> CandidateRun | None:
        """The state of ``items[i]``: the answer at hand, else a fresh run — None when the
        budget or the tolerances allow no further run."""
        item = self.span.items[i]
        run = self.known.get(item)
        if run is None:
            if self.halted() is not None:
                return None
            run = self.prober.run(item)
        self.states[i] = run
        self.order.append(run)
        self.progress.consulted(run)
        return run

    def halted(self) -> str | None:
        if (why := self.prober.blocked or self.progress.stop()) is not None:
            return why
        fresh = [r.state for r in self.order if not r.cached]
        if fresh.count(UNKNOWN) >= self.limits.max_unknown:
            return "too many commits could not be told"
        if fresh.count(NOT_APPLICABLE) >= self.limits.max_not_applicable:
            return "too many commits are not applicable"
        return None

    def between_not_applicable(self, lo: int, hi: int) -> bool:
        return all(
            i in self.states and self.states[i].state == NOT_APPLICABLE for i in range(lo + 1, hi)
        )


def informed_edge(
    span: TouchedSpan,
    prober: Prober,
    *,
    limits: Limits = _LIMITS,
    progress: Progress | None = None,
) -> InformedSearch:
    """The ``span.kind`` edge among ``span``'s commits: the touching commits searched first, the
    edge confirmed by its predecessor, else the full first-parent search (narrowed by what is
    known). ``prober``, ``limits`` and ``progress`` as for
    :func:`retire.bisect.window.locate_edge`."""
    items = span.items
    known = {item: hit for item in items if (hit := prober.cached(item)) is not None}
    s = _Informed(span, prober, known, limits, progress or Progress())
    if span.touching_count == 0:
        why = "no commit in the range touches the target's files"
        return _full(s, CommitSearch.UNINFORMED, why)
    lo, hi = _touching_search(s)
    if lo is None:
        return _full(s, CommitSearch.FELL_BACK, "the search of the touching commits stopped early")
    return _confirm(s, lo, hi)


def _touching_search(s: _Informed) -> tuple[int | None, int]:
    """Binary search over the touching commits for the step from the old state to the new
    (``after``, index ``len(items)``, is on the new side): the narrowed ``(lo, hi)``, ``lo``
    None when a run could not start."""
    items = s.span.items
    lo, hi = -1, len(items)
    for i in range(len(items)):
        # what is at hand costs nothing and narrows the search
        if items[i] in s.known:
            s.ask(i)
    lo, hi = narrow(s.states, lo, hi, s.low, s.high)
    touching = [i for i, item in enumerate(items) if item in s.span.touching]
    while True:
        open_ = [i for i in touching if lo < i < hi and i not in s.states]
        if not open_:
            return lo, hi
        # the middle of the open touching commits and ``hi`` (one of them is the edge)
        if s.ask(open_[(len(open_) - 1) // 2]) is None:
            return None, hi
        lo, hi = narrow(s.states, lo, hi, s.low, s.high)


def _confirm(s: _Informed, lo: int, hi: int) -> InformedSearch:
    """Confirm the edge at ``hi``: the commits between the last old-state commit and ``hi``
    must be none but not applicable ones, the one before ``hi`` asked first."""
    items = s.span.items
    while not s.between_not_applicable(lo, hi):
        j = max(i for i in range(lo + 1, hi) if not _na(s, i))
        run = s.states.get(j) or s.ask(j)
        if run is None:
            return _full(s, CommitSearch.FELL_BACK, "the confirmation could not run")
        if run.state == s.low:
            lo = j
        elif run.state != NOT_APPLICABLE:
            after = items[hi] if hi < len(items) else s.span.after
            return _full(
                s,
                CommitSearch.FELL_BACK,
                f"the edge is not at a commit that touches the target's files ({items[j][:12]}, "
                f"before {after[:12]}, is {run.state})",
            )
    edge = Edge(
        s.span.kind,
        EdgeState.FOUND,
        items[lo] if lo >= 0 else s.span.before,
        items[hi] if hi < len(items) else s.span.after,
    )
    k, total = s.span.touching_count, len(items) + 1
    note = (
        f"informed: {k} of {total} commits touch the target's files; the edge is at one of "
        f"them, confirmed by the commit before it"
    )
    return InformedSearch(edge, tuple(s.order), CommitSearch.TOUCHING, note)


def _na(s: _Informed, i: int) -> bool:
    return i in s.states and s.states[i].state == NOT_APPLICABLE


def _full(s: _Informed, how: CommitSearch, why: str) -> InformedSearch:
    """The full search over every first-parent commit, narrowed by the runs already made."""
    span = s.span
    known = {**s.known, **{span.items[i]: run for i, run in s.states.items()}}
    full = locate_edge(
        span.items,
        _Knowing(s.prober, known),
        kind=span.kind,
        before=span.before,
        after=span.after,
        limits=s.limits,
        progress=_Once(s.progress, s.order),
    )
    seen = {id(run) for run in s.order}
    runs = (*s.order, *(run for run in full.runs if id(run) not in seen))
    note = f"{why}: searched every first-parent commit of the range ({len(span.items) + 1})"
    return InformedSearch(full.edge, runs, how, note)


class _Knowing:
    """``prober`` whose cache also knows the runs the touching search made (counted as the fresh
    runs they were against the tolerances)."""

    def __init__(self, prober: Prober, known: Mapping[str, CandidateRun]) -> None:
        self._prober, self._known = prober, dict(known)
        self.width = prober.width

    @property
    def blocked(self) -> str | None:
        return self._prober.blocked

    def run(self, item: str, /) -> CandidateRun:
        return self._prober.run(item)

    def run_round(self, items: Sequence[str], /) -> Sequence[CandidateRun]:
        return self._prober.run_round(items)

    def cached(self, item: str, /) -> CandidateRun | None:
        return self._known.get(item) or self._prober.cached(item)

    @property
    def can_start(self) -> bool:
        # the fall-back keeps the slots busy where the prober can (retire.bisect.started)
        return starting(self._prober) is not None

    def start(self, item: str, /) -> None:
        self._started().start(item)

    def finished(self) -> CandidateRun:
        return self._started().finished()

    def cancel(self, item: str, /) -> bool:
        return self._started().cancel(item)

    def _started(self) -> Starting:
        prober = starting(self._prober)
        if prober is None:
            raise TypeError("the prober starts no candidate on its own")
        return prober

    def close(self) -> None:
        # the caller's prober: closed by whoever made it
        return None


class _Once(Progress):
    """``inner``, told of each run once: those the touching search consulted already are not
    told (nor spent) again when the full search takes them as known."""

    def __init__(self, inner: Progress, told: Sequence[CandidateRun]) -> None:
        super().__init__(inner.meter)
        self._inner = inner
        self._told = {id(run) for run in told}

    def consulted(self, run: CandidateRun) -> None:
        if id(run) not in self._told:
            self._inner.consulted(run)

    def cancelled(self, item: str) -> None:
        self._inner.cancelled(item)

    def stop(self) -> str | None:
        return self._inner.stop()

    def room(self) -> int | None:
        return self._inner.room()

    def note(self, text: str) -> None:
        self._inner.note(text)
