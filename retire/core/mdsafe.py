"""Untrusted text inside the Markdown patchlane writes (pull-request bodies, bump and pack bodies,
the report): shown as written, never read as Markdown or HTML.

A reproducer's output, a resolver's message, a host's name or a package's release-notes address
is data. Put into a body as it is, a line of three backticks closes the evidence fence and what
follows — an ``<img onerror>``, a ``## … approved`` heading — renders as the body's own. Each
helper here makes one kind of place safe, as GitHub's renderer (cmark-gfm) reads it:

- :func:`fence` — a code block whose fence is longer than any backtick run in the text;
- :func:`text` — one line of prose: no HTML, no block (heading, list, quote, rule, fence, table
  row), no link or image of the text's own;
- :func:`code` — an inline code span, however many backticks the text holds;
- :func:`link` — a link to an ``http(s)`` address only, its label plain text.

Pure.
"""

from __future__ import annotations

import re

__all__ = ["code", "fence", "link", "text"]

_BACKTICKS = re.compile(r"`+")
# Inline Markdown a line of prose could start itself: links and images, table cells, and the
# backslash that would escape our own escapes. Code spans and emphasis are left alone: they change
# how words look, never what the body says (the engine's own reasons quote commands in code
# spans, and names such as BUG_REPRODUCED stay readable).
_INLINE = re.compile(r"([\\\[\]|])")
# What opens a block when it starts a line: a heading, a quote, a list item, a rule, a setext
# underline or a code fence; the first character is escaped.
_BLOCK_START = re.compile(r"^(?:[#>+=*_`~-]|\d{1,9}[.)])")


def fence(body: str, info: str = "text") -> str:
    """``body`` as a fenced code block: the fence is one backtick longer than the longest run in
    the text (at least three), so no line of the text can close it."""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    marks = "`" * max(3, longest + 1)
    # the info string of a backtick fence may not hold a backtick
    label = info.replace("`", "").strip()
    return f"{marks}{label}\n{body.rstrip()}\n{marks}"


def text(value: object, limit: int | None = None) -> str:
    """``value`` as one line of inert prose (a table cell, a list item, a paragraph)."""
    flat = " ".join(str(value).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    # no tag can open without "<"; "&" keeps an entity in the text as written
    flat = flat.replace("&", "&amp;").replace("<", "&lt;")
    flat = _INLINE.sub(r"\\\1", flat)
    block = _BLOCK_START.match(flat)
    if block:
        # "1." reads as a list item, "1\." as text; "#" as a heading, "\#" as text
        end = block.end() - 1
        flat = f"{flat[:end]}\\{flat[end:]}"
    return flat


def code(value: object) -> str:
    """``value`` as one inline code span: the span's fence is longer than any backtick run in
    it, and GitHub shows entities in a code span as written, so nothing else is escaped. Not for
    a table cell (a ``|`` would end the cell): use :func:`text` there."""
    flat = " ".join(str(value).split())
    if not flat:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{marks}{pad}{flat}{pad}{marks}"


_SAFE_URL = re.compile(r"https?://[^\s<>\"'`()\[\]\\]+", re.IGNORECASE)


def link(label: object, url: str) -> str:
    """``[label](url)`` for an ``http(s)`` address without characters that would end the link;
    anything else is shown as text, never linked."""
    shown = text(label)
    if not _SAFE_URL.fullmatch(url.strip()):
        return f"{shown} ({text(url)})" if url.strip() else shown
    return f"[{shown}]({url.strip()})"
