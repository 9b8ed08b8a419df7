"""Building the weekly report's values (:mod:`retire.report.model`) from what the engine knows:
manifests, lanes, verdicts, validation records, the previous report and the burn-down history.
Pure: no I/O, no clock (``now`` is given)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from retire.evidence.validation import PROVING, ShimOutcome, ValidationRecord
from retire.history.reading import read
from retire.history.window import Window
from retire.lanes.model import Lane
from retire.probes.records import is_bisection
from retire.report.model import (
    BURNDOWN_WEEKS,
    Bisections,
    BurnPoint,
    BurnSource,
    Cell,
    Changes,
    Headline,
    Matrix,
    PreviousReport,
    Report,
    RunStamp,
    ShimEntry,
    VerdictChange,
    parse_week,
    week_bounds,
)
from retire.runs.lanerun import judge
from retire.runs.proof import Proof, assess, latest_pair
from retire.verdicts.model import Decision, FlagKind, LaneStep, Verdict
from shims import times
from shims.model import ShimManifest

__all__ = ["build", "build_matrix", "merge_burndown"]


def _stamp(record: ValidationRecord) -> RunStamp:
    host = record.host or {}
    gpu = host.get("gpu")
    return RunStamp(
        str(host.get("hostname") or "?"),
        str(gpu) if gpu else None,
        record.lane,
        record.started_at,
        record.outcome,
        record.mode,
        record.detail,
    )


def build_matrix(
    lanes: Sequence[Lane],
    shim_ids: Sequence[str],
    records_by_cell: Mapping[tuple[str, str], Sequence[ValidationRecord]],
) -> Matrix:
    """The lane × shim matrix from the latest records of each (shim, lane). Pure."""
    defined = [lane.name for lane in lanes]
    extra = sorted({lane for (_, lane) in records_by_cell} - set(defined))
    order = tuple(defined + extra)
    known = set(shim_ids)
    cells: dict[tuple[str, str], Cell] = {}
    for (shim, lane_name), group in records_by_cell.items():
        without, with_shim = latest_pair(group)
        anchor = without or with_shim
        # an empty group: nothing ran there, so there is nothing to judge
        if shim not in known or anchor is None:
            continue
        outcome, why = judge(without, with_shim)
        cells[(shim, lane_name)] = Cell(
            shim,
            lane_name,
            outcome,
            why,
            anchor.started_at[:10],
            str((anchor.host or {}).get("hostname") or "?"),
        )
    for lane in lanes:
        for shim in lane.shims:
            if shim in known and (shim, lane.name) not in cells:
                cells[(shim, lane.name)] = Cell(
                    shim,
                    lane.name,
                    ShimOutcome.NOT_RUN,
                    f"lane {lane.name} lists it; no run recorded",
                )
    return Matrix(order, frozenset(defined), tuple(shim_ids), cells)


def _changes(previous: PreviousReport | None, rows: Sequence[ShimEntry], matrix: Matrix) -> Changes:
    broken_now = {(c.shim, c.lane): c.outcome for c in matrix.cells.values() if c.broken}
    # a report written before bisections were left out of the matrix may list one
    broken_before = (
        frozenset(cell for cell in previous.broken if not is_bisection(cell[1]))
        if previous is not None
        else frozenset()
    )
    if previous is None:
        return Changes(
            None,
            newly_broken=tuple(
                (shim, lane, outcome) for (shim, lane), outcome in sorted(broken_now.items())
            ),
        )
    now = {row.shim: row for row in rows}
    new = tuple(s for s in now if s not in previous.verdicts)
    retired = tuple(sorted(s for s in previous.verdicts if s not in now))
    changed = tuple(
        VerdictChange(s, previous.verdicts[s], row.verdict.decision, row.verdict.why)
        for s, row in now.items()
        if s in previous.verdicts and previous.verdicts[s] != row.verdict.decision
    )
    newly = tuple(
        (shim, lane, outcome)
        for (shim, lane), outcome in sorted(broken_now.items())
        if (shim, lane) not in broken_before
    )
    repaired = tuple(
        sorted(cell for cell in broken_before if cell not in broken_now and cell[0] in now)
    )
    return Changes(previous.week, new, retired, changed, newly, repaired)


def merge_burndown(history: Iterable[BurnPoint], current: BurnPoint) -> tuple[BurnPoint, ...]:
    """One point per week: a report's own count beats git's for its week; ``current`` is last."""
    by_week: dict[str, BurnPoint] = {}
    rank = {source: order for order, source in enumerate(BurnSource)}
    for point in (*history, current):
        if point.week > current.week:
            continue
        held = by_week.get(point.week)
        if held is None or rank.get(point.source, 0) >= rank.get(held.source, 0):
            by_week[point.week] = point
    ordered = [by_week[w] for w in sorted(by_week)]
    return tuple(ordered[-BURNDOWN_WEEKS:])


def _missing_verdict(shim: str) -> Verdict:
    return Verdict(shim, Decision.UNKNOWN, "no verdict: the probes returned nothing for this shim")


@dataclass(frozen=True)
class _Runs:
    """The validation records grouped as the report reads them, and the matrix built from them."""

    by_shim: Mapping[str, Sequence[ValidationRecord]]
    matrix: Matrix
    # shim → its broken lanes, in the matrix's lane order
    broken: Mapping[str, tuple[str, ...]]


def _group_runs(
    lanes: Sequence[Lane], shim_ids: Sequence[str], records: Iterable[ValidationRecord]
) -> _Runs:
    by_shim: dict[str, list[ValidationRecord]] = {}
    by_cell: dict[tuple[str, str], list[ValidationRecord]] = {}
    for record in records:
        by_shim.setdefault(record.shim, []).append(record)
        # a bisection's runs are evidence about releases (the verdicts read them), not a lane:
        # they run without the shim only, so as a cell they would read "with-shim run missing"
        if not is_bisection(record.lane):
            by_cell.setdefault((record.shim, record.lane), []).append(record)
    matrix = build_matrix(lanes, shim_ids, by_cell)
    broken: dict[str, list[str]] = {}
    for cell in matrix.cells.values():
        if cell.broken:
            broken.setdefault(cell.shim, []).append(cell.lane)
    lane_order = {lane: i for i, lane in enumerate(matrix.lanes)}
    return _Runs(
        by_shim,
        matrix,
        {shim: tuple(sorted(found, key=lane_order.__getitem__)) for shim, found in broken.items()},
    )


def _last_runs(
    mine: Sequence[ValidationRecord], records_failure: str | None
) -> tuple[RunStamp | None, RunStamp | None]:
    """The shim's last proving run and its last run of any kind (stamped unreadable when the
    records could not be read: "never run" would be a claim the report cannot make)."""
    proven = [r for r in mine if r.outcome in PROVING]
    last_proven = _stamp(max(proven, key=lambda r: r.started_at)) if proven else None
    last_run = _stamp(max(mine, key=lambda r: r.started_at)) if mine else None
    if records_failure and last_run is None:
        last_run = RunStamp(
            "?", None, "?", "", "unknown", "-", f"records unreadable: {records_failure}"
        )
    return last_proven, last_run


def _row(
    manifest: ShimManifest,
    verdict: Verdict,
    lanes: Sequence[Lane],
    runs: _Runs,
    *,
    as_of: _dt.date,
    previous_broken: frozenset[tuple[str, str]] | None,
    records_failure: str | None,
    proof: Proof,
    window: Window | None = None,
) -> ShimEntry:
    last_proven, last_run = _last_runs(runs.by_shim.get(manifest.id, []), records_failure)
    broken = runs.broken.get(manifest.id, ())
    newly = tuple(
        lane
        for lane in broken
        if previous_broken is None or (manifest.id, lane) not in previous_broken
    )
    return ShimEntry(
        manifest=manifest,
        verdict=verdict,
        age_days=(as_of - manifest.created).days,
        lanes=tuple(verdict.lanes)
        or tuple(lane.name for lane in lanes if manifest.id in lane.shims),
        last_proven=last_proven,
        last_run=last_run,
        broken_lanes=broken,
        newly_broken_lanes=newly,
        # unreadable records prove nothing either way: no claim
        unproven=None if records_failure else proof.why if not proof.proven else None,
        window=window,
    )


def _window(
    manifest: ShimManifest,
    verdict: Verdict,
    runs: _Runs,
    windows: Mapping[str, Window | None] | None,
) -> Window | None:
    """The shim's window: the verdict's (the one value, read with the target's mirror by the
    gather); for a verdict made elsewhere, as given (read with a mirror), else the one reading of
    its runs."""
    if verdict.window is not None:
        return verdict.window
    if windows is not None and manifest.id in windows:
        return windows[manifest.id]
    mine = runs.by_shim.get(manifest.id, [])
    return read(mine, manifest.id, manifest.target.distribution)


def _headline(rows: Sequence[ShimEntry]) -> Headline:
    def decided(decision: Decision) -> int:
        return sum(r.verdict.decision == decision for r in rows)

    def flagged(kind: FlagKind) -> int:
        return sum(r.verdict.flagged(kind) for r in rows)

    return Headline(
        carried=len(rows),
        retire=decided(Decision.RETIRE),
        newly_broken=sum(bool(r.newly_broken_lanes) for r in rows),
        unknown=decided(Decision.UNKNOWN),
        broken=sum(bool(r.broken_lanes) for r in rows),
        keep=decided(Decision.KEEP),
        stale=flagged(FlagKind.STALE),
        drift=flagged(FlagKind.DRIFT),
        never_run=sum(r.never_run for r in rows),
        retire_in_some=decided(Decision.RETIRE_IN_SOME),
        blocked=sum(len(r.verdict.lanes_at(LaneStep.BLOCKED)) for r in rows),
    )


def build(
    manifests: Sequence[ShimManifest],
    lanes: Sequence[Lane],
    verdicts: Sequence[Verdict],
    records: Sequence[ValidationRecord],
    *,
    week: str,
    now: _dt.datetime,
    previous: PreviousReport | None = None,
    history: Iterable[BurnPoint] = (),
    notes: Sequence[str] = (),
    advice: Sequence[str] = (),
    records_failure: str | None = None,
    filing_queue: str | None = None,
    bisections: Bisections | None = None,
    windows: Mapping[str, Window | None] | None = None,
) -> Report:
    """The report for ``week`` (pure). ``records_failure`` says why no records could be read:
    then no row is called "never run" (that would be a claim the report cannot make).
    A row's window is its verdict's; for a verdict without one, ``windows`` gives it read with
    its target's mirror (the fix commit), else the row reads its runs."""
    week = parse_week(week)
    as_of = min(now.date(), week_bounds(week)[1])
    ordered = sorted(manifests, key=lambda m: m.id)
    by_verdict = {v.shim: v for v in verdicts}
    chosen = [by_verdict.get(m.id) or _missing_verdict(m.id) for m in ordered]
    runs = _group_runs(lanes, [m.id for m in ordered], records)
    proofs = assess([m.id for m in ordered], lanes, records)
    rows = tuple(
        _row(
            manifest,
            verdict,
            lanes,
            runs,
            as_of=as_of,
            previous_broken=previous.broken if previous is not None else None,
            records_failure=records_failure,
            proof=proof,
            window=_window(manifest, verdict, runs, windows),
        )
        for manifest, verdict, proof in zip(ordered, chosen, proofs, strict=True)
    )
    headline = _headline(rows)
    current = BurnPoint(week, headline.carried, headline.retire, BurnSource.NOW)
    return Report(
        week=week,
        generated_at=times.to_utc(now).isoformat(timespec="seconds"),
        as_of=as_of,
        headline=headline,
        rows=rows,
        matrix=runs.matrix,
        changes=_changes(previous, rows, runs.matrix),
        burndown=merge_burndown(history, current),
        notes=tuple(notes),
        advice=tuple(advice),
        filing_queue=filing_queue,
        bisections=bisections,
    )
