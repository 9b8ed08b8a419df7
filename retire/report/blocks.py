"""A block of a section's Markdown, kept as the parts it was written from: a paragraph, a bullet
list (with the paragraph that leads into it), a table's cells, or the engine's own tag lines.

A section written as blocks is still written once: its Markdown is :meth:`Block.markdown` of
each block, and the page draws the same blocks (``mdhtml.draw``) instead of parsing that
Markdown again — a table of 500 shims is cells already, and markdown-it's table rule is pure
Python. Each inline text is the same Markdown either way (``mdhtml.inline`` renders it). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Block", "Kind", "lines_of"]


class Kind(StrEnum):
    # the engine's own tag lines (``<details …>``, ``</details>``), written as they are
    HTML = "html"
    PARAGRAPH = "paragraph"
    ITEMS = "items"
    TABLE = "table"


@dataclass(frozen=True)
class Block:
    """One block. ``texts``: a paragraph's one text, a list's items, the tag lines, or a table's
    header cells; ``lead``: the paragraph right above a list (no blank line between them);
    ``align`` and ``rows``: a table's column alignments (``---``, ``---:``, ``:-:``) and cells."""

    kind: Kind
    texts: tuple[str, ...]
    lead: str | None = None
    align: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def html(cls, *lines: str) -> Block:
        return cls(Kind.HTML, lines)

    @classmethod
    def paragraph(cls, text: str) -> Block:
        return cls(Kind.PARAGRAPH, (text,))

    @classmethod
    def items(cls, texts: Iterable[str], lead: str | None = None) -> Block:
        return cls(Kind.ITEMS, tuple(texts), lead=lead)

    @classmethod
    def table(cls, header: str, align: str, rows: Iterable[Sequence[str]]) -> Block:
        """``header`` as the Markdown writes it (``"lane | outcome"``), ``align`` its rule
        (``"|---|---:|"``), each row its cells."""
        return cls(
            Kind.TABLE,
            tuple(header.split(" | ")),
            align=tuple(align.strip("|").split("|")),
            rows=tuple(tuple(row) for row in rows),
        )

    def markdown(self) -> list[str]:
        if self.kind is Kind.ITEMS:
            return [
                *([self.lead] if self.lead is not None else []),
                *(f"- {t}" for t in self.texts),
            ]
        if self.kind is Kind.TABLE:
            return [
                f"| {' | '.join(self.texts)} |",
                f"|{'|'.join(self.align)}|",
                *(f"| {' | '.join(row)} |" for row in self.rows),
            ]
        return list(self.texts)


def lines_of(blocks: Iterable[Block]) -> list[str]:
    """The Markdown of ``blocks``, a blank line between each two."""
    lines = [line for block in blocks for line in (*block.markdown(), "")]
    return lines[:-1]
