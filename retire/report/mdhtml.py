"""Markdown the engine writes, as HTML for the report page: CommonMark with GFM tables and
strikethrough through markdown-it-py (the tests hold it to cmark-gfm, GitHub's renderer). Pure.

Two readers: :func:`to_html` for Markdown that carries text from elsewhere (the filing queue:
raw HTML is text, as GitHub's sanitiser would leave it) and :func:`page_html` for the report's
own sections, whose text is escaped where it is written (``markdown.cell_text``) and whose few
tags (``<details>``, ``<sub>``, ``<br>``) are the engine's. Tables get the page's class and a
``data-label`` per cell (a narrow screen stacks them), long tokens may wrap anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from types import SimpleNamespace

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.rules_core.text_join import text_join
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

__all__ = ["LONG_TOKEN", "code_spans", "page_html", "to_html"]

#: Longer than this, a token (a URL, a hash, a path) may break anywhere; shorter words never do.
LONG_TOKEN = 16

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def code_spans(text: str) -> str:
    """Plain text (a shim's title) as escaped HTML whose backtick spans are ``<code>``: what
    GitHub would show for it as Markdown, for places Markdown is not rendered (``<summary>``).
    Text, never an attribute value: quotes stay as they are."""
    out, position = [], 0
    for match in _CODE_SPAN.finditer(text):
        body = match[2]
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        out.append(escape(text[position : match.start()], quote=False))
        out.append(f"<code>{escape(body, quote=False)}</code>")
        position = match.end()
    out.append(escape(text[position:], quote=False))
    return "".join(out)


_LONG = re.compile(rf"\S{{{LONG_TOKEN + 1},}}")


def breakable(text: str) -> str:
    """Escaped text whose long tokens are marked ``.brk``: a table column is then never narrower
    than its longest short word, and a URL still wraps."""
    return _LONG.sub(
        lambda found: f'<span class="brk">{found[0]}</span>', escape(text, quote=False)
    )


def _label_cells(state: StateCore) -> None:
    """The page's class on every table, and each body cell labelled with its column's header."""
    labels: list[str] = []
    column, previous = 0, ""
    for token in state.tokens:
        if token.type == "table_open":
            token.attrSet("class", "rows")
            labels = []
        elif token.type == "tr_open":
            column = 0
        elif token.type == "td_open":
            if column < len(labels):
                token.attrSet("data-label", labels[column])
            column += 1
        elif token.type == "inline" and previous == "th_open":
            labels.append(token.content)
        previous = token.type


def _inline_once(state: StateCore) -> None:
    """markdown-it's inline step and its text join, each distinct text parsed once per page: a
    page of 500 shims repeats its cells (an outcome, a host, a lane's name) thousands of times,
    and the renderer only reads the tokens (the join, which merges text tokens in place, runs
    here, once per text, instead of after)."""
    parsed: dict[str, list[Token]] = {}
    for token in state.tokens:
        if token.type != "inline":
            continue
        children = parsed.get(token.content)
        if children is None:
            token.children = []
            state.md.inline.parse(token.content, state.md, state.env, token.children)
            text_join(SimpleNamespace(tokens=[token]))  # type: ignore[arg-type]
            children = parsed[token.content] = token.children
        token.children = children


def _text(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return breakable(tokens[idx].content)


def _code(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return f"<code>{breakable(tokens[idx].content)}</code>"


def _scroll_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # a wide table scrolls in its own box, never the page
    return '<div class="grid-wrap">' + str(self.renderToken(tokens, idx, options, env))


def _scroll_close(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return str(self.renderToken(tokens, idx, options, env)) + "</div>"


def _reader(*, page: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": page}).enable(["table", "strikethrough"])
    # nothing the engine writes is a setext heading, an indented code block or a link reference:
    # fewer rules to try on every line of a page of 500 shims
    md.disable(["lheading", "code", "reference"])
    md.core.ruler.push("label_cells", _label_cells)
    md.core.ruler.at("inline", _inline_once)
    md.core.ruler.disable("text_join")
    if page:
        md.add_render_rule("text", _text)
        md.add_render_rule("code_inline", _code)
        md.add_render_rule("table_open", _scroll_open)
        md.add_render_rule("table_close", _scroll_close)
    return md


_QUOTED = _reader(page=False)
_PAGE = _reader(page=True)


def to_html(markdown: str) -> str:
    """HTML for Markdown that holds text from elsewhere: a tag in it is text."""
    return str(_QUOTED.render(markdown)).rstrip("\n")


#: GitHub's alerts (``> [!NOTE]``): a blockquote of that class on the page.
_ALERT = re.compile(r"<blockquote>\n<p>\[!(NOTE|WARNING)\]\s*")


def page_html(markdown: str) -> str:
    """HTML for the report's own Markdown (its text escaped where it was written)."""
    html = str(_PAGE.render(markdown)).rstrip("\n")
    return _ALERT.sub(lambda found: f'<blockquote class="{found[1].lower()}">\n<p>', html)
