"""The one error type for bad input, shared by the runtime and the engine (stdlib only)."""

from __future__ import annotations

import os

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad user input. ``str()`` is one line: ``file: key: problem — fix``."""

    def __init__(self, path: str | os.PathLike[str] | None, key: str | None, problem: str, fix: str | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
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
