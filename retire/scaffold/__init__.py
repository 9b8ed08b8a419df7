"""Scaffolds: a new patchlane project (``patchlane init``) and a new shim (``patchlane shim new``).

Both are plans first (:class:`Plan`: the files to create, the files to edit), then one write:
nothing is written when any file to create already exists, every file is written atomically,
and nothing outside the project is touched. The texts are the files under ``templates/``, with
``@@NAME@@`` placeholders (no ``$``: the workflows hold shell and GitHub expressions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.core.errors import InputError

__all__ = ["Plan", "template", "write"]

_PLACEHOLDER = re.compile(r"@@([A-Z]+)@@")


def template(name: str, **values: str) -> str:
    """The template ``templates/<name>`` with every ``@@KEY@@`` replaced (a missing value is a
    bug)."""
    text = (
        resources.files(__name__)
        .joinpath("templates", *name.split("/"))
        .read_text(encoding="utf-8")
    )
    return _PLACEHOLDER.sub(lambda m: values[m.group(1).lower()], text)


@dataclass(frozen=True)
class Plan:
    """What a scaffold writes under ``root``: new files, and edits of files that exist (full new
    text)."""

    root: Path
    # relative path -> text
    create: dict[str, str] = field(default_factory=dict)
    # relative path -> new text
    edit: dict[str, str] = field(default_factory=dict)
    # what the scaffold chose for the user (defaults), one line each, printed with the files
    notes: tuple[str, ...] = ()


def write(plan: Plan, *, command: str) -> list[str]:
    """Write ``plan``; refuses (one line, nothing written) when a file to create exists. Returns
    the paths."""
    root = plan.root.resolve()
    for relative in [*plan.create, *plan.edit]:
        target = (root / relative).resolve()
        # a template or an id can never leave the project
        if target != root and root not in target.parents:
            raise InputError(
                None, None, f"{relative} is outside {root}", "report this as a patchlane bug"
            )
    existing = [relative for relative in plan.create if (root / relative).exists()]
    if existing:
        raise InputError(
            str(root / existing[0]),
            None,
            f"exists; {command} writes only new files",
            "move it aside, or run it in a folder without it",
        )
    for relative, text in {**plan.create, **plan.edit}.items():
        atomic_write(root / relative, text)
    return [*plan.create, *plan.edit]
