"""Fresh Python children for reproducers: ``python -c CODE ARGS`` started the way a job launcher
starts a rank, under either isolation.

An env-constraint shim is proven in a child process: the policy must reach a process that starts
after it is set, and a module such as ``torch._inductor.config`` reads its variables once, at
import. A reproducer starts such a child with::

    from shims import child

    done = child.run(CODE, str(root), env=env, timeout=240, fresh=["torch._inductor.config"])
    done.returncode, done.stdout, done.stderr

- Under ``--isolation process`` (or outside patchlane) the child is a fresh interpreter,
  ``sys.executable -c CODE ARGS``.
- Under ``--isolation launcher`` the run is a fork of a lane interpreter that imported the heavy
  stack once; the child is then a fork of that launcher as it was before any run (its preloads
  imported with the variables every run shares, no shim activated), set up like ``python -c``:
  the given environment, ``sys.argv = ["-c", *args]``, ``sys.path[0] = ""``, a new ``__main__``.
  That saves the child the stack's import. ``fresh`` names the modules the child must import
  itself, after its environment is set (a module that reads a variable at import): if the
  launcher imported any of them, the child is a fresh interpreter after all, and
  :attr:`Finished.forked` says which it was.

:func:`start` returns at once (start two, then wait for both: they run side by side; from one
thread or several); every child ends with its run at the latest. Standard library only: this runs
in every lane's interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# `typing` stays unloaded in every run that imports this module: the types are the checker's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import TypedDict

    class _Reply(TypedDict, total=False):
        """The launcher's message about one child (shims/launcher.py, ``_Run``)."""

        id: int
        # forked, with this process id
        pid: int
        # not forked, and why
        refused: str
        # ended, with this exit code (negative: killed by that signal)
        exit: int


__all__ = ["Child", "Finished", "run", "start"]

# Set by the launcher in a run's fork (shims/forked.py): the run's end of a socket pair to the
# launcher, which forks the children, and the process it belongs to (a fork of the run, from
# multiprocessing say, starts fresh interpreters: replies on a shared channel would cross).
_channel: socket.socket | None = None
_owner: int | None = None
# Replies arrive on the one channel in any order and are queued by child id. One thread at a time
# reads the channel, outside the lock; the others wait on the condition for what it queues, so a
# thread blocked in wait() never holds up another thread's start() or wait() (two ranks of one job).
_state = threading.Condition()
_sending = threading.Lock()
_replies: dict[int, list[_Reply]] = {}
_buffer = b""
_reading = False
_closed = False
_next_id = 0


@dataclass(frozen=True)
class Finished:
    """A child that ended: its exit code (negative: killed by that signal) and what it printed."""

    returncode: int
    stdout: str
    stderr: str
    # True: a fork of the launcher; False: a fresh interpreter
    forked: bool


