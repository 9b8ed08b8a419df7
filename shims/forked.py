"""In a fork of the launcher (shims/launcher.py): become ``python <path> <args>`` or ``python -c
<code> <args>`` — a new session, the request's output files, environment, working directory,
``sys.argv``, ``sys.path``, warning filters and signal handlers — run it, and exit with the code
the interpreter would. Standard library only."""

import os
import sys

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
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


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
    return io.TextIOWrapper(
        binary, encoding=encoding, errors=errors, line_buffering=line, write_through=unbuffered
    )


def become(request: dict, channels: tuple, fresh: dict, run_channel=None) -> None:
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

        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.FileIO(0, "r", closefd=False), encoding=fresh["encoding"]
        )
        sys.stdout = sys.__stdout__ = _text_stream(
            1, fresh["encoding"], fresh["errors"], unbuffered=unbuffered, line=False
        )
        sys.stderr = sys.__stderr__ = _text_stream(
            2, fresh["encoding"], "backslashreplace", unbuffered=unbuffered, line=True
        )
        if request.get("cwd"):
            os.chdir(request["cwd"])
        source = request.get("code")
        path = None if source is not None else os.path.abspath(request["path"])
        _fresh_path(path, request, fresh)
        sys.argv = ["-c" if path is None else request["path"], *request.get("args", [])]
        if "warnings" in sys.modules:
            warnings = sys.modules["warnings"]
            warnings.filters[:] = fresh["warnings"]
            warnings._filters_mutated()
        if run_channel is not None and "shims.child" in sys.modules:
            children = sys.modules["shims.child"]
            children._channel, children._owner = run_channel, os.getpid()
        code = _run(path, source)
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


def _fresh_path(path, request: dict, fresh: dict) -> None:
    """``sys.path`` as ``python <path>`` would start with: the script's folder first (``""``
    for ``-c``), then this run's ``PYTHONPATH`` entries, then the candidate's site folders
    (``sys_path_first``)."""
    import importlib

    pythonpath = [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    first = []
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


def _run(path, source=None) -> int:
    import runpy

    code = 0
    try:
        if source is None:
            runpy.run_path(path, run_name="__main__")
        # what ``python -c`` does: the code runs as a new ``__main__``
        else:
            import types

            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            # The run's own child program, as the interpreter runs ``-c``: lane code, like the run.
            exec(compile(source, "<string>", "exec"), main.__dict__)
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
