"""A lane's fork server: import the heavy packages once, run every reproducer in a fresh fork.

Runs *inside* the lane's interpreter (standard library only)::

    <lane python> -m shims.launcher --preload torch,megatron.core

It imports the ``--preload`` modules, then answers requests, one JSON object per line on stdin;
answers go to stdout, one JSON object per line:

- on start: ``{"ready": true, "pid": …, "preloaded": [...], "failed": {module: reason},
  "seconds": …, "targets_loaded": [...], "threads": …}``, or ``{"ready": false, "error": …}``
  (then it exits): CUDA was initialised while importing, which would poison every fork;
- a request ``{"id": 1, "path": "…/reproduce.py", "args": ["--mode", "with"], "env": {...},
  "cwd": "…", "stdout": "<file>", "stderr": "<file>", "timeout": 600, "sys_path_first": [...],
  "targets": [...]}`` is answered with ``{"id": 1, "pid": …}`` once the child is forked and
  ``{"id": 1, "exit": 10, "timed_out": false, "seconds": …}`` when it is done.

Each child starts like ``python <path> <args>`` would: its own session (a timeout kills its
process group), stdin from /dev/null, stdout and stderr to the given files, the given
environment, working directory, ``sys.argv`` and ``sys.path[0]``, the warning filters and
signal handlers of a fresh interpreter; then ``runpy.run_path(path, run_name="__main__")`` and
its exit code (``SystemExit`` read as the interpreter reads it, a traceback and 1 otherwise).
The launcher never calls ``shims.activate()``: a ``--mode with`` reproducer activates its one
shim in the child (``shims.reproducer.run`` does), which patches target modules the launcher
had already imported as well; a ``--mode without`` child never sees a shim. Whatever a run
patches, leaks or crashes stays in its child.

What an interpreter fixes at start-up stays the launcher's: the hash seed, ``sys.flags``, the
warning filters from ``PYTHONWARNINGS``, and any value a preloaded module read from the
environment at import (the launcher starts with the variables all of a lane's runs share).

CUDA is never initialised here: nothing is called on torch but ``torch.cuda.is_initialized()``,
and a preload that initialised CUDA makes the launcher refuse to serve. A preload may still ask
whether CUDA is available at import (Megatron-Core does): through the CUDA runtime that marks every
later fork unable to use the GPU ("Cannot re-initialize CUDA in forked subprocess", seen on an
H100), so preloads run with ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (torch then asks NVML, which
leaves forks usable), and before serving the launcher forks once to check that a child is not in
torch's "bad fork" state — if it is, it refuses, and the lane runs with one interpreter per run. A
preload that fails to
import is reported and skipped: the run imports it itself and fails the way a fresh interpreter
would. ``sys_path_first`` (bisection) puts a candidate's site folder before everything but the
script's own folder, so the child imports the candidate's version of a distribution that the
launcher did not preload.

A run may start children of its own through :mod:`shims.child`: each arrives over a socket pair
the run inherits, and is forked from this launcher as it was before any run (a ``python -c``
child that skips the stack's import), unless it must import fresh a module the launcher already
imported (then the run starts a fresh interpreter itself). Such a child leads its own session and
ends with its run at the latest. The preloads are imported with the collector off and then frozen
(``gc.freeze``): forks share those pages instead of touching them at their first collection.
"""

import json
import os
import sys
import time

from shims.forked import become, kill_group

__all__ = ["main"]


def _reply(channel, message: dict) -> None:
    channel.write((json.dumps(message) + "\n").encode("utf-8"))
    channel.flush()


def _native_threads() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    check = getattr(cuda, "is_initialized", None)
    try:
        return bool(check()) if callable(check) else False
    # a half-imported torch: it did not get as far as a CUDA context
    except Exception:
        return False


