"""JSON Lines evidence files, read tolerantly: the one reader of every ``*.jsonl`` the engine keeps
(the validation manifest, ``validation/culprits.jsonl``).

A file is read safely (:mod:`shims.filereading`: a FIFO or a folder in its place is one
:class:`~retire.core.errors.InputError` naming it, never a block) and split on ``\\n`` only, as it
was written. Each line is decoded, parsed and handed to the caller's ``parse``; a line that is not
UTF-8, not JSON (a truncated write), not an object, nested too deeply, or that ``parse`` refuses (a
missing or mistyped key) is a :class:`Damaged` line — never an exception — which the caller warns
about (:func:`warn`: one line naming the file and the line) and keeps or moves as its file needs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from shims.filereading import read_bytes

__all__ = ["Damaged", "Lines", "parse_object", "read", "say", "warn"]

_T = TypeVar("_T")
#: The largest evidence file read (years of runs on many hosts are a few MiB).
MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class Damaged:
    """A line of an evidence file that is not one of its entries: its number, its bytes, why."""

    number: int
    line: bytes
    problem: str


@dataclass(frozen=True)
class Lines(Generic[_T]):
    """What a file holds: its entries, the lines they came from, its damaged lines, its bytes."""

    items: list[_T]
    lines: list[bytes]
    damaged: list[Damaged]
    data: bytes


def parse_object(line: bytes) -> dict[str, object]:
    """One line as a JSON object; ``ValueError`` (one short line) for anything else."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except RecursionError:
        raise ValueError("not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(
            f"not valid JSON ({getattr(exc, 'msg', exc)} at column {getattr(exc, 'colno', '?')})"
        ) from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def read(
    path: str | os.PathLike[str],
    parse: Callable[[dict[str, object]], _T],
    *,
    max_bytes: int = MAX_BYTES,
) -> Lines[_T]:
    """Every entry of the JSON Lines file ``path`` that ``parse`` takes (a missing file has none);
    the others as :class:`Damaged` lines. ``parse`` raises ``ValueError``, ``KeyError`` or
    ``TypeError`` for an object that is not an entry."""
    data = read_bytes(path, os.fspath(path), missing_ok=True, max_bytes=max_bytes)
    if data is None:
        return Lines([], [], [], b"")
    items, lines, damaged = [], [], []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            items.append(parse(parse_object(line)))
            lines.append(line)
        except KeyError as exc:
            damaged.append(Damaged(number, line, f"no key {exc.args[0]!r}"))
        except RecursionError:
            damaged.append(Damaged(number, line, "a field is nested too deeply"))
        except (ValueError, TypeError) as exc:
            damaged.append(Damaged(number, line, str(exc)[:200] or type(exc).__name__))
    return Lines(items, lines, damaged, data)


def say(line: str) -> None:
    """One warning line on stderr: the readers go on without what it names."""
    print(f"patchlane: warning: {line}", file=sys.stderr, flush=True)


def warn(path: str | os.PathLike[str], damaged: list[Damaged], then: str) -> None:
    """One warning line per damaged line, naming the file and the line; ``then`` says what became
    of it (``skipped, kept in the file as it is; …``)."""
    for item in damaged:
        say(f"{Path(path)}: line {item.number}: {item.problem} — {then}")
