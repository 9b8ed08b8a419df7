"""The report as one self-contained HTML page: inline CSS, the lane × shim matrix as a coloured
grid, the burn-down as inline SVG, no script and nothing loaded from anywhere (a Content Security
Policy of ``default-src 'none'`` makes the browser refuse it if something ever tries).

Hover titles carry the detail (outcome, why, host, date); every colour also has a glyph, so the
grid reads without colour vision too. Pure: a function of a ``report_model.Report``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from html import escape

from retire.report import mdhtml
from retire.report.mdhtml import page_html
from retire.report.model import CELL_OUTCOMES, BurnPoint, BurnSource, Report, ShimEntry, lane_next
from retire.report.sections import SECTIONS, Section, View, anchor, lane_notes
from retire.report.vocabulary import OUTCOMES, PLAIN, STEPS, VERDICTS, step
from retire.verdicts.model import LaneVerdict

__all__ = ["OUTCOME_COLOURS", "VERDICT_COLOURS", "to_html"]

#: Cell colours, ink and glyphs come from the one table of looks (``retire.report.vocabulary``);
#: these views name them for the page and its tests (the browser test looks for these exact pixels).
OUTCOME_COLOURS = {str(outcome): look.colour for outcome, look in OUTCOMES.items()}
OUTCOME_INK = {str(outcome): look.ink for outcome, look in OUTCOMES.items()}
OUTCOME_GLYPHS = {str(outcome): look.glyph for outcome, look in OUTCOMES.items()}
VERDICT_COLOURS = {str(name): (look.colour, look.ink) for name, look in VERDICTS.items()}
#: Lane steps: (background, ink) of each step's cell and tag.
STEP_COLOURS = {str(name): (look.colour, look.ink) for name, look in STEPS.items()}

#: Headline cards: the number's colour on white.
CARD_COLOURS = {
    "carried": "#334155",
    "retire": "#15803d",
    "broken": "#dc2626",
    "unknown": "#b45309",
    "blocked": "#b91c1c",
    # a zero: nothing to alarm anyone
    "none": "#475569",
}
#: Every text colour the stylesheet uses, on every background it is used on (a test checks
#: each pair for 4.5:1, and that no other colour appears in a page).
TEXT_PAIRS = (
    # ink on paper, wash, notes
    ("#0f172a", "#ffffff"),
    ("#0f172a", "#f8fafc"),
    ("#0f172a", "#fff7ed"),
    # muted
    ("#475569", "#ffffff"),
    ("#475569", "#f8fafc"),
    ("#475569", "#fff7ed"),
    ("#334155", "#ffffff"),
    ("#1d4ed8", "#ffffff"),
    ("#1d4ed8", "#f8fafc"),
    ("#1d4ed8", "#fff7ed"),
    # never-proven text; an unrecognised verdict tag
    ("#b91c1c", "#ffffff"),
    ("#334155", "#e2e8f0"),
    *((fore, back) for back, fore in VERDICT_COLOURS.values()),
    *((fore, back) for back, fore in STEP_COLOURS.values()),
    *((OUTCOME_INK[o], OUTCOME_COLOURS[o]) for o in OUTCOME_COLOURS),
    *((colour, "#ffffff") for colour in CARD_COLOURS.values()),
)
#: Colours that carry no text: borders, rules, swatches, chart fills.
DECORATION = ("#e2e8f0", "#fdba74", "#f59e0b", "#94a3b8", "#86efac", "#cbd5e1", "#0f172a")

_CSS = """
:root { --ink:#0f172a; --muted:#475569; --line:#e2e8f0; --paper:#ffffff; --wash:#f8fafc; }
* { box-sizing: border-box; }
body {
  margin: 0;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); background: var(--wash);
}
main { max-width: 1320px; margin: 0 auto; padding: 24px 28px 48px; overflow-wrap: break-word; }
.brk { overflow-wrap: anywhere; }
header h1 { font-size: 26px; margin: 0 0 2px; letter-spacing: -0.01em; }
header .sub { color: var(--muted); margin: 0 0 18px; }
h2 { font-size: 18px; margin: 0 0 10px; }
section {
  background: var(--paper); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px;
  margin: 0 0 18px;
}
.cards {
  display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px;
  background: none; border: 0; padding: 0;
}
.card {
  background: var(--paper); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px;
  border-top: 4px solid var(--c);
}
.card .n { font-size: 34px; font-weight: 700; line-height: 1.1; color: var(--c); }
.card .l { color: var(--muted); }
.stats { color: var(--muted); margin: -6px 0 18px; }
blockquote.warning, blockquote.note {
  background: #fff7ed; border: 1px solid #fdba74; border-radius: 8px; margin: 0; padding: 4px 14px;
}
/* advice (nothing is wrong: what the report cannot show yet) reads as advice, not as a warning */
blockquote.note { background: var(--wash); border-color: #cbd5e1; color: var(--muted); }
section#advice { background: none; border: 0; padding: 0; }
.tag {
  display: inline-block; padding: 0 7px; border-radius: 999px; font-size: 12px; font-weight: 600;
  white-space: nowrap;
}
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 0 0 12px; color: var(--muted); }
.legend span.sw {
  display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: -2px;
  margin-right: 5px; border: 1px solid rgba(0,0,0,.12);
}
.grid-wrap { overflow: auto; max-height: 78vh; }
table.grid { border-collapse: separate; border-spacing: 3px; }
table.grid th.lane {
  vertical-align: bottom; padding: 0 0 4px; font-weight: 500; font-size: 12px; color: #334155;
}
table.grid th.lane div {
  writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap;
}
table.grid th.lane.extra div { font-style: italic; color: var(--muted); }
table.grid th.shim {
  text-align: right; font: 12px/1.2 ui-monospace, "DejaVu Sans Mono", monospace; font-weight: 500;
  padding-right: 8px; white-space: nowrap; position: sticky; left: 0; background: var(--paper);
}
table.grid th.shim a { color: inherit; text-decoration: none; }
table.grid td {
  width: 26px; height: 26px; min-width: 26px; border-radius: 4px; text-align: center; color: #fff;
  font-size: 13px; font-weight: 700; padding: 0;
}
table.grid td.none { background: var(--wash); }
table.grid td.verdict { width: auto; padding: 0 8px 0 0; text-align: left; background: none; }
section h3 { font-size: 15px; margin: 14px 0 6px; }
table.grid td.o-not-run { border: 1px dashed #94a3b8; }
table.grid td.new { outline: 3px solid #0f172a; outline-offset: -3px; }
svg text { font: 11px system-ui, "DejaVu Sans", sans-serif; fill: #475569; }
table.rows td { overflow-wrap: break-word; }
table.rows { border-collapse: collapse; width: 100%; }
table.rows th, table.rows td {
  text-align: left; vertical-align: top; padding: 7px 8px; border-bottom: 1px solid var(--line);
}
table.rows th {
  font-size: 12px; color: var(--muted); font-weight: 600; position: sticky; top: 0;
  background: var(--paper);
}
table.rows td:first-child { min-width: 190px; }
table.rows td:first-child code { white-space: nowrap; }
table.rows code, details code { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; }
.title { color: var(--muted); font-size: 12px; }
a { color: #1d4ed8; }
details { border-top: 1px solid var(--line); padding: 8px 0; }
details summary { cursor: pointer; }
details ul { margin: 6px 0; }
footer { color: var(--muted); font-size: 12px; text-align: center; }
@media (max-width: 720px) {
  main { padding: 12px 10px 32px; }
  header h1 { font-size: 21px; }
  section { padding: 12px; }
  /* the counters in two short rows, so that what needs doing starts on the first screen */
  .cards { grid-template-columns: repeat(3, 1fr); gap: 6px; }
  .card { padding: 6px 8px; border-top-width: 3px; }
  .card .n { font-size: 20px; }
  .card .l { font-size: 12px; line-height: 1.25; }
  .stats { font-size: 12px; margin: -10px 0 12px; }
  section { margin: 0 0 12px; }
  table.rows, table.rows tbody, table.rows tr, table.rows td { display: block; width: 100%; }
  table.rows thead { display: none; }
  table.rows tr { border-bottom: 1px solid var(--line); padding: 6px 0; }
  table.rows td { border: 0; padding: 2px 0; min-width: 0 !important; }
  table.rows td[data-label]::before {
    content: attr(data-label) ": "; color: var(--muted); font-size: 12px; font-weight: 600;
  }
  table.rows td:first-child code { white-space: normal; }
  /* every lane of a dozen in view at 390 px: smaller cells, the shim's name wraps, the verdict
     (also in the tables below) makes room */
  table.grid { border-spacing: 2px; }
  table.grid td { width: 18px; height: 18px; min-width: 18px; font-size: 11px; }
  table.grid th.shim {
    max-width: 96px; white-space: normal; overflow-wrap: anywhere; font-size: 11px;
  }
  table.grid th.lane { font-size: 11px; }
  table.grid td.verdict, table.grid th.verdict { display: none; }
}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _verdict_tag(verdict: str) -> str:
    back, fore = VERDICT_COLOURS.get(verdict, (PLAIN.colour, PLAIN.ink))
    return f'<span class="tag" style="background:{back};color:{fore}">{_e(verdict)}</span>'


def _headline(report: Report) -> str:
    """The headline cards; a count of nothing is drawn in the muted ink, never in its alarm
    colour."""
    h = report.headline
    cards = [
        (h.carried, "shims carried", CARD_COLOURS["carried"]),
        (h.retire, "retire candidates", CARD_COLOURS["retire"]),
        (h.newly_broken, "newly broken", CARD_COLOURS["broken"]),
        (h.unknown, "with unknown evidence", CARD_COLOURS["unknown"]),
        (h.blocked, f"lane{'s' if h.blocked != 1 else ''} blocked", CARD_COLOURS["blocked"]),
    ]
    body = "".join(
        f'<div class="card" style="--c:{c if n else CARD_COLOURS["none"]}"><div class="n">{n}</div>'
        f'<div class="l">{_e(label)}</div></div>'
        for n, label, c in cards
    )
    stats = (
        f"{h.retire_in_some} retire in some lanes · {h.keep} keep · {h.stale} stale · "
        f"{h.drift} drift · {h.broken} broken on some lane · {h.never_run} never run"
    )
    return (
        f'<section class="cards" aria-label="headline">{body}</section><p class="stats">{stats}</p>'
    )


def _title(report: Report) -> str:
    since = (
        f"previous report {report.changes.previous_week}"
        if report.changes.previous_week
        else "no previous report"
    )
    return (
        f'<header><h1>Shim retirement report — {_e(report.week)}</h1><p class="sub">as of '
        f"{report.as_of.isoformat()} · generated {_e(report.generated_at)} · {_e(since)}</p>"
        "</header>"
    )


def _step_legend() -> str:
    items = "".join(
        f'<span><span class="sw" style="background:{look.colour}"></span>{look.glyph} '
        f"{_e(look.label)}</span>"
        for look in STEPS.values()
    )
    return (
        f'<div class="legend">{items}<span><span class="sw" style="background:#f8fafc"></span>'
        "blank: the lane does not carry the shim</span></div>"
    )


def _lane_title(row: ShimEntry, lane: LaneVerdict, grouped: frozenset[tuple[str, str]]) -> str:
    locked = f" (locked: {lane.locked})" if lane.locked else ""
    where = f"{row.shim} on {lane.lane}{locked}: {lane.step}"
    if (row.shim, lane.lane) in grouped:
        # a reason said once for several lanes, under the grid
        return f"{where} — said once below"
    after = f" — {lane_next(lane)}" if lane_next(lane) else ""
    return f"{where} — {lane.why}{after}"


def _lane_rows(report: Report, columns: tuple[str, ...]) -> str:
    out, grouped = [], report.grouped
    for row in report.rows:
        if not row.verdict.lane_verdicts:
            continue
        by_lane = {lane.lane: lane for lane in row.verdict.lane_verdicts}
        cells = []
        for name in columns:
            lane = by_lane.get(name)
            if lane is None:
                cells.append('<td class="none"></td>')
                continue
            look = step(lane.step)
            cells.append(
                f'<td class="s-{_e(lane.step)}" style="background:{look.colour};color:{look.ink}" '
                f'title="{_e(_lane_title(row, lane, grouped))}">{_e(look.glyph)}</td>'
            )
        out.append(
            f'<tr><th class="shim" scope="row"><a href="#{anchor(row.shim)}">{_e(row.shim)}</a>'
            f'</th><td class="verdict">{_verdict_tag(row.verdict.decision)}</td>'
            f"{''.join(cells)}</tr>"
        )
    return "".join(out)


def _lanes(report: Report) -> str:
    """Retirement per lane at a glance: shims down, lanes across, one step per cell; then the
    holds, the lanes without a decision and the conflicts, as the Markdown says them."""
    columns = report.lane_columns
    notes = page_html("\n".join(lane_notes(report)))
    if not columns:
        return (
            '<section id="lanes"><h2>Retirement per lane</h2><p>No per-lane verdicts (the '
            f"verdicts were gathered without lanes).</p>{notes}</section>"
        )
    head = "".join(
        f'<th class="lane" scope="col"><div title="{_e(lane)}">{_e(lane)}</div></th>'
        for lane in columns
    )
    return (
        f'<section id="lanes"><h2>Retirement per lane</h2>{_step_legend()}'
        '<div class="grid-wrap"><table class="grid steps">'
        f'<thead><tr><th></th><th class="lane verdict" scope="col"><div>verdict</div></th>{head}'
        f"</tr></thead><tbody>{_lane_rows(report, columns)}</tbody></table></div>{notes}</section>"
    )


def _legend() -> str:
    items = "".join(
        f'<span><span class="sw" '
        f'style="background:{OUTCOME_COLOURS[o]}"></span>{OUTCOME_GLYPHS[o]} '
        f"{_e(OUTCOMES[o].label)}</span>"
        for o in CELL_OUTCOMES
    )
    return (
        f'<div class="legend">{items}<span><span class="sw" style="background:#f8fafc"></span>'
        f"blank: the lane does not list the shim</span><span>▣ outlined: newly broken since the "
        f"last report</span></div>"
    )


def _grid(report: Report) -> str:
    m = report.matrix
    if not m.lanes or not m.shims:
        return (
            '<section id="matrix"><h2>Lane × shim matrix</h2><p>No lanes defined and no runs '
            "recorded.</p></section>"
        )
    newly = {(shim, lane) for shim, lane, _ in report.changes.newly_broken}
    head = "".join(
        f'<th class="lane{"" if lane in m.defined else " extra"}" scope="col"><div '
        f'title="{_e(lane)}">{_e(lane)}</div></th>'
        for lane in m.lanes
    )
    out = [
        (
            f'<section id="matrix"><h2>Lane × shim matrix</h2>{_legend()}'
            '<div class="grid-wrap"><table class="grid">'
        ),
        f"<thead><tr><th></th>{head}</tr></thead><tbody>",
    ]
    for shim in m.shims:
        cells = []
        for lane in m.lanes:
            cell = m.cells.get((shim, lane))
            if cell is None:
                cells.append('<td class="none"></td>')
                continue
            when = f" ({cell.host}, {cell.date})" if cell.date else ""
            title = f"{shim} on {lane}: {cell.outcome} — {cell.why}{when}"
            extra = " new" if (shim, lane) in newly else ""
            cells.append(
                f'<td class="o-{cell.outcome}{extra}" '
                f'style="background:{OUTCOME_COLOURS[cell.outcome]};'
                f'color:{OUTCOME_INK[cell.outcome]}" '
                f'title="{_e(title)}">{OUTCOME_GLYPHS[cell.outcome]}</td>'
            )
        out.append(
            f'<tr><th class="shim" scope="row"><a '
            f'href="#{anchor(shim)}">{_e(shim)}</a></th>{"".join(cells)}</tr>'
        )
    notes = ""
    if any(lane not in m.defined for lane in m.lanes):
        notes = (
            '<p class="title">Lanes in italics appear only in the validation records (e.g. a '
            "GPU host's overlay lane), not in lanes/.</p>"
        )
    out.append(f"</tbody></table></div>{notes}</section>")
    return "".join(out)


def _monday(week: str) -> _dt.date:
    year, number = (int(p) for p in week.split("-W"))
    return _dt.date.fromisocalendar(year, number, 1)


def burndown_svg(points: tuple[BurnPoint, ...], *, width: int = 1240, height: int = 260) -> str:
    """An inline SVG line chart of shims carried per week (report weeks dotted), candidates as
    bars."""
    if not points:
        return "<p>No history yet.</p>"
    left, right, top, bottom = 44, 40, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    first = _monday(points[0].week)
    offsets = [(_monday(p.week) - first).days // 7 for p in points]
    span = max(offsets[-1], 1)
    top_value = max(max(p.carried for p in points), 1)
    ceiling = top_value + max(1, round(top_value * 0.1))

    def x(offset: int) -> float:
        return left + plot_w * (offset / span) if len(points) > 1 else left + plot_w / 2

    def y(value: float) -> float:
        return top + plot_h * (1 - value / ceiling)

    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
            'role="img" aria-labelledby="burn-title">'
            '<title id="burn-title">Shims carried per ISO week</title>'
        )
    ]
    step = max(1, ceiling // 5)
    for tick in range(0, ceiling + 1, step):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#e2e8f0"/>'
            f'<text x="{left - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>'
        )
    bar = max(2.0, min(14.0, plot_w / (span + 1) * 0.6))
    for point, offset in zip(points, offsets, strict=True):
        if point.candidates:
            parts.append(
                f'<rect x="{x(offset) - bar / 2:.1f}" y="{y(point.candidates):.1f}" '
                f'width="{bar:.1f}" '
                f'height="{y(0) - y(point.candidates):.1f}" '
                f'fill="#86efac"><title>{_e(point.week)}: '
                f"{point.candidates} retire candidate(s)</title></rect>"
            )
    coords = [(x(o), y(p.carried)) for p, o in zip(points, offsets, strict=True)]
    line = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
    area = f"{coords[0][0]:.1f},{y(0):.1f} {line} {coords[-1][0]:.1f},{y(0):.1f}"
    parts.append(f'<polygon points="{area}" fill="#334155" fill-opacity="0.07"/>')
    parts.append(
        f'<polyline points="{line}" fill="none" stroke="#334155" stroke-width="2.5" '
        f'stroke-linejoin="round"/>'
    )
    for point, (cx, cy) in zip(points, coords, strict=True):
        radius, fill = (4.5, "#334155") if point.source != BurnSource.GIT else (2.5, "#94a3b8")
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{radius}" '
            f'fill="{fill}"><title>{_e(point.week)}: '
            f"{point.carried} shims carried (from {point.source})</title></circle>"
        )
    label_every = max(1, len(points) // 8)
    for index, (point, (cx, _)) in enumerate(zip(points, coords, strict=True)):
        last_one = index == len(points) - 1
        if (index % label_every == 0 and len(points) - 1 - index >= label_every / 2) or last_one:
            anchor = "end" if last_one else ("start" if index == 0 else "middle")
            shift = 6 if last_one else 0
            parts.append(
                f'<text x="{cx + shift:.1f}" y="{height - 12}" '
                f'text-anchor="{anchor}">{_e(point.week)}</text>'
            )
    last = points[-1]
    parts.append(
        f'<text x="{coords[-1][0] - 6:.1f}" y="{coords[-1][1] - 9:.1f}" text-anchor="end" '
        f'style="font-weight:700;fill:#0f172a">{last.carried} now</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _burndown(report: Report) -> str:
    key = (
        '<div class="legend"><span><span class="sw" style="background:#334155"></span>shims '
        "carried "
        '(large dots: weekly reports, small: counted in git history)</span><span><span class="sw" '
        'style="background:#86efac"></span>retire candidates (from reports)</span></div>'
    )
    if len(report.burndown) < 2:
        body = (
            f"<p>Only this week's count so far: {report.headline.carried}. The chart grows with "
            f"each report.</p>"
        )
    else:
        body = key + burndown_svg(report.burndown)
    return f'<section id="burndown"><h2>Burn-down: shims carried</h2>{body}</section>'


def _section(section: Section, report: Report, *, drawn: bool = True) -> str:
    """A section the page shows as its Markdown says it, under its heading (and count): drawn
    from its blocks where it is written as blocks (``drawn``), else its Markdown parsed."""
    if drawn and section.blocks is not None:
        blocks = section.blocks(report, View())
        if blocks is None:
            return ""
        body = mdhtml.draw(blocks)
    else:
        lines = section.body(report, View())
        if lines is None:
            return ""
        text = "\n".join(lines)
        body = mdhtml.to_html(text) if section.quoted else page_html(text)
    title = section.title(report)
    count = f" ({section.count(report)})" if section.count and section.count(report) else ""
    heading = f"<h2>{_e(title)}{count}</h2>" if title else ""
    return f'<section id="{section.id}">{heading}{body}</section>'


#: The sections the page draws its own way, by id; every other comes from its Markdown.
DRAWN: Mapping[str, Callable[[Report], str]] = {
    "title": _title,
    "headline": _headline,
    "lanes": _lanes,
    "matrix": _grid,
    "burndown": _burndown,
}


def to_html(report: Report, *, drawn: bool = True) -> str:
    """The whole page, as one string. ``drawn=False`` parses the Markdown of every section that
    is written as blocks instead of drawing the blocks: the same page, made the slow way (the
    tests hold the two to the same bytes, the benchmark times both)."""
    body = "".join(
        own(report) if (own := DRAWN.get(s.id)) else _section(s, report, drawn=drawn)
        for s in SECTIONS
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>Shim retirement report {_e(report.week)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}<footer>patchlane weekly retirement report · the same data as JSON "
        "beside this file</footer></main></body></html>\n"
    )
