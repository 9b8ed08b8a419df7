"""The report as JSON (for machines and the next report), Markdown (a GitHub issue body) and
the short text printed at the end of a run. Pure functions of a ``report_model.Report``.

The Markdown must fit one issue body (GitHub refuses more than 65,536 characters): when the full
text is longer, the per-shim evidence sections go first, then matrix rows and table rows that need
no attention, and a note points at the HTML and JSON files that always hold everything.
"""

from __future__ import annotations

from retire.report import regressions
from retire.report.evidence import summarise_verdict
from retire.report.model import SCHEMA, Bisections, Report, ShimEntry, lane_next
from retire.report.sections import MARKER, SECTIONS, View, cell_text
from retire.verdicts.model import Verdict

__all__ = [
    "ISSUE_BODY_LIMIT",
    "MARKER",
    "bisections_text",
    "cell_text",
    "short_text",
    "to_json",
    "to_markdown",
]

#: GitHub's limit on an issue body, with room for the workflow's own footer.
ISSUE_BODY_LIMIT = 65_000


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(report: Report) -> dict[str, object]:
    """Everything in the report as plain JSON data; :class:`PreviousReport` reads it back."""
    h = report.headline
    return {
        "kind": "patchlane-report",
        "schema": SCHEMA,
        "week": report.week,
        "generated_at": report.generated_at,
        "as_of": report.as_of.isoformat(),
        "headline": h.to_json(),
        "notes": list(report.notes),
        "advice": list(report.advice),
        "shims": [_row_json(row) for row in report.rows],
        "lanes": [
            {"name": lane, "defined": lane in report.matrix.defined} for lane in report.matrix.lanes
        ],
        "matrix": _matrix_json(report),
        "changes": {
            "previous_week": report.changes.previous_week,
            "new": list(report.changes.new),
            "retired": list(report.changes.retired),
            "verdicts": [
                {"shim": c.shim, "before": c.before, "after": c.after, "why": c.why}
                for c in report.changes.verdicts
            ],
            "newly_broken": [
                {"shim": shim, "lane": lane, "outcome": outcome}
                for shim, lane, outcome in report.changes.newly_broken
            ],
            "repaired": [{"shim": shim, "lane": lane} for shim, lane in report.changes.repaired],
        },
        "attention": {row.shim: list(row.attention) for row in report.attention},
        "stale_or_unlinked": [row.shim for row, _, _ in report.stale_or_unlinked],
        "burndown": [
            {"week": p.week, "carried": p.carried, "candidates": p.candidates, "source": p.source}
            for p in report.burndown
        ],
        "filing_queue": report.filing_queue,
        "verdicts": [_verdict_json(v) for v in report.verdicts],
        "blocked": [
            {
                "shim": row.shim,
                "lane": lane.lane,
                "blocker": lane.blocker or "",
                "floors": [str(floor) for floor in lane.floors],
                "file": lane.file,
                "locked": lane.locked,
                "why": lane.why,
            }
            for row, lane in report.blocked
        ],
        "bisections": report.bisections.to_json() if report.bisections is not None else None,
        "regressions": regressions.to_json(report.regressions),
    }


def _row_json(row: ShimEntry) -> dict[str, object]:
    v, m = row.verdict, row.manifest
    return {
        "shim": row.shim,
        "title": m.title,
        "fix_class": m.fix_class,
        "owner": m.owner,
        "created": m.created.isoformat(),
        "age_days": row.age_days,
        "upstream": {
            "status": m.upstream.status,
            "links": [{"role": link.role, "url": link.url} for link in m.upstream.links],
        },
        "verdict": v.decision,
        "why": v.why,
        "action": v.action,
        "flags": [{"kind": f.kind, "text": f.text} for f in v.flags],
        "retirement": {"mode": m.retirement.mode, "conditions": list(row.retire_when)},
        "conditions": [{"kind": c.kind, "state": c.state, "why": c.why} for c in v.conditions],
        "failures": [str(f) for f in v.failures],
        "floors": [str(floor) for floor in v.floors],
        "lanes": list(row.lanes),
        "last_proven": row.last_proven.to_json() if row.last_proven else None,
        "last_run": row.last_run.to_json() if row.last_run else None,
        "proven": row.proven_text,
        "unproven": row.unproven,
        "window": row.window.to_json() if row.window is not None else None,
        "broken_lanes": list(row.broken_lanes),
        "newly_broken_lanes": list(row.newly_broken_lanes),
        "attention": list(row.attention),
        "evidence": list(row.evidence),
        "lane_verdicts": [lane.to_json() for lane in v.lane_verdicts],
    }


def _verdict_json(verdict: Verdict) -> dict[str, object]:
    try:
        return summarise_verdict(verdict)
    # evidence that will not serialise must not cost the report
    except Exception as exc:  # noqa: BLE001
        return {
            "shim": verdict.shim,
            "verdict": str(verdict.decision),
            "why": verdict.why,
            "error": f"evidence not serialisable: {type(exc).__name__}: {exc}",
        }


