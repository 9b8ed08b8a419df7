"""An edge search that keeps every slot busy, pure: the next candidate starts as soon as one ends.

A round of ``-j N`` candidates (:mod:`retire.bisect.search`) waits for its slowest before the next
round starts. With a prober that starts candidates one at a time
(:class:`retire.bisect.prober.Starting`: candidates side by side,
:class:`retire.bisect.sidebyside.SideBySide`), :func:`started_edge` instead starts, whenever a slot
is free, the untested item that best splits the largest stretch of the edge no running candidate
covers; each run that ends narrows ``(lo, hi)``, and a running candidate the narrowed edge leaves
outside is cancelled (its answer no longer matters; it is neither recorded nor cached).

The answer is one at a time's. ``(lo, hi)`` is always :func:`~retire.bisect.search.narrow` of
the states known over the search's bounds — a function of that set, not of the order the runs
ended in — and the search ends only when no item inside is untested and nothing runs, as the
binary search does: so ``lo`` is the last item of the old state and ``hi`` the first of the new
one, and what lies between (items that could not be told, or are not applicable) is the same set,
whatever ran when — wherever no tolerance or budget cuts the search short, as for rounds
(``tests/test_bisect_started.py``: random histories, random durations, any width). A start is
allowed only while the running candidates fit what the budget and the tolerances have left, and a
cancelled candidate spends its run of the budget (:meth:`retire.bisect.prober.Progress.cancelled`),
so it never starts more runs than the budget allows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from retire.bisect.prober import Starting
from retire.bisect.search import CandidateRun, State, _Search, narrow, split_points

__all__ = ["splitting", "started_edge"]


def started_edge(
    s: _Search,
    prober: Starting,
    bounds: tuple[int, int],
    sides: tuple[State, State],
    *,
    room: Callable[[], int],
    exhausted: Callable[[], str | None],
) -> tuple[int, int, str | None]:
    """The step from ``sides[0]`` to ``sides[1]`` inside ``bounds`` (known runs already taken by
    ``s``), every slot kept busy: ``room`` says how many may run at once now, ``exhausted`` why no
    further one may start. Returns the narrowed ``(lo, hi)`` and why it stopped early, if it
    did."""
    items, states = s.versions, s.states
    low, high = sides
    lo, hi = narrow(states, *bounds, low, high)
    running: dict[str, int] = {}
    why: str | None = None
    while True:
        while why is None and len(running) < room():
            i = splitting(states, lo, hi, set(running.values()))
            if i is None:
                break
            if (why := exhausted()) is not None:
                break
            prober.start(items[i])
            running[items[i]] = i
        if not running:
            return lo, hi, why
        run = prober.finished()
        s._took(running.pop(run.version), run)
        lo, hi = narrow(states, *bounds, low, high)
        for item, i in list(running.items()):
            # one that has just ended is handed back as any other (an order it could have had)
            if not lo < i < hi and prober.cancel(item):
                s.progress.cancelled(item)
                del running[item]


def splitting(
    tested: Mapping[int, CandidateRun], lo: int, hi: int, running: set[int]
) -> int | None:
    """The untested item, not running, nearest the middle of the largest stretch of them between
    ``lo``, ``hi``, the ``tested`` and the ``running`` items (the newer of equals); above the
    highest tested item inside (a crash, a not applicable one) first, as one at a time looks;
    None when none is left."""
    inside = range(lo + 1, hi)
    told = [i for i in inside if i in tested]
    walls = sorted({lo, hi, *told, *(i for i in inside if i in running)})
    floor = max(told, default=lo)
    best: tuple[bool, int, int, int] | None = None
    for low, high in itertools.pairwise(walls):
        # nothing between two walls is tested or running
        untested = list(range(low + 1, high))
        if not untested:
            continue
        key = (low >= floor, len(untested), high, split_points(low, high, untested, 1)[0])
        best = key if best is None else max(best, key)
    return best[3] if best is not None else None
