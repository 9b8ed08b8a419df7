"""The report's sections, in the one order both documents show them: what needs a person first
(blocked, ready to retire, needs attention), then the matrices, the tables, the history and the
evidence.

Each section is written once, as Markdown (:class:`Section`): the issue body is that Markdown,
the HTML page renders it through :mod:`retire.report.mdhtml`, and only a section the page draws
differently (the headline cards, the two grids, the burn-down chart) has a renderer of its own in
:mod:`retire.report.html`, found by the section's id. Adding a section is one entry in
:data:`SECTIONS` (docs/architecture.md, "The report's sections"). Pure.

Text from verdicts, manifests and records goes through :func:`cell_text` (or a code span), so a
section's Markdown holds no tag but the engine's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from retire.core import mdsafe
from retire.history.edge import EdgeState
from retire.report import regressions, vocabulary
from retire.report.blocks import Block, lines_of
from retire.report.mdhtml import code_spans
from retire.report.model import CELL_OUTCOMES, Chase, Fact, Report, ShimEntry, lane_next
from retire.report.vocabulary import OUTCOMES, STEPS
from retire.report.words import short_link
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = [
    "MARKER",
    "SECTIONS",
    "Section",
    "View",
    "anchor",
    "cell_text",
    "code_cell",
    "lane_notes",
    "summary_title",
]

#: First line of the Markdown: how the workflow finds the one tracking issue again.
MARKER = "<!-- patchlane:weekly-retirement-report -->"

Lines = list[str]
Blocks = list[Block]
#: Where a lane row stands in for a reason said once for several lanes (two table cells).
SAID_ONCE = ("*said once under Retirement per lane*", "—")


@dataclass(frozen=True)
class View:
    """How much of the report a document shows: all of it, or less to fit an issue body."""

    # the per-lane table and the matrix show only these shims (None: every shim)
    only: frozenset[str] | None = None
    # the shims table shows only these shims (None: every shim)
    table: frozenset[str] | None = None
    evidence: bool = True
    # what was left out, said after the headline
    note: str = ""


@dataclass(frozen=True)
class Section:
    """One section: its id (the page's anchor), its heading and its Markdown body (None: the
    section has nothing to show this week and is left out). ``count`` is shown after the heading
    on the page; ``quoted`` Markdown holds text from elsewhere (a tag in it is text).

    A section of large tables and lists is written as blocks (:meth:`drawn`): its Markdown is the
    blocks', and the page draws the same blocks instead of parsing their Markdown again."""

    id: str
    title: Callable[[Report], str]
    body: Callable[[Report, View], Lines | None]
    count: Callable[[Report], int] | None = None
    quoted: bool = False
    blocks: Callable[[Report, View], Blocks | None] | None = None

    @classmethod
    def drawn(
        cls,
        id: str,
        title: Callable[[Report], str],
        blocks: Callable[[Report, View], Blocks | None],
        count: Callable[[Report], int] | None = None,
    ) -> Section:
        """A section written as blocks: its body is their Markdown."""

        def body(report: Report, view: View) -> Lines | None:
            written = blocks(report, view)
            return None if written is None else lines_of(written)

        return cls(id, title, body, count, blocks=blocks)

    def markdown(self, report: Report, view: View) -> Lines:
        body = self.body(report, view)
        if body is None:
            return []
        title = self.title(report)
        return [*([f"## {title}", ""] if title else []), *body, ""]


def _titled(text: str) -> Callable[[Report], str]:
    return lambda _: text


# ---------------------------------------------------------------------------------------------
# Markdown text


def cell_text(text: object, limit: int | None = None) -> str:
    """Text safe inside a Markdown table cell (and inert as HTML in an issue body)."""
    return _inert(str(text), limit)


# a report of 500 shims says the same host, lane, outcome and reason thousands of times
@functools.lru_cache(maxsize=1 << 16)
def _inert(text: str, limit: int | None) -> str:
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


