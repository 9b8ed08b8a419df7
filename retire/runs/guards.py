"""Guards in lane runs: a retired shim's reproducer, run without a shim in the lanes that carried
it, so a bug that comes back is seen the day it does.

A guard run is judged on its own (there is no with-shim run: the patch is gone):

==========  ==============================================================  ==========
outcome     meaning                                                         fails run
==========  ==============================================================  ==========
holding     the bug stays fixed (the reproducer prints a fix sentinel)      no
regressed   the bug reproduces again: ``patchlane shim restore ID``          yes, always
skipped     this host lacks what the reproducer needs                       no
crashed     the reproducer crashed or broke the protocol                    yes
timeout     the reproducer ran past its timeout                              yes
==========  ==============================================================  ==========

``--strict`` adds failures, it never removes one: a regressed guard fails every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from retire.evidence.validation import FIXED, RunOutcome, ValidationRecord
from retire.lanes.model import Lane
from shims.model import ShimManifest

__all__ = ["GuardOutcome", "GuardRun", "guards_for", "judge_guard"]


class GuardOutcome(StrEnum):
    """What one run of a guard's reproducer says."""

    HOLDING = "holding"
    REGRESSED = "regressed"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    TIMEOUT = "timeout"


#: The guard outcomes that fail a lane run, whatever the options.
GUARD_FAILING = frozenset({GuardOutcome.REGRESSED, GuardOutcome.CRASHED, GuardOutcome.TIMEOUT})


@dataclass(frozen=True)
class GuardRun:
    """One guard's run in one lane."""

    lane: str
    guard: str
    outcome: GuardOutcome
    why: str
    record: ValidationRecord | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", GuardOutcome(self.outcome))

    @property
    def failed(self) -> bool:
        return self.outcome in GUARD_FAILING


def judge_guard(record: ValidationRecord) -> tuple[GuardOutcome, str]:
    """The guard's outcome from its one without-shim run. Pure."""
    if record.outcome == RunOutcome.BUG_REPRODUCED:
        return GuardOutcome.REGRESSED, (
            f"the retired bug reproduces again: run `patchlane shim restore {record.shim}` to "
            "bring the patch back"
        )
    if record.outcome in FIXED:
        return GuardOutcome.HOLDING, f"the bug stays fixed ({record.sentinel})"
    if record.outcome == RunOutcome.SKIPPED:
        return GuardOutcome.SKIPPED, record.detail or "skipped by the reproducer"
    if record.outcome == RunOutcome.TIMEOUT:
        return GuardOutcome.TIMEOUT, record.detail or "the reproducer timed out"
    return GuardOutcome.CRASHED, record.detail or str(record.outcome)


def guards_for(lane: Lane, guards: Iterable[ShimManifest]) -> tuple[ShimManifest, ...]:
    """The guards this lane runs: those still guarding that name the lane (the lanes that carried
    the shim when it retired)."""
    return tuple(
        g
        for g in sorted(guards, key=lambda m: m.id)
        if g.guard is not None and g.guard.guarding and lane.name in g.guard.lanes
    )
