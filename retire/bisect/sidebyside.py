"""Candidates side by side (``patchlane bisect -j N``): a round of the search's candidates run at
once, each on a runner of its own and, for a reproducer that needs GPUs, on GPUs of its own.

The search (:mod:`retire.bisect.search`, :mod:`retire.bisect.window`) asks for a round through
:meth:`SideBySide.run_round` (a :class:`~retire.bisect.prober.Prober` of width N) and stays pure;
here each candidate of the round runs on a thread with a runner nobody else uses at that moment
(an :class:`~retire.bisect.runner.OverlayRunner` or a
:class:`~retire.bisect.revision.RevisionRunner`: its own overlay folder, its own launcher), so no
runner state is shared between threads. A reproducer that declares ``gpus = n`` holds ``n`` of the
host's GPUs from the host-wide leases (:class:`retire.runs.packing.GpuPool`) while its candidate
runs — never one a lane holds — and the candidate's children see only those
(``CUDA_VISIBLE_DEVICES``, set for that thread alone: :func:`retire.core.childenv.visible_devices`),
so its record's host stamp names them. How many run at once is ``N``, capped by how many such sets
the host's GPUs make; a reproducer that needs no GPU runs ``N`` at once with none.

It is also a :class:`~retire.bisect.prober.Starting` prober: an edge search starts each candidate
on its own (:meth:`SideBySide.start`), takes the next to end (:meth:`SideBySide.finished`, a
completion queue: ``wait(FIRST_COMPLETED)``) and starts another in the slot it freed, and cancels
one its results left outside the edge (:meth:`SideBySide.cancel`): the candidate's thread runs in
a cancel scope of its own (:mod:`retire.runs.cancelling`), so its fork's group is killed, its GPUs
go back to the pool when its thread leaves, and it is neither recorded nor cached.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from retire.bisect.prober import Prober
from retire.bisect.search import CandidateRun
from retire.core import childenv
from retire.runs import cancelling
from retire.runs.gpus import Gpu, discover
from retire.runs.packing import GpuPool, unmet
from retire.runs.reaper import REAPER
from shims.gpuneeds import GpuNeeds

__all__ = ["SideBySide", "host_gpus", "serialized", "width_for"]


def host_gpus(needs: GpuNeeds) -> tuple[Gpu, ...]:
    """The host's GPUs, where the reproducer needs some (none are looked for otherwise)."""
    return tuple(discover().gpus) if needs.count else ()