def summary_title(title: str, limit: int = 120) -> str:
    """A title inside ``<summary>``: raw HTML to GitHub, so Markdown is not rendered there — the
    title's backtick spans become ``<code>``, the rest is escaped (a ``|`` stays a ``|``)."""
    flat = " ".join(str(title).split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return code_spans(flat)


def anchor(shim: str) -> str:
    return f"evidence-{shim.replace('_', '-')}"


def _shim_link(shim: str) -> str:
    return f"[`{shim}`](#{anchor(shim)})"


def _link(role: str, url: str) -> str:
    return f"[{cell_text(short_link(url))}]({url.replace(')', '%29').replace(' ', '%20')}) ({role})"


def _verdict(row: ShimEntry) -> str:
    decision = row.verdict.decision
    return f"{vocabulary.verdict(decision).emoji} **{decision}**"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _table(header: str, align: str, rows: Lines) -> Lines:
    return [f"| {header} |", align, *rows]


def _touches(fact: Fact) -> str:
    """The (shim, lane) pairs of a lane fact, or the shims of a shim fact, in words."""
    if not fact.lanes:
        return ", ".join(f"`{shim}`" for shim in fact.shims)
    return "; ".join(
        f"`{shim}` on "
        + ", ".join(f"**{cell_text(lane)}**" for owner, lane in fact.lanes if owner == shim)
        for shim in fact.shims
    )


# ---------------------------------------------------------------------------------------------
# What needs a person


def _headline(report: Report, view: View) -> Lines:
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
    return [
        (
            f"**{h.carried} shims carried** · **{_plural(h.retire, 'retire candidate')}** · "
            f"**{h.newly_broken} newly broken** · **{h.unknown} with unknown evidence**{extra}"
        ),
        "",
        (
            f"<sub>as of {report.as_of.isoformat()} · generated {report.generated_at} · {since} · "
            f"{h.keep} keep, {h.stale} stale, {h.drift} drift, {h.broken} broken somewhere, "
            f"{h.never_run} never run</sub>"
        ),
    ]


def _title(report: Report, view: View) -> Lines:
    return [MARKER, f"# Shim retirement report — {report.week}"]


def _regressions(report: Report, view: View) -> Lines | None:
    # what broke again leads: a regressed guard is the week's most urgent news
    return regressions.to_markdown(report.regressions) or None


def _notes(report: Report, view: View) -> Lines | None:
    if not report.notes:
        return None
    return ["> [!WARNING]", *[f"> {cell_text(note)}  " for note in report.notes]]


def _advice(report: Report, view: View) -> Lines | None:
    # advice, not a warning: nothing is wrong, the report says what it cannot show yet
    if not report.advice:
        return None
    return ["> [!NOTE]", *[f"> {cell_text(note)}  " for note in report.advice]]


def _trimmed(report: Report, view: View) -> Lines | None:
    return [f"> [!NOTE]\n> {view.note}"] if view.note else None


def _blocked(report: Report, view: View) -> Lines | None:
    # nothing blocked: no section (an empty card would push the to-do down)
    if not report.blocked:
        return None
    rows = [
        f"| `{row.shim}` | {cell_text(lane.lane)} | "
        + (", ".join(code_cell(str(f)) for f in lane.floors) or "—")
        + f" | {cell_text(lane.blocker or lane.why, 400)} |"
        for row, lane in report.blocked
    ]
    return [
        (
            "Lanes that would let the shim go if their pins could rise; the blocker is the "
            "resolver's own explanation — what has to change. The next report checks again."
        ),
        "",
        *_table("shim | lane | raise to | blocker", "|---|---|---|---|", rows),
    ]


def _ready(report: Report, view: View) -> Blocks | None:
    if not report.ready:
        return None
    items = []
    for row in report.ready:
        going = ", ".join(cell_text(lane.lane) for lane in row.verdict.leaving)
        where = f" from {going}" if going else ""
        action = f" **Next:** {cell_text(row.verdict.action, 300)}" if row.verdict.action else ""
        items.append(f"{_shim_link(row.shim)} — {_verdict(row)}{where}{action}")
    return [Block.items(items)]


def _attention(report: Report, view: View) -> Blocks:
    rows = report.attention
    if not rows:
        return [Block.paragraph("Nothing: every shim is needed, proven and linked upstream.")]
    items = (
        f"**`{row.shim}`** — {cell_text('; '.join(row.attention))}: "
        f"{cell_text(row.verdict.why, 300)}"
        + (f" **Next:** {cell_text(row.verdict.action, 300)}" if row.verdict.action else "")
        for row in rows
    )
    return [Block.items(items)]


def _shared(report: Report, view: View) -> Lines | None:
    facts = report.shared_flags
    if not facts:
        return None
    return [
        (
            "Flags said alike under several shims: one fact (about a host, a lane or a lock), "
            "said once here and not under each shim."
        ),
        "",
        *[
            f"- {vocabulary.FLAG.emoji} `{fact.kind}` — {cell_text(fact.text, 400)} "
            f"**Shims:** {_touches(fact)}"
            for fact in facts
        ],
    ]


# ---------------------------------------------------------------------------------------------
# Lanes and shims


def _lane_word(lane: LaneVerdict) -> str:
    return f"{vocabulary.step(lane.step).emoji} {cell_text(lane.lane)} ({lane.step})"


def _per_lane(report: Report, view: View) -> Lines:
    rows = [
        r
        for r in report.rows
        if r.verdict.lane_verdicts and (view.only is None or r.shim in view.only)
    ]
    if not rows:
        return [
            "No per-lane verdicts (the verdicts were gathered without lanes).",
            "",
            *lane_notes(report, view.only),
        ]
    legend = " · ".join(f"{look.emoji} {cell_text(look.label)}" for look in STEPS.values())
    table = [
        f"| {_shim_link(row.shim)} | {_verdict(row)} | "
        + " · ".join(_lane_word(lane) for lane in row.verdict.lane_verdicts)
        + " |"
        for row in rows
    ]
    shown = frozenset(row.shim for row in rows)
    return [
        legend,
        "",
        *_table("shim | verdict | lanes", "|---|---|---|", table),
        "",
        *lane_notes(report, shown),
    ]


def lane_notes(report: Report, only: frozenset[str] | None = None) -> Lines:
    """Every hold with its until, every lane without a decision with its next step — each reason
    once, with the (shim, lane) pairs it holds for — and every conflict with both its sides."""
    lines: Lines = []
    for step, heading, label in (
        (LaneStep.HOLD, "Held by the lane's policy", "Until"),
        (LaneStep.UNKNOWN, "Lanes without a decision", "Next"),
    ):
        facts = report.lane_facts(step, only)
        if facts:
            lines += [
                f"### {heading}",
                "",
                *[
                    f"- {_touches(fact)} — {cell_text(fact.text, 300)} "
                    f"**{label}:** {cell_text(fact.next or '—', 300)}"
                    for fact in facts
                ],
                "",
            ]
    conflicts = [(r, text) for r, text in report.conflicts if only is None or r.shim in only]
    if conflicts:
        lines += [
            "### Conflicts",
            "",
            "Two evidence sources disagree; the floor comes from execution.",
            "",
            *[f"- {vocabulary.FLAG.emoji} `{r.shim}` — {cell_text(t, 400)}" for r, t in conflicts],
        ]
    return lines


def _matrix(report: Report, view: View) -> Lines:
    m = report.matrix
    if not m.lanes:
        return ["No lanes defined and no runs recorded."]
    legend = (
        " · ".join(f"{OUTCOMES[o].emoji} {o}" for o in CELL_OUTCOMES)
        + " · blank: the lane does not list it"
    )
    header = " | ".join(cell_text(lane) + ("" if lane in m.defined else " ⁺") for lane in m.lanes)
    rows = [
        f"| `{shim}` | "
        + " | ".join(
            OUTCOMES[c.outcome].emoji if (c := m.cell(shim, lane)) else "" for lane in m.lanes
        )
        + " |"
        for shim in m.shims
        if view.only is None or shim in view.only
    ]
    notes = []
    if any(lane not in m.defined for lane in m.lanes):
        notes.append(
            "⁺ a lane only seen in the validation records (e.g. a GPU host's overlay lane), not in "
            "lanes/."
        )
    if view.only is not None:
        notes.append(
            f"Showing {len(view.only)} of {len(m.shims)} shims (those that need attention)."
        )
    table = _table(f"shim | {header}", "|---|" + "|".join(":-:" for _ in m.lanes) + "|", rows)
    return [legend, "", *table, *([""] if notes else []), *[f"<sub>{n}</sub>" for n in notes]]


def _unproven(row: ShimEntry) -> str:
    """The label of a shim that no lane proves, before where it was last proven."""
    return f"**unproven**: {cell_text(row.unproven, 160)}<br>" if row.unproven is not None else ""


def _shims(report: Report, view: View) -> Blocks:
    rows = []
    for row in report.rows:
        if view.table is not None and row.shim not in view.table:
            continue
        m = row.manifest
        links = "<br>".join(_link(link.role, link.url) for link in m.upstream.links)
        joiner = " and " if m.retirement.mode == "all" else " or "
        rows.append(
            (
                _shim_link(row.shim),
                str(m.fix_class),
                cell_text(m.owner),
                f"{row.age_days} d",
                f"{m.upstream.status}<br>{links or '**no link**'}",
                _verdict(row),
                f"{cell_text(row.verdict.why, 220)}{_window(row)}",
                cell_text(joiner.join(row.retire_when)),
                f"{_unproven(row)}{cell_text(row.proven_text, 160)}",
            )
        )
    header = "shim | fix class | owner | age | upstream | verdict | why | retire when | last proven"
    return [Block.table(header, "|---|---|---|---:|---|---|---|---|---|", rows)]


def _window(row: ShimEntry) -> str:
    """The bug's window (retire.history: the verdict's), one line under the verdict's why, and
    where it came from — the records, and the mirror that ordered the commits with how it was
    found; nothing when the runs pin neither edge and no branch fixed it (the verdict's why
    already says what ran)."""
    window = row.window
    pinned = (EdgeState.FOUND, EdgeState.UNPINNED)
    if window is None or not window.seen:
        return ""
    edges = (window.introduced, window.fixed)
    if window.branch_fix is None and not any(edge.state in pinned for edge in edges):
        return ""
    # a commit's subject is the upstream's text: inert in the cell
    return (
        f"<br>**Window:** {cell_text(window.line(), 240)}"
        f"<br>*{cell_text(window.source.describe(), 360)}*"
    )


# ---------------------------------------------------------------------------------------------
# History


def _bisections(report: Report, view: View) -> Lines | None:
    done = report.bisections
    if done is None:
        return None
    lines = [
        (
            f"Budget: {done.budget} — {_plural(done.runs, 'reproducer run')} spent; every run is "
            "recorded in the validation manifest, and the verdicts read it."
        ),
        "",
    ]
    if not done.ran and not done.left:
        return [*lines, "No verdict is flagged candidate: nothing to bisect."]
    if done.ran:
        rows = [
            f"| `{b.shim}` | {code_cell(b.command)} | {b.runs} | {cell_text(b.summary, 400)}"
            + (f" **Stopped:** {cell_text(b.stopped)}" if b.stopped else "")
            + " |"
            for b in done.ran
        ]
        lines += [*_table("shim | command | runs | result", "|---|---|---:|---|", rows), ""]
    if done.left:
        lines += [
            "### Not run this time",
            "",
            *[f"- {code_cell(b.command, table=False)} — {cell_text(b.why)}" for b in done.left],
        ]
    return lines


def _changes_title(report: Report) -> str:
    week = report.changes.previous_week
    return f"Changes since {week}" if week else "Changes"


def _changes(report: Report, view: View) -> Blocks:
    c = report.changes
    if c.previous_week is None:
        return [Block.paragraph("No previous report to compare with: this is the first one.")]
    if c.empty:
        return [Block.paragraph("Nothing changed.")]
    named = [
        ("New shims", [f"`{s}`" for s in c.new]),
        ("Retired (gone from shims/)", [f"`{s}`" for s in c.retired]),
        ("Newly broken", [f"`{s}` on {cell_text(lane)} ({o})" for s, lane, o in c.newly_broken]),
        ("No longer broken", [f"`{s}` on {cell_text(lane)}" for s, lane in c.repaired]),
    ]
    said = [f"**{label}:** " + ", ".join(items) for label, items in named if items]
    blocks = [Block.items(said)] if said else []
    if c.verdicts:
        rows = [
            (
                f"`{v.shim}`",
                str(v.before),
                f"{vocabulary.verdict(v.after).emoji} **{v.after}**",
                cell_text(v.why, 200),
            )
            for v in c.verdicts
        ]
        blocks.append(Block.table("shim | before | now | why", "|---|---|---|---|", rows))
    return blocks


def _unlinked(report: Report, view: View) -> Blocks:
    words = {
        Chase.STALE: "**stale**: {text}",
        Chase.POLICY: "no upstream link (status not-applicable: local policy, nothing to file)",
        Chase.UNLINKED: "**no upstream link** (status {text}): file it and link it",
    }
    items = [
        f"`{row.shim}` — " + words[why].format(text=cell_text(text, 240))
        for row, why, text in report.stale_or_unlinked
    ]
    return [Block.items(items) if items else Block.paragraph("None.")]


def _burndown(report: Report, view: View) -> Lines:
    points = report.burndown
    if len(points) < 2:
        return [f"Only this week's count so far: {report.headline.carried}."]
    top = max(p.carried for p in points)
    rows = [
        f"| {p.week} | {p.carried} | {'' if p.candidates is None else p.candidates} | {p.source} |"
        for p in points
    ]
    return [
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
        *_table("week | carried | retire candidates | from", "|---|---:|---:|---|", rows),
        "",
        "</details>",
    ]


def _filing_queue(report: Report, view: View) -> Lines | None:
    # the queue's Markdown brings its own heading
    return [report.filing_queue.rstrip()] if report.filing_queue else None


# ---------------------------------------------------------------------------------------------
# Evidence


def _evidence(report: Report, view: View) -> Blocks | None:
    if not view.evidence:
        return None
    shared = {(fact.kind, fact.text) for fact in report.shared_flags}
    return [block for row in report.rows for block in _shim_evidence(report, row, shared)]


def _shim_evidence(report: Report, row: ShimEntry, shared: set[tuple[str, str]]) -> Blocks:
    v, m = row.verdict, row.manifest
    own = [f for f in v.flags if (f.kind, f.text) not in shared]
    said = len(v.flags) - len(own)
    flags = [f"{vocabulary.FLAG.emoji} `{f.kind}` — {cell_text(f.text)}" for f in own]
    if said:
        flags.append(f"{vocabulary.FLAG.emoji} {_plural(said, 'flag')} under *Across shims*")
    blocks = [
        Block.html(
            f'<details id="{anchor(row.shim)}"><summary><code>{row.shim}</code> — '
            f"{vocabulary.verdict(v.decision).emoji} {v.decision}: "
            f"{summary_title(m.title)}</summary>"
        ),
        Block.paragraph(f"**Why:** {cell_text(v.why)}"),
        *([Block.paragraph(f"**Next:** {cell_text(v.action)}")] if v.action else []),
        *([Block.items(flags)] if flags else []),
        Block.items(
            (cell_text(w) for w in row.retire_when),
            lead=f"**Retire when** ({m.retirement.mode} of):",
        ),
    ]
    if v.conditions:
        conditions = (
            f"{vocabulary.condition(c.state).emoji} `{c.kind}` — {cell_text(c.why)}"
            for c in v.conditions
        )
        blocks.append(Block.items(conditions, lead="**Conditions now:**"))
    if v.floors:
        blocks.append(
            Block.paragraph("**Proposed floors:** " + ", ".join(f"`{f}`" for f in v.floors))
        )
    if v.lane_verdicts:
        grouped = report.grouped
        rows = [
            (
                cell_text(lane.lane),
                f"{vocabulary.step(lane.step).emoji} {lane.step}",
                str(lane.policy),
                cell_text(lane.locked or "—"),
                *(
                    SAID_ONCE
                    if (row.shim, lane.lane) in grouped
                    else (cell_text(lane.why, 300), cell_text(lane_next(lane), 300))
                ),
            )
            for lane in v.lane_verdicts
        ]
        header = "lane | step | policy | locked | why | next"
        blocks.append(Block.table(header, "|---|---|---|---|---|---|", rows))
    if v.failures:
        failures = (f"⚠️ {cell_text(str(f))}" for f in v.failures)
        blocks.append(Block.items(failures, lead="**Probe failures:**"))
    if row.evidence:
        evidence = (cell_text(e, 400) for e in row.evidence)
        blocks.append(Block.items(evidence, lead="**Evidence:**"))
    runs = [c for lane in report.matrix.lanes if (c := report.matrix.cell(row.shim, lane))]
    if runs:
        outcomes = [
            (
                cell_text(c.lane),
                f"{OUTCOMES[c.outcome].emoji} {c.outcome}",
                cell_text(c.host),
                c.date,
                cell_text(c.why, 160),
            )
            for c in runs
        ]
        header = "lane | outcome | host | date | why"
        blocks.append(Block.table(header, "|---|---|---|---|---|", outcomes))
    return [
        *blocks,
        Block.paragraph(
            f"**Last proven:** {cell_text(row.proven_text)} · **owner** {cell_text(m.owner)} · "
            f"created {m.created.isoformat()}"
        ),
        Block.html("</details>"),
    ]


#: Every section, in the order both documents show them. What needs a person comes first: a
#: section for regressions goes right after the notes; advice (nothing wrong) after the to-do.
SECTIONS: tuple[Section, ...] = (
    Section("title", _titled(""), _title),
    Section("regressions", _titled("Regressions"), _regressions, lambda r: len(r.regressions)),
    Section("headline", _titled(""), _headline),
    Section("notes", _titled(""), _notes),
    Section("trimmed", _titled(""), _trimmed),
    Section("blocked", _titled("Blocked"), _blocked, count=lambda r: len(r.blocked)),
    Section.drawn("ready", _titled("Ready to retire"), _ready, count=lambda r: len(r.ready)),
    Section.drawn("attention", _titled("Needs attention"), _attention, lambda r: len(r.attention)),
    Section("advice", _titled(""), _advice),
    Section("across", _titled("Across shims"), _shared, count=lambda r: len(r.shared_flags)),
    Section("lanes", _titled("Retirement per lane"), _per_lane),
    Section("matrix", _titled("Lane × shim matrix"), _matrix),
    Section.drawn("shims", _titled("Shims"), _shims),
    Section("bisections", _titled("Bisections"), _bisections),
    Section.drawn("changes", _changes_title, _changes),
    Section.drawn("unlinked", _titled("Stale or without an upstream link"), _unlinked),
    Section("burndown", _titled("Burn-down: shims carried"), _burndown),
    Section("filing-queue", _titled(""), _filing_queue, quoted=True),
    Section.drawn("evidence", _titled("Evidence"), _evidence),
)
