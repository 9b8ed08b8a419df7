"""A lane's revisions resolved in this host's git mirrors: what its lock pins, and whether uv's
lock took it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retire.lanes import revisions
from retire.lanes.model import Lane

__all__ = ["RevisionNotTaken", "RevisionPin", "revision_pins", "unpinned"]


@dataclass(frozen=True)
class RevisionPin:
    """One lane revision resolved in this host's mirror."""

    revision: revisions.Revision
    mirror: Path
    commit: str

    @property
    def local_url(self) -> str:
        return self.mirror.as_uri()

    @property
    def requirement(self) -> str:
        return revisions.pinned_requirement(self.revision, self.mirror, self.commit)


def revision_pins(lane: Lane, mirrors: revisions.MirrorLookup | None) -> tuple[RevisionPin, ...]:
    """The lane's revisions resolved to commits in the local mirrors; InputError (one line: the
    lane file, the key, the fix) when a mirror or a revision is missing."""
    return tuple(
        RevisionPin(r, *revisions.resolve(r, mirrors, lane.origin)) for r in lane.revisions
    )


@dataclass(frozen=True)
class RevisionNotTaken:
    """uv's lock does not take a lane revision from its mirror at the resolved commit."""

    pin: RevisionPin

    @property
    def message(self) -> str:
        revision = self.pin.revision
        return (
            f"{revision.key}: uv's lock does not take {revision.distribution} from the mirror at "
            f"{self.pin.commit[:12]} (is that the distribution's name in the repository's "
            "pyproject.toml?)"
        )


def unpinned(lock: dict, pinned: tuple[RevisionPin, ...]) -> RevisionNotTaken | None:
    """The first revision uv's lock does not take from its mirror at the resolved commit; None
    when it takes every one."""
    found = revisions.vcs_entries(lock)
    for pin in pinned:
        entry = found.get(pin.revision.distribution)
        if entry is None or entry.get("commit-id") != pin.commit:
            return RevisionNotTaken(pin)
    return None
