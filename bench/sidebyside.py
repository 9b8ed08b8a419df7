"""``patchlane bisect -j 4`` vs ``-j 1`` on a GPU-free stand-in, timed and counted side by side.

A bug's window over 16 releases, then both of its edges into the commits between two tags (37 and
20 commits, Liger-Kernel's v0.8.1..v0.8.2 is 37), searched by the real pieces: the window and edge
searches (:mod:`retire.bisect.window`), candidates side by side on real threads
(:class:`retire.bisect.sidebyside.SideBySide`, the next started as soon as a slot frees:
:mod:`retire.bisect.started`, a cancelled one's process killed: :mod:`retire.runs.cancelling`) and
one pool of warm launchers for releases and commits (:class:`retire.runs.launcherpool.
LauncherPool`). Only the launcher and the reproducer are stand-ins: a launcher's start pays a
simulated import of the heavy stack (``IMPORT_S``, counted), and a candidate's run is a real
process that sleeps its own duration (random, ``SHORT_S``–``LONG_S``: a build and a run that vary
from commit to commit). Three contenders, interleaved:

- ``-j 1``: one candidate at a time, one launcher;
- ``-j 4`` as phase 1 ran it: rounds that wait for their slowest candidate, and a launcher per
  runner (the release and the commit search each make four);
- ``-j 4`` now: every slot kept busy, one pool of four launchers.

Rows: the wall time of ``-j 4`` over ``-j 1`` (goal ≤ 0.6, as the hardware acceptance on 4×
H100), the rounds (counted: a round-based ``-j 4``'s rounds over ``-j 1``'s runs, the sequential
steps each waits through), and the launchers started (goal: one per slot).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence

from bench import interleaved, median, quick, row
from retire.bisect.prober import OneAtATime, Prober
from retire.bisect.search import CandidateRun, State
from retire.bisect.sidebyside import SideBySide
from retire.bisect.window import locate_edge, locate_window
from retire.history.edge import EdgeKind
from retire.runs import cancelling
from retire.runs.launcherpool import LauncherPool
from retire.runs.reaper import REAPER

WIDTH = 4
RELEASES, BROKEN = 16, (5, 11)
#: the commits of the fixed and the introduced edge's ranges, and where in each the step is
COMMITS = {"fixed": (37, 23), "introduced": (20, 6)}
IMPORT_S = 1.0
SHORT_S, LONG_S = 0.15, 0.9
_SLEEP = "/bin/sleep" if os.path.exists("/bin/sleep") else None


class _Launcher:
    """A stand-in launcher: its start pays the simulated import; a run is a real process that
    sleeps, killed if its candidate is cancelled."""

    def __init__(self, counter: list[int], lock: threading.Lock) -> None:
        time.sleep(IMPORT_S)
        with lock:
            counter.append(1)

    def run(self, seconds: float) -> None:
        argv = [_SLEEP, f"{seconds:.3f}"] if _SLEEP else [sys.executable, "-c", "import time"]
        process = REAPER.spawn(argv, env={})
        try:
            with cancelling.killing(lambda: REAPER.kill(process)):
                process.wait(60)
        finally:
            REAPER.finish(process)

    def close(self) -> None:
        return None


class _Candidate(OneAtATime):
    """A runner as the bisection's are: the pool warmed at its first run, a launcher borrowed
    per run, nothing kept of a cancelled run."""

    def __init__(self, pool: LauncherPool[_Launcher], states: dict[str, State], times) -> None:
        self.pool, self.states, self.times = pool, states, times

    def run(self, item: str, /) -> CandidateRun:
        self.pool.warm_soon()
        with self.pool.borrow() as launcher:
            launcher.run(self.times[item])
        cancelling.commit()
        state = self.states[item]
        return CandidateRun(item, state, str(state))


class _Counted:
    """``side``, counting the rounds it runs (a candidate alone, or a batch) and the candidates
    started one at a time and cancelled."""

    def __init__(self, side: SideBySide, busy: bool) -> None:
        self.prober, self.width, self.rounds = side, side.width, 0
        self.can_start, self.started, self.cancelled = busy, 0, 0

    def start(self, item: str, /) -> None:
        self.started += 1
        self.prober.start(item)

    def finished(self) -> CandidateRun:
        return self.prober.finished()

    def cancel(self, item: str, /) -> bool:
        cancelled = self.prober.cancel(item)
        self.cancelled += cancelled
        return cancelled

    @property
    def blocked(self) -> str | None:
        return None

    def run(self, item: str, /) -> CandidateRun:
        self.rounds += 1
        return self.prober.run(item)

    def run_round(self, items: Sequence[str], /) -> Sequence[CandidateRun]:
        self.rounds += 1
        return self.prober.run_round(items)

    def cached(self, item: str, /) -> CandidateRun | None:
        return None

    def close(self) -> None:
        self.prober.close()


class _Bisection:
    """The stand-in's histories and durations (seeded), and one bisection over them."""

    def __init__(self) -> None:
        rng = random.Random(37)
        self.releases = [f"1.{i}" for i in range(RELEASES)]
        self.states = {
            v: State.BROKEN if BROKEN[0] <= i < BROKEN[1] else State.FIXED
            for i, v in enumerate(self.releases)
        }
        self.ranges: dict[str, list[str]] = {}
        for kind, (count, step) in COMMITS.items():
            items = [f"{kind[:3]}{i:02d}" for i in range(count)]
            sides = (State.BROKEN, State.FIXED)
            old, new = sides if kind == "fixed" else sides[::-1]
            self.states |= {item: old if i < step else new for i, item in enumerate(items)}
            self.ranges[kind] = items
        self.times = {item: rng.uniform(SHORT_S, LONG_S) for item in self.states}

    def run(self, width: int, *, busy: bool, shared: bool) -> dict:
        """One bisection: the window on the releases, then both edges in the commits."""
        starts: list[int] = []
        lock = threading.Lock()
        pools: list[LauncherPool[_Launcher]] = []

        def pool() -> LauncherPool[_Launcher]:
            pools.append(LauncherPool(lambda: _Launcher(starts, lock), width if shared else 1))
            return pools[-1]

        common = pool()

        def make() -> Callable[[], Prober]:
            def runner() -> Prober:
                return _Candidate(common if shared else pool(), self.states, self.times)

            return runner

        counted = []
        began = time.perf_counter()
        try:
            for search in ("releases", "commits"):
                prober = _Counted(SideBySide(make(), width), busy)
                counted.append(prober)
                self._search(search, prober)
                prober.close()
        finally:
            for each in pools:
                each.close()
        return {
            "seconds": time.perf_counter() - began,
            "launchers": len(starts),
            "rounds": sum(p.rounds for p in counted),
            "started": sum(p.started for p in counted),
            "cancelled": sum(p.cancelled for p in counted),
        }

    def virtual(self, width: int) -> float:
        """The same searches on a virtual clock (no process, thread or launcher): the wall time's
        floor at ``width``, slots kept busy."""
        from tests.support.clocked import Clocked

        total = 0.0
        for search in ("releases", "commits"):
            clock = Clocked(self.states, self.times, width)  # type: ignore[arg-type]
            self._search(search, clock)  # type: ignore[arg-type]
            total += clock.now
        return total + IMPORT_S

    def _search(self, search: str, prober: _Counted) -> None:
        if search == "releases":
            window = locate_window(
                self.releases, prober, known_broken=self.releases[BROKEN[0]], sample=4
            ).window
            assert window.fixed.after == self.releases[BROKEN[1]], window.line()
            return
        for kind, items in self.ranges.items():
            found = locate_edge(items, prober, kind=EdgeKind(kind), before="old", after="new")
            assert found.edge.after == items[COMMITS[kind][1]], found.edge


