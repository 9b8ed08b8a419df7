"""Every reproducer process tree patchlane starts, and how the whole of it is stopped.

Each reproducer starts in a session of its own (a timeout kills its process group) and carries
``PATCHLANE_RUN_TOKEN=<run token>.<n>`` in its environment, which its children inherit. So a
grandchild that leaves the group (``setsid``, a daemonising library) is still found: teardown
scans ``/proc/<pid>/environ`` for the marker and kills what carries it.

Three ways a run ends early, one result — nothing it started keeps running:

- **Ctrl-C / SIGTERM**: the command's handler raises :class:`KeyboardInterrupt`; the lane runner
  calls :meth:`Reaper.stop`, which kills every live group and every marked process, and the
  worker threads see :class:`Stopped` instead of starting the next reproducer. What finished
  was already appended to the validation manifest, one record at a time.
- **the controller's own death** (``kill -9``, an OOM kill): a guard process, started before
  the first lane build, waits on a pipe only the controller holds; when the pipe closes it kills
  every process carrying this run's marker.
- **a reproducer's timeout**: its group and its own marked processes are killed.

Only the standard library (and :mod:`retire.core.childenv`, :mod:`retire.core.interrupts`) is
imported here:
``python -m retire.runs.reaper TOKEN`` is the guard.

uv, started by lane builds, carries the run's marker as well (``<token>.uv``): a stop kills a
sync or an extension build in progress too, so an interrupt never waits for a download.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from retire.core import interrupts
from retire.core.childenv import RUN_TOKEN, RUN_TOKEN_ENV

__all__ = [
    "REAPER",
    "TOKEN_ENV",
    "Reaper",
    "Stopped",
    "kill_marked",
    "marked_pids",
    "terminate_on_sigterm",
]

TOKEN_ENV = RUN_TOKEN_ENV
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class Stopped(KeyboardInterrupt):
    """The run is being stopped (Ctrl-C, SIGTERM): no further reproducer starts, none is
    recorded."""


def marked_pids(marker: str, *, prefix: bool = False) -> list[int]:
    """Processes whose environment carries ``TOKEN_ENV=marker`` (``prefix``: any ``marker.<n>``)."""
    needle = f"\0{TOKEN_ENV}={marker}".encode() + (b"." if prefix else b"\0")
    found = []
    own = os.getpid()
    try:
        entries = os.listdir("/proc")
    # not Linux: process groups are all there is
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = b"\0" + handle.read() + b"\0"
        # gone, or another user's
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry))
    return found


def kill_marked(marker: str, *, prefix: bool = False, rounds: int = 50) -> int:
    """SIGKILL every process carrying ``marker`` (and its group), until none is left; how many."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = marked_pids(marker, prefix=prefix)
        if not pids:
            break
        for pid in pids:
            # the group first, then the process itself (one that left its group)
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
            killed.add(pid)
        # a zombie's environ reads empty: the next round sees only the living
        time.sleep(0.01)
    return len(killed)


class Reaper:
    """Starts reproducers marked and in sessions of their own; stops them all on demand."""

    def __init__(self) -> None:
        # uv's processes carry it too (retire.core.uv.base_env)
        self.token = RUN_TOKEN
        self._lock = threading.Lock()
        self._live: dict[int, tuple[subprocess.Popen, str]] = {}
        self._count = 0
        self._stopping = threading.Event()
        self._guard: subprocess.Popen | None = None

    def check(self) -> None:
        """Raise :class:`Stopped` once the run is being stopped."""
        if self._stopping.is_set():
            raise Stopped()

    def spawn(
        self, command: Sequence[str], *, env: Mapping[str, str], **popen: object
    ) -> subprocess.Popen:
        """``Popen(command)`` in a new session, marked, tracked; :class:`Stopped` when stopping."""
        self.check()
        self.ensure_guard()
        with self._lock:
            self._count += 1
            marker = f"{self.token}.{self._count}"
        child_env = {**env, TOKEN_ENV: marker}
        process = subprocess.Popen(list(command), env=child_env, start_new_session=True, **popen)  # type: ignore[call-overload]
        with self._lock:
            self._live[process.pid] = (process, marker)
        # stopped while it started: it must not outlive the stop
        if self._stopping.is_set():
            self.kill(process)
            raise Stopped()
        return process

    def marker(self, process: subprocess.Popen) -> str | None:
        """The marker :meth:`spawn` gave ``process`` (None once it is finished or if it was not
        spawned here)."""
        with self._lock:
            entry = self._live.get(process.pid)
        return entry[1] if entry is not None else None

    def kill(self, process: subprocess.Popen) -> None:
        """Kill ``process``'s group and every process that carries its marker."""
        with self._lock:
            entry = self._live.get(process.pid)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(OSError):
                process.kill()
        if entry is not None:
            kill_marked(entry[1])

    def finish(self, process: subprocess.Popen) -> None:
        """``process`` is done: whatever it left behind (its group, its marked descendants) is
        killed, it is waited for and no longer tracked."""
        with self._lock:
            entry = self._live.pop(process.pid, None)
        # not yet waited for, so its group id cannot have been reused
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                process.kill()
            process.wait()
        # what it left running, in its group or out of it, carries its marker
        if entry is not None:
            kill_marked(entry[1])

    def stop(self) -> None:
        """Stop the run: no new reproducer starts; every live one, and all it spawned, is killed."""
        self._stopping.set()
        with self._lock:
            live = list(self._live.values())
        for process, _ in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        kill_marked(self.token, prefix=True)

    def stop_uninterrupted(self) -> None:
        """:meth:`stop`, for a pool of workers being interrupted: a second Ctrl-C during it
        must not cut the stop short (a reproducer would live on to its timeout)."""
        while True:
            try:
                self.stop()
                return
            except KeyboardInterrupt:
                continue

    def halt(self) -> None:
        """:meth:`stop` as a signal handler may call it: takes no lock (the interrupted main
        thread may hold this one); kills every process of this run by its marker."""
        self._stopping.set()
        kill_marked(self.token, prefix=True)

    def resume(self) -> None:
        """Allow reproducers again (the next run in this process, e.g. a test's)."""
        self._stopping.clear()

    def ensure_guard(self) -> None:
        """Start the guard that kills this run's processes (reproducers, uv) if this process dies;
        once per process, before the first lane build."""
        with self._lock:
            if self._guard is not None and self._guard.poll() is None:
                return
            env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(_PACKAGE_ROOT)}
            try:
                self._guard = subprocess.Popen(
                    [sys.executable, "-m", "retire.runs.reaper", self.token],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except OSError:
                # no guard: SIGTERM and Ctrl-C are still handled in-process
                self._guard = None


REAPER = Reaper()


def terminate_on_sigterm():
    """A context manager: SIGTERM (and SIGHUP) raise
    :class:`~retire.core.interrupts.Terminated`, a :class:`KeyboardInterrupt`, like Ctrl-C, while
    it is active (main thread only; elsewhere it does nothing)."""
    return interrupts.handled()


def _guard(token: str) -> None:
    """The guard's life: ignore the signals aimed at the controller, wait for its pipe to close,
    then kill whatever still carries the run's marker."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except OSError:
        pass
    kill_marked(token, prefix=True)


if __name__ == "__main__":
    _guard(sys.argv[1])
