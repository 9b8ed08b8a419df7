"""The sections the page draws from their blocks (the Evidence, the shims table, the lists of
shims) are the HTML markdown-it makes of the same sections' Markdown, byte for byte — so the
drawn page and the Markdown cannot drift apart — and what came from elsewhere is text on the
drawn page as it is in the parsed one."""

from __future__ import annotations

import dataclasses
import random
import types
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import report as universe
from retire.core.project import Project
from retire.packs import store
from retire.report import build as report_build
from retire.report import html as report_html
from retire.report import mdhtml, weekly
from retire.report.blocks import Block, lines_of
from retire.report.model import Report
from retire.report.sections import SECTIONS, View, cell_text, code_cell
from retire.verdicts.model import Flag, FlagKind, LaneStep, LaneVerdict
from tests.conftest import ROOT
from tests.support.reportshop import (
    NOW,
    TRICKY_TITLE,
    build_shop,
    per_lane_verdicts,
    sample_bisections,
)

#: Text from upstream and from people: tags, Markdown of every kind, entities, escapes, pipes,
#: control characters, long tokens, odd whitespace.
HOSTILE = (
    "<script>alert(1)</script> and <img src=x onerror=alert(1)>",
    "a | b \\| c \\\\| d",
    "`code` and ``two`` and a lone ` backtick",
    "**bold** __strong__ *em* _em_ snake_case_name ~~struck~~ ~one~",
    "[a link](javascript:alert(1)) ![an image](https://example.org/x.png) <https://example.org>",
    "&amp; &lt;b&gt; &#x3c;script&#x3e; &copy; &nosuchentity; & alone",
    "# a heading",
    "1. a list item",
    "- a bullet",
    "> a quote",
    "ends with a backslash \\",
    "a line\nbreak\r\nand a\rcarriage return and a \0 NUL",
    "  padded\u00a0 ",
    "",
    "https://example.org/a_very_long_token_that_wraps/without_spaces?q=1&r=2",
    "</details><details open>",
    "*",
    "_",
    "\\*not emphasis\\*",
    "emoji 🟢 **after** a symbol",
    "BUG_REPRODUCED without the shim on lane-01: >=2.0",
)


def _hostile(rng: random.Random) -> str:
    return rng.choice(HOSTILE)


def _lane_verdicts(rng: random.Random, lanes: list[str]) -> tuple[LaneVerdict, ...]:
    """A step per lane; holds and undecided lanes share their reasons, so some are said once
    for several lanes (the evidence's lane rows then point there)."""
    steps = [LaneStep.HOLD, LaneStep.UNKNOWN, LaneStep.KEEP, LaneStep.BLOCKED, LaneStep.DROP]
    return tuple(
        LaneVerdict(
            lane,
            step := rng.choice(steps),
            "held for the lane's pins" if step is LaneStep.HOLD else _hostile(rng),
            locked=_hostile(rng) if rng.random() < 0.5 else None,
            blocker=_hostile(rng) if step is LaneStep.BLOCKED else None,
            until="the pins rise" if step is LaneStep.HOLD else None,
            action=_hostile(rng) if step is LaneStep.UNKNOWN else None,
        )
        for lane in lanes
    )


def _report(seed: int = 4) -> Report:
    """The benchmark's universe, cut to 40 shims × 6 lanes, with hostile text in every place
    text from elsewhere reaches the report: reasons, actions, flags, hosts, record details."""
    rng = random.Random(seed)
    data = universe.inputs(seed)
    manifests = data["manifests"][:40]
    keep = {m.id for m in manifests}
    lanes = [
        dataclasses.replace(lane, shims=tuple(s for s in lane.shims if s in keep))
        for lane in data["lanes"][:6]
    ]
    names = {lane.name for lane in lanes}
    verdicts = [
        dataclasses.replace(
            v,
            why=f"{v.why} {_hostile(rng)}",
            action=_hostile(rng) if rng.random() < 0.5 else v.action,
            flags=(*v.flags, Flag(FlagKind.STALE, _hostile(rng))),
            lanes=tuple(lane for lane in v.lanes if lane in names),
            lane_verdicts=_lane_verdicts(rng, [lane for lane in v.lanes if lane in names]),
        )
        for v in data["verdicts"]
        if v.shim in keep
    ]
    records = [
        dataclasses.replace(r, host={"hostname": _hostile(rng), "gpu": None}, detail=_hostile(rng))
        for r in data["records"]
        if r.shim in keep and r.lane in names
    ]
    return report_build.build(
        manifests,
        lanes,
        verdicts,
        records,
        week="2026-W47",
        now=universe.NOW,
        previous=data["previous"],
        history=data["history"],
    )


@pytest.fixture(scope="module")
def report() -> Report:
    return _report()


DRAWN = [section for section in SECTIONS if section.blocks is not None]


def test_the_large_sections_are_drawn():
    assert {"evidence", "shims", "attention", "changes"} <= {s.id for s in DRAWN}


