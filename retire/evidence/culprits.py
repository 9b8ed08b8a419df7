"""The culprits recorded as evidence: ``validation/culprits.jsonl`` beside the validation manifest,
one JSON object a line (``Culprit.to_json()``, written by :mod:`retire.branches.breaks`), read by
the weekly report's "Regressions" and by ``pack new --from-culprit``.

Read through the one tolerant reader (:mod:`retire.evidence.jsonlines`): a line that is not UTF-8,
not JSON, or an entry without its keys (``lane``, ``subject``, ``status``, ``line`` as text;
``packages`` a list of ``{name, old, new}``) is skipped with one warning naming the file and the
line, and kept in the file as it is; a FIFO or folder in the file's place is one warning (the
readers see no culprit) — never a traceback, never a block.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.secrets import scrub
from retire.evidence import jsonlines

__all__ = ["NAME", "append", "entry", "load"]

#: The file's name, beside the validation manifest.
NAME = "culprits.jsonl"
_TEXT_KEYS = ("lane", "subject", "status", "line")
_KEPT = "skipped, kept in the file as it is; fix or delete that line"


def entry(data: dict[str, object]) -> dict[str, object]:
    """``data`` when it is a recorded culprit every reader can use; ``ValueError`` naming the key
    otherwise."""
    for key in _TEXT_KEYS:
        if not isinstance(data.get(key), str):
            raise ValueError(f"{key!r} is missing or not text")
    packages = data.get("packages")
    if not isinstance(packages, list) or not all(
        isinstance(p, dict) and all(isinstance(p.get(k), str) for k in ("name", "old", "new"))
        for p in packages
    ):
        raise ValueError("'packages' is missing or not a list of {name, old, new}")
    for key in ("last_clean", "first_broken", "mode"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ValueError(f"{key!r} is not text")
    between = data.get("between", [])
    if not isinstance(between, list) or not all(isinstance(v, str) for v in between):
        raise ValueError("'between' is not a list of versions")
    commit = data.get("commit")
    if commit is not None and not (
        isinstance(commit, dict)
        and isinstance(commit.get("sha"), str)
        and isinstance(commit.get("pr"), str | None)
    ):
        raise ValueError("'commit' is not {sha, pr}")
    return data


def load(path: Path) -> list[dict[str, object]]:
    """Every recorded culprit of ``path`` that is whole, oldest first (a missing file: none)."""
    try:
        found = jsonlines.read(path, entry)
    except InputError as exc:
        jsonlines.say(f"{exc} — no culprit read from it")
        return []
    jsonlines.warn(path, found.damaged, _KEPT)
    return found.items


def append(path: Path, entries: Iterable[dict[str, object]], *, within: Path) -> None:
    """Add ``entries`` at the end of ``path``, atomically; every line already there stays as it
    is, damaged or not (a FIFO or folder in its place is one line, exit 2, nothing written)."""
    data = jsonlines.read(path, entry).data
    # bytes are written as given: the new lines are scrubbed here, as text would be
    lines = scrub("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries)).encode()
    kept = data if not data or data.endswith(b"\n") else data + b"\n"
    atomic_write(path, kept + lines, within=within)
