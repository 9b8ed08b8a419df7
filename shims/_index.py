"""The index: what activation needs from each manifest, cached so no TOML is parsed per process.

Private to the runtime (``shims/__init__.py``). An entry is a plain tuple (what the marshal cache
stores): id, target module, distribution, fix class, env pairs, has patch.py, error or ``None``.
The cache lives next to the manifests (``__pycache__``) or, for read-only catalogues, in the user's
cache folder; it is keyed by every manifest's size and mtime and by the validators' own mtimes.
"""

import os
import sys

from shims import _ERROR as ERROR
from shims import _ID as ID
from shims import catalogue

_INDEX_FORMAT = 2
#: The modules that validate manifests: the cached index depends on them.
_PARSER_MODULES = ("manifest.py", "model.py", "tomlreader.py", "filereading.py", "errors.py")
_UNCACHEABLE = "cannot validate manifests in this environment: "


def load(package_path: list, project: str | None = None) -> list[tuple]:
    """Index entries for every shim of the catalogue, sorted by id (first root wins a clash).

    Each root is put on ``package_path`` (the ``shims`` package's ``__path__``) right after the
    runtime's own folder, so ``shims.<id>.patch`` imports from it and no shim can shadow a
    runtime module. Raises :class:`~shims.errors.InputError` for a bad ``patchlane.toml``.
    """
    roots = extend_path(package_path, project)
    entries: dict[str, tuple] = {}
    for root in roots:
        for entry in _root_index(root):
            if entry[ID] in entries:
                continue
            entries[entry[ID]] = entry
    return [entries[key] for key in sorted(entries)]


def extend_path(package_path: list, project: str | None = None) -> list[str]:
    """Put the catalogue's roots on ``package_path`` after the runtime's own folder; returns the
    roots."""
    roots = catalogue.roots(project)
    for root in reversed(roots):
        if root not in package_path:
            package_path.insert(1, root)
    return roots


def _root_index(root: str) -> list[tuple]:
    stamp = _stamp(root)
    if stamp is None:
        return []
    names = [item[0] for item in stamp[2:]]
    cache_files = _cache_files(root)
    for cache_file in cache_files:
        cached = _read_cache(cache_file)
        if cached is not None and cached.get("stamp") == stamp:
            return list(cached["entries"])
    entries = [_index_entry(root, name) for name in names]
    if any(entry[ERROR] and entry[ERROR].startswith(_UNCACHEABLE) for entry in entries):
        # a problem of this environment, not of the manifests: don't remember it
        return entries
    for cache_file in cache_files:
        if _write_cache(cache_file, {"stamp": stamp, "entries": tuple(entries)}):
            break
    return entries


def _stamp(root: str) -> tuple | None:
    """What the cached index depends on: every manifest's size and mtime, and patch.py's
    presence."""
    try:
        scan = sorted(os.scandir(root), key=lambda item: item.name)
    except OSError:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    parser_mtimes = []
    # a changed validator re-validates every manifest
    for module in _PARSER_MODULES:
        try:
            parser_mtimes.append(os.stat(os.path.join(here, module)).st_mtime_ns)
        except OSError:
            parser_mtimes.append(0)
    items: list[tuple] = [_INDEX_FORMAT, tuple(parser_mtimes)]
    for item in scan:
        if item.name.startswith((".", "_")) or not item.is_dir():
            continue
        try:
            info = os.stat(os.path.join(item.path, "manifest.toml"))
        except OSError:
            continue
        has_patch = os.path.isfile(os.path.join(item.path, "patch.py"))
        items.append((item.name, info.st_mtime_ns, info.st_size, has_patch))
    return tuple(items)


def _index_entry(root: str, name: str) -> tuple:
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


def _read_cache(path: str) -> dict | None:
    import marshal

    try:
        with open(path, "rb") as handle:
            data = marshal.load(handle)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def _write_cache(path: str, data: dict) -> bool:
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
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return False
