"""The engine's error types: bad input (one line naming the file, the key and the fix), and the rest."""

from __future__ import annotations

from shims.errors import InputError

__all__ = ["ConfigError", "InputError", "PatchlaneError"]

#: Bad user input, ``file: key: problem — fix`` on one line (exit code 2). The engine's name for
#: the one input-error type: the shim runtime raises the same class
#: (``shims.manifest.ManifestError``).
ConfigError = InputError


class PatchlaneError(Exception):
    """A failure the user can act on that is not bad input (a missing tool, a refused install). Exit code 1."""
