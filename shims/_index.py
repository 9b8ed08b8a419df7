"""The index: what activation needs from each manifest, cached so no TOML is parsed per process.

Private to the runtime (``shims/__init__.py``). An entry is a plain tuple (what the marshal cache
stores, :mod:`shims._entry`): id, target module, distribution, fix class, env pairs, has patch.py,
error or ``None``.
The cache lives in the state folder of the project that holds the catalogue
(``.patchlane/cache/shims-index/``, never in the catalogue: a shop commits that folder) or else in
the user's cache folder; it is keyed by every manifest's size and mtime and by the validators' own
mtimes.
"""

import os
import sys
from stat import S_ISREG

from shims import catalogue
from shims._entry import ERROR, ID, Entry

#: One shim folder as the stamp sees it: name, manifest mtime and size, has patch.py.
_Scanned = tuple[str, int, int, bool]
#: What a cached index depends on: format, the validators' mtimes, then every scanned folder.
_Stamp = tuple[object, ...]

_INDEX_FORMAT = 3
#: The modules that validate manifests: the cached index depends on them.
_PARSER_MODULES = ("manifest.py", "model.py", "tomlreader.py", "filereading.py", "errors.py")
_UNCACHEABLE = "cannot validate manifests in this environment: "


def load(package_path: list[str], project: str | None = None) -> tuple[list[Entry], list[str]]:
    """Index entries for every shim of the catalogue, sorted by id (first root wins a clash), and
    the roots looked at.

    Each root is put on ``package_path`` (the ``shims`` package's ``__path__``) right after the
    runtime's own folder, so ``shims.<id>.patch`` imports from it and no shim can shadow a
    runtime module. Raises :class:`~shims.errors.InputError` for a bad ``patchlane.toml``.
    """
    roots = extend_path(package_path, project)
    entries: dict[str, Entry] = {}
    for root in roots:
        for entry in _root_index(root):
            if entry[ID] in entries:
                continue
            entries[entry[ID]] = entry
    return [entries[key] for key in sorted(entries)], roots


def unfound(roots: list[str]) -> str | None:
    """Why there is no catalogue at all — where it looked — or ``None`` when one of ``roots`` is a
    folder (an empty catalogue is a catalogue)."""
    if any(os.path.isdir(root) for root in roots):
        return None
    if os.environ.get(catalogue.PATH_ENV):
        return (
            f"no shim catalogue: ${catalogue.PATH_ENV} names {os.pathsep.join(roots)}, "
            f"which is no folder"
        )
    if roots:
        return f"no shim catalogue: {roots[0]} (from patchlane.toml) is no folder"
    return (
        f"no shim catalogue: ${catalogue.PATH_ENV} is unset and there is no "
        f"{catalogue.CONFIG_NAME} in {os.getcwd()} or above"
    )


def extend_path(package_path: list[str], project: str | None = None) -> list[str]:
    """Put the catalogue's roots on ``package_path`` after the runtime's own folder; returns the
    roots."""
    roots = catalogue.roots(project)
    for root in reversed(roots):
        if root not in package_path:
            package_path.insert(1, root)
    return roots


def _root_index(root: str) -> list[Entry]:
    scanned = _scan(root)
    if scanned is None:
        return []
    stamp = _stamp(scanned)
    cache_files = _cache_files(root)
    for cache_file in cache_files:
        cached = _read_cache(cache_file)
        if cached is not None and cached.get("stamp") == stamp:
            entries = cached.get("entries")
            # written by _write_cache below for this very stamp: the entries as they were built
            if isinstance(entries, tuple):
                return list(entries)
    # a guard (a retired shim's reproducer) is nothing to activate
    built = [e for name, *_ in scanned if (e := _index_entry(root, name)) is not None]
    if any((error := entry[ERROR]) and error.startswith(_UNCACHEABLE) for entry in built):
        # a problem of this environment, not of the manifests: don't remember it
        return built
    for cache_file in cache_files:
        if _write_cache(cache_file, {"stamp": stamp, "entries": tuple(built)}):
            break
    return built


