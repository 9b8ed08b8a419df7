"""The edge search that keeps every slot busy (retire.bisect.started), pure, on a virtual clock:
the next candidate starts as soon as one ends, a running one the results leave outside the edge is
cancelled, and the answer is one at a time's — for random monotone histories (with items that
cannot be told or are not applicable anywhere), random durations and any width. Then for real
threads and processes: candidates side by side (retire.bisect.sidebyside) start as slots free, and
a cancelled candidate's reproducer is killed and never recorded."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.bisect.budget import Budget, Meter
from retire.bisect.prober import OneAtATime, Progress, starting
from retire.bisect.search import CandidateRun, Limits
from retire.bisect.sidebyside import SideBySide
from retire.bisect.started import splitting
from retire.bisect.window import locate_edge, locate_window
from retire.runs import cancelling
from retire.runs.reaper import REAPER
from tests.support.clocked import Clocked

#: Tolerances no history here reaches: answers compare without a limit cutting one search short.
WIDE = Limits(max_unknown=1000, max_not_applicable=1000)


def _history(draw, n: int, kind: str) -> dict[str, str]:
    """``n`` items, the old state below a random edge and the new one from it, a random few
    that cannot be told or are not applicable anywhere."""
    edge = draw(st.integers(0, n))
    old, new = ("fixed", "broken") if kind == "introduced" else ("broken", "fixed")
    odd = draw(
        st.dictionaries(
            st.integers(0, n - 1), st.sampled_from(["unknown", "not-applicable"]), max_size=n // 3
        )
    )
    return {str(i): odd.get(i, old if i < edge else new) for i in range(n)}


@st.composite
def cases(draw):
    n = draw(st.integers(1, 60))
    kind = draw(st.sampled_from(["introduced", "fixed"]))
    states = _history(draw, n, kind)
    durations = {
        str(i): draw(st.floats(0.1, 20.0, allow_nan=False, allow_infinity=False)) for i in range(n)
    }
    return kind, states, durations, draw(st.integers(2, 7))


@settings(max_examples=300, deadline=None)
@given(cases())
def test_a_busy_edge_search_answers_as_one_at_a_time(case):
    kind, states, durations, width = case
    items = list(states)
    edges, runs = [], []
    for w in (1, width):
        prober = Clocked(states, durations, w)
        search = locate_edge(items, prober, kind=kind, before="a", after="b", limits=WIDE)
        edges.append(search.edge)
        runs.append((prober, search))
    assert edges[0] == edges[1]
    (_, _), (busy, search) = runs
    # never more than the width at once; every item started at most once a search; the
    # cancelled ones never consulted
    assert busy.most <= width and len(set(busy.started)) == len(busy.started)
    consulted = [run.version for run in search.runs]
    assert not set(busy.cancelled) & set(consulted)
    assert sorted(consulted + busy.cancelled) == sorted(busy.started)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(0, n - 1),
            st.integers(0, n),
            st.integers(2, 6),
            st.sampled_from(["none", "oldest", "newest"]),
            st.lists(st.floats(0.1, 9.0), min_size=n, max_size=n),
        )
    )
)
def test_the_window_is_the_same_when_slots_are_kept_busy(case):
    """Both edges of random windows, found or sampled, as one at a time finds them."""
    n, introduced, fixed, width, evidence, durations = case
    fixed = max(fixed, introduced + 1)
    history = [str(i) for i in range(n)]
    states = {str(i): "broken" if introduced <= i < fixed else "fixed" for i in range(n)}
    known = {"none": None, "oldest": introduced, "newest": fixed - 1}[evidence]
    known_broken = None if known is None else str(min(known, n - 1))
    times = dict(zip(history, durations, strict=True))
    windows = []
    for w in (1, width):
        window = locate_window(
            history, Clocked(states, times, w), known_broken=known_broken, limits=WIDE, sample=5
        ).window
        windows.append(
            (window.seen, window.introduced, window.fixed)
            if window.seen
            else (window.seen, window.untried)
        )
    assert windows[0] == windows[1]


def test_slots_are_kept_busy_where_a_round_waits_for_its_slowest():
    """64 commits, the edge at 40, every fourth candidate slow: width 4 in rounds waits for a slow
    one every round (longer than one at a time here); kept busy it finishes sooner than both,
    with the same edge."""
    items = [str(i) for i in range(64)]
    states = {item: "broken" if int(item) < 40 else "fixed" for item in items}
    durations = {item: 10.0 if int(item) % 4 == 0 else 2.0 for item in items}

    def clock(width: int, busy: bool) -> tuple[float, object]:
        prober = Clocked(states, durations, width)
        prober.can_start = busy
        found = locate_edge(items, prober, kind="fixed", before="a", after="b")
        return prober.now, found.edge

    one, edge_one = clock(1, False)
    rounds, edge_rounds = clock(4, False)
    busy, edge_busy = clock(4, True)
    assert edge_one == edge_rounds == edge_busy
    assert busy < min(rounds, one), (busy, rounds, one)


def test_the_largest_stretch_is_split_first_and_above_a_crash():
    # nothing tested: the middle
    assert splitting({}, -1, 9, set()) == 4
    # 4 running: the middle of the larger stretch left, the newer of equals
    assert splitting({}, -1, 9, {4}) == 6
    crash = {6: CandidateRun("6", "unknown", "crashed")}
    # above a crash first, as one at a time looks
    assert splitting(crash, -1, 12, set()) == 9
    assert splitting(crash, -1, 12, {7, 8, 9, 10, 11}) == 2
    assert splitting({}, 3, 4, set()) is None


def test_a_cancelled_start_spends_its_run_of_the_budget():
    """A budget of 3 runs, width 3: the newest of the three ends first, broken, and cancels the
    two below it; the search starts no other (the cancelled ones spent theirs)."""
    items = [str(i) for i in range(30)]
    states = {item: "broken" if int(item) < 25 else "fixed" for item in items}
    durations = {item: float(30 - int(item)) for item in items}
    meter = Meter(Budget(runs=3))
    prober = Clocked(states, durations, 3)
    locate_edge(items, prober, kind="fixed", before="a", after="b", progress=Progress(meter))
    assert prober.started == ["14", "22", "6"] and sorted(prober.cancelled) == ["14", "6"]
    assert meter.runs == 3


# ---------------------------------------------------------------------------------------------
# For real: threads, processes, a launcher's fork


class _Sleeping(OneAtATime):
    """A runner whose candidate ``i`` sleeps ``durations[i]``, as a real process: a cancel kills
    it (retire.runs.cancelling); logs when each started and ended, and what it recorded."""

    def __init__(self, log: list, durations: dict[str, float], recorded: list[str]) -> None:
        self.log, self.durations, self.recorded = log, durations, recorded

    def run(self, item: str, /) -> CandidateRun:
        began = time.monotonic()
        process = REAPER.spawn(
            [sys.executable, "-c", f"import time; time.sleep({self.durations[item]})"], env={}
        )
        try:
            with cancelling.killing(lambda: REAPER.kill(process)):
                process.wait(60)
        finally:
            REAPER.finish(process)
        self.log.append((item, began, time.monotonic(), process.returncode))
        cancelling.commit()
        self.recorded.append(item)
        return CandidateRun(item, "fixed" if int(item) >= 2 else "broken", "ran")


def test_side_by_side_starts_a_candidate_as_soon_as_a_slot_frees_and_kills_a_cancelled_one():
    log: list = []
    recorded: list[str] = []
    durations = {"0": 0.2, "1": 30.0, "2": 0.2, "3": 0.2, "4": 0.1}
    side = SideBySide(lambda: _Sleeping(log, durations, recorded), 2)
    assert starting(side) is side
    began = time.monotonic()
    side.start("0")
    side.start("1")
    first = side.finished()
    assert first.version == "0"
    # a slot freed: the next starts at once, while "1" still runs
    side.start("2")
    assert side.finished().version == "2"
    assert side.cancel("1")
    side.start("3")
    assert side.finished().version == "3"
    # one that has ended and is recorded cannot be cancelled: it is handed back
    side.start("4")
    deadline = time.monotonic() + 20
    while "4" not in recorded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not side.cancel("4") and side.finished().version == "4"
    side.close()
    assert time.monotonic() - began < 20
    ended = {item: (start, end, code) for item, start, end, code in log}
    assert ended["2"][0] < ended["1"][1] and ended["1"][2] != 0
    # the cancelled candidate was killed and never recorded
    assert "1" not in recorded and sorted(recorded) == ["0", "2", "3", "4"]


@pytest.mark.slow
def test_a_cancelled_fork_of_a_launcher_is_killed_and_the_launcher_serves_on(tmp_path: Path):
    from retire.runs.launcher import Launcher
    from shims.manifest import load_manifest
    from tests.support import shimtree

    root = tmp_path / "shims"
    site = tmp_path / "site"
    shimtree.write_target(site)
    env = shimtree.subprocess_env(tmp_path, root, site, SLEEP_FILE=str(tmp_path / "sleep"))
    sleeper = """
import os, time
from shims import reproducer

def check(with_shim):
    time.sleep(float(open(os.environ["SLEEP_FILE"]).read()))
    return reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("toy", check, packages=["toylib"])
"""
    folder = shimtree.write_shim(root, "toy", reproducer=sleeper)
    manifest = load_manifest(folder / "manifest.toml")
    cancel = cancelling.Cancel()
    (tmp_path / "sleep").write_text("60")
    with Launcher(sys.executable, [], env) as launcher:
        assert launcher.alive, launcher.fallback
        threading.Timer(1.0, cancel.cancel).start()
        began = time.monotonic()
        with cancelling.scope(cancel), pytest.raises(cancelling.CancelledError):
            launcher.run(manifest, "without", env=env)
            cancelling.check()
        assert time.monotonic() - began < 30 and launcher.alive
        (tmp_path / "sleep").write_text("0")
        assert launcher.run(manifest, "without", env=env).outcome == "bug-reproduced"
