"""The report as JSON (for machines and the next report), Markdown (a GitHub issue body) and
the short text printed at the end of a run. Pure functions of a ``report_model.Report``.

The Markdown must fit one issue body (GitHub refuses more than 65,536 characters): when the full
text is longer, the per-shim evidence sections go first, then matrix rows and table rows that need
no attention, and a note points at the HTML and JSON files that always hold everything.
"""

from __future__ import annotations

from retire.core import mdsafe
from retire.report import regressions, vocabulary
from retire.report.evidence import summarise_verdict
from retire.report.mdhtml import code_spans
from retire.report.model import (
    CELL_OUTCOMES,
    SCHEMA,
    Bisections,
    Chase,
    Report,
    ShimRow,
    lane_next,
)
from retire.report.vocabulary import OUTCOMES, STEPS
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = [
    "ISSUE_BODY_LIMIT",
    "MARKER",
    "bisections_text",
    "short_text",
    "to_json",
    "to_markdown",
]

#: GitHub's limit on an issue body, with room for the workflow's own footer.
ISSUE_BODY_LIMIT = 65_000
#: First line of the Markdown: how the workflow finds the one tracking issue again.
MARKER = "<!-- patchlane:weekly-retirement-report -->"


# ---------------------------------------------------------------------------------------------
# JSON


def to_json(report: Report) -> dict:
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
        "verdicts": [summarise_verdict(v) for v in report.verdicts],
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


def _row_json(row: ShimRow) -> dict:
    return {
        "shim": row.shim,
        "title": row.title,
        "fix_class": row.fix_class,
        "owner": row.owner,
        "created": row.created.isoformat(),
        "age_days": row.age_days,
        "upstream": {
            "status": row.upstream_status,
            "links": [{"role": r, "url": u} for r, u in row.links],
        },
        "verdict": row.verdict,
        "why": row.why,
        "action": row.action,
        "flags": [{"kind": k, "text": x} for k, x in row.flags],
        "retirement": {"mode": row.retirement_mode, "conditions": list(row.retire_when)},
        "conditions": [{"kind": k, "state": s, "why": w} for k, s, w in row.conditions],
        "failures": list(row.failures),
        "floors": list(row.floors),
        "lanes": list(row.lanes),
        "last_proven": row.last_proven.to_json() if row.last_proven else None,
        "last_run": row.last_run.to_json() if row.last_run else None,
        "proven": row.proven_text,
        "unproven": row.unproven,
        "broken_lanes": list(row.broken_lanes),
        "newly_broken_lanes": list(row.newly_broken_lanes),
        "attention": list(row.attention),
        "evidence": list(row.evidence),
        "lane_verdicts": [lane.to_json() for lane in row.lane_verdicts],
    }


def _matrix_json(report: Report) -> dict:
    out: dict[str, dict] = {}
    for (shim, lane), cell in report.matrix.cells.items():
        entry = {"outcome": cell.outcome, "why": cell.why}
        if cell.date:
            entry["date"], entry["host"] = cell.date, cell.host
        out.setdefault(shim, {})[lane] = entry
    return {shim: out[shim] for shim in report.matrix.shims if shim in out}


# ---------------------------------------------------------------------------------------------
# Markdown


def cell_text(text: str, limit: int | None = None) -> str:
    """Text safe inside a Markdown table cell (and inert as HTML in an issue body)."""
    # no heading, list, link or image of the text's own either (retire.core.mdsafe)
    return mdsafe.text(text, limit).replace(">", "&gt;")


def code_cell(text: str, *, table: bool = True) -> str:
    """A code span (inside a table cell unless ``table`` is false): GFM reads ``\\|`` in a
    table as a pipe, and a code span shows entities as written, so nothing else is escaped (a
    backtick in the text widens the fence)."""
    flat = " ".join(str(text).split())
    flat = flat.replace("|", "\\|") if table else flat
    fence = "``" if "`" in flat else "`"
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _link(role: str, url: str) -> str:
    from retire.report.model import short_link

    return f"[{cell_text(short_link(url))}]({url.replace(')', '%29').replace(' ', '%20')}) ({role})"


