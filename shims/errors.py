"""The one error type for bad input, shared by the runtime and the engine (standard library only).

Every reader of user files (lane and matrix files, shim manifests, pack files, the pack state and
deny-list) raises :class:`InputError`; ``str()`` is one line::

    lanes/stable.toml: lane.python: expected a string, got a number 3.12 — write it as a quoted
version such as "3.12"

``shims.manifest.InputError`` and ``retire.core.errors.InputError`` are this same class under
the names each side has always used, so one ``except InputError`` catches bad input anywhere.
"""

from __future__ import annotations

import os

__all__ = ["InputError"]


class InputError(Exception):
    """Bad user input. ``str()`` is one line: ``file: key: problem — fix``.

    ``path`` is the file as the user should read it (already made relative where that helps),
    ``key`` the dotted key path inside it; either may be ``None`` when the input is not a file
    (a command-line option, a name). ``fix`` says what to do, and is printed after an em dash.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        key: str | None,
        problem: str,
        fix: str | None = None,
    ) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.key = key or None
        self.problem = problem
        self.fix = fix or None
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ": ".join(str(part) for part in (self.path, self.key) if part)
        text = f"{where}: {self.problem}" if where else self.problem
        if self.fix:
            text += f" — {self.fix}"
        # one line, whatever the parts held
        return " ".join(text.split())

    # picklable (process pools) although __init__ takes four arguments
    def __reduce__(self) -> tuple[type[InputError], tuple[str | None, str | None, str, str | None]]:
        return (type(self), (self.path, self.key, self.problem, self.fix))
