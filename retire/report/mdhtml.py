"""The Markdown patchlane itself writes (the filing queue's section), as HTML for the report page.

Not a Markdown renderer for any text: the subset the engine's own sections use — ATX headings,
paragraphs, GFM pipe tables, bullet lists nested by two spaces, and inline code spans, autolinks
``<https://…>``, links ``[text](https://…)`` and ``**bold**``. Everything else is text, escaped.
The tests hold it to what cmark-gfm (GitHub's renderer) makes of the same Markdown. Pure.
"""

from __future__ import annotations

import re
from html import escape, unescape

__all__ = ["code_spans", "to_html"]

_INLINE = re.compile(
    r"(?P<code>(`+)(?P<code_text>.+?)\2)"
    r"|<(?P<auto>https?://[^>\s]+)>"
    r"|\[(?P<link_text>[^\]\n]+)\]\((?P<link>https?://[^)\s]+)\)"
    r"|\*\*(?P<bold>[^*\n]+)\*\*"
)
_HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"( *)[-*+]\s+(.*)")
_DELIMITER = re.compile(r"\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*")


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


def _text(markdown: str) -> str:
    """Plain text: entity references (``&lt;``) read as CommonMark reads them, then escaped."""
    return escape(unescape(markdown), quote=False)


def inline(text: str) -> str:
    """One line of Markdown text as escaped HTML with its code spans, links and bold."""
    out, position = [], 0
    for match in _INLINE.finditer(text):
        out.append(_text(text[position : match.start()]))
        if match["code"]:
            body = match["code_text"]
            if body.startswith(" ") and body.endswith(" ") and body.strip():
                # CommonMark strips one space from each side
                body = body[1:-1]
            out.append(f"<code>{escape(body)}</code>")
        elif match["auto"]:
            out.append(f'<a href="{escape(match["auto"])}">{escape(match["auto"])}</a>')
        elif match["link"]:
            out.append(f'<a href="{escape(match["link"])}">{inline(match["link_text"])}</a>')
        else:
            out.append(f"<strong>{inline(match['bold'])}</strong>")
        position = match.end()
    out.append(_text(text[position:]))
    return "".join(out)


def _cells(row: str) -> list[str]:
    """A pipe-table row's cells; ``\\|`` is a pipe inside a cell."""
    body = row.strip()
    body = body.removeprefix("|")
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _table(lines: list[str]) -> str:
    header = _cells(lines[0])
    head = "".join(f"<th>{inline(cell)}</th>" for cell in header)
    rows = []
    for line in lines[2:]:
        # GitHub pads a short row and drops a long row's extra cells
        cells = (_cells(line) + [""] * len(header))[: len(header)]
        rows.append(
            "<tr>"
            + "".join(
                f'<td data-label="{escape(label)}">{inline(cell)}</td>'
                for label, cell in zip(header, cells, strict=True)
            )
            + "</tr>"
        )
    return (
        f'<table class="rows"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _list(bullets: list[re.Match[str]]) -> str:
    """Bullets; a bullet indented by two or more spaces more than the one before nests under it."""
    out: list[str] = []
    depths: list[int] = []
    for match in bullets:
        depth = len(match[1]) // 2
        if not depths or depth > depths[-1]:
            out.append("<ul>")
            depths.append(depth)
        else:
            while depths and depth < depths[-1]:
                out.append("</li></ul>")
                depths.pop()
            out.append("</li>")
        out.append(f"<li>{inline(match[2])}")
    out.append("</li></ul>" * len(depths))
    return "".join(out)


def to_html(markdown: str, *, heading_offset: int = 0) -> str:
    """HTML for ``markdown``; headings go ``heading_offset`` levels deeper (a section's ``##``
    under the page's own ``<h2>``)."""
    blocks, lines = [], markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if heading := _HEADING.fullmatch(line):
            level = min(6, len(heading[1]) + heading_offset)
            blocks.append(f"<h{level}>{inline(heading[2])}</h{level}>")
            i += 1
        elif (
            line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and _DELIMITER.fullmatch(lines[i + 1])
        ):
            end = i + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            blocks.append(_table(lines[i:end]))
            i = end
        elif _BULLET.fullmatch(line):
            bullets = []
            end = i
            while end < len(lines) and (bullet := _BULLET.fullmatch(lines[end])):
                bullets.append(bullet)
                end += 1
            blocks.append(_list(bullets))
            i = end
        else:
            end = i
            while (
                end < len(lines)
                and lines[end].strip()
                and not _HEADING.fullmatch(lines[end])
                and not _BULLET.fullmatch(lines[end])
                and not lines[end].lstrip().startswith("|")
            ):
                end += 1
            blocks.append("<p>" + " ".join(inline(text.strip()) for text in lines[i:end]) + "</p>")
            i = end
    return "\n".join(blocks)
