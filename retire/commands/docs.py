"""``patchlane docs [TOPIC]``: the documentation, from wherever this copy of patchlane is.

The wheel carries ``docs/*.md`` as ``retire/docs/`` (pyproject's hatch ``force-include``), so an
installed copy has its own docs; a checkout (an editable install) reads ``docs/`` beside
``retire/``. Without a topic: every topic, its title and the folder; with one: that page, as
Markdown on stdout.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_text, say
from retire.core.errors import InputError
from retire.core.project import Project


def folder() -> Path | None:
    """Where this copy's docs are: the installed package's ``retire/docs``, else a checkout's
    ``docs/``."""
    # retire/commands/docs.py -> retire/
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "docs", package.parent / "docs"):
        if (candidate / "commands.md").is_file():
            return candidate
    return None


#: README sections that are topics of their own (other pages point to them), by heading.
SECTIONS = {"adoption": "Adopting patchlane in another repository"}


def _readme(where: Path) -> Path | None:
    """The README: beside the docs in the wheel (``retire/docs/README.md``), above them in a
    checkout."""
    for candidate in (where / "README.md", where.parent / "README.md"):
        if candidate.is_file():
            return candidate
    return None


def topics(where: Path) -> dict[str, str]:
    """Topic name (the file's stem; ``readme`` and its sections) -> its title (the heading)."""
    found = {}
    for page in sorted(where.glob("*.md")):
        if page.name == "README.md":
            continue
        first = page.read_text(encoding="utf-8").split("\n", 1)[0]
        found[page.stem] = first.lstrip("# ").strip()
    if _readme(where) is not None:
        found["readme"] = "The README: install, quick start, lanes, locks, shims, retiring"
        found.update({name: f"README, {heading!r}" for name, heading in SECTIONS.items()})
    return found


def page(where: Path, name: str) -> str:
    """The Markdown of topic ``name`` (one of :func:`topics`)."""
    readme = _readme(where)
    if name == "readme" and readme is not None:
        return readme.read_text(encoding="utf-8")
    if name in SECTIONS and readme is not None:
        text = readme.read_text(encoding="utf-8")
        start = text.index(f"\n## {SECTIONS[name]}\n") + 1
        end = text.find("\n## ", start)
        return text[start : end + 1 if end >= 0 else None]
    return (where / f"{name}.md").read_text(encoding="utf-8")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "topic", nargs="?", metavar="TOPIC", help="a page, e.g. commands (default: list them)"
    )


def run(project: Project, args: argparse.Namespace) -> int:
    where = folder()
    if where is None:
        raise InputError(
            None,
            "docs",
            "this copy of patchlane has no docs",
            "reinstall it from a wheel or a git URL (both carry them)",
        )
    pages = topics(where)
    if args.topic is None:
        width = max(map(len, pages))
        say("\n".join(f"{name:<{width}}  {title}" for name, title in pages.items()))
        say(f"(in {where}; `patchlane docs TOPIC` prints one)")
        return ExitCode.OK
    name = args.topic.removesuffix(".md").lower()
    if name not in pages:
        raise InputError(
            None, "TOPIC", f"no page {args.topic!r}", f"pick one of: {', '.join(pages)}"
        )
    emit_text(page(where, name))
    return ExitCode.OK


COMMAND = Command(
    "docs",
    "the documentation: the topics, or one page (`patchlane docs commands`)",
    add_arguments,
    run,
    "Print patchlane's documentation, which ships with it: without TOPIC, the topics and the "
    "folder they are in; with TOPIC, that page as Markdown.",
)