def _headline_md(report: Report) -> list[str]:
    h = report.headline
    since = (
        f"previous report {report.changes.previous_week}"
        if report.changes.previous_week
        else "no previous report"
    )
    extra = "".join(
        f" · **{n} {words}**"
        for n, words in (
            (h.retire_in_some, "retire in some lanes"),
            (h.blocked, f"lane{'s' if h.blocked != 1 else ''} blocked"),
        )
        if n
    )
    lines = [
        MARKER,
        f"# Shim retirement report — {report.week}",
        "",
        # what broke again leads: a regressed guard is the week's most urgent news
        *regressions.to_markdown(report.regressions),
        (
            f"**{h.carried} shims carried** · **{h.retire} retire "
            f"candidate{'s' if h.retire != 1 else ''}** · "
            f"**{h.newly_broken} newly broken** · **{h.unknown} with unknown evidence**{extra}"
        ),
        "",
        (
            f"<sub>as of {report.as_of.isoformat()} · generated {report.generated_at} · {since} · "
            f"{h.keep} keep, {h.stale} stale, {h.drift} drift, {h.broken} broken somewhere, "
            f"{h.never_run} never run</sub>"
        ),
        "",
    ]
    if report.notes:
        lines += ["> [!WARNING]", *[f"> {cell_text(note)}  " for note in report.notes], ""]
    return lines


def _attention_md(report: Report) -> list[str]:
    rows = report.attention
    if not rows:
        return [
            "## Needs attention",
            "",
            "Nothing: every shim is needed, proven and linked upstream.",
            "",
        ]
    lines = ["## Needs attention", ""]
    for row in rows:
        lines.append(
            f"- **`{row.shim}`** — {cell_text('; '.join(row.attention))}: {cell_text(row.why, 300)}"
            + (f" **Next:** {cell_text(row.action, 300)}" if row.action else "")
        )
    return [*lines, ""]


def _lane_word(lane: LaneVerdict) -> str:
    return f"{vocabulary.step(lane.step).emoji} {cell_text(lane.lane)} ({lane.step})"


def _per_lane_md(report: Report, only: set[str] | None = None) -> list[str]:
    """Each shim's lanes with their step, then every hold with its until, every lane without a
    decision with its next step, and every conflict with both its sides."""
    lines = ["## Retirement per lane", ""]
    rows = [r for r in report.rows if r.lane_verdicts and (only is None or r.shim in only)]
    if not rows:
        lines += ["No per-lane verdicts (the verdicts were gathered without lanes).", ""]
        return lines + _conflicts_md(report, only)
    legend = " · ".join(f"{look.emoji} {cell_text(look.label)}" for look in STEPS.values())
    lines += [legend, "", "| shim | verdict | lanes |", "|---|---|---|"]
    for row in rows:
        lines.append(
            f"| [`{row.shim}`](#{_anchor(row.shim)}) | "
            f"{vocabulary.verdict(row.verdict).emoji} **{row.verdict}** | "
            + " · ".join(_lane_word(lane) for lane in row.lane_verdicts)
            + " |"
        )
    lines.append("")
    shown = {row.shim for row in rows}
    for step, heading, label in (
        (LaneStep.HOLD, "**Held by the lane's policy:**", "Until"),
        (LaneStep.UNKNOWN, "**Lanes without a decision:**", "Next"),
    ):
        found = [(r, lane) for r, lane in report.lanes_at(step) if r.shim in shown]
        if found:
            lines += [
                heading,
                *[
                    f"- `{r.shim}` on **{cell_text(lane.lane)}** — {cell_text(lane.why, 300)} "
                    f"**{label}:** {cell_text(lane_next(lane).removeprefix('until ') or '—', 300)}"
                    for r, lane in found
                ],
                "",
            ]
    return lines + _conflicts_md(report, only)


def _conflicts_md(report: Report, only: set[str] | None) -> list[str]:
    conflicts = [(r, text) for r, text in report.conflicts if only is None or r.shim in only]
    if not conflicts:
        return []
    return [
        "**Conflicts** (two sources disagree; the floor comes from execution):",
        *[
            f"- {vocabulary.FLAG.emoji} `{r.shim}` — {cell_text(text, 400)}"
            for r, text in conflicts
        ],
        "",
    ]


