"""The files ``patchlane init`` writes to be committed, against git's own ignore rules.

A shop's ``.gitignore`` may keep a file out of every commit (``*pylock.toml``, ``.github/``):
the lock stays on one machine, and a fresh clone fails ``lock --check``. ``init`` asks git
(``git check-ignore``, which knows every ignore file, the global one included) before it writes,
appends a negation to the project's ``.gitignore`` for each file git would leave out, and after
it writes asks again: what is still ignored (a folder rule, a rule in a deeper ``.gitignore``)
is a note saying which rule and what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

from retire.core.git import Git, GitError

__all__ = ["LOCKS", "negations", "still_ignored"]

#: Every lane's lock, as a ``.gitignore`` pattern relative to the project.
LOCKS = "locks/*/pylock.toml"


def _ignored(root: Path, paths: list[str]) -> dict[str, str]:
    """path -> the rule that ignores it; nothing where ``root`` is no git work tree (yet)."""
    try:
        return Git(root).ignored(paths) if root.is_dir() else {}
    except GitError:
        return {}


def _negation(path: str) -> str:
    """The ``.gitignore`` line that lets git commit ``path`` again: every lane's lock for one,
    and for a path that names a kind of file (``lanes/<lane>.toml``, ``reports/<week>.json``)
    every file of that kind."""
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "locks" and parts[2] == "pylock.toml":
        return f"!/{LOCKS}"
    return "!/" + re.sub(r"<[a-z]+>", "*", path)


def negations(root: Path, paths: list[str]) -> tuple[list[str], list[str]]:
    """The lines to append to ``root/.gitignore`` so that git commits ``paths``, and a note for
    each file they are for (which rule ignored it)."""
    lines: list[str] = []
    notes: list[str] = []
    for path, rule in _ignored(root, paths).items():
        source, _, pattern = rule.partition(": ")
        # a negation cannot re-include a file under an ignored folder, nor beat a rule of a
        # deeper .gitignore: those are left to the note after writing
        deeper = Path(source.rpartition(":")[0])
        if pattern.endswith("/") or (deeper.name == ".gitignore" and deeper != Path(".gitignore")):
            continue
        line = _negation(path)
        if line not in lines:
            lines.append(line)
        notes.append(
            f"{path} is ignored by git ({rule}) and would never be committed: .gitignore gets "
            f"`{line}`"
        )
    return lines, notes


def still_ignored(root: Path, paths: list[str]) -> list[str]:
    """A note for each of ``paths`` that git still would not commit (after ``init`` wrote)."""
    return [
        f"{path} is still ignored by git ({rule}): a fresh clone will not have it — remove or "
        f"narrow that rule (a negation in .gitignore cannot undo a folder rule or a deeper "
        f".gitignore's), then `git add {path}`"
        for path, rule in _ignored(root, paths).items()
    ]