@pytest.mark.slow
@pytest.mark.parametrize("section", DRAWN, ids=lambda s: s.id)
def test_a_drawn_section_is_its_markdown_as_markdown_it_renders_it(report, section):
    blocks = section.blocks(report, View())
    assert blocks, section.id
    markdown = "\n".join(section.body(report, View()) or [])
    assert markdown == "\n".join(lines_of(blocks))
    assert mdhtml.draw(blocks) == mdhtml.page_html(markdown)


def test_the_drawn_page_is_the_parsed_page(report):
    assert report.grouped and report.blocked
    assert report_html.to_html(report) == report_html.to_html(report, drawn=False)


@pytest.mark.slow
def test_the_shops_drawn_page_is_its_parsed_page(tmp_path):
    """The shop of the page tests: per-lane verdicts (a blocked lane, a conflict), a title with
    code spans and pipes, bisections, a filing queue."""
    root = build_shop(tmp_path / "shop", beta_title=TRICKY_TITLE)
    queue = types.SimpleNamespace(
        filing_queue=lambda _: store.filing_queue(ROOT), markdown_section=store.markdown_section
    )
    written = weekly.generate(
        Project(root),
        now=NOW,
        verdicts=per_lane_verdicts(),
        packs=queue,
        bisect=lambda _: sample_bisections(),
    )
    report = written.report
    assert any(row.verdict.lane_verdicts for row in report.rows) and report.blocked
    assert report_html.to_html(report) == report_html.to_html(report, drawn=False)


class _Text(HTMLParser):
    """Every tag and every piece of text of a page, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((name, value or "") for name, value in attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_what_came_from_elsewhere_is_text_on_the_drawn_page(report):
    page = report_html.to_html(report)
    parsed = _Text()
    parsed.feed(page)
    # the engine's tags only: none of the hostile text's tags became one
    assert not {"script", "img"} & set(parsed.tags)
    assert not {"src", "onerror"} & {name for name, _ in parsed.attrs}
    assert not [v for name, v in parsed.attrs if name == "href" and "javascript" in v.lower()]
    shown = "".join(parsed.text)
    assert "<script>alert(1)</script>" in shown
    assert "[a link](javascript:alert(1))" in shown


@pytest.mark.parametrize("text", HOSTILE)
def test_every_block_kind_draws_as_markdown_it_renders_it(text):
    safe, code = cell_text(text), code_cell(text)
    blocks = [
        Block.html('<details id="x"><summary>x</summary>'),
        Block.paragraph(f"**Why:** {safe}"),
        Block.items([safe, f"`x` — {safe}", code, ""], lead=f"**Lead:** {safe}"),
        Block.items([]),
        Block.table(
            "lane | n | code | why",
            "|---|---:|:-:|:--|",
            [(safe, "1", code, f"{safe}<br>**{safe}**"), (safe,), ("", "", "", "", "extra")],
        ),
        Block.table("empty | table", "|---|---|", []),
        Block.paragraph(safe),
        Block.items([safe]),
        Block.items([safe, "two"]),
        Block.items([f"**{safe}**"], lead=safe),
        Block.html("</details>"),
    ]
    assert mdhtml.draw(blocks) == mdhtml.page_html("\n".join(lines_of(blocks)))


#: Pieces of inline Markdown, the engine's own and what borders them: words, punctuation and
#: symbols on either side of a delimiter, entities, code spans and anchors.
PIECES = (
    "a", "B1", " ", "_", "**", "*", "`", "`x`", "` `", "` a `", "`**`", "[`s_1`](#a-b)", "&gt;",
    "&amp;", "&lt;", "&", "&copy;", ":", ";", "(", ")", "—", "🟢", "-", ".", "\u00a0", "\\", ">",
    "=", "x_y", "é", "'", "[", "]", "<br>", "~~", "!", "[a b](https://x.org/p_q?r=1)",
    "[lib#1](https://GitHub.com/o/l/issues/1)", "[é](https://x.org/é%zz)", "(", "https://x.org",
    "a_", "_b", "x__y", "c_.",
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_inline_text_the_page_reads_itself_reads_as_markdown_it_reads_it(text):
    simple = mdhtml._simple(text)
    if simple is not None:
        assert simple == mdhtml._parsed(text)
    assert mdhtml.inline(text) == mdhtml._parsed(text)


@pytest.mark.parametrize(
    "text",
    [
        "**Why:** synthetic keep: lib3 &gt;=2.0; BUG_REPRODUCED without the shim",
        "**`shim_212`** — newly broken on lane-07: reason",
        "[`shim_159`](#evidence-shim-159) — 🟢 **retire** from lane-01",
        "plain words only",
        "submitted<br>[lib1#1](https://github.com/org1/lib1/issues/1) (report)",
    ],
)
def test_the_engines_own_inline_markdown_is_read_without_markdown_it(text):
    # the common shapes are read by the page itself (the benchmark's cost), and read alike
    assert mdhtml._simple(text) == mdhtml._parsed(text)