def _blocked_md(report: Report) -> list[str]:
    lines = ["## Blocked", ""]
    if not report.blocked:
        return [*lines, "None: no lane's raise is blocked.", ""]
    lines += [
        (
            "Lanes that would let the shim go if their pins could rise; the blocker is the "
            "resolver's own explanation — what has to change. The next report checks again."
        ),
        "",
        "| shim | lane | raise to | blocker |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| [`{row.shim}`](#{_anchor(row.shim)}) | {cell_text(lane.lane)} | "
        + (", ".join(code_cell(str(f)) for f in lane.floors) or "—")
        + f" | {cell_text(lane.blocker or lane.why, 400)} |"
        for row, lane in report.blocked
    ]
    return [*lines, ""]


def _bisections_md(report: Report) -> list[str]:
    done = report.bisections
    if done is None:
        return []
    lines = [
        "## Bisections",
        "",
        (
            f"Budget: {done.budget} — {done.runs} reproducer run{'s' if done.runs != 1 else ''} "
            "spent; every run is recorded in the validation manifest, and the verdicts read it."
        ),
        "",
    ]
    if not done.ran and not done.left:
        return [*lines, "No verdict is flagged candidate: nothing to bisect.", ""]
    if done.ran:
        lines += ["| shim | command | runs | result |", "|---|---|---:|---|"]
        lines += [
            f"| `{b.shim}` | {code_cell(b.command)} | {b.runs} | "
            f"{cell_text(b.summary, 400)}"
            + (f" **Stopped:** {cell_text(b.stopped)}" if b.stopped else "")
            + " |"
            for b in done.ran
        ]
        lines.append("")
    if done.left:
        lines += [
            "**Not run this time:**",
            *[f"- {code_cell(b.command, table=False)} — {cell_text(b.why)}" for b in done.left],
            "",
        ]
    return lines


def _shim_table_md(rows: tuple[ShimRow, ...]) -> list[str]:
    lines = [
        "## Shims",
        "",
        "| shim | fix class | owner | age | upstream | verdict | why | retire when | last proven |",
        "|---|---|---|---:|---|---|---|---|---|",
    ]
    for row in rows:
        links = "<br>".join(_link(r, u) for r, u in row.links) or "**no link**"
        joiner = " and " if row.retirement_mode == "all" else " or "
        lines.append(
            f"| [`{row.shim}`](#{_anchor(row.shim)}) | {row.fix_class} | {cell_text(row.owner)} | "
            f"{row.age_days} d "
            f"| {row.upstream_status}<br>{links} | {vocabulary.verdict(row.verdict).emoji} "
            f"**{row.verdict}** "
            f"| {cell_text(row.why, 220)} | {cell_text(joiner.join(row.retire_when))} | "
            f"{_unproven_md(row)}{cell_text(row.proven_text, 160)} |"
        )
    return [*lines, ""]


def _unproven_md(row: ShimRow) -> str:
    """The label of a shim that no lane proves, before where it was last proven."""
    return f"**unproven**: {cell_text(row.unproven, 160)}<br>" if row.unproven is not None else ""


def _anchor(shim: str) -> str:
    return f"evidence-{shim.replace('_', '-')}"


def _matrix_md(report: Report, only: set[str] | None = None) -> list[str]:
    m = report.matrix
    if not m.lanes:
        return ["## Lane × shim matrix", "", "No lanes defined and no runs recorded.", ""]
    legend = (
        " · ".join(f"{OUTCOMES[o].emoji} {o}" for o in CELL_OUTCOMES)
        + " · blank: the lane does not list it"
    )
    header = (
        "| shim | "
        + " | ".join(cell_text(lane) + ("" if lane in m.defined else " ⁺") for lane in m.lanes)
        + " |"
    )
    lines = [
        "## Lane × shim matrix",
        "",
        legend,
        "",
        header,
        "|---|" + "|".join(":-:" for _ in m.lanes) + "|",
    ]
    for shim in m.shims:
        if only is not None and shim not in only:
            continue
        cells = [OUTCOMES[c.outcome].emoji if (c := m.cell(shim, lane)) else "" for lane in m.lanes]
        lines.append(f"| `{shim}` | " + " | ".join(cells) + " |")
    notes = []
    if any(lane not in m.defined for lane in m.lanes):
        notes.append(
            "⁺ a lane only seen in the validation records (e.g. a GPU host's overlay lane), not in "
            "lanes/."
        )
    if only is not None:
        notes.append(f"Showing {len(only)} of {len(m.shims)} shims (those that need attention).")
    return lines + [""] + [f"<sub>{n}</sub>" for n in notes] + ([""] if notes else [])