def run() -> list[dict]:
    repeats = 1 if quick() else 3
    toy = _Bisection()
    facts: dict[str, list[dict]] = {"one": [], "rounds": [], "busy": []}

    def contender(name: str, width: int, busy: bool, shared: bool) -> Callable[[], float]:
        def go() -> float:
            facts[name].append(toy.run(width, busy=busy, shared=shared))
            return facts[name][-1]["seconds"]

        return go

    walls = interleaved(
        {
            "one": contender("one", 1, False, True),
            "rounds": contender("rounds", WIDTH, False, False),
            "busy": contender("busy", WIDTH, True, True),
        },
        repeats,
    )
    one, rounds, busy = (median(walls[name]) for name in ("one", "rounds", "busy"))
    floor = toy.virtual(WIDTH) / toy.virtual(1)
    kept = facts["busy"][0]
    steps_one, steps_rounds = facts["one"][0]["rounds"], facts["rounds"][0]["rounds"]
    starts = {name: facts[name][0]["launchers"] for name in facts}
    where = (
        f"{RELEASES} releases and two commit ranges ({COMMITS['fixed'][0]} and "
        f"{COMMITS['introduced'][0]} commits), runs of {SHORT_S}-{LONG_S} s, a launcher's start "
        f"{IMPORT_S} s (median of {repeats}, interleaved)"
    )
    return [
        row(
            "sidebyside.j4-vs-j1-wall",
            round(busy / one, 3),
            "<= 0.6",
            "ratio",
            busy / one <= 0.6,
            f"bisect -j {WIDTH} (slots kept busy, one pool of warm launchers) {busy:.2f} s vs "
            f"-j 1 {one:.2f} s; -j {WIDTH} as phase 1 ran it (rounds that wait for their slowest, "
            f"a launcher per runner) {rounds:.2f} s = {rounds / one:.2f}x; the floor, the same "
            f"searches on a virtual clock, {floor:.2f}; {where}",
        ),
        row(
            "sidebyside.j4-vs-j1-rounds",
            round(steps_rounds / steps_one, 3),
            "<= 0.6",
            "ratio",
            steps_rounds / steps_one <= 0.6,
            f"rounds of -j {WIDTH} {steps_rounds} vs -j 1's {steps_one} runs one after another "
            f"(counted, the same answers checked); kept busy, -j {WIDTH} runs the newest end "
            f"alone and waits on no round: {kept['started']} candidates started, "
            f"{kept['cancelled']} of them cancelled when a result left them outside the edge",
        ),
        row(
            "sidebyside.launcher-starts",
            starts["busy"],
            f"== {WIDTH}",
            "launchers",
            starts["busy"] == WIDTH and starts["one"] == 1,
            f"launchers started (each one import of the heavy stack) for the whole bisection, "
            f"releases and commits: -j {WIDTH} {starts['busy']}, -j 1 {starts['one']}; phase 1's "
            f"-j {WIDTH} started one per runner, {starts['rounds']}",
        ),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
