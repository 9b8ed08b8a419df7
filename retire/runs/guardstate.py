"""Where each guard stands (a retired shim's reproducer, run without a shim in the lanes that
carried it): one word and one line for the listings (``shim list``, ``catalogue``). Pure.

The word is the worst of its lanes' latest runs — ``regressed``, ``crashed``, ``timeout``,
``holding``, ``skipped`` — or ``not-run`` when none of its lanes recorded one, or ``dropped``
when the guard no longer guards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from retire.evidence.validation import Mode, ValidationRecord
from retire.runs.guards import GuardOutcome, judge_guard
from shims.model import ShimManifest

__all__ = ["GuardState", "guard_states"]

#: A guard none of whose lanes recorded a run.
NOT_RUN = "not-run"
#: A guard that stopped guarding (``shim drop``).
DROPPED = "dropped"
# worst first: the word a guard gets from its lanes' outcomes
_WORST = (
    GuardOutcome.REGRESSED,
    GuardOutcome.CRASHED,
    GuardOutcome.TIMEOUT,
    GuardOutcome.HOLDING,
    GuardOutcome.SKIPPED,
)


@dataclass(frozen=True)
class GuardState:
    """One guard's standing: its word, why, and each lane's latest outcome."""

    id: str
    word: str
    why: str
    # (lane, outcome of its latest run) for the lanes that recorded one
    lanes: tuple[tuple[str, str], ...] = ()


def _latest(records: Iterable[ValidationRecord]) -> dict[tuple[str, str], ValidationRecord]:
    latest: dict[tuple[str, str], ValidationRecord] = {}
    for record in sorted(records, key=lambda r: r.started_at):
        if record.mode == Mode.WITHOUT:
            latest[(record.lane, record.shim)] = record
    return latest


def guard_states(
    guards: Iterable[ShimManifest], records: Iterable[ValidationRecord]
) -> Mapping[str, GuardState]:
    """The standing of every guard of ``guards`` (manifests without ``[guard]`` are left out),
    by id, from the latest recorded run in each of its lanes."""
    latest = _latest(records)
    found: dict[str, GuardState] = {}
    for manifest in sorted(guards, key=lambda m: m.id):
        guard = manifest.guard
        if guard is None:
            continue
        retired = f"retired {guard.retired.isoformat()}"
        if not guard.guarding:
            when = guard.dropped.isoformat() if guard.dropped else "?"
            found[manifest.id] = GuardState(
                manifest.id, DROPPED, f"{retired}, dropped {when}: {guard.drop_reason}"
            )
            continue
        judged = {
            lane: judge_guard(latest[(lane, manifest.id)])
            for lane in guard.lanes
            if (lane, manifest.id) in latest
        }
        lanes = tuple((lane, str(outcome)) for lane, (outcome, _) in judged.items())
        worst = next((w for w in _WORST if any(o == w for o, _ in judged.values())), None)
        if worst is None:
            where = ", ".join(guard.lanes) or "no lane"
            found[manifest.id] = GuardState(
                manifest.id, NOT_RUN, f"{retired}; no run recorded yet in {where}"
            )
            continue
        at = [lane for lane, (outcome, _) in judged.items() if outcome == worst]
        why = next(text for outcome, text in judged.values() if outcome == worst)
        found[manifest.id] = GuardState(
            manifest.id, str(worst), f"{retired}; {worst} in {', '.join(at)}: {why}", lanes
        )
    return found
