"""Where one lane's target stands against the shim's recorded window (pure, no I/O):
docs/verdicts.md, "Windows".

A release lane is placed by the release it locks (else pins exactly); a revision lane by the
commit it locks, through its ancestry among the mirror's release tags: a commit that is part of
a release at or below the window's last clean release is before it, one that contains a release
at or above its first fixed release is after it. What the records do not pin is unknown, and an
unknown place changes no step.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from retire.evidence.values import Ancestry
from retire.evidence.window import Place, RecordedWindow

__all__ = ["WindowPlace", "by_commit", "by_release", "unplaced"]


@dataclass(frozen=True)
class WindowPlace:
    """A lane against the window: where, and the clause that says so (``liger-kernel 0.6.0 is
    before the window — the bug came in after 0.7.0 (clean), by 0.8.0 (broken)``)."""

    place: Place
    why: str
    locked: str | None = None


def unplaced(why: str, locked: str | None = None) -> WindowPlace:
    return WindowPlace(Place.UNKNOWN, why, locked)


def _said(window: RecordedWindow, subject: str, place: Place) -> str:
    if place == Place.BEFORE:
        return f"{subject} is before the window — {window.introduced()}"
    if place == Place.AFTER:
        return f"{subject} is after the window — {window.fixed()}"
    if place == Place.INSIDE:
        return f"{subject} is inside the window ({window.introduced()}; {window.fixed()})"
    return f"{subject} is not placed against the window (the recorded runs do not pin it)"


def by_release(window: RecordedWindow | None, dist: str, text: str | None) -> WindowPlace:
    """The lane that locks (or pins) ``dist`` ``text``."""
    if window is None or text is None:
        return unplaced("no recorded window, or no locked release")
    locked = f"{dist} {text}"
    try:
        version = Version(text)
    except InvalidVersion:
        return unplaced(f"{locked} is not a release", locked)
    place = window.place(version)
    return WindowPlace(place, _said(window, locked, place), locked)


def by_commit(window: RecordedWindow | None, ancestry: Ancestry, locked: str) -> WindowPlace:
    """The revision lane whose locked commit (``locked``: ``megatron-core @ d98e8a64dd``) stands
    among the release tags as ``ancestry`` says."""
    if window is None:
        return unplaced("no recorded window", locked)
    within, contains = ancestry.within_version, ancestry.contained_version
    below, above = window.last_clean_before, window.first_clean_after
    if within is not None and below is not None and within <= below:
        why = f"{locked} (part of release {within}) is before the window — {window.introduced()}"
        return WindowPlace(Place.BEFORE, why, locked)
    if contains is not None and above is not None and contains >= above:
        why = f"{locked} (contains release {contains}) is after the window — {window.fixed()}"
        return WindowPlace(Place.AFTER, why, locked)
    if (
        within is not None
        and contains is not None
        and window.place(within) == Place.INSIDE
        and window.place(contains) == Place.INSIDE
    ):
        return WindowPlace(Place.INSIDE, _said(window, locked, Place.INSIDE), locked)
    return WindowPlace(Place.UNKNOWN, _said(window, locked, Place.UNKNOWN), locked)
