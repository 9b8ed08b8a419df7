"""JSON Schemas (draft 2020-12) of every ``--json`` document patchlane prints.

One ``<name>.schema.json`` per document, shipped in the wheel beside this file;
:data:`DOCUMENTS` says which command prints which. ``tests/test_json_schemas.py`` validates real
output against them and fails when a command gains ``--json`` without a schema here.
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["DOCUMENTS", "ERROR", "load", "names"]

#: The command (its words, as typed after ``patchlane``) → the schema(s) of what ``--json`` prints.
#: ``lock`` prints one document when locking and another with ``--check``; ``retire`` prints the
#: report without ``--apply`` and the proposals with it; ``bump --dry-run`` what a bump would do.
#: ``python -m shims --json`` prints the rows of ``patchlane shim list --json``.
DOCUMENTS: dict[str, tuple[str, ...]] = {
    "init": ("init",),
    "lanes": ("lanes",),
    "lock": ("lock", "lock-check"),
    "lockdiff": ("lockdiff",),
    "run": ("run",),
    "summary": ("summary",),
    "shim list": ("shims",),
    "shim new": ("shim-new",),
    "catalogue": ("catalogue",),
    "mirrors list": ("mirrors-list",),
    "mirrors sync": ("mirrors-sync",),
    "verdicts": ("verdicts",),
    "bisect": ("bisect",),
    "report": ("report",),
    "retire": ("report", "retire-apply"),
    "bump": ("bump", "bump-dry-run"),
    "culprit": ("culprit",),
    "pack check": ("pack-check",),
    "pack plan": ("pack-plan",),
    "pack queue": ("pack-queue",),
}


#: What every command above prints with ``--json`` instead of its document when it fails first
#: (bad input, usage, a failed tool, an interruption): ``error.schema.json``.
ERROR = "error"


def names() -> list[str]:
    """Every schema shipped here, by name (``lock-check`` for ``lock-check.schema.json``)."""
    folder = resources.files(__name__)
    return sorted(
        entry.name.removesuffix(".schema.json")
        for entry in folder.iterdir()
        if entry.name.endswith(".schema.json")
    )


def load(name: str) -> dict:
    """The schema ``name`` as parsed JSON."""
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)
