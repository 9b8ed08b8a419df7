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
torch's "bad fork" state — if it is, it refuses, and the lane runs with one interpreter per run. A preload that fails to
import is reported and skipped: the run imports it itself and fails the way a fresh interpreter
would. ``sys_path_first`` (bisection) puts a candidate's site folder before everything but the
script's own folder, so the child imports the candidate's version of a distribution that the
launcher did not preload.
"""

import json
import os
import sys
import time

__all__ = ["main"]

_STARTUP_PATH = list(sys.path)


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
    except Exception:  # a half-imported torch: it did not get as far as a CUDA context
        return False


def _gpus_visible(torch) -> bool:
    """Whether this host has a CUDA device, asked through NVML (which leaves forks usable); True
    when that cannot be told (no such function in this torch)."""
    count = getattr(getattr(torch, "cuda", None), "_device_count_nvml", None)
    if not callable(count):
        return True
    try:
        return count() not in (0, -1)  # -1: no NVML, so no NVIDIA driver
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


def _exit_code(code) -> int:
    """What ``python script.py`` exits with after ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _text_stream(fd: int, encoding: str, errors: str, *, unbuffered: bool, line: bool):
    import io

    raw = io.FileIO(fd, "w", closefd=False)
    binary = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(binary, encoding=encoding, errors=errors, line_buffering=line,
                            write_through=unbuffered)


def _child(request: dict, channels: tuple, fresh: dict) -> None:
    """In the forked child: become ``python <path> <args>`` and never return."""
    code = 1
    try:
        os.setsid()
        for channel in channels:
            channel.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        import signal

        for number, handler in fresh["signals"].items():
            try:
                signal.signal(number, handler)
            except (OSError, ValueError):
                pass
        env = request.get("env")
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        import io

        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=fresh["encoding"])
        sys.stdout = sys.__stdout__ = _text_stream(1, fresh["encoding"], fresh["errors"], unbuffered=unbuffered,
                                                   line=False)
        sys.stderr = sys.__stderr__ = _text_stream(2, fresh["encoding"], "backslashreplace", unbuffered=unbuffered,
                                                   line=True)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        path = os.path.abspath(request["path"])
        _fresh_path(path, request, fresh)
        sys.argv = [request["path"], *request.get("args", [])]
        if "warnings" in sys.modules:
            warnings = sys.modules["warnings"]
            warnings.filters[:] = fresh["warnings"]
            warnings._filters_mutated()
        code = _run(path)
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _fresh_path(path: str, request: dict, fresh: dict) -> None:
    """``sys.path`` as ``python <path>`` would start with: the script's folder first, then this
    run's ``PYTHONPATH`` entries, then the candidate's site folders (``sys_path_first``)."""
    import importlib

    pythonpath = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    first = []
    if request.get("sys_path_first"):
        import site

        before = list(sys.path)
        for folder in request["sys_path_first"]:
            site.addsitedir(folder)  # runs the folder's .pth files, as a venv's site-packages would
        first = [p for p in sys.path if p not in before]
    rest = [p for p in _STARTUP_PATH[1:] if p not in first and p not in pythonpath]
    # Where a venv's own site-packages would be: after the standard library, before the base's.
    at = next((i for i, p in enumerate(rest) if os.path.basename(p) in ("site-packages", "dist-packages")), len(rest))
    sys.path[:] = [os.path.dirname(path), *dict.fromkeys(pythonpath), *rest[:at], *first, *rest[at:]]
    importlib.invalidate_caches()


def _run(path: str) -> int:
    import runpy

    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to ``python script.py``
        import traceback

        traceback.print_exc()
        code = 1
    # A fresh interpreter's shutdown: wait for non-daemon threads, then the atexit handlers.
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    return code


def _wait(pid: int, timeout) -> tuple:
    """``(exit code as subprocess reports it, timed out)``; past ``timeout`` the group is killed."""
    import signal

    timed_out = False
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                break
            if pidfd is not None:
                import select

                select.select([pidfd], [], [], left)
            else:
                time.sleep(0.005 if left is None else min(0.005, left))
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return os.waitstatus_to_exitcode(status), timed_out


def serve(requests, replies, fresh: dict) -> None:
    """Answer requests until stdin closes."""
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        began = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(request, (requests, replies), fresh)
        _reply(replies, {"id": request.get("id"), "pid": pid})
        code, timed_out = _wait(pid, request.get("timeout"))
        _reply(replies, {"id": request.get("id"), "exit": code, "timed_out": timed_out,
                         "seconds": round(time.monotonic() - began, 6)})


def main(argv=None) -> int:
    import signal
    import warnings

    args = list(sys.argv[1:] if argv is None else argv)
    modules, targets = [], []
    while args:
        flag = args.pop(0)
        if flag in ("--preload", "--targets") and args:
            (modules if flag == "--preload" else targets).extend(p for p in args.pop(0).split(",") if p)
        else:
            print(f"usage: python -m shims.launcher [--preload MODULE,…] [--targets MODULE,…] (got {flag!r})",
                  file=sys.stderr)
            return 2
    # The protocol gets its own descriptors; whatever a preloaded package prints goes to stderr.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    fresh = {
        "warnings": list(warnings.filters),
        "signals": {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
                    if signal.getsignal(number) is not None},
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
        "errors": getattr(sys.stdout, "errors", None) or "strict",
    }
    started = time.monotonic()
    # Children get the request's environment, so this reaches only the preloads' own checks.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    imported, failed = preload(modules)
    if _cuda_initialised():
        _reply(replies, {"ready": False, "error": f"importing {', '.join(modules)} initialised CUDA: a fork of this "
                         "process could not use the GPU; run these reproducers with --isolation process"})
        return 3
    if _fork_unusable():
        _reply(replies, {"ready": False, "error": f"importing {', '.join(modules)} left torch unable to use CUDA in "
                         "a fork (it asked the CUDA runtime whether a GPU exists); run these reproducers with "
                         "--isolation process"})
        return 3
    if "shims" in sys.modules and getattr(sys.modules["shims"], "_activated", False):
        _reply(replies, {"ready": False, "error": f"importing {', '.join(modules)} activated the shims: "
                         "a without-shim run would see them"})
        return 3
    _reply(replies, {"ready": True, "pid": os.getpid(), "preloaded": imported, "failed": failed,
                     "seconds": round(time.monotonic() - started, 6),
                     "targets_loaded": [t for t in targets if t in sys.modules], "threads": _native_threads()})
    serve(requests, replies, fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