def _gpus_visible(torch) -> bool:
    """Whether this host has a CUDA device, asked through NVML (which leaves forks usable); True
    when that cannot be told (no such function in this torch)."""
    count = getattr(getattr(torch, "cuda", None), "_device_count_nvml", None)
    if not callable(count):
        return True
    try:
        # -1: no NVML, so no NVIDIA driver
        return count() not in (0, -1)
    except Exception:  # noqa: BLE001 - an unexpected torch: assume a GPU, and check the fork
        return True


def _fork_unusable() -> bool:
    """Whether a fork of this process could not use a GPU this host has (torch's bad-fork state).
    A fresh child answers, so nothing is initialised here. A host without a GPU loses nothing: its
    runs find no CUDA device either way."""
    torch = sys.modules.get("torch")
    probe = getattr(getattr(torch, "_C", None), "_cuda_isInBadFork", None)
    if not callable(probe) or not _gpus_visible(torch):
        return False
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(1 if probe() else 0)
        except BaseException:  # noqa: BLE001 - the child must never return into the launcher
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)


def preload(modules: list) -> tuple:
    """Import ``modules``; ``(imported, {module: reason})``. Never raises for an import."""
    import importlib

    imported, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import must not end the launcher
            failed[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        else:
            imported.append(name)
    return imported, failed


def _pidfd(pid: int):
    try:
        return os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    except OSError:
        return None


class _Run:
    """One run's fork and the children it asked for (:mod:`shims.child`), watched until it ends."""

    def __init__(self, pid: int, channel, serving: tuple, fresh: dict) -> None:
        self.pid, self.channel, self.serving, self.fresh = pid, channel, serving, fresh
        # pid -> (request id, pidfd or None)
        self.children: dict[int, tuple] = {}
        self.buffer = b""

    def wait(self, timeout) -> tuple:
        """``(exit code as subprocess reports it, timed out)``; past ``timeout`` the run's group
        is killed. Its children are killed when it ends."""
        import select

        deadline = None if timeout is None else time.monotonic() + float(timeout)
        pidfd = _pidfd(self.pid)
        try:
            while True:
                # Seen exited but not yet reaped, the run's id is still its own: what it left in its
                # process group (a fresh interpreter it started, say) ends with it, as it would
                # under one interpreter per run.
                if hasattr(os, "waitid"):
                    if (
                        os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                        is not None
                    ):
                        kill_group(self.pid)
                        _, status = os.waitpid(self.pid, 0)
                        return os.waitstatus_to_exitcode(status), False
                # no waitid (macOS): the group is left to the lane's end (the marker)
                else:
                    done, status = os.waitpid(self.pid, os.WNOHANG)
                    if done:
                        return os.waitstatus_to_exitcode(status), False
                self._reap_children()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    kill_group(self.pid)
                    _, status = os.waitpid(self.pid, 0)
                    return os.waitstatus_to_exitcode(status), True
                watched = [fd for fd in (pidfd, self.channel) if fd is not None]
                watched += [fd for _, fd in self.children.values() if fd is not None]
                polling = pidfd is None or any(fd is None for _, fd in self.children.values())
                wait_s = (
                    min(left, 0.005) if polling and left is not None else 0.005 if polling else left
                )
                ready, _, _ = select.select(watched, [], [], wait_s)
                if self.channel is not None and self.channel in ready:
                    self._read_requests()
        finally:
            if pidfd is not None:
                os.close(pidfd)
            self._end_children()

    def _read_requests(self) -> None:
        try:
            chunk = self.channel.recv(65536)
        except OSError:
            chunk = b""
        # the run closed its end (or exited): no more requests
        if not chunk:
            self.channel.close()
            self.channel = None
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                self._start_child(request)

    def _start_child(self, request: dict) -> None:
        preloaded = [name for name in request.get("fresh") or () if name in sys.modules]
        if preloaded:
            self._say(
                {
                    "id": request.get("id"),
                    "refused": f"the launcher imported {', '.join(preloaded)}, "
                    "which the child must import itself",
                }
            )
            return
        pid = os.fork()
        if pid == 0:
            become(request, (*self.serving, self.channel), self.fresh)
        self.children[pid] = (request.get("id"), _pidfd(pid))
        self._say({"id": request.get("id"), "pid": pid})

    def _reap_children(self) -> None:
        for pid, (number, fd) in list(self.children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if fd is not None:
                    os.close(fd)
                del self.children[pid]
                self._say({"id": number, "exit": os.waitstatus_to_exitcode(status)})

    def _end_children(self) -> None:
        for pid, (_, fd) in self.children.items():
            kill_group(pid)
            os.waitpid(pid, 0)
            if fd is not None:
                os.close(fd)
        self.children.clear()
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def _say(self, message: dict) -> None:
        if self.channel is None:
            return
        try:
            self.channel.sendall((json.dumps(message) + "\n").encode("utf-8"))
        # the run is gone; its children end with it
        except OSError:
            pass


def serve(requests, replies, fresh: dict) -> None:
    """Answer requests until stdin closes."""
    import socket

    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        began = time.monotonic()
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            become(request, (requests, replies), fresh, run_channel=theirs)
        theirs.close()
        _reply(replies, {"id": request.get("id"), "pid": pid})
        code, timed_out = _Run(pid, ours, (requests, replies), fresh).wait(request.get("timeout"))
        _reply(
            replies,
            {
                "id": request.get("id"),
                "exit": code,
                "timed_out": timed_out,
                "seconds": round(time.monotonic() - began, 6),
            },
        )


def main(argv=None) -> int:
    import signal
    import warnings

    args = list(sys.argv[1:] if argv is None else argv)
    modules, targets = [], []
    while args:
        flag = args.pop(0)
        if flag in ("--preload", "--targets") and args:
            (modules if flag == "--preload" else targets).extend(
                p for p in args.pop(0).split(",") if p
            )
        else:
            print(
                f"usage: python -m shims.launcher [--preload MODULE,…] [--targets MODULE,…] (got "
                f"{flag!r})",
                file=sys.stderr,
            )
            return 2
    # The protocol gets its own descriptors; whatever a preloaded package prints goes to stderr.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    fresh = {
        "warnings": list(warnings.filters),
        "signals": {
            number: signal.getsignal(number)
            for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
            if signal.getsignal(number) is not None
        },
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
        "errors": getattr(sys.stdout, "errors", None) or "strict",
    }
    started = time.monotonic()
    # Children get the request's environment, so this reaches only the preloads' own checks.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import gc

    # importing allocates far more than it frees: a collection now is wasted work
    gc.disable()
    imported, failed = preload(modules)
    # what the preloads made is never collected here, so forks leave its pages shared
    gc.freeze()
    gc.enable()
    if _cuda_initialised():
        _reply(
            replies,
            {
                "ready": False,
                "error": f"importing {', '.join(modules)} initialised CUDA: a fork of this "
                "process could not use the GPU; run these reproducers with --isolation process",
            },
        )
        return 3
    if _fork_unusable():
        _reply(
            replies,
            {
                "ready": False,
                "error": f"importing {', '.join(modules)} left torch unable to use CUDA in "
                "a fork (it asked the CUDA runtime whether a GPU exists); run these reproducers "
                "with "
                "--isolation process",
            },
        )
        return 3
    if "shims" in sys.modules and getattr(sys.modules["shims"], "_activated", False):
        _reply(
            replies,
            {
                "ready": False,
                "error": f"importing {', '.join(modules)} activated the shims: "
                "a without-shim run would see them",
            },
        )
        return 3
    _reply(
        replies,
        {
            "ready": True,
            "pid": os.getpid(),
            "preloaded": imported,
            "failed": failed,
            "seconds": round(time.monotonic() - started, 6),
            "targets_loaded": [t for t in targets if t in sys.modules],
            "threads": _native_threads(),
        },
    )
    serve(requests, replies, fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
