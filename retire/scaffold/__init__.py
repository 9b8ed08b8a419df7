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
from shims.filereading import read_bytes, read_text

__all__ = ["Plan", "kept", "newline_of", "raw_text", "template", "write"]

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
    included), lines only inserted — or a one-line list grown at its end (``[a]`` → ``[a, b]``),
    or the last line given the line end it lacked."""
    added = iter(new.splitlines(keepends=True))
    for line in old.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        grows = body[:-1] if body.endswith("]") else None
        if not any(
            candidate == line
            or (not end and candidate.rstrip("\r\n") == body)
            or (
                grows is not None
                and candidate.startswith(grows)
                and candidate.rstrip("\r\n").endswith("]")
                and candidate.endswith(end)
            )
            for candidate in added
        ):
            return False
    return True


def raw_text(path: Path, name: str, *, within: Path) -> str | None:
    """The text of an existing file as it is, line ends included (``\\r\\n`` stays: an edit
    appends in the file's own line ends); None when it is missing. Read safely: a link on the way
    from ``within`` (the file itself included: never read through), a FIFO, a folder there, a file
    that is not UTF-8, is one line."""
    contained(within, path)
    data = read_bytes(path, name, missing_ok=True)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # the reader's own line: where, which byte, the fix
        read_text(path, name)
        raise


def newline_of(text: str) -> str:
    """The line end a file uses (its first one; ``\\n`` when it has none)."""
    end = text.find("\n")
    return "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"


def _conflicts(root: Path, plan: Plan) -> list[str]:
    """Every target that is in the way, said once each: a file to create that exists, a file to
    edit that is no longer a regular file, a file where a folder must go (``.github``)."""
    found: dict[str, str] = {}
    for relative in [*plan.create, *plan.edit]:
        parts = Path(relative).parts
        for depth in range(1, len(parts)):
            folder = root.joinpath(*parts[:depth])
            if folder.exists() and not folder.is_dir():
                found.setdefault(Path(*parts[:depth]).as_posix(), "a file where a folder goes")
        target = root / relative
        if relative in plan.create and (target.exists() or target.is_symlink()):
            found.setdefault(relative, "exists")
        elif relative in plan.edit and not target.is_file():
            found.setdefault(relative, "is no longer a regular file")
    return [f"{path} ({why})" for path, why in found.items()]


def write(plan: Plan, *, command: str, append_only: bool = False) -> list[str]:
    """Write ``plan``: all of it or nothing. Refuses (one line naming every file in the way,
    nothing written) when a file to create exists or a folder it needs is a file, or, with
    ``append_only``, when an edit would change a line a file holds. Returns the paths."""
    root = plan.root.resolve()
    for relative in [*plan.create, *plan.edit]:
        # a template or an id never leaves the project, nor goes through a link in it: checked
        # for every file before the first is written
        contained(root, relative)
    conflicts = _conflicts(root, plan)
    if len(conflicts) == 1 and conflicts[0].endswith(" (exists)"):
        raise InputError(
            str(root / conflicts[0].removesuffix(" (exists)")),
            None,
            f"exists; {command} writes only new files",
            "move it aside, or run it in a folder without it",
        )
    if conflicts:
        raise InputError(
            str(root),
            None,
            f"{len(conflicts)} files in the way of {command}, which writes only new files: "
            + ", ".join(conflicts),
            "move them aside, or run it in a folder without them",
        )
    before: dict[str, str] = {}
    for relative, text in plan.edit.items():
        before[relative] = raw_text(root / relative, str(root / relative), within=root) or ""
        # an edit adds: every line the file holds stays, in order, byte for byte
        if append_only and not kept(before[relative], text):
            raise InputError(
                str(root / relative), None, "would be rewritten", "report this as a patchlane bug"
            )
    done: list[str] = []
    # the folders there before: an undo removes only the ones it made
    existed = {
        folder
        for relative in plan.create
        for folder in (root / relative).parents
        if folder.is_dir()
    }
    try:
        for relative, text in {**plan.create, **plan.edit}.items():
            atomic_write(root / relative, text, within=root)
            done.append(relative)
    except BaseException:
        # all or nothing: what was written goes back as it was
        _undo(root, plan, done, before, existed)
        raise
    return [*plan.create, *plan.edit]


def _undo(
    root: Path, plan: Plan, done: list[str], before: dict[str, str], existed: set[Path]
) -> None:
    for relative in reversed(done):
        try:
            if relative in plan.edit:
                atomic_write(root / relative, before[relative], within=root)
            else:
                (root / relative).unlink()
                # the folders it made, when empty
                for folder in (root / relative).parents:
                    if folder in existed or any(folder.iterdir()):
                        break
                    folder.rmdir()
        except OSError:
            pass