def width_for(needs: GpuNeeds, jobs: int, gpus: Sequence[Gpu]) -> int:
    """How many candidates may run at once: ``jobs``, capped by how many sets of ``needs`` the
    host's ``gpus`` make (where they can meet it at all; where not, nothing is held and the
    reproducer says what it lacks)."""
    if not needs.count or not gpus or unmet(needs, gpus) is not None:
        return jobs
    fitting = [gpu for gpu in gpus if needs.unfit(gpu) is None]
    return max(1, min(jobs, len(fitting) // needs.count))


def serialized(say: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``say``, one line at a time when runners on several threads speak."""
    if say is None:
        return None
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            say(line)

    return said


class SideBySide:
    """Runs rounds of candidates at once: :meth:`run_round` runs up to ``width`` together.
    ``make`` builds one runner (a runner per candidate running at the same time, kept and reused
    by later rounds); ``needs``: the reproducer's GPUs."""

    def __init__(
        self,
        make: Callable[[], Prober],
        jobs: int,
        needs: GpuNeeds | None = None,
        *,
        gpus: Sequence[Gpu] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        needs = needs or GpuNeeds()
        host = host_gpus(needs) if gpus is None else tuple(gpus)
        self.needs = needs
        self.width = width_for(needs, jobs, host)
        # nothing to hold where the host cannot meet the need (held_gpus does the same)
        held = bool(needs.count and host) and unmet(needs, host) is None
        self.pool = GpuPool(host) if held else None
        self.say = serialized(say) or (lambda line: None)
        self._make = make
        self._lock = threading.Lock()
        first = make()
        self._idle: list[Prober] = [first]
        self._made: list[Prober] = [first]
        # candidates started one at a time: their threads, and each one's cancel
        self._threads: ThreadPoolExecutor | None = None
        self._running: dict[str, tuple[Future[CandidateRun], cancelling.Cancel]] = {}

    def cached(self, item: str, /) -> CandidateRun | None:
        """What the runners' cache knows of ``item`` (they share one)."""
        return self._made[0].cached(item)

    def run(self, item: str, /) -> CandidateRun:
        return self._one(item)

    def run_round(self, items: Sequence[str], /) -> list[CandidateRun]:
        """The runs of ``items``, all at once, in the order given."""
        if len(items) <= 1:
            return [self._one(item) for item in items]
        threads = ThreadPoolExecutor(len(items), thread_name_prefix="patchlane-candidate")
        stopped = False
        try:
            return list(threads.map(self._one, items))
        # Ctrl-C, SIGTERM: the other candidates' reproducers end now, not at their timeout (as
        # the lanes of `patchlane run -j` do)
        except KeyboardInterrupt:
            stopped = True
            REAPER.stop_uninterrupted()
            raise
        finally:
            # prompt after a stop: the workers' reproducers are dead
            threads.shutdown(wait=True, cancel_futures=True)
            if stopped:
                REAPER.resume()

    #: an edge search may start candidates one at a time (retire.bisect.prober.Starting)
    can_start = True

    def start(self, item: str, /) -> None:
        """Start ``item``'s run on a thread of its own (queued while ``width`` run)."""
        if item in self._running:
            raise ValueError(f"{item} is already running")
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.width, thread_name_prefix="patchlane-candidate")
        cancel = cancelling.Cancel()
        self._running[item] = (self._threads.submit(self._cancellable, item, cancel), cancel)

    def _cancellable(self, item: str, cancel: cancelling.Cancel) -> CandidateRun:
        with cancelling.scope(cancel):
            # cancelled before a slot came free
            cancel.check()
            return self._one(item)

    def finished(self) -> CandidateRun:
        """The next run to end among those started and not cancelled."""
        if not self._running:
            raise ValueError("no candidate is running")
        try:
            futures = [future for future, _ in self._running.values()]
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
        # Ctrl-C, SIGTERM: the running candidates' reproducers end now, as a round's do
        except KeyboardInterrupt:
            self._stop_all()
            raise
        item = next(item for item, (future, _) in self._running.items() if future in done)
        future, _ = self._running.pop(item)
        return future.result()

    def cancel(self, item: str, /) -> bool:
        """Stop ``item``'s run: what it waits on is killed, and its answer is never handed back;
        False when it has already ended and is recorded (:meth:`finished` hands it back)."""
        entry = self._running.get(item)
        if entry is None or not entry[1].cancel():
            return False
        del self._running[item]
        return True

    def _stop_all(self) -> None:
        REAPER.stop_uninterrupted()
        try:
            self._cancel_running()
        finally:
            REAPER.resume()

    def _cancel_running(self) -> None:
        """Cancel every candidate still running and end the threads that ran them."""
        for _, cancel in self._running.values():
            cancel.cancel()
        self._running.clear()
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None

    @property
    def blocked(self) -> str | None:
        """Why none of the runners can run a candidate any more (the first to say), or None."""
        return next((why for runner in self._made if (why := runner.blocked) is not None), None)

    @property
    def runs(self) -> int:
        """Reproducer runs made by all the runners."""
        return sum(getattr(runner, "runs", 0) for runner in self._made)

    def _one(self, item: str) -> CandidateRun:
        runner = self._take()
        try:
            if self.pool is None:
                return runner.run(item)
            with self.pool.hold(self.needs, REAPER.check) as given:
                ids = ",".join(gpu.id for gpu in given)
                self.say(f"{_label(item)} on GPUs {', '.join(str(gpu) for gpu in given)}")
                with childenv.visible_devices(ids):
                    return runner.run(item)
        finally:
            with self._lock:
                self._idle.append(runner)

    def _take(self) -> Prober:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        runner = self._make()
        with self._lock:
            self._made.append(runner)
        return runner

    def close(self) -> None:
        """Cancel what still runs, then close every runner made."""
        self._cancel_running()
        for runner in self._made:
            runner.close()


def _label(item: str) -> str:
    """A release as it is; a commit by its short sha."""
    return item[:12] if len(item) == 40 else item