def _scan(root: str) -> list[_Scanned] | None:
    """Every shim folder of ``root`` with a manifest, sorted by name; None if ``root`` cannot be
    listed.

    Two ``stat`` calls per shim, relative to the open folder (no path walk each): on a busy host
    the system calls are most of what an untouched shim costs a process.
    """
    relative = os.stat in os.supports_dir_fd
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if relative else None
    except OSError:
        return None
    prefix = "" if relative else root + os.sep
    try:
        names = sorted(os.listdir(root if fd is None else fd))
        scanned = []
        for name in names:
            if name.startswith((".", "_")):
                continue
            try:
                # a plain file (not a folder) fails here too: NotADirectoryError
                info = os.stat(f"{prefix}{name}/manifest.toml", dir_fd=fd)
            except OSError:
                continue
            try:
                has_patch = S_ISREG(os.stat(f"{prefix}{name}/patch.py", dir_fd=fd).st_mode)
            except OSError:
                has_patch = False
            scanned.append((name, info.st_mtime_ns, info.st_size, has_patch))
        return scanned
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)


def _stamp(scanned: list[_Scanned]) -> _Stamp:
    """What the cached index depends on: every manifest's size and mtime, and patch.py's
    presence."""
    here = os.path.dirname(os.path.abspath(__file__))
    parser_mtimes = []
    # a changed validator re-validates every manifest
    for module in _PARSER_MODULES:
        try:
            parser_mtimes.append(os.stat(os.path.join(here, module)).st_mtime_ns)
        except OSError:
            parser_mtimes.append(0)
    return (_INDEX_FORMAT, tuple(parser_mtimes), *scanned)


def _index_entry(root: str, name: str) -> Entry | None:
    # The slow path (a cache miss): the full validator, imported only now.
    try:
        from shims.errors import InputError
        from shims.manifest import load_manifest
    # e.g. packaging missing from a hand-made env: report, don't crash
    except ImportError as exc:
        return (
            name,
            "",
            "",
            "",
            (),
            False,
            f"{_UNCACHEABLE}{exc} — install patchlane (or packaging) here",
        )

    folder = os.path.join(root, name)
    has_patch = os.path.isfile(os.path.join(folder, "patch.py"))
    try:
        manifest = load_manifest(os.path.join(folder, "manifest.toml"), check_files=False)
    except InputError as exc:
        return (name, "", "", "", (), has_patch, str(exc))
    if manifest.guard is not None:
        return None
    return (
        manifest.id,
        manifest.target.module,
        manifest.target.distribution,
        manifest.fix_class,
        manifest.env,
        has_patch,
        None,
    )


def _cache_files(root: str) -> list[str]:
    """Where the index of ``root`` is cached: the state folder of the project that holds it
    (``.patchlane/``, never committed), then the user's cache folder (a read-only project, or a
    catalogue outside any project such as a training image's)."""
    key = "".join(ch if ch.isalnum() else "_" for ch in root).strip("_")[-120:]
    name = f"{key}.{sys.implementation.cache_tag}.marshal"
    files = []
    project = catalogue.find_project(root)
    if project is not None:
        files.append(os.path.join(project, ".patchlane", "cache", "shims-index", name))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    files.append(os.path.join(base, "patchlane", "shims-index", name))
    return files


def _read_cache(path: str) -> dict[str, object] | None:
    import marshal

    try:
        with open(path, "rb") as handle:
            # one read, then loads: marshal.load on a file object reads it in tiny pieces (~10x)
            data = marshal.loads(handle.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def _write_cache(path: str, data: dict[str, object]) -> bool:
    import marshal

    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            marshal.dump(data, handle)
        # atomic: concurrent processes never read half an index
        os.replace(temporary, path)
        return True
    except OSError:
        # only on this rare path: contextlib would pull functools and collections into activation
        import contextlib

        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return False
