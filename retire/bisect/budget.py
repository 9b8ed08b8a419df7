"""A budget for the bisections a weekly run makes itself (``patchlane report`` / ``retire``
``--bisect-budget RUNS`` and ``--bisect-minutes M``), and the meter that spends it.

Runs are fresh reproducer runs (an answer from the bisection cache costs none); minutes are wall
time from the first bisection on. The meter is the ``stop`` a bisection asks before each run
(:func:`retire.bisect.bisect`), so one that reaches the end of the budget stops where it is —
its runs recorded and cached, so the next week's bisection resumes there — and no bisection
starts once the budget is spent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from retire.bisect.search import ENV_FAILED, CandidateRun

__all__ = ["Budget", "Meter"]


@dataclass(frozen=True)
class Budget:
    """At most ``runs`` fresh reproducer runs and ``minutes`` of wall time (None: no limit);
    ``jobs``: how many of a bisection's candidates run at once (``--bisect-jobs``, as
    ``patchlane bisect -j``), which spends the same runs in less time."""

    runs: int | None = None
    minutes: float | None = None
    jobs: int = 1

    @property
    def asked(self) -> bool:
        """Whether any bisection may run at all: nothing runs unless a limit is given."""
        return self.runs is not None or self.minutes is not None

    def shares(self, count: int) -> tuple[int | None, ...]:
        """Each of ``count`` bisections' share of the runs when they run at once (as Slurm jobs):
        ``runs // count`` each, the remainder to the first, so the shares add up to the budget;
        never less than one run, so a budget smaller than ``count`` reaches only its first
        ``runs`` bisections (the length of the answer). Without a runs limit, every bisection
        may run uncounted (None each)."""
        if self.runs is None:
            return (None,) * count
        reached = min(count, self.runs)
        if not reached:
            return ()
        each, rest = divmod(self.runs, reached)
        return (each + rest,) + (each,) * (reached - 1)


class Meter:
    """Spends a :class:`Budget`: counts the fresh runs it is shown, times from its creation."""

    def __init__(self, budget: Budget, clock: Callable[[], float] | None = None) -> None:
        self.budget = budget
        self.runs = 0
        self._clock = clock or time.monotonic
        self._started = self._clock()
        #: why :meth:`spent` refused a run a bisection wanted (it was cut short), else None
        self.refused: str | None = None

    def count(self, run: CandidateRun) -> None:
        """One run a bisection consulted: a fresh reproducer run spends one."""
        if not run.cached and run.outcome != ENV_FAILED:
            self.runs += 1

    def cancelled(self) -> None:
        """A run started and then cancelled (no search consults it): it spent one all the
        same."""
        self.runs += 1

    def spent(self) -> str | None:
        """Why no further run may start, or None while the budget lasts."""
        runs, minutes = self.budget.runs, self.budget.minutes
        if runs is not None and self.runs >= runs:
            return f"the budget of {runs} reproducer run{'s' if runs != 1 else ''} is spent"
        if minutes is not None and self._clock() - self._started >= minutes * 60:
            return f"the {minutes:g}-minute budget is spent"
        return None

    def left(self) -> int | None:
        """How many more fresh runs the budget allows (None: it does not count runs): the most a
        round of candidates run at once may start."""
        if self.budget.runs is None:
            return None
        return max(0, self.budget.runs - self.runs)

    def stop(self) -> str | None:
        """:meth:`spent`, for a bisection's ``stop``: remembers that a run was refused."""
        reason = self.spent()
        if reason is not None:
            self.refused = reason
        return reason
