"""Which shims some lane proves, and why the others are *unproven*.

A lane proves a shim when its latest recorded runs of that shim's reproducer (the latest
without-shim run and the with-shim run of the same lane run) are judged (:func:`judge`):

- ``needed``: the bug reproduced without the shim (``BUG_REPRODUCED``) and not with it
  (``FIX_VALIDATED`` / ``MEMORY_SAVE_VERIFIED``) — the shim is proven necessary and working;
- ``upstream-fixed``: the reproducer ran and printed that the bug is gone without the shim — it
  proves something too (a retirement candidate, which fails no run).

Anything else proves nothing: a reproducer that still raises ``Skip`` (a scaffold not written
yet, a target the lane does not install, a host without what it needs), a crash, a timeout, a
shim the fix does not fix, a lane that never ran it, or no lane that lists the shim at all.

The evidence is the validation manifest — every lane's latest runs, from this run or an earlier
one on any host (a GPU lane proven on a GPU runner stays proven where only the CPU lanes run) —
restricted to lanes that list the shim today. ``patchlane run`` reads it after recording this
run's records, so a run's own proof counts at once and a reproducer that stops proving (its
latest run skips) stops counting for that lane.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retire.evidence.validation import Mode, ShimOutcome, ValidationRecord
from retire.lanes.model import Lane
from retire.runs.lanerun import judge

__all__ = ["PROVEN", "Proof", "assess", "latest_pair"]

#: The judged outcomes that prove a shim on a lane.
PROVEN = frozenset({ShimOutcome.NEEDED, ShimOutcome.UPSTREAM_FIXED})


@dataclass(frozen=True)
class Proof:
    """One shim: the lanes that prove it, or (unproven) why none does."""

    shim: str
    # lanes whose latest runs prove it, in lane order
    proven_on: tuple[str, ...]
    # unproven: what each lane that lists it said, or that no lane lists it
    why: str = ""

    @property
    def proven(self) -> bool:
        return bool(self.proven_on)

    def to_json(self) -> dict[str, object]:
        return {"shim": self.shim, "why": self.why}


def _latest(records: Iterable[ValidationRecord], mode: Mode) -> ValidationRecord | None:
    best = None
    for record in records:
        if record.mode == mode and (best is None or record.started_at >= best.started_at):
            best = record
    return best


def latest_pair(
    records: Sequence[ValidationRecord],
) -> tuple[ValidationRecord | None, ValidationRecord | None]:
    """The latest without-shim run of one (shim, lane) and the with-shim run that belongs to it."""
    without = _latest(records, Mode.WITHOUT)
    if without is None:
        return None, _latest(records, Mode.WITH)
    withs = [r for r in records if r.mode == Mode.WITH and r.started_at >= without.started_at]
    if without.run:
        same = [r for r in withs if r.run == without.run]
        withs = same or withs
    return without, _latest(withs, Mode.WITH)


def assess(
    shims: Sequence[str], lanes: Sequence[Lane], records: Iterable[ValidationRecord]
) -> tuple[Proof, ...]:
    """A :class:`Proof` for each of ``shims``, from the latest ``records`` of the ``lanes`` (the
    project's) that list it. Pure."""
    wanted = set(shims)
    by_cell: dict[tuple[str, str], list[ValidationRecord]] = {}
    for record in records:
        if record.shim in wanted:
            by_cell.setdefault((record.shim, record.lane), []).append(record)
    proofs = []
    for shim in shims:
        listing = [lane.name for lane in lanes if shim in lane.shims]
        if not listing:
            proofs.append(Proof(shim, (), "no lane lists it: add it to a lane's shims"))
            continue
        proven, said = [], []
        for lane in listing:
            group = by_cell.get((shim, lane), [])
            if not group:
                said.append(f"{lane}: no run recorded")
                continue
            outcome, why = judge(*latest_pair(group))
            if outcome in PROVEN:
                proven.append(lane)
            else:
                said.append(f"{lane}: {outcome} — {why}")
        proofs.append(Proof(shim, tuple(proven), "" if proven else "; ".join(said)))
    return tuple(proofs)
