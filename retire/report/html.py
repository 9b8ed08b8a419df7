"""The report as one self-contained HTML page: inline CSS, the lane × shim matrix as a coloured
grid, the burn-down as inline SVG, no script and nothing loaded from anywhere (a Content Security
Policy of ``default-src 'none'`` makes the browser refuse it if something ever tries).

Hover titles carry the detail (outcome, why, host, date); every colour also has a glyph, so the
grid reads without colour vision too. Pure: a function of a ``report_model.Report``.
"""

from __future__ import annotations

import datetime as _dt
import re
from html import escape

from retire.report import regressions
from retire.report.mdhtml import code_spans
from retire.report.mdhtml import to_html as markdown_html
from retire.report.model import (
    CELL_OUTCOMES,
    BurnPoint,
    BurnSource,
    Chase,
    Report,
    ShimRow,
    lane_next,
    short_link,
)
from retire.report.vocabulary import OUTCOMES, PLAIN, STEPS, VERDICTS, condition, step
from retire.verdicts.model import LaneStep, LaneVerdict

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
.notes { background: #fff7ed; border-color: #fdba74; }
.notes li { margin: 2px 0; }
ul.attention { margin: 0; padding-left: 18px; }
ul.attention li { margin: 3px 0; }
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
table.rows td[data-label="fix class"] { white-space: nowrap; }
table.rows { border-collapse: collapse; width: 100%; }
table.rows th, table.rows td {
  text-align: left; vertical-align: top; padding: 7px 8px; border-bottom: 1px solid var(--line);
}
table.rows th {
  font-size: 12px; color: var(--muted); font-weight: 600; position: sticky; top: 0;
  background: var(--paper);
}
table.rows tr.attn td:first-child { box-shadow: inset 4px 0 0 #f59e0b; }
table.rows td:first-child { min-width: 190px; }
table.rows td:first-child code { white-space: nowrap; }
table.rows td.num { text-align: right; white-space: nowrap; }
table.rows code, details code { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; }
.title { color: var(--muted); font-size: 12px; }
.why { max-width: 380px; }
table.rows td.why { min-width: 200px; }
.never { color: #b91c1c; font-weight: 600; }
a { color: #1d4ed8; }
details { border-top: 1px solid var(--line); padding: 8px 0; }
details summary { cursor: pointer; }
details ul { margin: 6px 0; }
footer { color: var(--muted); font-size: 12px; text-align: center; }
@media (max-width: 720px) {
  main { padding: 12px 10px 32px; }
  header h1 { font-size: 21px; }
  section { padding: 12px; }
  .cards { grid-template-columns: repeat(2, 1fr); }
  .card .n { font-size: 28px; }
  table.rows, table.rows tbody, table.rows tr, table.rows td { display: block; width: 100%; }
  table.rows thead { display: none; }
  table.rows tr { border-bottom: 1px solid var(--line); padding: 6px 0; }
  table.rows td { border: 0; padding: 2px 0; min-width: 0 !important; }
  table.rows td[data-label]::before {
    content: attr(data-label) ": "; color: var(--muted); font-size: 12px; font-weight: 600;
  }
  table.rows td:first-child code { white-space: normal; }
  .why { max-width: none; }
}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


#: Longer than this, a token (a URL, a hash, a path) may break anywhere; shorter words never do.
LONG_TOKEN = 16


def _wrappable(text: str, after: str) -> str:
    """``text`` (a link, an address) that may wrap after each ``after`` (``<wbr>``), each long
    piece between them breakable anywhere."""
    pieces = text.split(after)
    return f"{_e(after)}<wbr>".join(
        f'<span class="brk">{_e(p)}</span>' if len(p) > LONG_TOKEN else _e(p) for p in pieces
    )


def _owner(text: str) -> str:
    """An address may wrap before its ``@``, never inside a word."""
    name, at, host = text.partition("@")
    return f"{_t(name)}<wbr>{_e(at)}{_t(host)}" if at else _t(text)


def _t(value: object) -> str:
    """Free text, escaped, its backtick spans as ``<code>`` (actions name commands that way),
    each long token marked breakable (``.brk``): a table column is then never narrower than its
    longest short word, and a URL still wraps."""
    out = []
    for i, piece in enumerate(re.split(r"`([^`\n]+)`", str(value))):
        words = re.split(r"(\s+)", piece)
        text = "".join(
            f'<span class="brk">{_e(word)}</span>' if len(word) > LONG_TOKEN else _e(word)
            for word in words
        )
        out.append(f"<code>{text}</code>" if i % 2 else text)
    return "".join(out)


def _verdict_tag(verdict: str) -> str:
    back, fore = VERDICT_COLOURS.get(verdict, (PLAIN.colour, PLAIN.ink))
    return f'<span class="tag" style="background:{back};color:{fore}">{_e(verdict)}</span>'


def _cards(report: Report) -> str:
    h = report.headline
    cards = [
        (h.carried, "shims carried", CARD_COLOURS["carried"]),
        (h.retire, "retire candidates", CARD_COLOURS["retire"]),
        (h.newly_broken, "newly broken", CARD_COLOURS["broken"]),
        (h.unknown, "with unknown evidence", CARD_COLOURS["unknown"]),
        (h.blocked, f"lane{'s' if h.blocked != 1 else ''} blocked", CARD_COLOURS["blocked"]),
    ]
    body = "".join(
        f'<div class="card" style="--c:{c}"><div class="n">{n}</div>'
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


def _notes(report: Report) -> str:
    if not report.notes:
        return ""
    items = "".join(f"<li>{_t(n)}</li>" for n in report.notes)
    return f'<section class="notes"><h2>Notes</h2><ul>{items}</ul></section>'


def _attention(report: Report) -> str:
    rows = report.attention
    if not rows:
        return (
            '<section id="attention"><h2>Needs attention</h2><p>Nothing: every shim is needed, '
            "proven and linked upstream.</p></section>"
        )
    items = "".join(
        f'<li><a href="#shim-{_e(r.shim)}"><code>{_e(r.shim)}</code></a> '
        f"<b>{_e('; '.join(r.attention))}</b> — {_t(r.why)}"
        + (f"<br><b>Next:</b> {_t(r.action)}" if r.action else "")
        + "</li>"
        for r in rows
    )
    return (
        f'<section id="attention"><h2>Needs attention ({len(rows)})</h2><ul '
        f'class="attention">{items}</ul></section>'
    )


def _step_tag(name: str) -> str:
    back, fore = STEP_COLOURS.get(name, (PLAIN.colour, PLAIN.ink))
    return f'<span class="tag" style="background:{back};color:{fore}">{_e(name)}</span>'


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


def _lane_title(row: ShimRow, lane: LaneVerdict) -> str:
    locked = f" (locked: {lane.locked})" if lane.locked else ""
    after = f" — {lane_next(lane)}" if lane_next(lane) else ""
    return f"{row.shim} on {lane.lane}{locked}: {lane.step} — {lane.why}{after}"


def _lane_rows(report: Report, columns: tuple[str, ...]) -> str:
    out = []
    for row in report.rows:
        if not row.lane_verdicts:
            continue
        by_lane = {lane.lane: lane for lane in row.lane_verdicts}
        cells = []
        for name in columns:
            lane = by_lane.get(name)
            if lane is None:
                cells.append('<td class="none"></td>')
                continue
            look = step(lane.step)
            cells.append(
                f'<td class="s-{_e(lane.step)}" style="background:{look.colour};color:{look.ink}" '
                f'title="{_e(_lane_title(row, lane))}">{_e(look.glyph)}</td>'
            )
        out.append(
            f'<tr><th class="shim" scope="row"><a href="#shim-{_e(row.shim)}">{_e(row.shim)}</a>'
            f'</th><td class="verdict">{_verdict_tag(row.verdict)}</td>{"".join(cells)}</tr>'
        )
    return "".join(out)


def _lane_notes(report: Report) -> str:
    """Every hold with its until, every lane without a decision with its next step, every
    conflict with both its sides."""
    parts = []
    for kind, heading, label in (
        (LaneStep.HOLD, "Held by the lane's policy", "Until"),
        (LaneStep.UNKNOWN, "Lanes without a decision", "Next"),
    ):
        found = report.lanes_at(kind)
        if found:
            items = "".join(
                f"<li><code>{_e(row.shim)}</code> on <b>{_e(lane.lane)}</b> — {_t(lane.why)}"
                f"<br><b>{label}:</b> {_t(lane_next(lane).removeprefix('until ') or '—')}</li>"
                for row, lane in found
            )
            parts.append(f"<h3>{_e(heading)}</h3><ul>{items}</ul>")
    if report.conflicts:
        items = "".join(
            f"<li>⚑ <code>{_e(row.shim)}</code> {_t(text)}</li>" for row, text in report.conflicts
        )
        parts.append(
            "<h3>Conflicts</h3><p>Two evidence sources disagree; the floor comes from execution."
            f"</p><ul>{items}</ul>"
        )
    return "".join(parts)


def _lanes(report: Report) -> str:
    """Retirement per lane at a glance: shims down, lanes across, one step per cell."""
    columns = report.lane_columns
    if not columns:
        return (
            '<section id="lanes"><h2>Retirement per lane</h2><p>No per-lane verdicts (the '
            f"verdicts were gathered without lanes).</p>{_lane_notes(report)}</section>"
        )
    head = "".join(
        f'<th class="lane" scope="col"><div title="{_e(lane)}">{_e(lane)}</div></th>'
        for lane in columns
    )
    return (
        f'<section id="lanes"><h2>Retirement per lane</h2>{_step_legend()}'
        '<div class="grid-wrap"><table class="grid steps">'
        f'<thead><tr><th></th><th class="lane" scope="col"><div>verdict</div></th>{head}</tr>'
        f"</thead><tbody>{_lane_rows(report, columns)}</tbody></table></div>"
        f"{_lane_notes(report)}</section>"
    )


def _blocked(report: Report) -> str:
    found = report.blocked
    if not found:
        return (
            '<section id="blocked"><h2>Blocked</h2><p>None: no lane\'s raise is blocked.</p>'
            "</section>"
        )
    rows = "".join(
        f'<tr><td><a href="#shim-{_e(row.shim)}"><code>{_e(row.shim)}</code></a></td>'
        f'<td data-label="lane">{_e(lane.lane)}</td>'
        f'<td data-label="raise to">'
        + (", ".join(f"<code>{_e(str(f))}</code>" for f in lane.floors) or "—")
        + f'</td><td class="why" data-label="blocker">{_t(lane.blocker or lane.why)}</td></tr>'
        for row, lane in found
    )
    return (
        f'<section id="blocked"><h2>Blocked ({len(found)})</h2><p class="title">Lanes that would '
        "let the shim go if their pins could rise; the blocker is the resolver's own explanation "
        "— what has to change. The next report checks again.</p>"
        '<table class="rows"><thead><tr><th>shim</th><th>lane</th><th>raise to</th>'
        f"<th>blocker</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _bisections(report: Report) -> str:
    done = report.bisections
    if done is None:
        return ""
    runs = f"{done.runs} reproducer run{'s' if done.runs != 1 else ''}"
    body = [
        (
            f"<p>Budget: {_e(done.budget)} — {runs} spent; every run is recorded in the "
            "validation manifest, and the verdicts read it.</p>"
        )
    ]
    if not done.ran and not done.left:
        body.append("<p>No verdict is flagged candidate: nothing to bisect.</p>")
    if done.ran:
        rows = "".join(
            f"<tr><td><code>{_e(b.shim)}</code></td>"
            f'<td data-label="command"><code>{_e(b.command)}</code></td>'
            f'<td class="num" data-label="runs">{b.runs}</td>'
            f'<td class="why" data-label="result">{_t(b.summary)}'
            + (f"<br><b>Stopped:</b> {_t(b.stopped)}" if b.stopped else "")
            + "</td></tr>"
            for b in done.ran
        )
        body.append(
            '<table class="rows"><thead><tr><th>shim</th><th>command</th><th>runs</th>'
            f"<th>result</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    if done.left:
        items = "".join(f"<li><code>{_e(b.command)}</code> — {_t(b.why)}</li>" for b in done.left)
        body.append(f"<h3>Not run this time</h3><ul>{items}</ul>")
    return f'<section id="bisections"><h2>Bisections</h2>{"".join(body)}</section>'


def _lanes_table(row: ShimRow) -> str:
    if not row.lane_verdicts:
        return ""
    rows = "".join(
        f"<tr><td>{_e(lane.lane)}</td>"
        f'<td data-label="step">{_step_tag(lane.step)}</td>'
        f'<td data-label="policy">{_e(lane.policy)}</td>'
        f'<td data-label="locked">{_e(lane.locked or "—")}</td>'
        f'<td class="why" data-label="why">{_t(lane.why)}</td>'
        f'<td class="why" data-label="next">{_t(lane_next(lane))}</td></tr>'
        for lane in row.lane_verdicts
    )
    return (
        '<table class="rows"><thead><tr><th>lane</th><th>step</th><th>policy</th><th>locked</th>'
        f"<th>why</th><th>next</th></tr></thead><tbody>{rows}</tbody></table>"
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
            f'href="#shim-{_e(shim)}">{_e(shim)}</a></th>{"".join(cells)}</tr>'
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


def _changes(report: Report) -> str:
    c = report.changes
    if c.previous_week is None:
        return (
            '<section id="changes"><h2>Changes</h2><p>No previous report to compare with: this '
            "is the first one.</p></section>"
        )
    if c.empty:
        return (
            f'<section id="changes"><h2>Changes since {_e(c.previous_week)}</h2><p>Nothing '
            f"changed.</p></section>"
        )
    items = []
    if c.new:
        items.append(
            "<li><b>New shims:</b> " + ", ".join(f"<code>{_e(s)}</code>" for s in c.new) + "</li>"
        )
    if c.retired:
        items.append(
            "<li><b>Retired (gone from shims/):</b> "
            + ", ".join(f"<code>{_e(s)}</code>" for s in c.retired)
            + "</li>"
        )
    if c.newly_broken:
        items.append(
            "<li><b>Newly broken:</b> "
            + ", ".join(
                f"<code>{_e(shim)}</code> on {_e(lane)} ({_e(outcome)})"
                for shim, lane, outcome in c.newly_broken
            )
            + "</li>"
        )
    if c.repaired:
        items.append(
            "<li><b>No longer broken:</b> "
            + ", ".join(f"<code>{_e(shim)}</code> on {_e(lane)}" for shim, lane in c.repaired)
            + "</li>"
        )
    table = ""
    if c.verdicts:
        rows = "".join(
            f"<tr><td><code>{_e(v.shim)}</code></td><td "
            f'data-label="before">{_verdict_tag(v.before)}</td>'
            f'<td data-label="now">{_verdict_tag(v.after)}</td>'
            f'<td class="why" data-label="why">{_t(v.why)}</td></tr>'
            for v in c.verdicts
        )
        table = (
            '<table class="rows"><thead><tr><th>shim</th><th>before</th><th>now</th><th>why</th>'
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )
    return (
        f'<section id="changes"><h2>Changes since '
        f"{_e(c.previous_week)}</h2><ul>{''.join(items)}</ul>{table}</section>"
    )


def _links(row: ShimRow) -> str:
    if not row.links:
        return '<span class="never">no link</span>'
    return "<br>".join(
        f'<a href="{_e(url)}">{_wrappable(short_link(url), "/")}</a> '
        f'<span class="title">{_e(role)}</span>'
        for role, url in row.links
    )


def _proven(row: ShimRow) -> str:
    text = _t(row.proven_text)
    shown = f'<span class="never">{text}</span>' if row.last_proven is None else text
    if row.unproven is None:
        return shown
    # no lane proves it (retire.runs.proof): the label comes first
    return f'<strong class="never">unproven</strong>: {_e(row.unproven)}<br>{shown}'


def _shim_table(report: Report) -> str:
    out = [
        (
            '<section id="shims"><h2>Shims</h2><div class="grid-wrap" style="max-height:none">'
            '<table class="rows"><thead><tr>'
        ),
        (
            "<th>shim</th><th>fix class</th><th>owner</th><th>age</th><th>upstream</th>"
            "<th>verdict</th><th>why</th><th>retire when</th><th>last proven</th></tr></thead>"
            "<tbody>"
        ),
    ]
    for row in report.rows:
        joiner = " <b>and</b> " if row.retirement_mode == "all" else " <b>or</b> "
        out.append(
            f'<tr id="row-{_e(row.shim)}" class="{"attn" if row.attention else ""}">'
            f'<td><a href="#shim-{_e(row.shim)}"><code>{_e(row.shim)}</code></a><div '
            f'class="title">{code_spans(row.title)}</div></td>'
            f'<td data-label="fix class">{_e(row.fix_class)}</td><td '
            f'data-label="owner">{_owner(row.owner)}</td>'
            f'<td class="num" data-label="age">{row.age_days} d</td>'
            f'<td data-label="upstream">{_e(row.upstream_status)}<br>{_links(row)}</td>'
            f'<td data-label="verdict">{_verdict_tag(row.verdict)}</td>'
            f'<td class="why" data-label="why">{_t(row.why)}</td>'
            f'<td data-label="retire when">{joiner.join(_t(w) for w in row.retire_when)}</td>'
            f'<td data-label="last proven">{_proven(row)}</td></tr>'
        )
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _unlinked(report: Report) -> str:
    rows = report.stale_or_unlinked
    if not rows:
        return (
            '<section id="unlinked"><h2>Stale or without an upstream '
            "link</h2><p>None.</p></section>"
        )
    items = []
    for row, why, text in rows:
        if why == Chase.STALE:
            items.append(f"<li><code>{_e(row.shim)}</code> {_verdict_tag('stale')} {_t(text)}</li>")
        elif why == Chase.POLICY:
            items.append(
                f"<li><code>{_e(row.shim)}</code> no upstream link — status not-applicable (local "
                f"policy, nothing to file)</li>"
            )
        else:
            items.append(
                f"<li><code>{_e(row.shim)}</code> <b>no upstream link</b> (status {_t(text)}): "
                f"file it and link it</li>"
            )
    return (
        f'<section id="unlinked"><h2>Stale or without an upstream '
        f"link</h2><ul>{''.join(items)}</ul></section>"
    )


def _evidence(report: Report) -> str:
    out = ['<section id="evidence"><h2>Evidence per shim</h2>']
    for row in report.rows:
        bits = [
            f"<p><b>Why:</b> {_t(row.why)}</p>",
            *([f"<p><b>Next:</b> {_t(row.action)}</p>"] if row.action else []),
            *(
                [
                    '<ul class="flags">'
                    + "".join(f"<li>⚑ <code>{_e(k)}</code> {_t(x)}</li>" for k, x in row.flags)
                    + "</ul>"
                ]
                if row.flags
                else []
            ),
            f"<p><b>Retire when</b> ({_e(row.retirement_mode)} of):</p><ul>"
            + "".join(f"<li>{_t(w)}</li>" for w in row.retire_when)
            + "</ul>",
        ]
        if row.conditions:
            bits.append(
                "<p><b>Conditions now:</b></p><ul>"
                + "".join(
                    f"<li>{_e(condition(s).emoji)} <code>{_e(k)}</code> — {_t(w)}</li>"
                    for k, s, w in row.conditions
                )
                + "</ul>"
            )
        if row.floors:
            bits.append(
                "<p><b>Proposed floors:</b> "
                + ", ".join(f"<code>{_e(f)}</code>" for f in row.floors)
                + "</p>"
            )
        bits.append(_lanes_table(row))
        if row.failures:
            bits.append(
                "<p><b>Probe failures:</b></p><ul>"
                + "".join(f"<li>⚠️ {_t(f)}</li>" for f in row.failures)
                + "</ul>"
            )
        if row.evidence:
            bits.append(
                "<p><b>Evidence:</b></p><ul>"
                + "".join(f"<li>{_t(e)}</li>" for e in row.evidence)
                + "</ul>"
            )
        runs = [
            c for lane in report.matrix.lanes if (c := report.matrix.cells.get((row.shim, lane)))
        ]
        if runs:
            bits.append(
                '<table class="rows"><thead><tr><th>lane</th><th>outcome</th><th>host</th>'
                "<th>date</th><th>why</th></tr></thead><tbody>"
                + "".join(
                    f'<tr><td>{_e(c.lane)}</td><td data-label="outcome"><span class="sw" '
                    f'style="display:inline-block;width:10px;height:10px;'
                    f"border-radius:2px;background:{OUTCOME_COLOURS[c.outcome]};border:1px solid "
                    f'#94a3b8"></span> {_e(c.outcome)}</td>'
                    f'<td data-label="host">{_e(c.host)}</td><td '
                    f'data-label="date">{_e(c.date)}</td><td class="why" '
                    f'data-label="why">{_t(c.why)}</td></tr>'
                    for c in runs
                )
                + "</tbody></table>"
            )
        bits.append(
            f"<p><b>Last proven:</b> {_proven(row)} · <b>owner</b> {_t(row.owner)} · created "
            f"{row.created.isoformat()}</p>"
        )
        out.append(
            f'<details id="shim-{_e(row.shim)}"><summary><code>{_e(row.shim)}</code> '
            f"{_verdict_tag(row.verdict)} "
            f"{code_spans(row.title)}</summary>{''.join(bits)}</details>"
        )
    out.append("</section>")
    return "".join(out)


def _filing_queue(report: Report) -> str:
    if not report.filing_queue:
        return ""
    text = report.filing_queue.strip()
    # the section's own heading is the <h2>
    body = text.split("\n", 1)[1] if text.startswith("## ") else text
    return (
        f'<section id="filing-queue"><h2>Filing '
        f"queue</h2>{markdown_html(body, heading_offset=0)}</section>"
    )


def to_html(report: Report) -> str:
    """The whole page, as one string."""
    since = (
        f"previous report {report.changes.previous_week}"
        if report.changes.previous_week
        else "no previous report"
    )
    return "".join(
        [
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            (
                '<meta http-equiv="Content-Security-Policy" '
                "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
            ),
            (
                f"<title>Shim retirement report "
                f"{_e(report.week)}</title><style>{_CSS}</style></head><body><main>"
            ),
            (
                f'<header><h1>Shim retirement report — {_e(report.week)}</h1><p class="sub">as of '
                f"{report.as_of.isoformat()} · "
                f"generated {_e(report.generated_at)} · {_e(since)}</p></header>"
            ),
            regressions.to_html(report.regressions),
            _cards(report),
            _notes(report),
            _attention(report),
            _lanes(report),
            _blocked(report),
            _grid(report),
            _burndown(report),
            _bisections(report),
            _changes(report),
            _shim_table(report),
            _unlinked(report),
            _filing_queue(report),
            _evidence(report),
            (
                "<footer>patchlane weekly retirement report · the same data as JSON beside this "
                "file</footer></main></body></html>\n"
            ),
        ]
    )
