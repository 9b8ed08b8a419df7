"""The execution probe, recorded side: what reproducers printed without their shim.

Reads the validation manifest (``retire.evidence.validation.load``), which holds runs from every
host that merged its records — a GPU host's run counts here as much as a local one. For each shim
it keeps the latest conclusive ``--mode without`` run per (lane, host): older runs on the same
lane and host were made on versions since replaced. A bisection's lane (``bisect``,
``bisect:<lane>``) is many environments, one per release it tried: there the versions a run saw
are part of the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from packaging.utils import canonicalize_name

from retire.core.errors import InputError
from retire.evidence.validation import PROVING, Mode, ValidationRecord
from retire.evidence.values import ExecutionEvidence, ExecutionHistory, ProbeFailure

__all__ = [
    "BISECT_LANE",
    "bisection_lane",
    "evidence_of",
    "history",
    "is_bisection",
    "load_records",
]

#: The lane a bisection records its runs under; ``bisect:<lane>`` when overlaid on a lane's env.
BISECT_LANE = "bisect"


def bisection_lane(lane: str | None = None) -> str:
    return f"{BISECT_LANE}:{lane}" if lane else BISECT_LANE


def is_bisection(lane: str) -> bool:
    return lane == BISECT_LANE or lane.startswith(BISECT_LANE + ":")


def load_records(path: str | os.PathLike[str]) -> list[ValidationRecord] | ProbeFailure:
    """Every record of the manifest at ``path`` (none if it does not exist); never raises."""
    from retire.evidence import validation

    try:
        return validation.load(path)
    except InputError as exc:
        return ProbeFailure("records", str(path), str(exc))


def evidence_of(record: ValidationRecord) -> ExecutionEvidence:
    host = record.host or {}
    versions = tuple(
        sorted((canonicalize_name(name), version) for name, version in record.versions.items())
    )
    gpu = host.get("gpu")
    revisions = tuple(
        sorted((canonicalize_name(name), commit) for name, commit in record.revisions.items())
    )
    return ExecutionEvidence(
        shim=record.shim,
        lane=record.lane,
        mode=record.mode,
        outcome=record.outcome,
        versions=versions,
        host=str(host.get("hostname") or "?"),
        gpu=str(gpu) if gpu else None,
        started_at=record.started_at,
        sentinel=record.sentinel,
        detail=record.detail,
        record_id=record.record_id,
        revisions=revisions,
    )


def history(
    records: Iterable[ValidationRecord], shim: str, *, mode: str = Mode.WITHOUT
) -> ExecutionHistory:
    """The latest conclusive ``mode`` run of ``shim`` per (lane, host), oldest first.

    A later timeout, crash or skip says nothing about the bug, so it never hides an earlier
    conclusive run on the same lane and host (a bug that shows itself as a hang must not end up
    retired on another host's clean run); it counts only where nothing conclusive exists.
    """
    # (lane, host, and the versions of a bisection's run: each candidate is one of its own)
    latest: dict[tuple[str, str, tuple[tuple[str, str | None], ...]], ExecutionEvidence] = {}
    for record in records:
        if record.shim != shim or record.mode != mode:
            continue
        run = evidence_of(record)
        key = (run.lane, run.host, run.versions if is_bisection(run.lane) else ())
        rank = (run.outcome in PROVING, run.started_at)
        held = latest.get(key)
        if held is None or rank >= (held.outcome in PROVING, held.started_at):
            latest[key] = run
    return ExecutionHistory(shim, tuple(sorted(latest.values(), key=lambda r: r.started_at)))


def histories(
    records: Sequence[ValidationRecord] | ProbeFailure, shims: Iterable[str]
) -> dict[str, ExecutionHistory | ProbeFailure]:
    if isinstance(records, ProbeFailure):
        return dict.fromkeys(shims, records)
    return {shim: history(records, shim) for shim in shims}
