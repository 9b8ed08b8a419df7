"""Ctrl-C and SIGTERM end every command the same way.

Python turns SIGINT into :class:`KeyboardInterrupt`; SIGTERM (a CI cancel) and SIGHUP (a closed
terminal) would end the process at once, with no word, no ``--json`` document and children left
running. While :func:`handled` is active they raise :class:`Terminated`, a
:class:`KeyboardInterrupt`, so one handler — the command line's — says "interrupted" once,
prints the error document, ends what was started and exits 130 (Ctrl-C) or 143 (SIGTERM,
SIGHUP). As the signal arrives, the callbacks registered with :func:`on_interrupt` end the
processes worker threads wait on (uv, reproducers), so nothing waits for them to finish, and
:func:`stopping` tells those threads not to report what the interruption killed as a failure.
Standard library only: ``python -m retire`` installs it before anything else is imported.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = [
    "INTERRUPTED",
    "TERMINATED",
    "Terminated",
    "exit_code",
    "handled",
    "ignore",
    "install",
    "on_interrupt",
    "quiet",
    "reset",
    "stopping",
]

#: Exit codes: 128 + the signal's number, as a shell reports a process it ended.
INTERRUPTED = 130
TERMINATED = 143

_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: stop as Ctrl-C stops, exit 143."""


#: Set from the first Ctrl-C or SIGTERM until :func:`reset`: what worker threads check before
#: they report a failure the interruption caused (a killed uv is no failed lock).
_STOPPING = threading.Event()
#: Called, in the main thread, as a signal arrives, before anything waits for a worker thread:
#: they end the processes the workers wait on (lock-free: the main thread may hold any lock).
_ON_INTERRUPT: list[Callable[[], None]] = []


def on_interrupt(callback: Callable[[], None]) -> None:
    """Call ``callback`` when Ctrl-C or SIGTERM arrives (once per registration)."""
    if callback not in _ON_INTERRUPT:
        _ON_INTERRUPT.append(callback)


def stopping() -> bool:
    """Whether the command is being interrupted."""
    return _STOPPING.is_set()


def reset() -> None:
    """The next command in this process (tests, nox) is not interrupted."""
    _STOPPING.clear()


def _stop() -> None:
    _STOPPING.set()
    for callback in list(_ON_INTERRUPT):
        with contextlib.suppress(Exception):
            callback()


def _raise(signum: int, frame: FrameType | None) -> None:
    _stop()
    raise Terminated(signal.Signals(signum).name)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _stop()
    raise KeyboardInterrupt


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM or SIGHUP."""
    return TERMINATED if isinstance(interrupt, Terminated) else INTERRUPTED


def install() -> None:
    """SIGTERM and SIGHUP raise :class:`Terminated` from now on (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        for sig in _SIGNALS:
            signal.signal(sig, _raise)


def ignore() -> None:
    """Ctrl-C and SIGTERM are ignored from now on (main thread only): the command has said what
    it had to, and a signal during the interpreter's exit would replace its exit code."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, *_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)


def _handlers() -> dict[int, Callable[[int, FrameType | None], None]]:
    """This module's handler for each signal it handles; Ctrl-C only where Python's own
    handler is in place (an ignored SIGINT, a background job's, stays ignored)."""
    handlers: dict[int, Callable[[int, FrameType | None], None]] = dict.fromkeys(_SIGNALS, _raise)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _interrupt):
        handlers[signal.SIGINT] = _interrupt
    return handlers


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while active (main thread only; elsewhere
    nothing changes); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig, handler in _handlers().items()}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A second Ctrl-C or SIGTERM is ignored while active (main thread only): the interruption
    being handled says its one line and ends what was started, without a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, *_SIGNALS)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