class Child:
    """A started child; :meth:`wait` for it (``subprocess.TimeoutExpired`` past ``timeout``, the
    child killed first, as ``subprocess.run`` does)."""

    def __init__(
        self,
        code: str,
        args: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        fresh: Iterable[str],
    ) -> None:
        self._folder = tempfile.mkdtemp(prefix="patchlane-child-")
        self._out = os.path.join(self._folder, "stdout")
        self._err = os.path.join(self._folder, "stderr")
        self._command = [sys.executable, "-c", code, *args]
        self._process: subprocess.Popen[bytes] | None = None
        # the launcher's number for it (0: not asked for; numbers start at 1)
        self._id = 0
        self.pid: int | None = None
        # why the launcher did not fork it (then it is a fresh interpreter)
        self.refused = ""
        self._finished: Finished | None = None
        if _channel is not None and _owner == os.getpid():
            self._fork(_channel, code, args, env, cwd, list(fresh))
        if self.pid is None:
            with open(self._out, "wb") as out, open(self._err, "wb") as err:
                self._process = subprocess.Popen(
                    self._command,
                    env=dict(env),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                )
            self.pid = self._process.pid

    @property
    def forked(self) -> bool:
        return self._process is None

    def _fork(
        self,
        channel: socket.socket,
        code: str,
        args: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        fresh: list[str],
    ) -> None:
        global _next_id
        with _state:
            _next_id += 1
            self._id = _next_id
        request = {
            "id": self._id,
            "code": code,
            "args": list(args),
            "env": dict(env),
            "cwd": os.path.abspath(cwd) if cwd is not None else os.getcwd(),
            "stdout": self._out,
            "stderr": self._err,
            "fresh": fresh,
        }
        try:
            # whole lines, one thread at a time
            with _sending:
                channel.sendall((json.dumps(request) + "\n").encode("utf-8"))
        except OSError as exc:
            self.refused = f"the launcher's channel is closed ({exc})"
            return
        reply = _next_reply(self._id, None)
        if reply is None or "pid" not in reply:
            self.refused = (reply or {}).get("refused", "the launcher did not answer")
            return
        self.pid = int(reply["pid"])

    def wait(self, timeout: float | None = None) -> Finished:
        if self._finished is not None:
            return self._finished
        try:
            if self._process is not None:
                try:
                    code = self._process.wait(timeout)
                except subprocess.TimeoutExpired as expired:
                    self._process.kill()
                    self._process.wait()
                    raise subprocess.TimeoutExpired(
                        self._command, expired.timeout, *self._output()
                    ) from None
            else:
                deadline = None if timeout is None else time.monotonic() + timeout
                reply = _next_reply(self._id, deadline)
                if reply is None:
                    self._kill()
                    # the launcher reaps it and says so
                    _next_reply(self._id, None)
                    # without a timeout, only a closed channel ends the wait: the launcher is gone
                    if timeout is None:
                        raise ChildProcessError(
                            f"the launcher's channel closed before child {self.pid} ended; "
                            "it was killed"
                        )
                    raise subprocess.TimeoutExpired(self._command, timeout, *self._output())
                code = int(reply["exit"])
            self._finished = Finished(code, *self._output(), forked=self.forked)
            return self._finished
        finally:
            if self._process is None or self._process.returncode is not None:
                shutil.rmtree(self._folder, ignore_errors=True)

    def _kill(self) -> None:
        from shims.forked import kill_group

        kill_group(self.pid)

    def _output(self) -> tuple[str, str]:
        def text(path: str) -> str:
            try:
                with open(path, "rb") as handle:
                    return handle.read().decode("utf-8", "replace")
            except OSError:
                return ""

        return text(self._out), text(self._err)


def start(
    code: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    fresh: Iterable[str] = (),
) -> Child:
    """Start ``python -c code args`` (see the module's docstring); ``env`` defaults to this
    process's environment."""
    return Child(code, [str(a) for a in args], os.environ if env is None else env, cwd, fresh)


def run(
    code: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    fresh: Iterable[str] = (),
    timeout: float | None = None,
) -> Finished:
    """:func:`start`, then wait for it."""
    return start(code, *args, env=env, cwd=cwd, fresh=fresh).wait(timeout)


def _next_reply(wanted: int, deadline: float | None) -> _Reply | None:
    """The launcher's next message about child ``wanted``: None past ``deadline`` or when the
    channel closes. Messages about other children are queued for their own :meth:`Child.wait`."""
    global _reading
    while True:
        with _state:
            while True:
                queued = _replies.get(wanted)
                if queued:
                    return queued.pop(0)
                channel = _channel
                if channel is None or _closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if not _reading:
                    break
                # another thread is reading: it wakes us when it has queued what came
                _state.wait(left)
            _reading = True
        chunk = None
        try:
            chunk = _receive(channel, left)
        finally:
            with _state:
                _reading = False
                _queue(chunk)
                _state.notify_all()


def _receive(channel: socket.socket, left: float | None) -> bytes | None:
    """What ``channel`` holds within ``left`` seconds: None if nothing came, b"" once it
    closed."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        if not selector.select(left):
            return None
    try:
        return channel.recv(65536)
    except OSError:
        return b""


def _queue(chunk: bytes | None) -> None:
    """Under ``_state``: the whole lines of what arrived, queued by child id."""
    global _buffer, _closed
    if chunk is None:
        return
    if not chunk:
        _closed = True
        return
    _buffer += chunk
    while b"\n" in _buffer:
        line, _buffer = _buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
            _replies.setdefault(int(message["id"]), []).append(message)
        except (ValueError, KeyError, TypeError):
            continue
