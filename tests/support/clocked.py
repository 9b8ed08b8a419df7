"""A prober on a virtual clock (no thread, no process): each item takes its own duration, a round
waits for its slowest, items started one at a time end in the order of their end times. What the
busy edge search (retire.bisect.started) is held to in tests/test_bisect_started.py, and the floor
the side-by-side bench (bench/sidebyside.py) is measured against."""

from __future__ import annotations

from collections.abc import Sequence

from retire.bisect.prober import OneAtATime
from retire.bisect.search import CandidateRun

OUTCOME = {"broken": "bug-reproduced", "fixed": "fix-validated", "unknown": "crashed"}


class Clocked(OneAtATime):
    """A prober of ``width`` on a virtual clock: each item takes its ``durations``; started items
    end in the order of their end times. Logs what started, what was cancelled, and the most that
    ran at once."""

    def __init__(self, states: dict[str, str], durations: dict[str, float], width: int) -> None:
        self.states, self.durations, self.width = states, durations, width
        self.now = 0.0
        self.running: dict[str, float] = {}
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.most = 0
        self.can_start = width > 1

    def _run(self, item: str) -> CandidateRun:
        state = self.states[item]
        return CandidateRun(item, state, OUTCOME.get(state, "skipped"))

    def run(self, item: str, /) -> CandidateRun:
        self.now += self.durations[item]
        self.started.append(item)
        return self._run(item)

    def run_round(self, items: Sequence[str], /) -> list[CandidateRun]:
        self.now += max(self.durations[item] for item in items)
        self.started += items
        return [self._run(item) for item in items]

    def start(self, item: str, /) -> None:
        assert item not in self.running and len(self.running) < self.width
        self.running[item] = self.now + self.durations[item]
        self.started.append(item)
        self.most = max(self.most, len(self.running))

    def finished(self) -> CandidateRun:
        item = min(self.running, key=lambda i: (self.running[i], i))
        self.now = self.running.pop(item)
        return self._run(item)

    def cancel(self, item: str, /) -> bool:
        del self.running[item]
        self.cancelled.append(item)
        return True
