"""Building the weekly report's values (:mod:`retire.report.model`) from what the engine knows:
manifests, lanes, verdicts, validation records, the previous report and the burn-down history.
Pure: no I/O, no clock (``now`` is given)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence

from retire.evidence.validation import PROVING, Mode, ShimOutcome
from retire.evidence.values import (
    ExecutionHistory,
    IssueState,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
)
from retire.report.model import (
    BURNDOWN_WEEKS,
    BurnPoint,
    Cell,
    Changes,
    Headline,
    Matrix,
    PreviousReport,
    Report,
    RunStamp,
    ShimRow,
    VerdictChange,
    parse_week,
    short_link,
    week_bounds,
)
from retire.runs.lanerun import judge
from shims import times

__all__ = ["build", "build_matrix", "evidence_line", "merge_burndown"]


def _stamp(record) -> RunStamp:
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


def _condition_words(condition) -> str:
    if condition.kind == "version-floor":
        return f"{condition.distribution} {condition.version} released"
    if condition.kind == "pr-released":
        return f"{short_link(condition.url)} merged and released"
    if condition.kind == "commit-in-tag":
        return (
            f"commit {condition.commit[:10]} of {short_link(condition.repository)} in a release tag"
        )
    return "reproducer clean without the shim"


def evidence_line(value: object) -> str:
    """One line for one piece of evidence (a ``retire.evidence`` value)."""
    if isinstance(value, ReleaseList):
        latest = value.latest
        when = f", {latest.upload_time.date()}" if latest and latest.upload_time else ""
        newest = f"newest {latest.version}{when}" if latest else "no installable release"
        return (
            f"index: {value.distribution} has {len(value.releases)} release(s) on "
            f"{value.index_url}; {newest}"
        )
    if isinstance(value, PullState):
        state = (
            f"merged {value.merged_at.date()}" if value.merged and value.merged_at else value.state
        )
        return f"code host: {value.label} {state}" + (f" — {value.title}" if value.title else "")
    if isinstance(value, IssueState):
        reason = f" ({value.state_reason})" if value.state_reason else ""
        return f"code host: {value.label} {value.state}{reason}" + (
            f" — {value.title}" if value.title else ""
        )
    if isinstance(value, TagContainment):
        tags = ", ".join(value.release_tags[:3]) or "no release tag"
        return f"git: {value.commit[:12]} of {value.repository} in {tags}"
    if isinstance(value, ExecutionHistory):
        runs = ", ".join(f"{r.outcome} on {r.where} {r.started_at[:10]}" for r in value.runs[-3:])
        return f"runs without the shim: {runs or 'none recorded'}"
    if isinstance(value, ProbeFailure):
        return f"probe failed: {value}"
    return f"{type(value).__name__}"


def _latest(records: Iterable, mode: str):
    best = None
    for record in records:
        if record.mode == mode and (best is None or record.started_at >= best.started_at):
            best = record
    return best


def _pair(records: Sequence):
    """The latest without-shim run and the with-shim run that belongs to it."""
    without = _latest(records, Mode.WITHOUT)
    if without is None:
        return None, _latest(records, Mode.WITH)
    withs = [r for r in records if r.mode == Mode.WITH and r.started_at >= without.started_at]
    if without.run:
        same = [r for r in withs if r.run == without.run]
        withs = same or withs
    return without, _latest(withs, Mode.WITH)


def build_matrix(
    lanes: Sequence, shim_ids: Sequence[str], records_by_cell: Mapping[tuple[str, str], list]
) -> Matrix:
    """The lane × shim matrix from the latest records of each (shim, lane). Pure."""
    defined = [lane.name for lane in lanes]
    extra = sorted({lane for (_, lane) in records_by_cell} - set(defined))
    order = tuple(defined + extra)
    known = set(shim_ids)
    cells: dict[tuple[str, str], Cell] = {}
    for (shim, lane), group in records_by_cell.items():
        if shim not in known:
            continue
        without, with_shim = _pair(group)
        outcome, why = judge(without, with_shim)
        anchor = without or with_shim
        cells[(shim, lane)] = Cell(
            shim,
            lane,
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


def _changes(previous: PreviousReport | None, rows: Sequence[ShimRow], matrix: Matrix) -> Changes:
    broken_now = {(c.shim, c.lane): c.outcome for c in matrix.cells.values() if c.broken}
    if previous is None:
        return Changes(
            None, newly_broken=tuple((s, l, o) for (s, l), o in sorted(broken_now.items()))
        )
    now = {row.shim: row for row in rows}
    new = tuple(s for s in now if s not in previous.verdicts)
    retired = tuple(sorted(s for s in previous.verdicts if s not in now))
    changed = tuple(
        VerdictChange(s, previous.verdicts[s], row.verdict, row.why)
        for s, row in now.items()
        if s in previous.verdicts and previous.verdicts[s] != row.verdict
    )
    newly = tuple(
        (s, l, o) for (s, l), o in sorted(broken_now.items()) if (s, l) not in previous.broken
    )
    repaired = tuple(
        sorted(cell for cell in previous.broken if cell not in broken_now and cell[0] in now)
    )
    return Changes(previous.week, new, retired, changed, newly, repaired)


def merge_burndown(history: Iterable[BurnPoint], current: BurnPoint) -> tuple[BurnPoint, ...]:
    """One point per week: a report's own count beats git's for its week; ``current`` is last."""
    by_week: dict[str, BurnPoint] = {}
    rank = {"git": 0, "report": 1, "now": 2}
    for point in (*history, current):
        if point.week > current.week:
            continue
        held = by_week.get(point.week)
        if held is None or rank.get(point.source, 0) >= rank.get(held.source, 0):
            by_week[point.week] = point
    ordered = [by_week[w] for w in sorted(by_week)]
    return tuple(ordered[-BURNDOWN_WEEKS:])


def _missing_verdict(shim: str):
    from retire.verdicts.model import Verdict

    return Verdict(shim, "unknown", "no verdict: the probes returned nothing for this shim")


def build(
    manifests: Sequence,
    lanes: Sequence,
    verdicts: Sequence,
    records: Sequence,
    *,
    week: str,
    now: _dt.datetime,
    previous: PreviousReport | None = None,
    history: Iterable[BurnPoint] = (),
    notes: Sequence[str] = (),
    records_failure: str | None = None,
    filing_queue: str | None = None,
) -> Report:
    """The report for ``week`` (pure). ``records_failure`` says why no records could be read:
    then no row is called "never run" (that would be a claim the report cannot make)."""
    week = parse_week(week)
    as_of = min(now.date(), week_bounds(week)[1])
    manifests = sorted(manifests, key=lambda m: m.id)
    by_verdict = {v.shim: v for v in verdicts}
    shim_ids = [m.id for m in manifests]

    by_shim: dict[str, list] = {}
    by_cell: dict[tuple[str, str], list] = {}
    for record in records:
        by_shim.setdefault(record.shim, []).append(record)
        by_cell.setdefault((record.shim, record.lane), []).append(record)
    matrix = build_matrix(lanes, shim_ids, by_cell)
    broken_by_shim: dict[str, list[str]] = {}
    for cell in matrix.cells.values():
        if cell.broken:
            broken_by_shim.setdefault(cell.shim, []).append(cell.lane)
    lane_order = {lane: i for i, lane in enumerate(matrix.lanes)}
    previous_broken = previous.broken if previous is not None else None

    rows = []
    for manifest in manifests:
        verdict = by_verdict.get(manifest.id) or _missing_verdict(manifest.id)
        mine = by_shim.get(manifest.id, [])
        proven = [r for r in mine if r.outcome in PROVING]
        last_proven = _stamp(max(proven, key=lambda r: r.started_at)) if proven else None
        last_run = _stamp(max(mine, key=lambda r: r.started_at)) if mine else None
        if records_failure and last_run is None:
            last_run = RunStamp(
                "?", None, "?", "", "unknown", "-", f"records unreadable: {records_failure}"
            )
        broken = tuple(sorted(broken_by_shim.get(manifest.id, []), key=lane_order.__getitem__))
        newly = tuple(
            l for l in broken if previous_broken is None or (manifest.id, l) not in previous_broken
        )
        rows.append(
            ShimRow(
                shim=manifest.id,
                title=manifest.title,
                fix_class=manifest.fix_class,
                owner=manifest.owner,
                created=manifest.created,
                age_days=(as_of - manifest.created).days,
                upstream_status=manifest.upstream.status,
                links=tuple((link.role, link.url) for link in manifest.upstream.links),
                verdict=str(verdict.decision),
                why=verdict.why,
                retirement_mode=manifest.retirement.mode,
                retire_when=tuple(_condition_words(c) for c in manifest.retirement.conditions),
                conditions=tuple((c.kind, str(c.state), c.why) for c in verdict.conditions),
                failures=tuple(str(f) for f in verdict.failures),
                floors=tuple(verdict.floors),
                lanes=tuple(verdict.lanes)
                or tuple(l.name for l in lanes if manifest.id in l.shims),
                last_proven=last_proven,
                last_run=last_run,
                broken_lanes=broken,
                newly_broken_lanes=newly,
                evidence=tuple(evidence_line(e) for e in (*verdict.evidence, *verdict.failures)),
                action=verdict.action,
                flags=tuple((str(f.kind), f.text) for f in verdict.flags),
            )
        )
    rows_t = tuple(rows)
    count = {kind: sum(r.verdict == kind for r in rows_t) for kind in ("keep", "retire", "unknown")}
    count.update({kind: sum(r.flagged(kind) for r in rows_t) for kind in ("stale", "drift")})
    headline = Headline(
        carried=len(rows_t),
        retire=count["retire"],
        newly_broken=sum(bool(r.newly_broken_lanes) for r in rows_t),
        unknown=count["unknown"],
        broken=sum(bool(r.broken_lanes) for r in rows_t),
        keep=count["keep"],
        stale=count["stale"],
        drift=count["drift"],
        never_run=sum(r.never_run for r in rows_t),
    )
    burndown = merge_burndown(history, BurnPoint(week, headline.carried, headline.retire, "now"))
    return Report(
        week=week,
        generated_at=times.to_utc(now).isoformat(timespec="seconds"),
        as_of=as_of,
        headline=headline,
        rows=rows_t,
        matrix=matrix,
        changes=_changes(previous, rows_t, matrix),
        burndown=burndown,
        notes=tuple(notes),
        filing_queue=filing_queue,
        verdicts=tuple(
            _verdict_json(by_verdict.get(m.id) or _missing_verdict(m.id)) for m in manifests
        ),
    )


def _verdict_json(verdict) -> dict:
    try:
        return verdict.to_json()
    except Exception as exc:  # noqa: BLE001 - evidence that will not serialise must not cost the report
        return {
            "shim": verdict.shim,
            "verdict": str(verdict.decision),
            "why": verdict.why,
            "error": f"evidence not serialisable: {type(exc).__name__}: {exc}",
        }
