"""Proof that a lane env holds what its lock says, read from the env's own ``*.dist-info`` folders.

``uv pip sync`` of an env that already has every locked version only audits it: it re-checks no
hash. So a lane env remembers the digest of the lock it was built from (a different lock means a
fresh env, whose every file uv installs hash-checked), and after each sync the versions actually
installed are compared with the lock's; a difference fails the build with one line.
"""

from __future__ import annotations

from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["expected_versions", "installed_versions", "mismatches"]


def expected_versions(lock: dict, python_full_version: str) -> dict[str, str]:
    """Canonical name → version of every lock entry whose marker holds for this interpreter."""
    here = {
        "python_version": ".".join(python_full_version.split(".")[:2]),
        "python_full_version": python_full_version,
    }
    return {
        str(canonicalize_name(p["name"])): p["version"]
        for p in lock.get("packages", [])
        if "version" in p and ("marker" not in p or Marker(p["marker"]).evaluate(here))
    }


def installed_versions(*site_dirs: str | Path) -> dict[str, str]:
    """Canonical name → version of the distributions installed in ``site_dirs`` (no interpreter
    started)."""
    found: dict[str, str] = {}
    for folder in dict.fromkeys(str(d) for d in site_dirs):
        try:
            entries = sorted(Path(folder).glob("*.dist-info"))
        except OSError:
            continue
        for entry in entries:
            name, sep, version = entry.name[: -len(".dist-info")].rpartition("-")
            if sep:
                found.setdefault(str(canonicalize_name(name)), version)
    return found


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def mismatches(expected: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One phrase per locked package that is missing or at another version (empty: they match)."""
    problems = []
    for name, version in sorted(expected.items()):
        have = installed.get(name)
        if have is None:
            problems.append(f"{name} {version} is locked but not installed")
        elif not _same(have, version):
            problems.append(f"{name} {have} is installed, the lock says {version}")
    return problems