def _changes_md(report: Report) -> list[str]:
    c = report.changes
    if c.previous_week is None:
        return ["## Changes", "", "No previous report to compare with: this is the first one.", ""]
    lines = [f"## Changes since {c.previous_week}", ""]
    if c.empty:
        return [*lines, "Nothing changed.", ""]
    if c.new:
        lines.append("- **New shims:** " + ", ".join(f"`{s}`" for s in c.new))
    if c.retired:
        lines.append("- **Retired (gone from shims/):** " + ", ".join(f"`{s}`" for s in c.retired))
    if c.newly_broken:
        lines.append(
            "- **Newly broken:** "
            + ", ".join(
                f"`{shim}` on {cell_text(lane)} ({outcome})"
                for shim, lane, outcome in c.newly_broken
            )
        )
    if c.repaired:
        lines.append(
            "- **No longer broken:** "
            + ", ".join(f"`{shim}` on {cell_text(lane)}" for shim, lane in c.repaired)
        )
    if c.verdicts:
        lines += ["", "| shim | before | now | why |", "|---|---|---|---|"]
        lines += [
            f"| `{v.shim}` | {v.before} | {vocabulary.verdict(v.after).emoji} **{v.after}** | "
            f"{cell_text(v.why, 200)} |"
            for v in c.verdicts
        ]
    return [*lines, ""]


def _unlinked_md(report: Report) -> list[str]:
    rows = report.stale_or_unlinked
    lines = ["## Stale or without an upstream link", ""]
    if not rows:
        return [*lines, "None.", ""]
    for row, why, text in rows:
        if why == Chase.STALE:
            lines.append(f"- `{row.shim}` — **stale**: {cell_text(text, 240)}")
        elif why == Chase.POLICY:
            lines.append(
                f"- `{row.shim}` — no upstream link (status not-applicable: local policy, nothing "
                f"to file)"
            )
        else:
            lines.append(
                f"- `{row.shim}` — **no upstream link** (status {text}): file it and link it"
            )
    return [*lines, ""]


def _burndown_md(report: Report) -> list[str]:
    points = report.burndown
    lines = ["## Burn-down: shims carried", ""]
    if len(points) < 2:
        return [*lines, f"Only this week's count so far: {report.headline.carried}.", ""]
    top = max(p.carried for p in points)
    lines += [
        "```mermaid",
        "xychart-beta",
        '  title "Shims carried per ISO week"',
        "  x-axis [" + ", ".join(f'"{p.week[2:]}"' for p in points) + "]",
        f'  y-axis "shims" 0 --> {max(top, 1) + 1}',
        "  line [" + ", ".join(str(p.carried) for p in points) + "]",
        "```",
        "",
        "<details><summary>Points</summary>",
        "",
        "| week | carried | retire candidates | from |",
        "|---|---:|---:|---|",
        *[
            f"| {p.week} | {p.carried} | {'' if p.candidates is None else p.candidates} | "
            f"{p.source} |"
            for p in points
        ],
        "",
        "</details>",
        "",
    ]
    return lines


