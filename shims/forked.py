"""In a fork of the launcher (shims/launcher.py): become ``python <path> <args>`` or ``python -c
<code> <args>`` — a new session, the request's output files, environment, working directory,
``sys.argv``, ``sys.path``, warning filters and signal handlers — run it, and exit with the code
the interpreter would. Standard library only."""

from __future__ import annotations

import contextlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import io
    import signal
    import socket
    from collections.abc import Callable, Sequence
    from types import FrameType
    from typing import Protocol, Required, TypedDict

    #: A signal handler as ``signal.getsignal`` returns it (``None`` left out).
    Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers

    class Request(TypedDict, total=False):
        """What to become: a run (the engine's request) or a run's child (:mod:`shims.child`)."""

        id: int
        # a script's path; or the code of ``python -c``, then no path
        path: str
        code: str
        args: list[str]
        # the whole environment (absent or None: the launcher's)
        env: dict[str, str] | None
        cwd: str | None
        stdout: Required[str]
        stderr: Required[str]
        timeout: float | None
        # site folders imported from before the launcher's own (bisection)
        sys_path_first: list[str]
        # target modules the engine asks about (the launcher's ready message)
        targets: list[str]
        # modules a run's child must import itself (shims.child)
        fresh: list[str]

    class Fresh(TypedDict):
        """What a fresh interpreter starts with and a fork must get back, read in the launcher
        before any preload (a plain dict at run time: the launcher imports nothing it needn't)."""

        # the entries of warnings.filters
        warnings: list[object]
        signals: dict[int, Handler]
        # sys.stdout's encoding and errors
        encoding: str
        errors: str

    class Closable(Protocol):
        """A descriptor the launcher holds: its protocol streams, a run's socket."""

        def close(self) -> None: ...


__all__ = ["become", "kill_group"]


# The interpreter's own start-up path (the launcher imports this module before any preload).
_STARTUP_PATH = list(sys.path)


def kill_group(pid: int | None) -> None:
    """Kill a forked run and whatever it started: become() made it the leader of its own session,
    so its process group is theirs too. A process already gone is not an error."""
    import signal

    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # not (or no longer) a group leader: the process itself
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _exit_code(code: object) -> int:
    """What ``python script.py`` exits with after ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    # the interpreter prints it however it can; a broken stderr must not change the code
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _text_stream(
    fd: int, encoding: str, errors: str, *, unbuffered: bool, line: bool
) -> io.TextIOWrapper:
    import io

    raw = io.FileIO(fd, "w", closefd=False)
    binary = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        binary, encoding=encoding, errors=errors, line_buffering=line, write_through=unbuffered
    )


def become(
    request: Request,
    channels: Sequence[Closable | None],
    fresh: Fresh,
    run_channel: socket.socket | None = None,
) -> None:
    """In the forked child: become ``python <path> <args>`` (or ``python -c <code> <args>``)
    and never return. ``run_channel``: a run's end of its socket pair for :mod:`shims.child`."""
    code = 1
    try:
        os.setsid()
        for channel in channels:
            if channel is not None:
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
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, handler)
        env = request.get("env")
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        import io

        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=fresh["encoding"])
        sys.stdout = _text_stream(
            1, fresh["encoding"], fresh["errors"], unbuffered=unbuffered, line=False
        )
        sys.stderr = _text_stream(
            2, fresh["encoding"], "backslashreplace", unbuffered=unbuffered, line=True
        )
        # A fresh interpreter's sys.__stdin__ (and the others) are its streams too. Type checkers
        # hold them final; a fork that becomes a new program rebinds them all the same.
        vars(sys).update(__stdin__=sys.stdin, __stdout__=sys.stdout, __stderr__=sys.stderr)
        cwd = request.get("cwd")
        if cwd:
            os.chdir(cwd)
        source = request.get("code")
        path = None if source is not None else os.path.abspath(request["path"])
        _fresh_path(path, request, fresh)
        sys.argv = ["-c" if path is None else request["path"], *request.get("args", [])]
        if "warnings" in sys.modules:
            warnings = sys.modules["warnings"]
            warnings.filters[:] = fresh["warnings"]
            warnings._filters_mutated()
        if run_channel is not None and "shims.child" in sys.modules:
            # The run's channel to the launcher, where the run's shims.child reads it. Set through
            # the module's namespace: importing shims.child here would close an import circle.
            vars(sys.modules["shims.child"]).update(_channel=run_channel, _owner=os.getpid())
        code = _run(path, source)
    # the child must end here, whatever happened
    except BaseException:  # noqa: BLE001
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _fresh_path(path: str | None, request: Request, fresh: Fresh) -> None:
    """``sys.path`` as ``python <path>`` would start with: the script's folder first (``""``
    for ``-c``), then this run's ``PYTHONPATH`` entries, then the candidate's site folders
    (``sys_path_first``)."""
    import importlib

    pythonpath = [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    first: list[str] = []
    if request.get("sys_path_first"):
        import site

        before = list(sys.path)
        for folder in request["sys_path_first"]:
            # runs the folder's .pth files, as a venv's site-packages would
            site.addsitedir(folder)
        first = [p for p in sys.path if p not in before]
    rest = [p for p in _STARTUP_PATH[1:] if p not in first and p not in pythonpath]
    # Where a venv's own site-packages would be: after the standard library, before the base's.
    at = next(
        (
            i
            for i, p in enumerate(rest)
            if os.path.basename(p) in ("site-packages", "dist-packages")
        ),
        len(rest),
    )
    sys.path[:] = [
        "" if path is None else os.path.dirname(path),
        *dict.fromkeys(pythonpath),
        *rest[:at],
        *first,
        *rest[at:],
    ]
    importlib.invalidate_caches()


def _run(path: str | None, source: str | None) -> int:
    """Run the script at ``path``, else ``source`` as ``python -c`` does; the exit code."""
    import runpy

    code = 0
    try:
        if path is not None:
            runpy.run_path(path, run_name="__main__")
        # what ``python -c`` does: the code runs as a new ``__main__``
        elif source is not None:
            import types

            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            # The run's own child program, as the interpreter runs ``-c``: lane code, like the run.
            exec(compile(source, "<string>", "exec"), main.__dict__)  # noqa: S102
    except SystemExit as exc:
        code = _exit_code(exc.code)
    # what an uncaught exception does to ``python script.py``
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    _shut_down()
    return code


def _shut_down() -> None:
    """A fresh interpreter's shutdown: wait for non-daemon threads, then the atexit handlers."""
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        with contextlib.suppress(BaseException):
            threading._shutdown()
    with contextlib.suppress(BaseException):
        import atexit

        atexit._run_exitfuncs()
