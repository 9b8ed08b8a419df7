"""A lane's freezes as the absolute UTC cutoffs one lock is made with.

``exclude-newer`` may be a date or a cooldown (``"7 days"``), and ``[lane.exclude-newer-package]``
gives single packages their own (or none). uv gets absolute times only: a cooldown is resolved
once, recorded in the lock's ``[tool.patchlane]`` table with the moment it was measured from, and
measured from that same moment on every re-lock until an upgrade rolls it forward. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import tomlkit

from retire.lanes.model import Cooldown, Freeze, Lane
from shims import times

__all__ = ["Cutoffs", "resolve_cutoffs"]


@dataclass(frozen=True)
class Cutoffs:
    """A lane's freezes as absolute UTC times, as one lock is made with them.

    ``resolved_at`` is the moment its cooldowns were measured from (None: the lane has none);
    ``packages`` maps a package to its own cutoff, or None where it is not frozen at all.
    """

    exclude_newer: datetime | None = None
    packages: tuple[tuple[str, datetime | None], ...] = ()
    resolved_at: datetime | None = None

    def provenance(self, lane: Lane) -> dict:
        """The ``[tool.patchlane]`` keys that record them (and the cooldown they came from)."""
        table: dict = {}
        if self.exclude_newer:
            table["exclude-newer"] = times.format_utc(self.exclude_newer)
        if lane.cooldown:
            table["cooldown"] = str(lane.cooldown)
        if self.resolved_at:
            table["cooldown-resolved-at"] = times.format_utc(self.resolved_at)
        if self.packages:
            packages = tomlkit.inline_table()
            packages.update(
                {name: times.format_utc(at) if at else False for name, at in self.packages}
            )
            table["exclude-newer-package"] = packages
        return table


def resolve_cutoffs(lane: Lane, previous: dict | None, *, now: datetime, roll: bool) -> Cutoffs:
    """The absolute cutoffs to lock ``lane`` with.

    A cooldown (``exclude-newer = "7 days"``) is measured back from the moment recorded in the
    previous lock of this lane, so re-locking an unchanged lane (``--force``, another lane's
    change, a new requirement) never drifts its cutoff; ``roll`` (``--upgrade``,
    ``--upgrade-package``, ``bump``) measures from ``now`` instead.
    """
    relative = [lane.cooldown, *(p.freeze for p in lane.exclude_newer_package)]
    anchor = _cooldown_anchor(lane, previous, now=now, roll=roll)

    def absolute(freeze: Freeze) -> datetime | None:
        return freeze.cutoff(anchor) if isinstance(freeze, Cooldown) else freeze

    return Cutoffs(
        absolute(lane.freeze),
        tuple((p.name, absolute(p.freeze)) for p in lane.exclude_newer_package),
        anchor if any(isinstance(f, Cooldown) for f in relative) else None,
    )


def _cooldown_anchor(lane: Lane, previous: dict | None, *, now: datetime, roll: bool) -> datetime:
    """The moment cooldowns are measured from: the one the previous lock of this lane recorded,
    unless ``roll`` (or it recorded none readable), else ``now`` to the second."""
    recorded = (
        (previous or {}).get("cooldown-resolved-at")
        if (previous or {}).get("lane") == lane.name
        else None
    )
    try:
        resolved_at = times.parse(recorded) if recorded and not roll else None
    except times.TimeError:
        resolved_at = None
    return resolved_at or times.to_utc(now).replace(microsecond=0)
