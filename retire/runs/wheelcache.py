"""Built wheels of a target at a commit, kept on disk so that a candidate built once is never built
again: not by a rerun of the bisection, nor by another shim's bisection over the same range.

An entry is keyed by what makes the wheel (:class:`WheelKey`: the repository, the commit, the
build — uv's build or a named command, and the interpreter the wheel is for — and the package's
subdirectory) and lives in its own folder under ``.patchlane/cache/wheels/`` (``Project.
wheel_cache``): the wheel, and ``entry.json`` with the key, the wheel's name, size and sha256.
An entry is written whole into a temporary folder, then renamed into place: readers see all of it
or none. One that does not read back whole (a missing or altered wheel, a damaged ``entry.json``,
another key) is a miss, and is removed. The cache is bounded: after each write the least recently
used entries (by the mtime of ``entry.json``, refreshed on every hit) are removed until the whole
fits ``max_bytes``; a wheel larger than that is not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from retire.core.atomic import atomic_write, make_folder

__all__ = ["DEFAULT_MAX_BYTES", "ENTRY", "WheelCache", "WheelKey"]

#: How much the wheel cache may hold unless told otherwise (a few compiled wheels).
DEFAULT_MAX_BYTES = 4 << 30
#: The file that says what an entry holds.
ENTRY = "entry.json"
#: Bump when what an entry means changes, so old entries stop matching.
_VERSION = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class WheelKey:
    """What makes one wheel: ``build`` says how it was built and for which interpreter."""

    repository: str
    commit: str
    build: str
    subdirectory: str = ""

    def digest(self) -> str:
        blob = json.dumps([_VERSION, *asdict(self).values()], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


class WheelCache:
    """The wheels under ``root``, at most ``max_bytes`` of them."""

    def __init__(self, root: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes

    def _folder(self, key: WheelKey) -> Path:
        digest = key.digest()
        return self.root / digest[:2] / digest

    def get(self, key: WheelKey) -> Path | None:
        """The wheel kept for ``key``, or None; an entry that does not read back whole is
        removed."""
        folder = self._folder(key)
        entry = folder / ENTRY
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
            wheel = folder / _wheel_name(data["wheel"])
            whole = (
                data["key"] == asdict(key)
                and wheel.stat().st_size == data["size"]
                and _sha256(wheel) == data["sha256"]
            )
        except FileNotFoundError:
            if folder.is_dir():
                _remove(folder)
            return None
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            whole = False
        if not whole:
            _remove(folder)
            return None
        # most recently used: the last evicted
        with contextlib.suppress(OSError):
            os.utime(entry)
        return wheel

    def put(self, key: WheelKey, wheel: Path) -> Path | None:
        """Keep a copy of ``wheel`` for ``key``; the kept copy, or None when it is larger than
        the whole cache may be."""
        name = _wheel_name(wheel.name)
        size = wheel.stat().st_size
        if size > self.max_bytes:
            return None
        make_folder(self.root, within=self.root)
        staging = Path(tempfile.mkdtemp(prefix=".entry-", dir=self.root))
        try:
            shutil.copyfile(wheel, staging / name)
            entry = {"key": asdict(key), "wheel": name, "size": size, "sha256": _sha256(wheel)}
            atomic_write(staging / ENTRY, json.dumps(entry, indent=1), within=self.root)
            folder = self._folder(key)
            make_folder(folder.parent, within=self.root)
            if folder.exists():
                _remove(folder)
            try:
                os.rename(staging, folder)
            # another writer put the same wheel first: theirs is as good
            except OSError:
                if not (folder / ENTRY).is_file():
                    raise
        finally:
            _remove(staging)
        self.evict(keep=folder)
        return folder / name

    def entries(self) -> list[tuple[float, int, Path]]:
        """(last used, bytes, folder) of every entry, least recently used first."""
        found = []
        for entry in self.root.glob(f"??/*/{ENTRY}"):
            try:
                used = entry.stat().st_mtime
                size = sum(p.stat().st_size for p in entry.parent.iterdir())
            # removed meanwhile
            except OSError:
                continue
            found.append((used, size, entry.parent))
        return sorted(found)

    def evict(self, *, keep: Path | None = None) -> int:
        """Remove the least recently used entries (never ``keep``) until the rest fit
        ``max_bytes``; how many were removed."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, folder in entries:
            if total <= self.max_bytes:
                break
            if folder == keep:
                continue
            _remove(folder)
            total -= size
            removed += 1
        return removed


def _wheel_name(name: object) -> str:
    """``name`` as a wheel's file name, never a path."""
    if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"not a wheel's name: {name!r}")
    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        raise ValueError(str(exc)) from None
    return name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
