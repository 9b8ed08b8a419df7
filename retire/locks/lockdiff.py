"""What changed between two locks of a lane: package by package, classified. Pure."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.values import nightly_date

KINDS = ("major", "minor", "patch", "pre-release", "nightly", "downgrade", "added", "removed", "other")


@dataclass(frozen=True)
class PackageChange:
    name: str
    old: str | None
    new: str | None
    kind: str  # one of KINDS
    uploaded: _dt.datetime | None = None  # when the new version's files were uploaded


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
    a, b = (before.release + (0, 0, 0))[:3], (after.release + (0, 0, 0))[:3]
    if a[0] != b[0]:
        return "major"
    if a[1] != b[1]:
        return "minor"
    return "patch"


def _packages(lock: dict | None) -> dict[str, dict]:
    return {str(canonicalize_name(p["name"])): p for p in (lock or {}).get("packages", []) if "name" in p}


def _upload_time(package: dict) -> _dt.datetime | None:
    times = [f.get("upload-time") for f in [package.get("sdist") or {}, *package.get("wheels", [])]]
    times = [t for t in times if isinstance(t, _dt.datetime)]
    return max(times) if times else None


def diff(old_lock: dict | None, new_lock: dict | None) -> tuple[PackageChange, ...]:
    """Changes from ``old_lock`` to ``new_lock`` (parsed TOML), sorted by package name."""
    before, after = _packages(old_lock), _packages(new_lock)
    changes = []
    for name in sorted(set(before) | set(after)):
        old = before.get(name, {}).get("version")
        new = after.get(name, {}).get("version")
        if old == new:
            continue
        changes.append(PackageChange(name, old, new, classify(old, new), _upload_time(after[name]) if name in after else None))
    return tuple(changes)


def markdown_table(changes: tuple[PackageChange, ...]) -> str:
    if not changes:
        return "_no package changed_"
    rows = ["| package | old | new | kind | uploaded |", "|---|---|---|---|---|"]
    for c in changes:
        uploaded = c.uploaded.date().isoformat() if c.uploaded else ""
        rows.append(f"| {c.name} | {c.old or '—'} | {c.new or '—'} | {c.kind} | {uploaded} |")
    return "\n".join(rows)
