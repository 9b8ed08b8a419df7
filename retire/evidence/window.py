"""A shim's window on its target's releases as the recorded runs show it, and where a release
stands against it (pure: the records are read elsewhere).

Only runs *without* the shim that prove something count (the bug, or its absence), on a release
of the target (a run on a package built from a commit is placed by ancestry, elsewhere). A release
with any run that reproduced the bug is *broken*, whatever other hosts said; a release is *clean*
only when every conclusive run on it was. From those:

- **before** the window: at or below a clean release that is older than every broken one — the
  bug came in later (one clean run there, one broken run above it, prove it);
- **inside**: a broken release, or one whose nearest runs on both sides are broken;
- **after**: at or above a clean release newer than every broken one — fixed;
- **unknown**: anything else (no broken run at all, a stretch nobody ran between a clean and a
  broken release, or clean runs between broken ones). Uncertain evidence places nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.validation import FIXED, PROVING, RunOutcome, ValidationRecord

__all__ = ["Place", "RecordedWindow", "recorded_window"]


class Place(enum.StrEnum):
    """Where an item (a lane's release or commit) stands against the window."""

    BEFORE = "before"
    INSIDE = "inside"
    AFTER = "after"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class RecordedWindow:
    """The releases of ``distribution`` the runs without ``shim`` told broken and clean (each
    oldest first, disjoint: a release with a run that reproduced the bug is broken)."""

    shim: str
    distribution: str
    broken: tuple[Version, ...]
    clean: tuple[Version, ...]

    @property
    def last_clean_before(self) -> Version | None:
        """The newest clean release older than every broken one (the introduced edge's clean
        side)."""
        if not self.broken:
            return None
        return max((v for v in self.clean if v < self.broken[0]), default=None)

    @property
    def first_clean_after(self) -> Version | None:
        """The oldest clean release newer than every broken one (the fixed edge's clean side)."""
        if not self.broken:
            return None
        return min((v for v in self.clean if v > self.broken[-1]), default=None)

    def place(self, version: Version) -> Place:
        """Where ``version`` stands against the window (the module docstring says when)."""
        if version in self.broken:
            return Place.INSIDE
        below, above = self.last_clean_before, self.first_clean_after
        if below is not None and version <= below:
            return Place.BEFORE
        if above is not None and version >= above:
            return Place.AFTER
        if version in self.clean:
            return Place.UNKNOWN
        runs = sorted({*self.broken, *self.clean})
        older = max((v for v in runs if v < version), default=None)
        newer = min((v for v in runs if v > version), default=None)
        if older in self.broken and newer in self.broken:
            return Place.INSIDE
        return Place.UNKNOWN

    def introduced(self) -> str:
        """``the bug came in after 0.6.0 (clean), by 0.7.0 (broken)``; an edge nobody pinned
        says so."""
        if not self.broken:
            return "no run without the shim reproduced the bug"
        first = self.broken[0]
        below = self.last_clean_before
        if below is None:
            return f"the bug reproduced on {first}; no older release was run clean"
        return f"the bug came in after {below} (clean), by {first} (broken)"

    def fixed(self) -> str:
        """``fixed after 0.8.1 (broken), by 0.8.2 (clean)``, or what is still open."""
        if not self.broken:
            return "no run without the shim reproduced the bug"
        last = self.broken[-1]
        above = self.first_clean_after
        if above is None:
            return f"still broken at the newest release run, {last}"
        return f"fixed after {last} (broken), by {above} (clean)"

    def to_json(self) -> dict[str, object]:
        return {
            "broken": [str(v) for v in self.broken],
            "clean": [str(v) for v in self.clean],
            "introduced": self.introduced(),
            "fixed": self.fixed(),
        }


def recorded_window(
    records: Iterable[ValidationRecord], shim: str, distribution: str
) -> RecordedWindow:
    """``shim``'s window on ``distribution``'s releases from ``records`` (every host's): the
    releases its runs without the shim told broken and clean."""
    target = canonicalize_name(distribution)
    bugs: set[Version] = set()
    clean: set[Version] = set()
    for record in records:
        if record.shim != shim or record.mode != "without" or record.outcome not in PROVING:
            continue
        if any(canonicalize_name(name) == target for name in record.revisions):
            continue
        text = next(
            (v for k, v in record.versions.items() if canonicalize_name(k) == target and v), None
        )
        version = _version(text)
        if version is None:
            continue
        if record.outcome == RunOutcome.BUG_REPRODUCED:
            bugs.add(version)
        elif record.outcome in FIXED:
            clean.add(version)
    return RecordedWindow(shim, target, tuple(sorted(bugs)), tuple(sorted(clean - bugs)))


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        version = Version(text)
    except InvalidVersion:
        return None
    # a local label (``0.19.0+d48bd6b``) is a build of a commit, not the release
    return None if version.local else version
