"""The index: what activation needs from each manifest, cached so no TOML is parsed per process.

Private to the runtime (``shims/__init__.py``). An entry is a plain tuple (what the marshal cache
stores, :mod:`shims._entry`): id, target module, distribution, fix class, env pairs, has patch.py,
error or ``None``.
The cache lives next to the manifests (``__pycache__``) or, for read-only catalogues, in the user's
cache folder; it is keyed by every manifest's size and mtime and by the validators' own mtimes.
"""

import os
import sys

from shims import catalogue
from shims._entry import ERROR, ID, Entry

#: One shim folder as the stamp sees it: name, manifest mtime and size, has patch.py.
_Scanned = tuple[str, int, int, bool]
#: What a cached index depends on: format, the validators' mtimes, then every scanned folder.
_Stamp = tuple[object, ...]

_INDEX_FORMAT = 2
#: The modules that validate manifests: the cached index depends on them.
_PARSER_MODULES = ("manifest.py", "model.py", "tomlreader.py", "filereading.py", "errors.py")
_UNCACHEABLE = "cannot validate manifests in this environment: "


def load(package_path: list[str], project: str | None = None) -> list[Entry]:
    """Index entries for every shim of the catalogue, sorted by id (first root wins a clash).

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
    return [entries[key] for key in sorted(entries)]


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
    built = [_index_entry(root, name) for name, *_ in scanned]
    if any((error := entry[ERROR]) and error.startswith(_UNCACHEABLE) for entry in built):
        # a problem of this environment, not of the manifests: don't remember it
        return built
    for cache_file in cache_files:
        if _write_cache(cache_file, {"stamp": stamp, "entries": tuple(built)}):
            break
    return built


def _scan(root: str) -> list[_Scanned] | None:
    """Every shim folder of ``root`` with a manifest, sorted by name; None if ``root`` cannot be
    listed."""
    try:
        scan = sorted(os.scandir(root), key=lambda item: item.name)
    except OSError:
        return None
    scanned = []
    for item in scan:
        if item.name.startswith((".", "_")) or not item.is_dir():
            continue
        try:
            info = os.stat(os.path.join(item.path, "manifest.toml"))
        except OSError:
            continue
        has_patch = os.path.isfile(os.path.join(item.path, "patch.py"))
        scanned.append((item.name, info.st_mtime_ns, info.st_size, has_patch))
    return scanned


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


def _index_entry(root: str, name: str) -> Entry:
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
    name = f"patchlane-index.{sys.implementation.cache_tag}.marshal"
    files = [os.path.join(root, "__pycache__", name)]
    # Read-only installs (site-packages owned by root): fall back to the user's cache folder.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = "".join(ch if ch.isalnum() else "_" for ch in root).strip("_")[-120:]
    files.append(os.path.join(base, "patchlane", f"{key}.{name}"))
    return files


def _read_cache(path: str) -> dict[str, object] | None:
    import marshal

    try:
        with open(path, "rb") as handle:
            data = marshal.load(handle)
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
