"""A lane's fork server: import the heavy packages once, run every reproducer in a fresh fork.

Runs *inside* the lane's interpreter (standard library only)::

    <lane python> -m shims.launcher --preload torch,megatron.core

Requests and answers are JSON lines on stdin and stdout. docs/shims.md ("The lane launcher")
describes the protocol, what each forked child gets back of a fresh interpreter, and why CUDA is
never initialised here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from shims.forked import become, kill_group

TYPE_CHECKING = False
if TYPE_CHECKING:
    import io
    import socket
    from collections.abc import Iterable, Sequence
    from types import ModuleType

    from shims.forked import Closable, Fresh, Handler, Request

__all__ = ["main"]

#: Exit codes: the command line was wrong; the launcher refused to serve.
_USAGE, _REFUSED = 2, 3


def _reply(channel: io.BufferedWriter, message: dict[str, object]) -> None:
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
    except Exception:  # noqa: BLE001
        return False


def _gpus_visible(torch: ModuleType | None) -> bool:
    """Whether this host has a CUDA device, asked through NVML (which leaves forks usable); True
    when that cannot be told (no such function in this torch)."""
    count = getattr(getattr(torch, "cuda", None), "_device_count_nvml", None)
    if not callable(count):
        return True
    try:
        # -1: no NVML, so no NVIDIA driver
        return count() not in (0, -1)
    # an unexpected torch: assume a GPU, and check the fork
    except Exception:  # noqa: BLE001
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
        # the child must never return into the launcher
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)


def preload(modules: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """Import ``modules``; ``(imported, {module: reason})``. Never raises for an import."""
    import importlib

    imported: list[str] = []
    failed: dict[str, str] = {}
    for name in modules:
        try:
            importlib.import_module(name)
        # SystemExit at import must not end the launcher
        except BaseException as exc:  # noqa: BLE001
            failed[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        else:
            imported.append(name)
    return imported, failed


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    except OSError:
        return None


class _Run:
    """One run's fork and the children it asked for (:mod:`shims.child`), watched until it ends."""

    def __init__(
        self, pid: int, channel: socket.socket, serving: tuple[Closable, ...], fresh: Fresh
    ) -> None:
        self.pid, self.serving, self.fresh = pid, serving, fresh
        # None once the run closed its end
        self.channel: socket.socket | None = channel
        # pid -> (request id, pidfd or None)
        self.children: dict[int, tuple[int | None, int | None]] = {}
        self.buffer = b""

    def wait(self, timeout: float | None) -> tuple[int, bool]:
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
        channel = self.channel
        if channel is None:
            return
        try:
            chunk = channel.recv(65536)
        except OSError:
            chunk = b""
        # the run closed its end (or exited): no more requests
        if not chunk:
            channel.close()
            self.channel = None
            return
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                # what the run's shims.child sends; a run's own code could send anything
                request: Request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                self._start_child(request)

    def _start_child(self, request: Request) -> None:
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

    def _say(self, message: dict[str, object]) -> None:
        if self.channel is None:
            return
        # the run is gone; its children end with it
        with contextlib.suppress(OSError):
            self.channel.sendall((json.dumps(message) + "\n").encode("utf-8"))


def serve(requests: io.BufferedReader, replies: io.BufferedWriter, fresh: Fresh) -> None:
    """Answer requests until stdin closes."""
    import socket

    for line in requests:
        if not line.strip():
            continue
        request: Request = json.loads(line)
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


def main(argv: Sequence[str] | None = None) -> int:
    parsed = _arguments(list(sys.argv[1:] if argv is None else argv))
    if isinstance(parsed, str):
        print(parsed, file=sys.stderr)
        return _USAGE
    modules, targets = parsed
    requests, replies = _protocol_streams()
    fresh = _fresh_state()
    started = time.monotonic()
    imported, failed = _preload_frozen(modules)
    refusal = _refusal(modules)
    if refusal is not None:
        _reply(replies, {"ready": False, "error": refusal})
        return _REFUSED
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
            # what a module of the same name beside a reproducer cannot shadow in a fork
            "modules": sorted({name.partition(".")[0] for name in sys.modules}),
        },
    )
    serve(requests, replies, fresh)
    return 0


def _arguments(args: list[str]) -> tuple[list[str], list[str]] | str:
    """``(modules to preload, target modules)`` from the command line, or the usage line."""
    modules: list[str] = []
    targets: list[str] = []
    while args:
        flag = args.pop(0)
        if flag in ("--preload", "--targets") and args:
            (modules if flag == "--preload" else targets).extend(
                p for p in args.pop(0).split(",") if p
            )
        else:
            return (
                "usage: python -m shims.launcher [--preload MODULE,…] [--targets MODULE,…] (got "
                f"{flag!r})"
            )
    return modules, targets


def _protocol_streams() -> tuple[io.BufferedReader, io.BufferedWriter]:
    """The protocol gets its own descriptors; whatever a preloaded package prints goes to
    stderr."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    return requests, replies


def _fresh_state() -> Fresh:
    """What every fork gets back of a fresh interpreter, read before any preload changes it."""
    import signal
    import warnings

    signals: dict[int, Handler] = {}
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        handler = signal.getsignal(number)
        if handler is not None:
            signals[number] = handler
    return {
        "warnings": list(warnings.filters),
        "signals": signals,
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
        "errors": getattr(sys.stdout, "errors", None) or "strict",
    }


def _preload_frozen(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    """:func:`preload`, with the collector off, then what it made frozen (``gc.freeze``)."""
    # Children get the request's environment, so this reaches only the preloads' own checks.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import gc

    # importing allocates far more than it frees: a collection now is wasted work
    gc.disable()
    imported, failed = preload(modules)
    # what the preloads made is never collected here, so forks leave its pages shared
    gc.freeze()
    gc.enable()
    return imported, failed


def _refusal(modules: list[str]) -> str | None:
    """Why this launcher must not serve after importing ``modules`` (each fork would differ from
    a fresh interpreter where it matters), or None."""
    if _cuda_initialised():
        return (
            f"importing {', '.join(modules)} initialised CUDA: a fork of this "
            "process could not use the GPU; run these reproducers with --isolation process"
        )
    if _fork_unusable():
        return (
            f"importing {', '.join(modules)} left torch unable to use CUDA in "
            "a fork (it asked the CUDA runtime whether a GPU exists); run these reproducers "
            "with --isolation process"
        )
    if "shims" in sys.modules and getattr(sys.modules["shims"], "_activated", False):
        return (
            f"importing {', '.join(modules)} activated the shims: a without-shim run would see them"
        )
    return None


if __name__ == "__main__":
    raise SystemExit(main())
