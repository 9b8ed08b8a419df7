"""The HTML page's colours and its rendering of the filing queue, without a browser (the browser
checks are in test_report_html.py): every text colour pair of the stylesheet has a WCAG contrast of
at least 4.5:1, no undeclared colour appears in a page, and the queue's Markdown becomes the same
table and lists that GitHub's renderer (cmark-gfm) makes of it."""

from __future__ import annotations

import dataclasses
import re
import types
from html.parser import HTMLParser

import pytest

from retire.core.project import Project
from retire.packs import store
from retire.report import html as report_html
from retire.report import mdhtml, weekly
from tests.conftest import ROOT
from tests.support.reportshop import (
    NOW,
    TRICKY_TITLE,
    build_shop,
    per_lane_verdicts,
    sample_bisections,
)


def luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_is_computed_as_wcag_says():
    assert round(contrast("#000000", "#ffffff"), 2) == 21.0
    # WCAG's own example of the AA threshold
    assert round(contrast("#767676", "#ffffff"), 2) == 4.54


@pytest.mark.parametrize(("fore", "back"), report_html.TEXT_PAIRS)
def test_every_text_colour_pair_has_contrast_of_at_least_4_5(fore, back):
    assert contrast(fore, back) >= 4.5, f"{fore} on {back}: {contrast(fore, back):.2f}"


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    root = build_shop(tmp_path_factory.mktemp("page") / "shop", beta_title=TRICKY_TITLE)
    queue = types.SimpleNamespace(
        filing_queue=lambda _: store.filing_queue(ROOT), markdown_section=store.markdown_section
    )
    return (
        weekly.generate(
            Project(root),
            now=NOW,
            verdicts=per_lane_verdicts(),
            packs=queue,
            bisect=lambda _: sample_bisections(),
        )
        .paths[1]
        .read_text()
    )


@pytest.mark.slow
def test_no_colour_in_a_page_is_undeclared(page):
    declared = (
        {c for pair in report_html.TEXT_PAIRS for c in pair}
        | set(report_html.DECORATION)
        | set(report_html.OUTCOME_COLOURS.values())
    )
    used = {c.lower() for c in re.findall(r"#[0-9a-fA-F]{6}\b", page)}
    assert used - declared == set()


class _Blocks(HTMLParser):
    """The text of each table cell and list item, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.items: list[str] = []
        self._open: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        # a nested list starts a new line of its item
        if tag == "ul" and self._open:
            self._open[-1][1].append(" ")
        if tag in ("td", "th", "li"):
            self._open.append((tag, []))

    def handle_endtag(self, tag):
        if tag in ("td", "th", "li") and self._open:
            kind, parts = self._open.pop()
            text = " ".join("".join(parts).split())
            (self.items if kind == "li" else self.cells).append(text)
            # a nested list's text also belongs to its parent item
            if self._open:
                self._open[-1][1].append(" ")

    def handle_data(self, data):
        for _, parts in self._open:
            parts.append(data)


def blocks(html: str) -> _Blocks:
    parser = _Blocks()
    parser.feed(html)
    return parser


@pytest.mark.slow
def test_the_filing_queue_renders_as_github_renders_it(page):
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="the test extra installs cmarkgfm")
    entries = list(store.filing_queue(ROOT))
    # The real queue, plus one blocked pack (the catalogue may have none this week): a table and
    # nested lists are the cases that matter.
    entries.append(
        dataclasses.replace(
            entries[0],
            id="blocked_example",
            status="blocked",
            reasons=(
                "reproducer `reproduce.py` | needs a GPU run",
                "no upstream link yet",
                "the `[upstream]` table names no report",
            ),
        )
    )
    section = store.markdown_section(entries)
    assert "|---|" in section and "\n  - " in section
    ours, github = (
        blocks(mdhtml.to_html(section)),
        blocks(cmarkgfm.github_flavored_markdown_to_html(section)),
    )
    assert ours.cells == github.cells
    assert ours.items == github.items
    assert len(ours.cells) > 5 and len(ours.items) > 3
    # In the page: a rendered section, not Markdown in a <pre>.
    queue = page[page.index('<section id="filing-queue">') :]
    queue = queue[: queue.index("</section>")]
    assert "<pre>" not in queue and '<table class="rows">' in queue and "|---|" not in queue


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        (
            "a `x|y` and <https://example.org/a_b> and [t](https://e.org) **b**",
            (
                "<p>a <code>x|y</code> and <a "
                'href="https://example.org/a_b">https://example.org/a_b</a> and '
                '<a href="https://e.org">t</a> <strong>b</strong></p>'
            ),
        ),
        (
            "<script>alert(1)</script> & [x](javascript:alert(1))",
            "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; [x](javascript:alert(1))</p>",
        ),
        (
            "### Blocked\n\n- `a`\n  - why\n- `b`",
            "<h3>Blocked</h3>\n<ul><li><code>a</code><ul><li>why</li></ul></li><li><code>b</code></li></ul>",
        ),
    ],
)
def test_markdown_subset(markdown, html):
    # the renderer's line breaks between block tags are not content
    assert re.sub(r">\n<", "><", mdhtml.to_html(markdown)) == html.replace(">\n<", "><")
