"""Markdown the engine writes, as HTML for the report page: CommonMark with GFM tables and
strikethrough through markdown-it-py (the tests hold it to cmark-gfm, GitHub's renderer). Pure.

Two readers: :func:`to_html` for Markdown that carries text from elsewhere (the filing queue:
raw HTML is text, as GitHub's sanitiser would leave it) and :func:`page_html` for the report's
own sections, whose text is escaped where it is written (``markdown.cell_text``) and whose few
tags (``<details>``, ``<sub>``, ``<br>``) are the engine's. Tables get the page's class and a
``data-label`` per cell (a narrow screen stacks them), long tokens may wrap anywhere.

A section written as :class:`~retire.report.blocks.Block` values is drawn by :func:`draw`: the
HTML :func:`page_html` makes of those blocks' Markdown, without parsing the blocks again (the
Evidence section of 500 shims is 1.1 MB of tables and lists, and markdown-it's block rules are
pure Python); each inline text still goes through markdown-it (:func:`inline`, once per distinct
text). ``tests/test_report_drawn.py`` holds the two to the same HTML.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from html import escape
from types import SimpleNamespace

from markdown_it import MarkdownIt
from markdown_it.common.utils import (
    escapeHtml,
    isMdAsciiPunct,
    isPunctChar,
    isWhiteSpace,
    mdTrim,
)
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.rules_core.text_join import text_join
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from retire.report.blocks import Block, Kind, lines_of

__all__ = ["LONG_TOKEN", "code_spans", "draw", "inline", "page_html", "to_html"]

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


def _html_renderer(md: MarkdownIt) -> RendererHTML:
    renderer = md.renderer
    # the default renderer, which the page's rules were added to
    assert isinstance(renderer, RendererHTML)
    return renderer


_RENDERER = _html_renderer(_PAGE)


def to_html(markdown: str) -> str:
    """HTML for Markdown that holds text from elsewhere: a tag in it is text."""
    return str(_QUOTED.render(markdown)).rstrip("\n")


#: GitHub's alerts (``> [!NOTE]``): a blockquote of that class on the page.
_ALERT = re.compile(r"<blockquote>\n<p>\[!(NOTE|WARNING)\]\s*")


def page_html(markdown: str) -> str:
    """HTML for the report's own Markdown (its text escaped where it was written)."""
    html = str(_PAGE.render(markdown)).rstrip("\n")
    return _ALERT.sub(lambda found: f'<blockquote class="{found[1].lower()}">\n<p>', html)


# ---------------------------------------------------------------------------------------------
# Blocks drawn without parsing them again

#: A character that can start something in markdown-it's inline rules (an escape, a code span,
#: emphasis, strikethrough, a link or an image, a tag or an autolink, an entity, a line break);
#: text without one is one text token. ``\r`` and NUL are what the parser normalises first.
_MARKUP = re.compile(r"[\\`*_~\[\]!<&\n\r\0]")
_NEWLINES = re.compile(r"\r\n?|\n")


#: The pieces of the engine's own inline Markdown :func:`_simple` reads: a code span of single
#: backticks, a link of one code span to an anchor on the page, a link of plain words to an
#: http(s) address, the page's ``<br>``, ``**``, the three entities ``cell_text`` writes, an
#: underscore (in a name); and (last) any other character that starts something.
_PIECE = re.compile(
    r"(?<!`)`(?P<code>[^`\n]+)`(?!`)"
    r"|\[`(?P<label>[^`\n]+)`\]\((?P<anchor>#[A-Za-z0-9_-]+)\)"
    r"|\[(?P<words>[^\[\]\\`*_~!<&\n\r\0]+)\]\((?P<url>https?://[^\s()<>\\`&\"'\0]+)\)"
    r"|(?P<br><br>)"
    r"|(?<!\*)(?P<strong>\*\*)(?!\*)"
    r"|&(?P<entity>amp|lt|gt);"
    r"|(?P<underscore>_)"
    r"|[\\`*~\[\]!<&\n\r\0]"
)
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_WORD = re.compile(r"[A-Za-z0-9]")


