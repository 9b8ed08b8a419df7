"""Scaffolds: a new patchlane project (``patchlane init``) and a new shim (``patchlane shim new``).

``source`` says where patchlane comes from (``init --from``); ``merge`` appends to a shop's
noxfile and pre-commit config. Both scaffolds are plans first (:class:`Plan`: the files to
create, the files to edit, the notes), then one write: nothing is written when any file to create
already exists, an existing file is only appended to by ``init`` (never rewritten), every file is
written atomically, and nothing outside the project is touched. The texts are the files under
``templates/``, with ``@@NAME@@`` placeholders (no ``$``: the workflows hold shell and GitHub
expressions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.project import contained

__all__ = ["Plan", "kept", "template", "write"]

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
    # what to tell the person, one line each, printed with the files: a file left alone and the
    # lines to add to it by hand, the defaults the scaffold chose, …
    notes: tuple[str, ...] = ()


def kept(old: str, new: str) -> bool:
    """Whether ``new`` holds every line of ``old``, in order and byte for byte (line ends
    included), lines only inserted — or a one-line list grown at its end (``[a]`` → ``[a, b]``)."""
    added = iter(new.splitlines(keepends=True))
    for line in old.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        grows = body[:-1] if body.endswith("]") else None
        if not any(
            candidate == line
            or (
                grows is not None
                and candidate.startswith(grows)
                and candidate.endswith("]" + line[len(body) :])
            )
            for candidate in added
        ):
            return False
    return True


def write(plan: Plan, *, command: str, append_only: bool = False) -> list[str]:
    """Write ``plan``; refuses (one line, nothing written) when a file to create exists, or, with
    ``append_only``, when an edit would change what a file holds. Returns the paths."""
    root = plan.root.resolve()
    for relative in [*plan.create, *plan.edit]:
        # a template or an id never leaves the project, nor goes through a link in it: checked
        # for every file before the first is written
        contained(root, relative)
    existing = [relative for relative in plan.create if (root / relative).exists()]
    if existing:
        raise InputError(
            str(root / existing[0]),
            None,
            f"exists; {command} writes only new files",
            "move it aside, or run it in a folder without it",
        )
    for relative, text in plan.edit.items() if append_only else ():
        # an edit adds: every line the file holds stays, in order, byte for byte
        if not kept((root / relative).read_text(encoding="utf-8"), text):
            raise InputError(
                str(root / relative), None, "would be rewritten", "report this as a patchlane bug"
            )
    for relative, text in {**plan.create, **plan.edit}.items():
        atomic_write(root / relative, text, within=root)
    return [*plan.create, *plan.edit]
