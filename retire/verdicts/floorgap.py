"""Floors the weekly job tightens (pure): the releases nobody ran between the last broken run and
the first clean one.

A floor proven by execution is the oldest release a run showed clean; it is *minimal* only when
the release just below it was run and reproduced the bug. When the index lists releases between
the newest broken run below the floor and the floor itself, and no run covers them, the first
fixed release may be older than the floor (a hold lane then waits for a release it does not need):
one bisection between the two closes the gap, and the verdict's ``candidate`` flag names it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import Version

from retire.evidence.values import ExecutionHistory
from retire.verdicts.execution import BUG, CLEAN, Order, first_clean, version_of

__all__ = ["FloorGap", "floor_gap"]


@dataclass(frozen=True)
class FloorGap:
    """Releases of ``distribution`` never run between ``last_broken`` and ``first_clean``."""

    distribution: str
    last_broken: Version
    first_clean: Version
    untested: tuple[Version, ...]

    def describe(self) -> str:
        shown = ", ".join(str(v) for v in self.untested[:4]) + (
            ", …" if len(self.untested) > 4 else ""
        )
        return (
            f"the floor {self.distribution}>={self.first_clean} may not be minimal: "
            f"{self.last_broken} reproduced the bug and {len(self.untested)} release(s) between "
            f"them were never run ({shown})"
        )


def floor_gap(
    history: ExecutionHistory,
    distribution: str,
    releases: Iterable[Version],
    order: Order | None = None,
) -> FloorGap | None:
    """The untested releases between the newest broken run below the oldest clean one and that
    clean one, when the runs prove a floor (no bug at or above it); None when there are none."""
    found = first_clean(history, distribution, None, order)
    if found.state != CLEAN or found.floor is None:
        return None
    floor = found.floor
    broken = [
        v
        for run in history.runs
        if run.outcome == BUG
        and (v := version_of(run, distribution, order)) is not None
        and v < floor
    ]
    if not broken:
        return None
    last = max(broken)
    ran = {v for run in history.runs if (v := version_of(run, distribution, order)) is not None}
    untested = sorted(
        v
        for v in set(releases)
        if last < v < floor and not v.is_prerelease and not v.is_devrelease and v not in ran
    )
    if not untested:
        return None
    return FloorGap(distribution, last, floor, tuple(untested))