def _flanks(text: str, start: int, end: int) -> tuple[bool, bool]:
    """Whether the ``**`` at ``text[start:end]`` can open, and whether it can close (CommonMark's
    flanking rules, as markdown-it's ``scanDelims`` applies them)."""
    last = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    last_punct = isMdAsciiPunct(ord(last)) or isPunctChar(last)
    after_punct = isMdAsciiPunct(ord(after)) or isPunctChar(after)
    last_space, after_space = isWhiteSpace(ord(last)), isWhiteSpace(ord(after))
    left = not (after_space or (after_punct and not (last_space or last_punct)))
    right = not (last_space or (last_punct and not (after_space or after_punct)))
    return left, right


def _code_body(body: str) -> str:
    # one space is stripped from each side of a code span that has one on each, unless all spaces
    if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
        return body[1:-1]
    return body


def _simple(text: str) -> str | None:
    """The page's HTML of an inline text made only of what the engine writes — plain text, its
    entities, underscores after a letter or digit, code spans, ``**strong**``, ``<br>`` and its
    links — read as markdown-it reads it; None for anything else (markdown-it reads that)."""
    out: list[str] = []
    words: list[str] = []
    position, opened = 0, False
    for piece in _PIECE.finditer(text):
        words.append(text[position : piece.start()])
        position = piece.end()
        kind = piece.lastgroup
        if kind == "entity":
            words.append(_ENTITIES[piece["entity"]])
            continue
        if kind == "underscore":
            # after a letter or a digit an underscore cannot open emphasis; taking only those,
            # none opens, so none closes either
            if piece.start() > 0 and _WORD.match(text[piece.start() - 1]):
                words.append("_")
                continue
            return None
        if kind is None:
            return None
        out.append(breakable("".join(words)))
        words = []
        if kind == "code":
            out.append(f"<code>{breakable(_code_body(piece['code']))}</code>")
        elif kind == "url":
            href = _PAGE.normalizeLink(piece["url"])
            if not _PAGE.validateLink(href):
                return None
            out.append(f'<a href="{escapeHtml(href)}">{breakable(piece["words"])}</a>')
        elif kind == "br":
            out.append("<br>")
        elif kind == "anchor":
            out.append(
                f'<a href="{piece["anchor"]}"><code>{breakable(_code_body(piece["label"]))}'
                "</code></a>"
            )
        else:
            left, right = _flanks(text, piece.start(), piece.end())
            # strictly opener, closer, opener, …: anything else is emphasis markdown-it reads
            if (left, right) != ((True, False) if not opened else (False, True)):
                return None
            opened = not opened
            out.append("<strong>" if opened else "</strong>")
    if opened:
        return None
    words.append(text[position:])
    out.append(breakable("".join(words)))
    return "".join(out)


@functools.lru_cache(maxsize=1 << 15)
def inline(text: str) -> str:
    """One inline text of the page's Markdown (a paragraph's, an item's, a cell's, trimmed as the
    parser trims them) as the page's HTML: exactly what :func:`page_html` makes of it there."""
    if not _MARKUP.search(text):
        return breakable(text)
    simple = _simple(text)
    return simple if simple is not None else _parsed(text)


def _parsed(text: str) -> str:
    """An inline text as markdown-it reads it (and as the page renders its tokens)."""
    children: list[Token] = []
    source = _NEWLINES.sub("\n", text).replace("\0", "\ufffd")
    _PAGE.inline.parse(source, _PAGE, {}, children)
    token = Token("inline", "", 0, children=children)
    text_join(SimpleNamespace(tokens=[token]))  # type: ignore[arg-type]
    return _RENDERER.renderInline(token.children or [], _PAGE.options, {})


@functools.lru_cache(maxsize=1 << 15)
def _cell(text: str) -> str:
    # a table cell as GFM splits it: an escaped pipe is the cell's pipe, without its backslash
    return inline(mdTrim(text.replace("\\|", "|")))


