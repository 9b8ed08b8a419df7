"""What every search of a bisection talks to: one :class:`Prober` (the candidates' runs) and one
:class:`Progress` (what it says as it goes, and the budget it spends).

A prober runs one candidate (:meth:`Prober.run`) or a round of them at once
(:meth:`Prober.run_round`, up to :attr:`Prober.width`), knows what its cache holds
(:meth:`Prober.cached`), says when nothing more can run there (:attr:`Prober.blocked`: a commit
build whose backend the index does not serve) and is closed when the bisection ends. The
release runner (:class:`~retire.bisect.runner.OverlayRunner`), the commit runner
(:class:`~retire.bisect.revision.RevisionRunner`) and candidates side by side
(:class:`~retire.bisect.sidebyside.SideBySide`) are probers; :func:`prober_of` makes one of a
function (the culprit's release step, tests). A prober may keep what it made across rounds (an
overlay env, a launcher): the search asks it, and closes nothing but through :meth:`close`.

A prober of width above 1 may also start candidates one at a time and hand back each as it ends
(:class:`Starting`: :meth:`~Starting.start`, :meth:`~Starting.finished`,
:meth:`~Starting.cancel`): an edge search then starts the next candidate as soon as a slot frees
and cancels a running one its results leave outside the edge (:mod:`retire.bisect.window`), instead
of waiting for the slowest of a round.

The search (:mod:`retire.bisect.search`, :mod:`retire.bisect.window`) stays pure: it asks the
prober for runs and tells the progress each one it consulted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from retire.bisect.budget import Meter
    from retire.bisect.search import CandidateRun

__all__ = ["OneAtATime", "Prober", "Progress", "Starting", "prober_of", "starting", "stopping"]


class Prober(Protocol):
    """Runs a search's candidates (items: releases, commits, labels)."""

    #: how many candidates one round may run at once (1: one after another)
    width: int

    @property
    def blocked(self) -> str | None:
        """Why no candidate can run here any more, or None: what every candidate needs could not
        be had (the build backend of a commit search's builds); the search stops there, saying
        so."""
        ...

    def run(self, item: str, /) -> CandidateRun:
        """One candidate's run (its cached answer when there is one)."""
        ...

    def run_round(self, items: Sequence[str], /) -> Sequence[CandidateRun]:
        """The runs of ``items`` (at most :attr:`width`), in the order given."""
        ...

    def cached(self, item: str, /) -> CandidateRun | None:
        """What is already known of ``item`` (no run), or None."""
        ...

    def close(self) -> None:
        """End what the runs needed (launchers); the prober runs nothing after."""
        ...


@runtime_checkable
class Starting(Protocol):
    """A prober that starts candidates one at a time, up to its ``width`` at once, and hands each
    back as it ends."""

    width: int

    @property
    def can_start(self) -> bool:
        """Whether :meth:`start` may be used (a wrapper says what the prober it wraps can)."""
        ...

    def start(self, item: str, /) -> None:
        """Start ``item``'s run (at most ``width`` running at once); it returns at once."""
        ...

    def finished(self) -> CandidateRun:
        """The next run to end among those started and not cancelled (blocks until one does)."""
        ...

    def cancel(self, item: str, /) -> bool:
        """Stop ``item``'s run (what it started is killed); it is neither handed back, recorded
        nor cached. False when it had already ended (and is recorded): :meth:`finished` hands it
        back as any other."""
        ...


def starting(prober: Prober) -> Starting | None:
    """``prober`` as one that starts candidates one at a time, where it can and runs more than one
    at once; else None (its searches run rounds)."""
    if prober.width > 1 and isinstance(prober, Starting) and prober.can_start:
        return prober
    return None


class OneAtATime:
    """A prober of width 1: a round is its items run one after another. A subclass gives
    :meth:`run`; it knows nothing cached and has nothing to close unless it says otherwise."""

    width: int = 1
    blocked: str | None = None

    def run(self, item: str, /) -> CandidateRun:
        raise NotImplementedError

    def run_round(self, items: Sequence[str], /) -> list[CandidateRun]:
        return [self.run(item) for item in items]

    def cached(self, item: str, /) -> CandidateRun | None:
        return None

    def close(self) -> None:
        return None


class _Function(OneAtATime):
    def __init__(
        self, run: Callable[[str], CandidateRun], known: Mapping[str, CandidateRun]
    ) -> None:
        self._run, self._known = run, dict(known)

    def run(self, item: str, /) -> CandidateRun:
        return self._run(item)

    def cached(self, item: str, /) -> CandidateRun | None:
        return self._known.get(item)


def prober_of(
    run: Callable[[str], CandidateRun], known: Mapping[str, CandidateRun] | None = None
) -> Prober:
    """``run`` (an item → its run) as a prober of width 1; ``known``: answers at hand, its
    :meth:`~Prober.cached`."""
    return _Function(run, known or {})


class Progress:
    """What one bisection hears as it goes, and what it may spend.

    Every run its searches consult (a cached answer too) is numbered across all of them and told
    to :meth:`ran`; its runners' notes (a launcher's imports, a named build) go to :meth:`note`;
    ``meter`` (:class:`~retire.bisect.budget.Meter`, None: no limit) counts the fresh runs and is
    asked before each run or round (:meth:`stop`) and how many a round may start (:meth:`room`).
    The base says nothing; ``patchlane bisect`` prints each line (a subclass)."""

    def __init__(self, meter: Meter | None = None) -> None:
        self.meter = meter
        self.steps = 0

    def consulted(self, run: CandidateRun) -> None:
        """One run a search consulted: numbered, counted against the budget, told."""
        self.steps += 1
        if self.meter is not None:
            self.meter.count(run)
        self.ran(self.steps, run)

    def cancelled(self, item: str) -> None:
        """``item``'s run was started, then cancelled (no search consults it): it is counted
        against the budget all the same."""
        if self.meter is not None:
            self.meter.cancelled()

    def stop(self) -> str | None:
        """Why no further run may start (the budget is spent), or None."""
        return self.meter.stop() if self.meter is not None else None

    def room(self) -> int | None:
        """How many more fresh runs the budget allows (None: it does not count runs)."""
        return self.meter.left() if self.meter is not None else None

    def ran(self, step: int, run: CandidateRun) -> None:
        """The ``step``-th run consulted; the base says nothing."""

    def note(self, text: str) -> None:
        """A runner's note; the base says nothing."""


class _Stopping(Progress):
    def __init__(self, stop: Callable[[], str | None]) -> None:
        super().__init__()
        self._stop = stop

    def stop(self) -> str | None:
        return self._stop()


def stopping(stop: Callable[[], str | None]) -> Progress:
    """A progress that says nothing and whose budget is ``stop`` (asked before each run or round:
    the culprit search's)."""
    return _Stopping(stop)