def _matrix_json(report: Report) -> dict[str, dict[str, dict[str, str]]]:
    out: dict[str, dict[str, dict[str, str]]] = {}
    for (shim, lane), cell in report.matrix.cells.items():
        entry = {"outcome": cell.outcome, "why": cell.why}
        if cell.date:
            entry["date"], entry["host"] = cell.date, cell.host
        out.setdefault(shim, {})[lane] = entry
    return {shim: out[shim] for shim in report.matrix.shims if shim in out}


# ---------------------------------------------------------------------------------------------
# Markdown


def _document(report: Report, view: View, limit: int | None = None) -> str | None:
    """The issue body ``view`` shows; None as soon as it is sure to be longer than ``limit``
    (the sections after that point are never written: a report of 500 shims is over the limit
    long before its Evidence section)."""
    lines: list[str] = []
    size = 0
    for section in SECTIONS:
        written = section.markdown(report, view)
        lines += written
        size += sum(len(line) + 1 for line in written)
        # later sections only add to the text: once what is written is over, so is the whole
        if limit is not None and size > limit and len("\n".join(lines).rstrip()) + 1 > limit:
            return None
    return "\n".join(lines).rstrip() + "\n"


def to_markdown(
    report: Report, *, limit: int = ISSUE_BODY_LIMIT, full_report: str | None = None
) -> str:
    """A GitHub issue body: every section of :data:`retire.report.sections.SECTIONS`; trimmed
    (with a note) to stay under ``limit``."""
    pointer = f" The full report is in {full_report}." if full_report else ""
    attention = frozenset(row.shim for row in report.attention)
    attempts = (
        View(),
        View(evidence=False, note=f"Evidence sections left out to fit an issue body.{pointer}"),
        View(
            only=attention,
            evidence=False,
            note=f"Matrix trimmed to the shims that need attention.{pointer}",
        ),
        View(
            only=attention,
            table=attention,
            evidence=False,
            note=f"Tables trimmed to the {len(attention)} shims that need attention.{pointer}",
        ),
    )
    for view in attempts[:-1]:
        text = _document(report, view, limit)
        if text is not None:
            return text
    text = _document(report, attempts[-1]) or ""
    if len(text) <= limit:
        return text
    cut = text[: limit - 200]
    return cut[: cut.rfind("\n")] + f"\n\n> [!NOTE]\n> Truncated to fit an issue body.{pointer}\n"


# ---------------------------------------------------------------------------------------------
# Short text


def bisections_text(done: Bisections) -> list[str]:
    """The candidate bisections in a few terminal lines: the budget, each that ran, each left."""
    runs = f"{done.runs} reproducer run{'s' if done.runs != 1 else ''}"
    lines = [f"candidate bisections (budget: {done.budget}): {len(done.ran)} ran, {runs}"]
    for b in done.ran:
        stopped = f" — stopped: {b.stopped}" if b.stopped else ""
        lines.append(f"  {b.shim}: {b.status}, {b.runs} run(s): {b.summary}{stopped}")
    lines += [f"  {b.shim}: not run — {b.why} ({b.command})" for b in done.left]
    return lines


def _urgent_text(report: Report) -> list[str]:
    """The regressions (a guard's bug back, a shim newly broken) and the blocked lanes, first in
    the terminal as in the documents; nothing when there are none."""
    lines = []
    for r in report.regressions:
        what = "REGRESSED: guard" if r.kind == "guard-regressed" else "newly broken:"
        then = f" — {r.culprit}" if r.culprit else ""
        lines.append(f"{what} {r.subject} in lane {r.lane}{then}")
        if r.action:
            lines.append(f"  next: {r.action}")
    blocked = report.blocked
    if blocked:
        lines.append(f"blocked ({len(blocked)}):")
        lines += [f"  {row.shim} on {lane.lane}: {lane_next(lane)}" for row, lane in blocked]
    return lines


def short_text(report: Report, written: list[str] | tuple[str, ...] = ()) -> str:
    """What a person reads in the terminal: the headline and the shims that need attention."""
    h = report.headline
    lines = [
        (
            f"retirement report {report.week}: {h.carried} shims carried, {h.retire} retire "
            f"candidate(s), "
            f"{h.newly_broken} newly broken, {h.unknown} unknown evidence"
        ),
    ]
    # what broke again and what is blocked lead: the most urgent news of the week
    lines += _urgent_text(report)
    for note in (*report.notes, *report.advice):
        lines.append(f"note: {note}")
    rows = report.attention
    if rows:
        width = max(len(row.shim) for row in rows)
        lines.append("needs attention:")
        for row in rows:
            why = " ".join(row.verdict.why.split())
            why = why if len(why) <= 140 else why[:139] + "…"
            lines.append(f"  {row.shim:<{width}}  {'; '.join(row.attention)} — {why}")
            if row.verdict.action:
                lines.append(f"  {'':<{width}}  next: {row.verdict.action}")
    elif not report.regressions and not report.blocked:
        lines.append("nothing needs attention")
    if report.changes.previous_week and not report.changes.empty:
        c = report.changes
        parts = [
            f"{len(c.new)} new",
            f"{len(c.retired)} retired",
            f"{len(c.verdicts)} verdict change(s)",
        ]
        lines.append(f"since {c.previous_week}: " + ", ".join(parts))
    if report.bisections is not None:
        lines += bisections_text(report.bisections)
    if written:
        lines.append("wrote " + ", ".join(written))
    return "\n".join(lines)
