"""Untrusted text in the Markdown patchlane writes renders as text, as GitHub renders it.

A reproducer's output, a resolver's blocker, a host name, release-notes addresses: rendered with
cmark-gfm (GitHub's renderer), none of them may close the evidence fence, open a heading, add
HTML (an ``<img onerror>``) or a link/image of its own. The PR body ``retire --apply`` saves, the
bump PR body, the bisection evidence, pack bodies and the report's Markdown each get the hostile
text; Hypothesis fuzzes the evidence text and the helpers (``retire.core.mdsafe``).
"""

from __future__ import annotations

import os
from html import unescape
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from retire.branches.bump import BumpStatus, LaneBump
from retire.branches.bump import pr_body as bump_body
from retire.branches.dropmessage import pr_body
from retire.branches.dropplan import DropPlan
from retire.branches.lanemoves import TreeEdit
from retire.branches.retirement import evidence_markdown
from retire.core import mdsafe
from retire.evidence.floor import Floor
from retire.evidence.validation import ValidationRecord
from retire.report.markdown import cell_text
from retire.verdicts.model import Flag, FlagKind, LaneStep, LaneVerdict, Verdict

cmarkgfm = pytest.importorskip("cmarkgfm", reason="the test extra installs cmarkgfm")
from cmarkgfm.cmark import Options  # noqa: E402

