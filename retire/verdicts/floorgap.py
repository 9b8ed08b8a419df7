"""Floors the weekly job tightens (pure): the releases nobody ran between the last broken run and
the first clean one.

A floor proven by execution is the first clean release after the last broken one (the bug's
window, :mod:`retire.history`); it is *minimal* only when no release between the two exists. When
the index lists releases between them and no run covers them, the first fixed release may be
older than the floor (a hold lane then waits for a release it does not need): one bisection
between the two closes the gap, and the verdict's ``candidate`` flag names it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from retire.history.window import Window

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
    window: Window | None, distribution: str, releases: Iterable[Version]
) -> FloorGap | None:
    """The untested ``releases`` between the window's last broken release and the first clean one
    after it, when the runs prove that floor (a monotone window with a fixed edge); None when
    there are none."""
    if window is None or not window.seen or not window.monotone:
        return None
    before, after = window.last_broken, window.first_fixed
    if before is None or after is None:
        return None
    try:
        last, floor = Version(before), Version(after)
        ran = {Version(item) for item in window.history}
    except InvalidVersion:
        return None
    untested = sorted(
        v
        for v in set(releases)
        if last < v < floor and not v.is_prerelease and not v.is_devrelease and v not in ran
    )
    if not untested:
        return None
    return FloorGap(distribution, last, floor, tuple(untested))
