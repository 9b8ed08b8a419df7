"""Secrets kept out of the engine's environment block, so lane code cannot read them there.

Lane code gets an allow-list of variables (:mod:`retire.core.childenv`), but on Linux any process
of the same user may read ``/proc/<pid>/environ`` of another — the environment that process was
*started* with — and a reproducer's parent, or its launcher's parent, is the engine. Changing
``os.environ`` does not change that block. So the command line's entry point
(:func:`shed`) re-executes the engine, before anything else runs, with every secret-named
variable (:func:`retire.core.secrets.looks_secret`) removed from its environment; the values
travel through a pipe the new image reads once and closes, and are put back into ``os.environ``
in memory only (where the probes and uv's credentials look for them, and which no other process
can read as an environment). The re-executed engine also makes itself non-dumpable
(``PR_SET_DUMPABLE``), so its ``/proc`` files — its memory included — are closed to other
processes of its user, lane code among them.

What patchlane cannot clean is a process that started it: a shell, CI step or nox process that
holds ``GITHUB_TOKEN`` in its own environment is readable by that user's processes. Give the
token only to the commands that probe (the Action passes it to the report step alone).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys

from retire.core.secrets import looks_secret

__all__ = ["HELD_FD", "shed"]

#: Names the pipe a re-executed engine reads its secrets from (not a secret: a number).
HELD_FD = "PATCHLANE_HELD_FD"
#: Bytes of secrets a pipe carries without blocking the writer (Linux's smallest pipe buffer).
_PIPE_BYTES = 4096
_PR_SET_DUMPABLE = 4


def _undumpable() -> None:
    """Close this process's /proc files (environ, mem, fd…) to other processes of its user."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _restore(text: str) -> None:
    """Read the secrets the previous image left in the pipe named by ``text``; put them back
    into ``os.environ`` (memory only)."""
    try:
        descriptor = int(text)
        if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            return
    except (ValueError, OSError):
        return
    try:
        payload = os.read(descriptor, _PIPE_BYTES)
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)
    try:
        held = json.loads(payload)
    except ValueError:
        return
    if isinstance(held, dict):
        os.environ.update({k: v for k, v in held.items() if isinstance(k, str) and looks_secret(k)})
    _undumpable()


def shed() -> None:
    """Re-execute this process without its secret-named variables (once, at the command line's
    entry; never when there are none, nor off Linux, where ``/proc`` does not expose them)."""
    if not sys.platform.startswith("linux"):
        return
    text = os.environ.pop(HELD_FD, None)
    if text is not None:
        _restore(text)
        return
    held = {name: value for name, value in os.environ.items() if looks_secret(name)}
    if not held:
        return
    payload = json.dumps(held).encode("utf-8")
    if len(payload) > _PIPE_BYTES or not sys.executable or not sys.orig_argv:
        # too many secrets for one pipe write: at least close /proc to lane code
        _undumpable()
        return
    read, write = os.pipe()
    os.write(write, payload)
    os.close(write)
    os.set_inheritable(read, True)
    env = {name: value for name, value in os.environ.items() if not looks_secret(name)}
    env[HELD_FD] = str(read)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    # the interpreter cannot be started again: carry on as we are, /proc closed
    except OSError:
        os.close(read)
        _undumpable()
