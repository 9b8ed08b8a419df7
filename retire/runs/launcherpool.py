"""Warm launchers for candidates run side by side: one per slot, kept across rounds and searches.

``patchlane bisect -j N`` runs up to ``N`` candidates at once. Every candidate of one bisection
forks from the same base interpreter with the same preloads — a release's overlay and a commit's
differ only in the site folder put first on the fork's ``sys.path`` — and a launcher never
initialises CUDA (a fork's ``CUDA_VISIBLE_DEVICES`` decides its GPUs), so a launcher belongs to no
candidate, runner or GPU set. A :class:`LauncherPool` keeps up to ``slots`` of them: each started
on first need (or all at once, in parallel, by :meth:`LauncherPool.warm`, while the first
overlays are still being built), lent to one running candidate at a time (:meth:`borrow`), and
closed together at the end. The heavy stack is then imported once per slot for the whole
bisection — releases and commits alike — not once per runner: the window bisection
(:func:`retire.bisect.transitions.bisect_window`) makes one pool of ``-j`` slots that its release
and commit runners (:class:`retire.bisect.runner.OverlayRunner`) borrow from, and the first fresh
run warms every slot in the background (:meth:`LauncherPool.warm_soon`) while its overlay builds —
a bisection whose answers are all cached starts none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

__all__ = ["Closable", "LauncherPool"]


class Closable(Protocol):
    def close(self) -> None: ...


L = TypeVar("L", bound=Closable)


class LauncherPool(Generic[L]):
    """Up to ``slots`` launchers made by ``start``, each lent to one borrower at a time."""

    def __init__(self, start: Callable[[], L], slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a pool needs at least one slot, not {slots}")
        self._start = start
        self.slots = slots
        self._idle: list[L] = []
        self._made: list[L] = []
        # slots being started now (counted against ``slots``)
        self._starting = 0
        self._closed = False
        self._changed = threading.Condition()
        self._warming: threading.Thread | None = None

    @property
    def started(self) -> int:
        """How many launchers the pool has started (each one import of the heavy stack)."""
        with self._changed:
            return len(self._made)

    @property
    def made(self) -> tuple[L, ...]:
        """The launchers started so far (lent or idle)."""
        with self._changed:
            return tuple(self._made)

    def warm(self) -> None:
        """Start every slot's launcher now, side by side; a start that fails frees its slot (the
        others are lent all the same) and the first failure is raised once all have ended."""
        with self._changed:
            missing = self.slots - len(self._made) - self._starting
            self._starting += max(missing, 0)
        if missing <= 0:
            return
        with ThreadPoolExecutor(missing, thread_name_prefix="patchlane-launcher") as threads:
            futures = [threads.submit(self._make) for _ in range(missing)]
        started = [f.result() for f in futures if f.exception() is None]
        with self._changed:
            closed = self._closed
            if not closed:
                self._idle.extend(started)
            self._changed.notify_all()
        # closed while they started: nobody will borrow them
        for launcher in started if closed else ():
            launcher.close()
        failed = [exc for f in futures if (exc := f.exception()) is not None]
        if failed:
            raise failed[0]

    def warm_soon(self) -> None:
        """:meth:`warm` on a thread of its own (once): the slots start while the caller goes on
        (builds a candidate's overlay); a borrower that comes first waits for one, or starts one
        where a start failed. :meth:`close` waits for it."""
        with self._changed:
            if self._warming is not None or self._closed:
                return
            self._warming = threading.Thread(
                target=self._warm_quietly, name="patchlane-launchers-warm", daemon=True
            )
        self._warming.start()

    def _warm_quietly(self) -> None:
        # a launcher that cannot start is the borrower's to start again and report
        with contextlib.suppress(Exception):
            self.warm()

    @contextlib.contextmanager
    def borrow(self) -> Iterator[L]:
        """An idle launcher (started now when fewer than ``slots`` exist, else the next one
        returned), back in the pool when the block ends."""
        launcher = self._take()
        try:
            yield launcher
        finally:
            with self._changed:
                if self._closed:
                    launcher.close()
                else:
                    self._idle.append(launcher)
                self._changed.notify()

    def _take(self) -> L:
        with self._changed:
            while True:
                if self._closed:
                    raise RuntimeError("the launcher pool is closed")
                if self._idle:
                    return self._idle.pop()
                if len(self._made) + self._starting < self.slots:
                    self._starting += 1
                    break
                self._changed.wait()
        return self._make()

    def _make(self) -> L:
        """One launcher; the slot it was started for is counted as made (or freed on failure)."""
        try:
            launcher = self._start()
        except BaseException:
            with self._changed:
                self._starting -= 1
                self._changed.notify()
            raise
        with self._changed:
            self._starting -= 1
            self._made.append(launcher)
        return launcher

    def close(self) -> None:
        """Close every idle launcher now and each borrowed one as it comes back (those still
        being warmed once they have started)."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            warming = self._warming
            self._changed.notify_all()
        for launcher in idle:
            launcher.close()
        if warming is not None and warming is not threading.current_thread():
            warming.join()

    def __enter__(self) -> LauncherPool[L]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
