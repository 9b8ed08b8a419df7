"""One candidate's run cancelled while it runs: what it started is killed, and it is never recorded.

A bisection that runs candidates side by side (``patchlane bisect -j``,
:mod:`retire.bisect.sidebyside`) starts the next one as soon as a slot frees; a result that narrows
the search can leave a running candidate outside it, whose answer no longer matters. Its thread
runs inside a :func:`scope` of its own :class:`Cancel`; :meth:`Cancel.cancel` (from the thread that
schedules) kills what the run registered with :func:`killing` while it waits on it — a launcher's
fork and its group (:meth:`retire.runs.launcher.Launcher.run`), a reproducer's interpreter
(:func:`retire.runs.reproduce.run_reproducer`), a named build (:func:`retire.runs.wheelbuild.
build_wheel`) — and the runner asks :func:`check` before it runs anything, and :func:`commit`
before it records or caches: a cancelled run raises :class:`CancelledError` there, and a run
already committed cannot be cancelled (its answer stands and is handed back). A step that registers
nothing (uv building an overlay) runs to its end first. Outside a scope nothing is ever cancelled.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
from collections.abc import Callable, Iterator

__all__ = ["Cancel", "CancelledError", "check", "commit", "killing", "scope"]


class CancelledError(Exception):
    """The run was cancelled: its answer is not wanted, and nothing of it is recorded."""


class Cancel:
    """One run's cancellation: set once, from any thread; kills what the run waits on. A run
    that has ended and is being recorded (:meth:`commit`) can no longer be cancelled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kills: dict[int, Callable[[], None]] = {}
        self._numbers = itertools.count()
        self.cancelled = False
        self.committed = False

    def cancel(self) -> bool:
        """Cancel the run: kill what it waits on now, and whatever it registers later. False
        (and nothing done) when the run has already ended and is recorded: its answer stands."""
        with self._lock:
            if self.committed:
                return False
            self.cancelled = True
            kills = list(self._kills.values())
        for kill in kills:
            # it may have ended meanwhile
            with contextlib.suppress(OSError):
                kill()
        return True

    def check(self) -> None:
        """:class:`CancelledError` once the run is cancelled."""
        if self.cancelled:
            raise CancelledError()

    def commit(self) -> None:
        """The run has ended and is about to be recorded: :class:`CancelledError` if it was
        cancelled first, else no cancel reaches it any more."""
        with self._lock:
            if self.cancelled:
                raise CancelledError()
            self.committed = True

    @contextlib.contextmanager
    def killing(self, kill: Callable[[], None]) -> Iterator[None]:
        """``kill`` called if the run is cancelled while the block runs (at once if it already
        is)."""
        number = next(self._numbers)
        with self._lock:
            self._kills[number] = kill
            already = self.cancelled
        if already:
            with contextlib.suppress(OSError):
                kill()
        try:
            yield
        finally:
            with self._lock:
                self._kills.pop(number, None)


_SCOPE: contextvars.ContextVar[Cancel | None] = contextvars.ContextVar(
    "patchlane_cancel", default=None
)


@contextlib.contextmanager
def scope(cancel: Cancel) -> Iterator[Cancel]:
    """Runs on this thread inside the block are cancelled by ``cancel``."""
    token = _SCOPE.set(cancel)
    try:
        yield cancel
    finally:
        _SCOPE.reset(token)


def killing(kill: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
    """``kill`` called if this thread's run is cancelled while the block runs; nothing outside a
    :func:`scope`."""
    current = _SCOPE.get()
    return current.killing(kill) if current is not None else contextlib.nullcontext()


def commit() -> None:
    """This thread's run has ended and is about to be recorded (:meth:`Cancel.commit`); nothing
    outside a :func:`scope`."""
    current = _SCOPE.get()
    if current is not None:
        current.commit()


def check() -> None:
    """:class:`CancelledError` when this thread's run is cancelled; nothing outside a
    :func:`scope`."""
    current = _SCOPE.get()
    if current is not None:
        current.check()
