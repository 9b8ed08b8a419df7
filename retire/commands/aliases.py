"""Deprecated spellings of commands, kept for one release (0.2 removes them).

Each is hidden from ``patchlane --help``, works as the command that replaced it, and says so in
one line on stderr (stdout, ``--json`` included, is unchanged).
"""

from __future__ import annotations

from retire.commands import shim, validation
from retire.commands.base import Command

__all__ = ["ALIASES"]

ALIASES = (
    # "manifest" is a shim's manifest.toml; the records are "validation"
    Command(
        "manifest",
        "",
        validation.add_arguments,
        validation.run,
        replaced_by="patchlane validation",
    ),
    # `shim` and `shims` were two commands one letter apart
    Command("shims", "", shim.add_list_arguments, shim.run_list, replaced_by="patchlane shim list"),
)
