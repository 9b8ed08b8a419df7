"""The engine's error types: bad input (one line naming the file, the key and the fix), and the
rest."""

from __future__ import annotations

from shims.errors import InputError

#: ``InputError`` is bad user input, ``file: key: problem — fix`` on one line (exit code 2). It is
#: defined by the runtime (``shims.errors``), whose readers raise it too; the engine imports it
#: from here.
__all__ = ["InputError", "PatchlaneError"]


class PatchlaneError(Exception):
    """A failure the user can act on that is not bad input (a missing tool, a refused install).
    Exit code 1."""
