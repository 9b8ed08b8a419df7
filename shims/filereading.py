"""Reading a file people point patchlane at, safely: never a block, never too much, never a
traceback.

:func:`read_bytes` and :func:`read_text` refuse what is not a regular file before opening it (a
FIFO would block a reader forever, a folder or a device is never meant), opens without blocking
should the path have changed since, refuses more than :data:`MAX_BYTES` and names the line of bad
UTF-8. Every problem is one :class:`~shims.errors.InputError`. Standard library only: the shim
runtime uses it too, at activation — so it imports nothing but ``os`` and ``stat`` (loaded with
``os`` anyway) until there is an error to raise.
"""

import os
import stat

# Annotations only: shims.errors is imported on the error path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from shims.errors import InputError

__all__ = ["MAX_BYTES", "read_bytes", "read_text", "too_large"]

#: The largest file read (a hand-written lane file or manifest is a few KiB).
MAX_BYTES = 1 << 20


def read_bytes(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    missing_ok: bool = False,
    max_bytes: int = MAX_BYTES,
) -> bytes | None:
    """The bytes of ``path`` (named ``name`` in errors); ``None`` for a missing file if
    ``missing_ok``."""
    name = os.fspath(path) if name is None else name
    try:
        _regular(os.stat(path).st_mode, name)
        # O_NONBLOCK: should the path have become a FIFO since the stat, opening it never waits.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as handle:
            _regular(os.fstat(fd).st_mode, name)
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise _error(name, "file not found", "create it or fix the path") from None
    # ValueError: a NUL in the path
    except (OSError, ValueError) as exc:
        raise _error(
            name, f"cannot read: {getattr(exc, 'strerror', None) or exc}", "check the file"
        ) from None
    if len(data) > max_bytes:
        raise too_large(name, max_bytes)
    return data


def read_text(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    missing_ok: bool = False,
    max_bytes: int = MAX_BYTES,
) -> str | None:
    """The text of ``path`` (named ``name`` in errors); ``None`` for a missing file if
    ``missing_ok``.

    Newlines are read as ``open()`` reads them (``\\r\\n`` and ``\\r`` become ``\\n``).
    """
    name = os.fspath(path) if name is None else name
    data = read_bytes(path, name, missing_ok=missing_ok, max_bytes=max_bytes)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _error(
            name,
            f"not UTF-8 text at line {line} (byte {data[exc.start]:#04x})",
            "save the file as UTF-8",
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _regular(mode: int, name: str) -> None:
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise _error(name, f"not a regular file ({kind})", "point it at a file")


def _error(name: str, problem: str, fix: str) -> "InputError":
    """The one input-error type, imported only when there is an error to raise."""
    from shims.errors import InputError

    return InputError(name, None, problem, fix)


def too_large(name: str, max_bytes: int) -> "InputError":
    return _error(
        name,
        f"larger than {max_bytes // 1024} KiB",
        "a hand-written file is far smaller: check it is the right file",
    )
