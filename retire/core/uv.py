"""The pinned uv binary, the one way to run it (:func:`run`), and the host's uv configuration
(where named indexes get their URLs)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retire.core import childenv, interrupts, tooltext, uvauth
from retire.core.errors import InputError, PatchlaneError

#: Held while the binary is looked up: ``find_uv_bin`` reads ``sysconfig``, whose first use fills
#: a shared table that another thread would read half-filled (``run --jobs 8`` over fresh lanes
#: crashed in it with ``"uv" + None``).
_LOOKUP = threading.Lock()


def binary() -> str:
    """The uv shipped with patchlane's pinned ``uv`` dependency; PATH only as a fallback. Looked
    up once per process, by one thread at a time."""
    with _LOOKUP:
        return _binary()


@functools.cache
def _binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise PatchlaneError(
                "uv is not installed: install patchlane's engine (pip install 'patchlane[engine]')"
            ) from None
        return found


@functools.cache
def version() -> str:
    proc = run(["--version"])
    if proc.returncode != 0 or len(proc.stdout.split()) < 2:
        raise PatchlaneError(
            f"uv --version failed: "
            f"{' / '.join(failure_lines(proc.stderr)) or f'exit {proc.returncode}'}"
        )
    return proc.stdout.split()[1]


# The caller's Python setup: it must not leak into lane interpreters (a GPU host's wrapper that
# puts carried packages on PYTHONPATH would otherwise be recorded as the base image's versions).
CALLER_PYTHON_ENV = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "__PYVENV_LAUNCHER__")

# The index settings uv reads from the environment. patchlane reads them itself (host_indexes)
# and passes the result explicitly, so a lane's own default index is never overridden by them.
INDEX_ENV = ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL")


def base_env(
    extra: dict[str, str] | None = None, *, without_indexes: bool = False, progress: bool = False
) -> dict[str, str]:
    """The environment uv runs in: what :func:`retire.core.childenv.for_uv` allows (no token but
    its index credentials), quiet (unless ``progress``), never downloading interpreters behind our
    back."""
    env = childenv.for_uv()
    if without_indexes:
        for name in INDEX_ENV:
            env.pop(name, None)
    if not progress:
        env.setdefault("UV_NO_PROGRESS", "1")
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # a lane's tools never see the caller's venv or paths by accident
    for name in CALLER_PYTHON_ENV:
        env.pop(name, None)
    # an interrupted run kills uv and its builds too
    env[childenv.RUN_TOKEN_ENV] = f"{childenv.RUN_TOKEN}.uv"
    if extra:
        env.update(extra)
    return env


def run(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    without_indexes: bool = False,
    live: bool = False,
    indexes: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``uv args…``: the pinned binary in :func:`base_env`, stdin closed, output captured as text.

    ``live`` also shows uv's stderr on this process's stderr as it comes, progress bars
    included (:func:`_run_live`); callers ask for it only when stderr is a terminal.
    uv's own failures come back as the exit code (callers explain them with
    :func:`failure_lines`); only a uv that cannot be started raises. ``indexes`` (name → URL)
    names indexes the command line does not (a lane's, for a sync of its lock), so the host's
    credentials for them reach uv (:mod:`retire.core.uvauth`).
    """
    # interrupted: the sweep that ended every uv has run, and no new one starts after it
    if interrupts.stopping():
        raise KeyboardInterrupt("interrupted")
    with uvauth.handed(os.environ, lambda: {**_indexes(args, cwd), **(indexes or {})}) as auth:
        if live and _PTY_OK:
            return _run_live(args, cwd=cwd, without_indexes=without_indexes, auth=auth)
        try:
            proc = subprocess.run(
                [binary(), *args],
                cwd=cwd,
                capture_output=True,
                text=True,
                env=base_env(auth.env, without_indexes=without_indexes),
                stdin=subprocess.DEVNULL,
                pass_fds=auth.pass_fds,
            )
        except OSError as exc:
            raise PatchlaneError(f"uv could not be started: {exc}") from None
        # what uv relays (an index's error page, a build's output) reaches people as plain text
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout, plain(proc.stderr)
        )


def _indexes(args: Sequence[str], cwd: str | os.PathLike[str] | None) -> dict[str, str]:
    """Index name → URL for one call's credentials: this host's named indexes, the call's own."""
    try:
        named = dict(host_indexes().named)
    # an unreadable uv.toml: uv says so itself
    except InputError:
        named = {}
    return {**named, **uvauth.call_indexes(args, cwd)}


try:
    import fcntl
    import pty
    import termios

    _PTY_OK = True
# not POSIX: no live view, output stays captured
except ImportError:
    _PTY_OK = False

#: Terminal output as the lines it leaves (:func:`retire.core.tooltext.plain`).
plain = tooltext.plain


def _echo(chunk: bytes) -> None:
    stream = sys.stderr
    if hasattr(stream, "buffer"):
        stream.flush()
        stream.buffer.write(chunk)
    # a text-only stderr (a test's capture): the bytes as text
    else:
        stream.write(chunk.decode(errors="replace"))
    stream.flush()


