"""``patchlane lockdiff``: what changed between two PEP 751 locks, whoever made them."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_json, say, shown
from retire.core.errors import InputError
from retire.core.project import Project
from shims import tomlreader


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "old",
        type=Path,
        metavar="OLD",
        help="a pylock.toml (patchlane's, pip lock's, uv export's …)",
    )
    p.add_argument("new", type=Path, metavar="NEW", help="the pylock.toml to compare it with")
    form = p.add_mutually_exclusive_group()
    form.add_argument(
        "--markdown", action="store_true", help="a Markdown table (as bump pull requests show)"
    )
    form.add_argument(
        "--json", action="store_true", help="one JSON document: both locks' origins and the changes"
    )


#: The largest lock read (a GPU stack's lock is tens of KiB).
MAX_LOCK_BYTES = 64 << 20


def read(path: Path) -> dict:
    """A PEP 751 lock as parsed TOML; anything else is one line naming the file."""
    # Safe reading: a device (/dev/zero), a FIFO or a folder is one error, never a block or a flood.
    data = tomlreader.read(path, str(path), max_bytes=MAX_LOCK_BYTES).data
    if "lock-version" not in data or not isinstance(data.get("packages", []), list):
        raise InputError(
            path,
            None,
            "not a PEP 751 lock (no lock-version, or packages is not an array)",
            "give a pylock.toml made by patchlane, pip lock or uv export --format pylock.toml",
        )
    return data


def origin(lock: dict) -> str:
    """`patchlane lock of lane 'cpu' (uv 0.13.9)` or `foreign lock, created by pip`."""
    # deferred: the runtime-only install (no engine) must still print `--help`
    from retire.locks.locking import provenance

    mine = provenance(lock)
    if mine:
        return f"patchlane lock of lane {mine.get('lane')!r} (uv {mine.get('uv-version', '?')})"
    return f"foreign lock, created by {lock.get('created-by') or 'an unnamed tool'}"


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.locks import lockdiff

    old, new = read(args.old), read(args.new)
    changes = lockdiff.diff(old, new)
    if args.json:
        emit_json(
            {
                "old": {"path": str(args.old), "origin": origin(old)},
                "new": {"path": str(args.new), "origin": origin(new)},
                "changes": [c.to_json() for c in changes],
            }
        )
        return ExitCode.OK
    say(f"{shown(args.old)}: {origin(old)}")
    say(f"{shown(args.new)}: {origin(new)}")
    say(lockdiff.markdown_table(changes) if args.markdown else lockdiff.text_table(changes))
    return ExitCode.OK


COMMAND = Command(
    "lockdiff",
    "what changed between two pylock.toml files (any tool's)",
    add_arguments,
    run,
    "What changed between two PEP 751 locks, package by package (keyed by name and environment "
    "marker), classified major/minor/patch/pre-release/nightly. Reads locks made by patchlane, "
    "`pip lock` and `uv export --format pylock.toml` alike.",
)