def _evidence_md(report: Report) -> list[str]:
    lines = ["## Evidence", ""]
    for row in report.rows:
        lines += [
            (
                f'<details id="{_anchor(row.shim)}"><summary><code>{row.shim}</code> — '
                f"{vocabulary.verdict(row.verdict).emoji} {row.verdict}: "
                f"{summary_title(row.title)}</summary>"
            ),
            "",
            f"**Why:** {cell_text(row.why)}",
            "",
            *([f"**Next:** {cell_text(row.action)}", ""] if row.action else []),
            *(
                [*[f"- {vocabulary.FLAG.emoji} `{k}` — {cell_text(x)}" for k, x in row.flags], ""]
                if row.flags
                else []
            ),
            f"**Retire when** ({row.retirement_mode} of):",
            *[f"- {cell_text(w)}" for w in row.retire_when],
            "",
        ]
        if row.conditions:
            lines += [
                "**Conditions now:**",
                *[
                    f"- {vocabulary.condition(s).emoji} `{k}` — {cell_text(w)}"
                    for k, s, w in row.conditions
                ],
                "",
            ]
        if row.floors:
            lines += ["**Proposed floors:** " + ", ".join(f"`{f}`" for f in row.floors), ""]
        lines += _lanes_table_md(row)
        if row.failures:
            lines += ["**Probe failures:**", *[f"- ⚠️ {cell_text(f)}" for f in row.failures], ""]
        if row.evidence:
            lines += ["**Evidence:**", *[f"- {cell_text(e, 400)}" for e in row.evidence], ""]
        runs = [c for lane in report.matrix.lanes if (c := report.matrix.cell(row.shim, lane))]
        if runs:
            lines += ["| lane | outcome | host | date | why |", "|---|---|---|---|---|"]
            lines += [
                f"| {cell_text(c.lane)} | {OUTCOMES[c.outcome].emoji} {c.outcome} | "
                f"{cell_text(c.host)} | {c.date} "
                f"| {cell_text(c.why, 160)} |"
                for c in runs
            ]
            lines.append("")
        lines += [
            (
                f"**Last proven:** {cell_text(row.proven_text)} · **owner** {cell_text(row.owner)} "
                f"· "
                f"created {row.created.isoformat()}"
            ),
            "",
            "</details>",
            "",
        ]
    return lines


def summary_title(title: str, limit: int = 120) -> str:
    """A title inside ``<summary>``: raw HTML to GitHub, so Markdown is not rendered there — the
    title's backtick spans become ``<code>``, the rest is escaped (a ``|`` stays a ``|``)."""
    flat = " ".join(str(title).split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return code_spans(flat)


def _lanes_table_md(row: ShimRow) -> list[str]:
    if not row.lane_verdicts:
        return []
    lines = ["| lane | step | policy | locked | why | next |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {cell_text(lane.lane)} | {vocabulary.step(lane.step).emoji} {lane.step} | "
        f"{lane.policy} | {cell_text(lane.locked or '—')} | {cell_text(lane.why, 300)} | "
        f"{cell_text(lane_next(lane), 300)} |"
        for lane in row.lane_verdicts
    ]
    return [*lines, ""]


def to_markdown(
    report: Report, *, limit: int = ISSUE_BODY_LIMIT, full_report: str | None = None
) -> str:
    """A GitHub issue body: headline, attention list, tables, matrix, changes, burn-down and a
    collapsible evidence section per shim; trimmed (with a note) to stay under ``limit``."""
    head = _headline_md(report) + _attention_md(report)
    tail = (
        _blocked_md(report)
        + _bisections_md(report)
        + _changes_md(report)
        + _unlinked_md(report)
        + _burndown_md(report)
    )
    if report.filing_queue:
        tail += [report.filing_queue.rstrip(), ""]
    pointer = f" The full report is in {full_report}." if full_report else ""
    attention = {row.shim for row in report.attention}
    attention_rows = tuple(row for row in report.rows if row.shim in attention)
    attempts = [
        (report.rows, None, True, ""),
        (report.rows, None, False, f"Evidence sections left out to fit an issue body.{pointer}"),
        (
            report.rows,
            attention,
            False,
            f"Matrix trimmed to the shims that need attention.{pointer}",
        ),
        (
            attention_rows,
            attention,
            False,
            f"Tables trimmed to the {len(attention_rows)} shims that need attention.{pointer}",
        ),
    ]
    text = ""
    for rows, only, evidence, note in attempts:
        body = list(head)
        if note:
            body += [f"> [!NOTE]\n> {note}", ""]
        body += _per_lane_md(report, only) + _shim_table_md(rows) + _matrix_md(report, only) + tail
        if evidence:
            body += _evidence_md(report)
        text = "\n".join(body).rstrip() + "\n"
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
    for note in report.notes:
        lines.append(f"note: {note}")
    rows = report.attention
    if rows:
        width = max(len(row.shim) for row in rows)
        lines.append("needs attention:")
        for row in rows:
            why = " ".join(row.why.split())
            why = why if len(why) <= 140 else why[:139] + "…"
            lines.append(f"  {row.shim:<{width}}  {'; '.join(row.attention)} — {why}")
            if row.action:
                lines.append(f"  {'':<{width}}  next: {row.action}")
    else:
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