def _run_live(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    without_indexes: bool,
    auth: uvauth.Handed,
) -> subprocess.CompletedProcess[str]:
    """Run uv with its stderr on a pseudo-terminal copied to ours as it comes, so it draws its
    progress; the text comes back too, as :func:`plain` lines, for the caller to parse."""
    master, follower = pty.openpty()
    # the bars fit our terminal's width; no terminal (or no size) leaves uv's default
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fcntl.ioctl(
            follower,
            termios.TIOCSWINSZ,
            fcntl.ioctl(sys.stderr.fileno(), termios.TIOCGWINSZ, b"\0" * 8),
        )
    try:
        proc = subprocess.Popen(
            [binary(), *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=follower,
            stdin=subprocess.DEVNULL,
            env=base_env(auth.env, without_indexes=without_indexes, progress=True),
            pass_fds=auth.pass_fds,
        )
    except OSError as exc:
        os.close(master)
        raise PatchlaneError(f"uv could not be started: {exc}") from None
    finally:
        os.close(follower)
    out: list[bytes] = []
    # stdout=PIPE always gives a stream; without one there is nothing to read
    reader = threading.Thread(
        target=lambda: out.append(proc.stdout.read() if proc.stdout is not None else b""),
        daemon=True,
    )
    reader.start()
    seen = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            # EIO: uv closed its end
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            _echo(chunk)
    finally:
        os.close(master)
    code = proc.wait()
    reader.join()
    stdout = b"".join(out).decode(errors="replace")
    return subprocess.CompletedProcess(
        [binary(), *args], code, stdout, plain(seen.decode(errors="replace"))
    )


def failure_lines(stderr: str) -> list[str]:
    """What uv said went wrong: its stderr without blank lines and warnings, stripped."""
    return [
        line.strip()
        for line in stderr.splitlines()
        if line.strip() and not line.startswith("warning:")
    ]


def _config_files() -> list[Path]:
    """uv's user- and system-level configuration files, most specific first (as uv reads them)."""
    if os.environ.get("UV_CONFIG_FILE"):
        return [Path(os.environ["UV_CONFIG_FILE"])]
    if os.environ.get("UV_NO_CONFIG"):
        return []
    files = []
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    files.append(Path(config_home) / "uv" / "uv.toml")
    for folder in (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":"):
        files.append(Path(folder) / "uv" / "uv.toml")
    files.append(Path("/etc/uv/uv.toml"))
    return files


@dataclass(frozen=True)
class HostIndexes:
    """What this host's uv configuration says about indexes."""

    # name → URL, for lanes that name an index without a URL
    named: dict[str, str]
    # the default index, when the host replaces uv's own
    default: str | None


def host_indexes() -> HostIndexes:
    """Named indexes from ``UV_INDEX`` (``name=url`` entries) and uv.toml ``[[index]]`` tables,
    and the default index from ``UV_DEFAULT_INDEX`` / ``UV_INDEX_URL`` or uv.toml."""
    named: dict[str, str] = {}
    default = os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or None
    for entry in os.environ.get("UV_INDEX", "").split():
        name, sep, url = entry.partition("=")
        if sep and name and url:
            named.setdefault(name, url)
    for path in _config_files():
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        # ValueError: TOML or UTF-8
        except (OSError, ValueError, RecursionError) as exc:
            raise InputError(
                path, None, f"uv configuration is not readable ({exc})", "fix or remove the file"
            ) from None
        for index in data.get("index", []):
            if not (isinstance(index, dict) and isinstance(index.get("url"), str)):
                continue
            if isinstance(index.get("name"), str):
                named.setdefault(index["name"], index["url"])
            if index.get("default") is True and default is None:
                default = index["url"]
        pip = data.get("pip")
        for table in (data, pip if isinstance(pip, dict) else {}):
            if default is None and isinstance(table.get("index-url"), str):
                default = table["index-url"]
    return HostIndexes(named, default)


@functools.cache
def builtin_default_index() -> str | None:
    """The index uv uses when nothing configures one, as uv itself reports it.

    Asked of uv (``pip compile --emit-index-url`` of nothing; no network) rather than written
    here, so patchlane names no registry and follows uv if its default ever changes.
    """
    with tempfile.TemporaryDirectory(prefix="patchlane-uv-") as scratch:
        empty = Path(scratch, "empty.in")
        empty.write_text("", encoding="utf-8")
        proc = run(
            [
                "pip",
                "compile",
                str(empty),
                "--emit-index-url",
                "--no-header",
                "--quiet",
                "--no-config",
            ]
        )
    for line in proc.stdout.splitlines():
        if line.startswith("--index-url "):
            return line.split(None, 1)[1].strip()
    return None


def default_index() -> str | None:
    """The default index for probes: the host's uv configuration, else uv's own default."""
    return host_indexes().default or builtin_default_index()
