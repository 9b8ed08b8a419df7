"""The one place files are written: all or nothing, never half a lock or half a manifest, never
through a link.

Every write names the folder it must stay in (``within``: the project's root, or a folder the
user named outside it) and goes through the one containment check,
:func:`retire.core.project.contained`: a symbolic link anywhere below that folder on the way to
the file is refused in one line (:class:`~retire.core.errors.InputError`, exit 2), never
followed; so is a link at the file itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from retire.core.project import contained
from retire.core.secrets import scrub

__all__ = ["atomic_stream", "atomic_write", "locked", "make_folder", "stage"]

Folder = str | os.PathLike[str]


def _here(path: Folder) -> str:
    """A path a caller hands in, as Python reads one: relative to the working folder, never to
    ``within`` (``validation/manifest.jsonl`` within ``validation`` is not
    ``validation/validation/manifest.jsonl``)."""
    return os.path.abspath(path)


def make_folder(path: Folder, *, within: Folder) -> Path:
    """``path`` as a folder inside ``within`` (made with its parents when missing); a link below
    ``within`` on the way to it, ``path`` itself included, is one line, never followed.

    For folders other programs fill (lane envs, git worktrees, mirrors, wheelhouse parts)."""
    folder = contained(within, _here(path))
    folder.mkdir(parents=True, exist_ok=True)
    # made just now by someone else as a link: still refused
    return contained(within, folder)


def atomic_write(
    path: str | os.PathLike[str], data: str | bytes, *, within: Folder, encoding: str = "utf-8"
) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old file or the new one.

    ``path`` must stay inside ``within`` with no link below it on the way
    (:func:`make_folder`); the file's folders are made as needed.

    Text is scrubbed of every known secret first (:func:`retire.core.secrets.scrub`): reports,
    caches, manifests and locks are all written here, so none can carry a token. Bytes are
    written as given (wheels and other binary artifacts; callers redact what they know).
    The temporary file lives in the same folder (``os.replace`` is only atomic within one file
    system), is flushed to disk before the rename, and takes over the old file's permissions.
    """
    payload = scrub(data).encode(encoding) if isinstance(data, str) else data
    atomic_stream(path, (payload,), within=within)


def atomic_stream(path: Folder, blocks: Iterable[bytes], *, within: Folder) -> None:
    """:func:`atomic_write` of the bytes ``blocks`` yields, without holding them all (wheels,
    joined chunks). An exception from ``blocks`` (a hash that does not match) leaves the old
    file as it was."""
    target = contained(within, _here(path))
    temporary = _staged(target, blocks, within=within)
    try:
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise _named(exc, target) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _named(exc: OSError, target: Path) -> OSError:
    """``exc`` naming the file being written, not its temporary file nor nothing at all (a write
    past ``RLIMIT_FSIZE`` or onto a full disk says "File too large" with no file): every error
    line names its file."""
    # OSError(errno, …) is the subclass for that errno (FileNotFoundError, …), as raised
    return OSError(exc.errno, exc.strerror or str(exc), str(target))


def stage(path: Folder, data: str | bytes, *, within: Folder, encoding: str = "utf-8") -> Path:
    """The first half of :func:`atomic_write`: ``data`` (text scrubbed as there) in a temporary
    file beside ``path``, flushed to disk with the mode ``path`` would get. ``os.replace(it,
    path)`` is the write, which needs no space on the disk; the caller replaces or removes it.

    For writes of several files that must all happen or none (``shim new``): stage every file,
    then replace them, so a full disk stops the command before the first file changes."""
    target = contained(within, _here(path))
    payload = scrub(data).encode(encoding) if isinstance(data, str) else data
    return _staged(target, (payload,), within=within)


def _staged(target: Path, blocks: Iterable[bytes], *, within: Folder) -> Path:
    # say so by its name, not by the temporary file's
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(target))
    make_folder(target.parent, within=within)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        # what a plain open() would have created
        mode = 0o666 & ~umask
    try:
        descriptor, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise _named(exc, target) from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for block in blocks:
                handle.write(block)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise _named(exc, target) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return Path(temporary)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], *, within: Folder) -> Iterator[None]:
    """Hold an exclusive advisory lock for a read-modify-write of ``path`` across processes.

    The lock is taken on the file's folder (Linux and macOS can ``flock`` a directory), so no
    lock file is left beside committed files; writers of that folder take turns. The folder is
    made as :func:`make_folder` makes it (never through a link below ``within``).
    """
    folder = make_folder(contained(within, _here(path)).parent, within=within)
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
