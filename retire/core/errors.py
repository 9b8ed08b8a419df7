"""Engine errors: bad input (one line naming the file, the key and the fix) and other failures."""

from __future__ import annotations

from shims.errors import InputError

__all__ = ["ConfigError", "InputError", "PatchlaneError"]


class ConfigError(InputError):
    """Bad input to the engine: lane, matrix, pack and state files, flags. Exit code 2."""


class PatchlaneError(Exception):
    """A failure the user can act on that is not bad input (a missing tool, a refused install). Exit code 1."""