def _table(block: Block) -> str:
    columns = len(block.texts)
    styles = [f' style="text-align:{a}"' if (a := _align(rule)) else "" for rule in block.align]
    head = "".join(
        f"<th{style}>{_cell(h)}</th>\n" for style, h in zip(styles, block.texts, strict=True)
    )
    labels = [
        f'{style} data-label="{escapeHtml(mdTrim(h))}"'
        for style, h in zip(styles, block.texts, strict=True)
    ]
    body = "".join(
        "<tr>\n"
        + "".join(
            f"<td{label}>{_cell(cell)}</td>\n"
            for label, cell in zip(
                labels, (*row[:columns], *[""] * (columns - len(row))), strict=True
            )
        )
        + "</tr>\n"
        for row in block.rows
    )
    return (
        f'<div class="grid-wrap"><table class="rows">\n<thead>\n<tr>\n{head}</tr>\n</thead>\n'
        + (f"<tbody>\n{body}</tbody>\n" if block.rows else "")
        + "</table>\n</div>"
    )


def _paragraph(text: str) -> str:
    return f"<p>{inline(mdTrim(text))}</p>\n"


def _drawn(block: Block) -> str:
    if block.kind is Kind.HTML:
        return "\n".join(block.texts) + "\n"
    if block.kind is Kind.PARAGRAPH:
        return _paragraph(block.texts[0])
    if block.kind is Kind.ITEMS:
        lead = _paragraph(block.lead) if block.lead is not None else ""
        if not block.texts:
            return lead
        return (
            lead
            + "<ul>\n"
            + "".join(f"<li>{inline(mdTrim(t))}</li>\n" for t in block.texts)
            + "</ul>\n"
        )
    return _table(block)


def _align(rule: str) -> str:
    """A table column's rule (``---:``) as the alignment GFM gives its cells."""
    rule = mdTrim(rule)
    if rule.endswith(":"):
        return "center" if rule.startswith(":") else "right"
    return "left" if rule.startswith(":") else ""


#: A line that opens a block other than a paragraph (a heading, a quote, a list item, a rule, a
#: fence, a tag) — never one the engine writes as text (``cell_text`` escapes the first
#: character), but then such a block is parsed rather than drawn.
_BLOCK_START = re.compile(
    r"(?:[*_-][ \t]*){3,}$|[#>]|[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|```|~~~|<"
)


def _plain(text: str | None) -> bool:
    # a paragraph of its own (no lead: None), or an item's text
    return text is None or (bool(trimmed := mdTrim(text)) and not _BLOCK_START.match(trimmed))


def _regular(block: Block) -> bool:
    """Whether the Markdown reads the block as its kind says: an empty paragraph is none, an
    item's text that opens a block of its own is that block, and an empty first item does not
    start a list under a paragraph (it continues the paragraph)."""
    if block.kind is Kind.PARAGRAPH:
        return _plain(block.texts[0])
    if block.kind is Kind.ITEMS:
        return _plain(block.lead) and all(map(_plain, block.texts))
    return True


def _empty(block: Block) -> bool:
    """Whether the block's Markdown is blank lines only."""
    if block.kind is Kind.TABLE:
        return False
    return not any(line.strip() for line in (*block.texts, block.lead or ""))


def _runs(blocks: Iterable[Block]) -> list[list[Block]]:
    """The blocks, each alone, but a list with every list after it that has no paragraph of its
    own above it (blank lines between them only): the Markdown makes one list of them."""
    runs: list[list[Block]] = []
    listed = False
    for block in blocks:
        # a list under no paragraph of its own (none, or one the Markdown reads otherwise)
        bare = block.kind is Kind.ITEMS and (block.lead is None or not _plain(block.lead))
        if listed and (_empty(block) or bare):
            runs[-1].append(block)
            continue
        runs.append([block])
        listed = block.kind is Kind.ITEMS and bool(block.texts)
    return runs


def draw(blocks: Iterable[Block]) -> str:
    """The page's HTML of ``blocks``: what :func:`page_html` makes of their Markdown. A block
    the Markdown reads other than as its kind says (an empty paragraph, lists that run into one)
    is parsed, alone: blocks a blank line apart are read apart."""
    out = []
    for run in _runs(blocks):
        if all(map(_empty, run)):
            continue
        if len(run) == 1 and _regular(run[0]) and not _empty(run[0]):
            out.append(_drawn(run[0]))
        else:
            out.append(str(_PAGE.render("\n".join(lines_of(run)))))
    return "".join(out).rstrip("\n").replace("\0", "\ufffd")
