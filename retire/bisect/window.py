"""The search for a bug's window on an ordered history, pure: where it was introduced and where it
was fixed. It extends a bug's history: the window it ends in is
:class:`retire.history.window.Window`, the value every reader takes.

A real upstream bug is a *window*, not a threshold: one release (or commit) introduces it, a later
one fixes it, and the history on either side is clean. :func:`locate_window` finds both edges of
that window over any ordered history (releases, or the commits between two tags) by asking a
prober (:class:`retire.bisect.prober.Prober`) for the states of items; it never does I/O itself.

- *introduced*: the first broken item after a clean one (``before`` the last clean item,
  ``after`` the first broken);
- *fixed*: the first clean item after a broken one (``before`` the last broken, ``after`` the
  first clean).

Either edge may be ``open`` (broken from the oldest item on, still broken at the newest),
``unpinned`` (items that could not be told, or were not tried, lie between its two sides) or
``unsearched`` (a budget ended the search first).

With no broken item known, the search looks for one: the newest item first, then a bounded,
spread-out sample of older ones (the middle, then the quarters, …), newer ones first at each
level and above any crash first (old releases that crash under today's dependencies form a
prefix). When none is found the window is *not seen*, and it says what ran and which stretches
were never tried — never a bare "no transition".

Each edge is a binary search between its two known sides, so a window whose broken item is known
costs at most ``ceil(log2 n)`` conclusive runs per edge, plus the newest end. With a prober of
``width`` above 1 each round of an edge search runs up to ``width`` items at once, splitting the
open interval evenly (:mod:`retire.bisect.search`), and the sample takes up to ``width`` items a
round; a prober that starts items one at a time keeps every slot of an edge search busy instead
(:mod:`retire.bisect.started`), with the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retire.bisect.prober import Prober, Progress, starting
from retire.bisect.search import (
    BROKEN,
    FIXED,
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    Limits,
    State,
    _above_walls,
    _Search,
    narrow,
)
from retire.bisect.started import started_edge
from retire.history.edge import Edge, EdgeKind, EdgeState
from retire.history.window import Provenance, Told, Window, unseen

__all__ = [
    "DEFAULT_SAMPLE",
    "EdgeSearch",
    "WindowSearch",
    "locate_edge",
    "locate_window",
    "spread",
]

#: How many older items the search for a broken one may try after the newest end.
DEFAULT_SAMPLE = 8
_LIMITS = Limits()


@dataclass(frozen=True)
class WindowSearch:
    """A window search's answer: the window (:class:`retire.history.window.Window`, the value
    every reader takes) and every run that placed it, in the order consulted."""

    window: Window
    runs: tuple[CandidateRun, ...]

    @property
    def fresh_runs(self) -> int:
        """Reproducer runs made now (cached answers cost none)."""
        return sum(1 for r in self.runs if not r.cached and r.outcome != "env-failed")


def spread(count: int) -> list[int]:
    """Indices ``0 … count-1`` in the order a spread-out sample takes them: the middle, then the
    quarters (the newer first), then the eighths, …; every index once."""
    order: list[int] = []
    seen: set[int] = set()
    parts = 2
    while len(order) < count:
        for j in range(parts - 1, 0, -2):
            i = (j * count) // parts
            if i not in seen:
                seen.add(i)
                order.append(i)
        parts *= 2
        if parts > 4 * count:
            order += [i for i in range(count - 1, -1, -1) if i not in seen]
            break
    return order


@dataclass
class _Locate:
    """The state of one window search over a :class:`_Search` (its asks, states and budget)."""

    s: _Search
    limits: Limits
    # unknowns met while sampling, not counted against the edges' tolerance
    sampled_unknown: int = 0

    def exhausted(self) -> str | None:
        if (spent := self.s.stop()) is not None:
            return spent
        unknown = self.s.fresh(UNKNOWN) - self.sampled_unknown
        if unknown >= self.limits.max_unknown:
            return f"{unknown} item(s) could not be told ({self.s._listed(UNKNOWN)})"
        if self.s.fresh(NOT_APPLICABLE) >= self.limits.max_not_applicable:
            return f"{self.s.fresh(NOT_APPLICABLE)} item(s) are not applicable here"
        return None

    def state(self, i: int) -> State | None:
        run = self.s.states.get(i)
        return run.state if run is not None else None

    def sample(self, below: int, count: int) -> int | None:
        """Up to ``count`` fresh runs over ``0 … below-1``, spread out and above any crash first,
        up to ``width`` of them a round; the first broken item's index (in the sample's order),
        or None."""
        order = spread(below)
        spent = 0
        while spent < count:
            # the sample's unknowns count against no tolerance: only the budget caps a round
            size = self.s.round_size(self.s.width) if self.s.width > 1 else 1
            picks = self._sample_round(order, below, min(size, count - spent))
            if not picks:
                return None
            runs = self.s.ask_round(picks)
            spent += sum(0 if run.cached else 1 for run in runs)
            self.sampled_unknown += sum(1 for r in runs if r.state == UNKNOWN and not r.cached)
            broken = [i for i in picks if self.state(i) == BROKEN]
            if broken:
                return min(broken, key=order.index)
        return None

    def _sample_round(self, order: list[int], below: int, size: int) -> list[int]:
        """Up to ``size`` untried items in the sample's order, above the highest crash first; as
        many as the budget (``stop``, asked for each) lets start."""
        picks: list[int] = []
        walls = [
            i for i in self.s.states if i < below and self.state(i) in (UNKNOWN, NOT_APPLICABLE)
        ]
        wall = max(walls, default=-1)
        while len(picks) < size:
            untried = [i for i in order if i not in self.s.states and i not in picks]
            if not untried:
                break
            i = next((j for j in untried if j > wall), untried[0])
            if self.s.stop() is not None:
                return []
            picks.append(i)
        return picks

    def edge(self, lo: int, hi: int, low_state: State) -> tuple[int, int, str | None]:
        """Binary-search ``(lo, hi)`` for the step from ``low_state`` at ``lo`` to the other state
        at ``hi`` (either may be -1 / len: unknown); above walls of crashes first. Returns the
        narrowed (lo, hi) and why it stopped early, if it did. A prober that starts candidates
        one at a time (:func:`retire.bisect.prober.starting`) is kept busy instead of run in
        rounds (:func:`retire.bisect.started.started_edge`)."""
        high_state = FIXED if low_state == BROKEN else BROKEN
        lo, hi = self._known(lo, hi, low_state, high_state)
        if (prober := starting(self.s.prober)) is not None:
            return started_edge(
                self.s,
                prober,
                (lo, hi),
                (low_state, high_state),
                room=self._room,
                exhausted=self.exhausted,
            )
        while True:
            unknown_left = self.limits.max_unknown - self.s.fresh(UNKNOWN) + self.sampled_unknown
            size = self.s.round_size(unknown_left) if self.s.width > 1 else 1
            picks = self._next(lo, hi, size)
            if not picks:
                return lo, hi, None
            if (why := self.exhausted()) is not None:
                return lo, hi, why
            self.s.ask_round(picks)
            lo, hi = narrow(self.s.states, lo, hi, low_state, high_state)

    def _room(self) -> int:
        """How many candidates may run at once now: the width, less than neither what the budget
        has left nor what the tolerances could still absorb (running ones count as spent)."""
        unknown_left = self.limits.max_unknown - self.s.fresh(UNKNOWN) + self.sampled_unknown
        return self.s.round_size(unknown_left)

    def _known(self, lo: int, hi: int, low: State, high: State) -> tuple[int, int]:
        """Narrow ``(lo, hi)`` by what is already known inside it (sampled runs, the cache)."""
        for i in range(lo + 1, hi):
            if i not in self.s.states and self.s.versions[i] in self.s.known:
                self.s.ask(i)
        lows = [i for i in range(lo + 1, hi) if self.state(i) == low]
        lo = max(lows, default=lo)
        highs = [i for i in range(lo + 1, hi) if self.state(i) == high]
        return lo, min(highs, default=hi)

    def _next(self, lo: int, hi: int, count: int = 1) -> list[int]:
        """Up to ``count`` untried items splitting ``(lo, hi)`` evenly (one: nearest the middle),
        above the highest crash or not-applicable item first."""
        walls = [lo, *(i for i in range(lo + 1, hi) if i in self.s.states), hi]
        return _above_walls(walls, self.s.states, count)


def locate_window(
    history: Sequence[str],
    prober: Prober,
    *,
    known_broken: str | None = None,
    limits: Limits = _LIMITS,
    sample: int = DEFAULT_SAMPLE,
    progress: Progress | None = None,
) -> WindowSearch:
    """Both edges of the bug's window on ``history`` (oldest first).

    ``prober`` runs the items (what its cache knows is consulted for free), up to its ``width``
    at once a round. ``known_broken``: an item evidence recorded elsewhere shows broken (not run
    again). ``sample``: how many older items the search for a broken one may run when none is
    known and the newest is clean. ``progress`` hears every result as it is consulted; its budget
    is asked before each run or round, and how many runs a round may start."""
    history = tuple(history)
    s = _Search.over(history, prober, limits, progress)
    loc = _Locate(s, limits)
    if not history:
        return _unseen(loc, "no candidates in the range", known_broken)
    evidence = history.index(known_broken) if known_broken in history else None
    newest = s.newest_end()
    broken = [i for i, run in s.states.items() if run.state == BROKEN]
    if evidence is None and not broken:
        if newest is None:
            told = s.halted or s.exhausted() or "nothing could be told broken or clean"
            return _unseen(loc, f"the newest end could not be told: {told}", known_broken)
        found = loc.sample(newest, sample)
        if found is None:
            return _unseen(loc, _not_found(loc, newest, sample), known_broken)
        broken = [found]
    anchors = broken + ([evidence] if evidence is not None else [])
    lo, hi, why = loc.edge(max(anchors), len(history), BROKEN)
    fixed = _fixed_edge(loc, lo, hi, why)
    lo, hi, why = loc.edge(-1, min(anchors), FIXED)
    introduced = _introduced_edge(loc, lo, hi, why)
    window = Window(
        history,
        True,
        introduced,
        fixed,
        told=_told(loc),
        source=Provenance(bisection=_fresh(s.order), known_broken=known_broken),
    )
    return WindowSearch(window, tuple(s.order))


def _between(loc: _Locate, lo: int, hi: int) -> tuple[list[str], bool]:
    """(the items in ``(lo, hi)`` that are not merely not applicable, whether there are none)."""
    items = [loc.s.versions[i] for i in range(lo + 1, hi) if loc.state(i) != NOT_APPLICABLE]
    return items, not items


def _fixed_edge(loc: _Locate, lo: int, hi: int, why: str | None) -> Edge:
    history = loc.s.versions
    unpinned, pinned = _between(loc, lo, hi)
    if hi < len(history):
        state = EdgeState.FOUND if pinned else EdgeState.UNPINNED
        return Edge(EdgeKind.FIXED, state, history[lo], history[hi], tuple(unpinned), why or "")
    if pinned:
        return Edge(
            EdgeKind.FIXED,
            EdgeState.OPEN,
            history[lo],
            None,
            (),
            f"still broken at the newest, {history[lo]}",
        )
    return Edge(
        EdgeKind.FIXED,
        EdgeState.UNSEARCHED if why else EdgeState.UNPINNED,
        history[lo],
        None,
        tuple(unpinned),
        why or f"nothing newer than {history[lo]} was told clean",
    )


def _introduced_edge(loc: _Locate, lo: int, hi: int, why: str | None) -> Edge:
    history = loc.s.versions
    unpinned, pinned = _between(loc, lo, hi)
    if lo >= 0:
        state = EdgeState.FOUND if pinned else EdgeState.UNPINNED
        return Edge(
            EdgeKind.INTRODUCED, state, history[lo], history[hi], tuple(unpinned), why or ""
        )
    if pinned:
        return Edge(
            EdgeKind.INTRODUCED,
            EdgeState.OPEN,
            None,
            history[hi],
            (),
            f"broken from the oldest candidate, {history[hi]}",
        )
    crashed = [i for i in unpinned if loc.s.states.get(history.index(i)) is not None]
    note = why or (
        f"nothing older was told clean (could not be told: {', '.join(crashed)})"
        if crashed
        else "nothing older was told clean"
    )
    return Edge(EdgeKind.INTRODUCED, EdgeState.UNPINNED, None, history[hi], tuple(unpinned), note)


def _untried(loc: _Locate) -> tuple[tuple[str, str], ...]:
    """The stretches of the history no run reached, as (oldest, newest)."""
    history, stretches, start = loc.s.versions, [], None
    for i in range(len(history) + 1):
        tried = i == len(history) or i in loc.s.states
        if not tried and start is None:
            start = i
        elif tried and start is not None:
            stretches.append((history[start], history[i - 1]))
            start = None
    return tuple(stretches)


def _not_found(loc: _Locate, newest: int, sample: int) -> str:
    """What ran, when no item reproduced the bug."""
    runs = loc.s.order
    told = ", ".join(f"{r.version} {_word(r)}" for r in runs)
    why = loc.s.halted or ""
    budget = f"; stopped: {why}" if why else f" (a sample of at most {sample} older item(s))"
    return f"no item reproduced the bug: ran {told}{budget}"


def _word(run: CandidateRun) -> str:
    if run.state == FIXED:
        return "clean"
    if run.state == UNKNOWN:
        return f"could not be told ({run.outcome})"
    return str(run.state)


def _fresh(runs: Sequence[CandidateRun]) -> int:
    return sum(1 for r in runs if not r.cached and r.outcome != "env-failed")


def _told(loc: _Locate) -> tuple[Told, ...]:
    """What the search's conclusive runs told of each item, oldest first."""
    return tuple(
        Told(loc.s.versions[i], run.state == BROKEN)
        for i, run in sorted(loc.s.states.items())
        if run.state in (BROKEN, FIXED)
    )


