"""The one place files are written: all or nothing, never half a lock or half a manifest."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from retire.core.secrets import scrub

__all__ = ["atomic_write", "locked"]


def atomic_write(
    path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8"
) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old file or the new one.

    Text is scrubbed of every known secret first (:func:`retire.core.secrets.scrub`): reports,
    caches, manifests and locks are all written here, so none can carry a token. Bytes are
    written as given (wheels and other binary artifacts; callers redact what they know).
    The temporary file lives in the same folder (``os.replace`` is only atomic within one file
    system), is flushed to disk before the rename, and takes over the old file's permissions.
    """
    target = Path(path)
    # say so by its name, not by the temporary file's
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = scrub(data).encode(encoding) if isinstance(data, str) else data
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        # what a plain open() would have created
        mode = 0o666 & ~umask
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive advisory lock for a read-modify-write of ``path`` across processes.

    The lock is taken on the file's folder (Linux and macOS can ``flock`` a directory), so no
    lock file is left beside committed files; writers of that folder take turns.
    """
    folder = Path(path).parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    # not POSIX: atomic replace still protects readers, not concurrent writers
    except ImportError:
        yield
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        # closing releases the lock
        os.close(descriptor)