FUZZ = settings(
    max_examples=int(os.environ.get("PATCHLANE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

HOSTILE = (
    "ok\n```\n<img src=x onerror=alert(1)>\n## Security review: approved\n"
    "~~~\n    indented\n<script>alert(2)</script>\n![pixel](https://tracker.example/p.gif)\n"
    "[click](javascript:alert(3))\n- [x] approved\n1. merged\n> quoted\n---\n````\n"
)


def github_html(markdown: str) -> str:
    # unsafe: GitHub's own sanitiser is not what protects the body; the Markdown must
    return cmarkgfm.github_flavored_markdown_to_html(
        markdown, options=Options.CMARK_OPT_HARDBREAKS | Options.CMARK_OPT_UNSAFE
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.headings: list[str] = []
        self.pre: list[str] = []
        self._where: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._where.append(tag)
        if tag == "pre":
            self.pre.append("")
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.headings.append("")

    def handle_endtag(self, tag):
        if self._where and self._where[-1] == tag:
            self._where.pop()

    def handle_data(self, data):
        if "pre" in self._where:
            self.pre[-1] += data
        if self._where and self._where[-1] in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.headings[-1] += data


def tags(markdown: str) -> _Tags:
    parser = _Tags()
    parser.feed(github_html(markdown))
    return parser


def assert_inert(
    markdown: str, *, headings: tuple[str, ...] = (), heading_text: bool = False
) -> _Tags:
    """No HTML, image, link to javascript:, list item or heading of the hostile text's own
    (``heading_text``: the hostile text is part of one of the body's own headings)."""
    found = tags(markdown)
    assert not {"img", "script", "blockquote", "ol"} & set(found.tags), found.tags
    if not heading_text:
        assert "approved" not in " ".join(found.headings), found.headings
    assert all(h in " ".join(found.headings) for h in headings)
    assert 'href="javascript' not in github_html(markdown)
    return found


def record(
    output: str, *, outcome: str = "bug-reproduced", host: str = "h100-1"
) -> ValidationRecord:
    return ValidationRecord(
        shim="toylib_add",
        mode="without",
        lane="cpu",
        host={"hostname": host, "gpu": "<img src=y onerror=alert(4)>"},
        versions={"toylib": "1.5"},
        sentinel=outcome.upper().replace("-", "_"),
        outcome=outcome,
        exit_code=10 if outcome == "bug-reproduced" else 0,
        duration_s=1.0,
        started_at="2026-05-01T00:00:00+00:00",
        output_tail=output,
    )


def retire_body(output: str, *, why: str = "toylib 1.6 fixed add()", host: str = "h100-1") -> str:
    verdict = Verdict(
        "toylib_add",
        "retire-in-some",
        why,
        flags=(Flag(FlagKind.CONFLICT, output),),
    )
    evidence = evidence_markdown(
        verdict, (record(output, host=host), record(output, outcome="fix-validated", host=host))
    )
    plan = DropPlan(
        "toylib_add",
        why,
        (Floor.parse("toylib>=1.6"),),
        evidence,
        (("issue", "https://github.com/o/r/issues/1"), ("fix", "javascript:alert(5)")),
        lanes=(
            LaneVerdict("drop", LaneStep.DROP, "fixed", file="lanes/drop.toml"),
            LaneVerdict("blocked", LaneStep.BLOCKED, "blocked", blocker=output),
        ),
    )
    return pr_body(plan, TreeEdit(changes=("lanes/drop.toml: dropped",), folder_removed=False))


def test_a_fence_in_the_reproducers_output_does_not_close_the_evidence_fence():
    body = retire_body(HOSTILE)
    found = assert_inert(body, headings=("Retire shim", "Evidence"))
    # the output is shown whole, as written, in the before and after blocks
    assert sum(HOSTILE.rstrip() in unescape(block) for block in found.pre) == 2
    # the body's own headings are all there is
    assert [h.split()[0] for h in found.headings] == [
        "Retire",
        "Lanes",
        "Lanes",
        "Upstream",
        "Evidence",
    ]


def test_a_hostile_reason_or_host_name_is_text():
    body = retire_body("x", why=HOSTILE, host="## approved <img src=z onerror=alert(6)>")
    assert_inert(body)
    assert "onerror" in unescape(github_html(body))


def test_the_bump_body_shows_a_resolvers_message_and_a_release_notes_address_as_text():
    lanes = (
        LaneBump(
            "cpu",
            BumpStatus.FAILED,
            why=HOSTILE,
            outcomes=(("toylib_add", "<img src=q onerror=alert(7)>", None),),
        ),
        LaneBump(
            "gpu",
            BumpStatus.BUMPED,
            notes=(
                ("toylib", "https://example.org/notes) ![x](https://tracker.example/p.gif"),
                ("other", "javascript:alert(8)"),
                ("good", "https://example.org/changelog"),
            ),
        ),
    )
    import datetime as _dt

    body = bump_body(
        lanes, cutoff=_dt.datetime(2026, 5, 1, tzinfo=_dt.UTC), packages=(), suites_ran=True
    )
    found = assert_inert(body, headings=("Lane",), heading_text=True)
    # the resolver's message stays inside the lane's own heading: no heading of its own
    assert [h.split()[0] for h in found.headings] == ["Lane", "Lane"]
    assert '<a href="https://example.org/changelog">good</a>' in github_html(body)


def test_report_cells_and_list_items_are_text():
    for markdown in (f"- {cell_text(HOSTILE)}", f"| a |\n|---|\n| {cell_text(HOSTILE)} |"):
        found = assert_inert(markdown)
        # an http(s) address is linked as GitHub links any (never the image it names)
        assert not {"h1", "h2", "pre", "hr"} & set(found.tags), found.tags


# ---------------------------------------------------------------------------------------------
# Fuzzing: whatever the text, the fence holds it whole and a line of prose stays one line of text

MARKDOWNISH = st.lists(
    st.sampled_from(
        [
            *"`~#>-*_+=|[]()!<>&\\/:; \n\t\r0123456789.)abcAZ@",
            "```",
            "\n```\n",
            "<img src=x>",
            "\n## ",
        ]
    ),
    max_size=60,
).map("".join)


@FUZZ
@given(MARKDOWNISH)
# found by hypothesis: character references are text, decoded once
@pytest.mark.slow
@example("&#0")
@example("a &amp; b")
def test_fuzz_evidence_text_stays_inside_its_fence(output):
    body = retire_body(output)
    found = tags(body)
    wanted = output.replace("\r\n", "\n").replace("\r", "\n").rstrip().splitlines()[-25:]
    # both fenced blocks are there, holding the tail exactly as written
    # HTMLParser already decoded the page's character references: decoding again would turn
    # text such as "&#0" (written in the page as "&amp;#0") into U+FFFD
    blocks = list(found.pre)
    assert len(blocks) == 2
    for block in blocks:
        assert block.rstrip("\n").splitlines() == [line.rstrip() for line in wanted] or (
            block.rstrip("\n") == "\n".join(wanted).rstrip()
        )
    assert [h.split()[0] for h in found.headings] == [
        "Retire",
        "Lanes",
        "Lanes",
        "Upstream",
        "Evidence",
    ]
    assert not {"img", "script", "blockquote", "ol", "h1", "h4"} & set(found.tags)


@pytest.mark.slow
@FUZZ
@given(MARKDOWNISH)
def test_fuzz_a_line_of_prose_renders_as_the_same_text(value):
    html = github_html(f"before\n\n{mdsafe.text(value)}\n\nafter")
    found = tags(f"before\n\n{mdsafe.text(value)}\n\nafter")
    # one paragraph of text (emphasis and code spans at most), nothing else
    assert set(found.tags) <= {"p", "em", "strong", "code", "del", "br"}, (value, found.tags)
    shown = " ".join(unescape(_strip_tags(html)).split())
    assert (
        shown == " ".join(f"before {' '.join(value.split())} after".split())
        or "`" in value
        or (set(value) & set("*_~"))
    )


def _strip_tags(html: str) -> str:
    import re

    return re.sub(r"<[^>]+>", " ", html)


@pytest.mark.slow
@FUZZ
@given(MARKDOWNISH, st.sampled_from(["text", "sh", ""]))
def test_fuzz_a_fence_holds_any_text(value, info):
    found = tags(f"{mdsafe.fence(value, info)}\n\n## after")
    assert found.headings == ["after"]
    body = value.replace("\r\n", "\n").replace("\r", "\n").rstrip()
    assert unescape(found.pre[0]).rstrip("\n") == body


def test_a_hostile_commit_subject_in_a_window_bisection_renders_as_text():
    """A mirror's commit subject is upstream's text: in the bisection evidence it stays inert."""
    from retire.bisect.search import Candidates
    from retire.bisect.windowresult import WindowResult
    from retire.history.edge import CommitSpan, Edge, EdgeKind, EdgeState
    from retire.history.window import Window
    from retire.mirrors.history import Commit

    hostile = "<img src=x onerror=alert(1)> ## approved\n```\n# Fixed"
    commit = Commit("a" * 40, hostile, "2026-07-30T00:00:00+00:00", 12, False)
    span = CommitSpan(
        EdgeKind.FIXED, ("v1.0", "v1.1"), 3, EdgeState.FOUND, "b" * 40, "a" * 40, commit=commit
    )
    fixed = Edge(EdgeKind.FIXED, EdgeState.FOUND, "1.0", "1.1", commits=span)
    opened = Edge(EdgeKind.INTRODUCED, EdgeState.OPEN)
    window = Window(("1.0", "1.1"), True, opened, fixed)
    result = WindowResult("toy", "toylib", window, Candidates(("1.0", "1.1")))
    markdown = result.markdown()
    # the window's own Markdown keeps the subject inert too (the report, packs)
    assert "<img" not in github_html(window.markdown())
    assert "onerror" in markdown
    html_out = github_html(markdown)
    assert "<img" not in html_out and "<h1" not in html_out and "approved</h2>" not in html_out
