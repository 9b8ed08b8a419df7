"""The one error type for bad input: a single line naming the file, the key and the fix."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """Bad user input. ``str()`` is one line: ``file: key: problem — fix``."""

    def __init__(self, path: str | Path | None, key: str | None, problem: str, fix: str | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.path, self.key) if part)
        text = f"{where}: {self.problem}" if where else self.problem
        if self.fix:
            text += f" — {self.fix}"
        return " ".join(text.split())  # one line, whatever the parts held


class PatchlaneError(Exception):
    """A failure the user can act on that is not bad input (a missing tool, a refused install)."""
