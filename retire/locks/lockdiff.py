"""What changed between two locks: package by package, classified. Pure.

Any PEP 751 lock reads: patchlane's own, ``pip lock``'s, ``uv export --format pylock.toml``'s. A
package is keyed by its name *and* its environment marker, so a lock that carries one package
twice (``numpy`` 2.0 for Python < 3.12, 2.2 for the rest) diffs as two rows; an entry whose
marker changed but that is the only one of its name on both sides stays one row. A package
taken from a repository is compared by its commit too: a revision that moved is a change (kind
``other``) even when its version label stayed.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.values import nightly_date

KINDS = (
    "major",
    "minor",
    "patch",
    "pre-release",
    "nightly",
    "downgrade",
    "added",
    "removed",
    "other",
)


@dataclass(frozen=True)
class PackageChange:
    name: str
    old: str | None
    new: str | None
    # one of KINDS
    kind: str
    # when the new version's files were uploaded
    uploaded: _dt.datetime | None = None
    # the entry's environment marker (the new one when it changed)
    marker: str | None = None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "marker": self.marker,
            "old": self.old,
            "new": self.new,
            "kind": self.kind,
            "uploaded": self.uploaded.isoformat() if self.uploaded else None,
        }


def classify(old: str | None, new: str | None) -> str:
    if old is None:
        return "added"
    if new is None:
        return "removed"
    try:
        before, after = Version(old), Version(new)
    except InvalidVersion:
        return "other"
    if after < before:
        return "downgrade"
    if nightly_date(after) is not None:
        return "nightly"
    if after.is_prerelease:
        return "pre-release"
    a, b = (*before.release, 0, 0, 0)[:3], (*after.release, 0, 0, 0)[:3]
    if a[0] != b[0]:
        return "major"
    if a[1] != b[1]:
        return "minor"
    return "patch"


# (canonical name, marker or "")
Key = tuple[str, str]


def _packages(lock: dict | None) -> dict[Key, dict]:
    """Entries by (name, marker). A lock's entries without a name (a malformed foreign lock) are
    left out; so is the project a ``uv export`` describes as a directory, which has no version."""
    found: dict[Key, dict] = {}
    for package in (lock or {}).get("packages", []):
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        if "version" not in package and isinstance(package.get("directory"), dict):
            continue
        marker = package["marker"] if isinstance(package.get("marker"), str) else ""
        found[(str(canonicalize_name(package["name"])), marker)] = package
    return found


def _version(package: dict | None) -> str | None:
    """The entry's version; for one taken from a repository also its commit (``0.1 @
    a1b2c3d4e5``), so a revision that moved is a change even where its version label is not."""
    if package is None:
        return None
    version = package.get("version")
    vcs = package.get("vcs")
    commit = vcs.get("commit-id") if isinstance(vcs, dict) else None
    if isinstance(commit, str) and commit:
        return f"{version} @ {commit[:10]}" if version is not None else f"@ {commit[:10]}"
    return str(version) if version is not None else None


def _upload_time(package: dict) -> _dt.datetime | None:
    files = [package.get("sdist") or {}, package.get("archive") or {}, *package.get("wheels", [])]
    stamps = [f.get("upload-time") for f in files if isinstance(f, dict)]
    uploaded = [t for t in stamps if isinstance(t, _dt.datetime)]
    return max(uploaded) if uploaded else None


def _pair(before: dict[Key, dict], after: dict[Key, dict]) -> list[tuple[Key | None, Key | None]]:
    """(old key, new key) pairs: same name and marker; else the one entry of a name on each side."""
    pairs = [(key, key) for key in before if key in after]
    gone = [key for key in before if key not in after]
    new = [key for key in after if key not in before]
    for name in {key[0] for key in gone} & {key[0] for key in new}:
        old_keys, new_keys = [k for k in gone if k[0] == name], [k for k in new if k[0] == name]
        # a marker rewritten, not a package split in two
        if len(old_keys) == 1 and len(new_keys) == 1:
            pairs.append((old_keys[0], new_keys[0]))
            gone.remove(old_keys[0])
            new.remove(new_keys[0])
    return pairs + [(key, None) for key in gone] + [(None, key) for key in new]


def diff(old_lock: dict | None, new_lock: dict | None) -> tuple[PackageChange, ...]:
    """Changes from ``old_lock`` to ``new_lock`` (parsed TOML), sorted by package name, then
    marker."""
    before, after = _packages(old_lock), _packages(new_lock)
    changes = []
    for old_key, new_key in _pair(before, after):
        old = _version(before[old_key]) if old_key else None
        new = _version(after[new_key]) if new_key else None
        if old == new and (old_key and new_key) and old_key[1] == new_key[1]:
            continue
        key = new_key or old_key
        # _pair gives every key with its match or None, never two Nones
        if key is None:
            continue
        uploaded = _upload_time(after[new_key]) if new_key else None
        # same version, another marker
        kind = classify(old, new) if old != new else "other"
        changes.append(PackageChange(key[0], old, new, kind, uploaded, key[1] or None))
    return tuple(sorted(changes, key=lambda c: (c.name, c.marker or "")))


def markdown_table(changes: tuple[PackageChange, ...]) -> str:
    if not changes:
        return "_no package changed_"
    with_markers = any(c.marker for c in changes)
    head = "| package | " + ("marker | " if with_markers else "") + "old | new | kind | uploaded |"
    rows = [head, "|---|" + ("---|" if with_markers else "") + "---|---|---|---|"]
    for c in changes:
        uploaded = c.uploaded.date().isoformat() if c.uploaded else ""
        marker = f"`{c.marker}` | " if c.marker else ("| " if with_markers else "")
        rows.append(
            f"| {c.name} | {marker}{c.old or '—'} | {c.new or '—'} | {c.kind} | {uploaded} |"
        )
    return "\n".join(rows)


def text_table(changes: tuple[PackageChange, ...]) -> str:
    """For a terminal: one aligned line per change."""
    if not changes:
        return "no package changed"
    width = max(len(c.name) for c in changes)
    return "\n".join(
        (
            f"{c.name:<{width}}  {c.old or '—':>12} → {c.new or '—':<12}  {c.kind:<11}"
            + (f"  ; {c.marker}" if c.marker else "")
        ).rstrip()
        for c in changes
    )