def _unseen(loc: _Locate, reason: str, known_broken: str | None) -> WindowSearch:
    window = unseen(
        tuple(loc.s.versions),
        reason,
        untried=_untried(loc),
        told=_told(loc),
        source=Provenance(bisection=_fresh(loc.s.order), known_broken=known_broken),
    )
    return WindowSearch(window, tuple(loc.s.order))


@dataclass(frozen=True)
class EdgeSearch:
    """One edge searched on its own, and the runs that placed it."""

    edge: Edge
    runs: tuple[CandidateRun, ...]


def locate_edge(
    items: Sequence[str],
    prober: Prober,
    *,
    kind: EdgeKind,
    before: str,
    after: str,
    limits: Limits = _LIMITS,
    progress: Progress | None = None,
) -> EdgeSearch:
    """The ``kind`` edge among ``items`` (oldest first), which lie
    strictly between two sides already known: ``before`` (clean for introduced, broken for fixed)
    and ``after`` (the other state) — the commits between two adjacent releases, say. At most
    ``ceil(log2(len(items) + 1))`` conclusive runs (``prober``, ``progress``: as for
    :func:`locate_window`)."""
    items, kind = tuple(items), EdgeKind(kind)
    s = _Search.over(items, prober, limits, progress)
    loc = _Locate(s, limits)
    lo, hi, why = loc.edge(-1, len(items), FIXED if kind is EdgeKind.INTRODUCED else BROKEN)
    unpinned, pinned = _between(loc, lo, hi)
    state = EdgeState.FOUND if pinned else EdgeState.UNPINNED
    edge = Edge(
        kind,
        state,
        items[lo] if lo >= 0 else before,
        items[hi] if hi < len(items) else after,
        tuple(unpinned),
        why or "",
    )
    return EdgeSearch(edge, tuple(s.order))
