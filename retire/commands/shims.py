"""``patchlane shims``: the project's shims, whether each is active here and why."""

from __future__ import annotations

import argparse
import os

from retire.commands.base import Command, ExitCode, emit_json, say
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--probe",
        action="store_true",
        help="import each installed target module so its shape check and probe run",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="validate every manifest and its files; exit 2 on errors",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    import shims
    from shims import __main__ as listing

    if args.check:
        if not project.shims_dir.is_dir():
            say(f"no shim catalogue at {project.shims_dir}: nothing to check")
            return ExitCode.OK
        return listing.check(str(project.shims_dir))
    # This process activates the project's catalogue, never whatever the installed package holds.
    os.environ[shims.PATH_ENV] = str(project.shims_dir)
    found = listing.rows(probe=args.probe)
    if args.json:
        emit_json(found)
    else:
        say(listing.table(found))
    return ExitCode.OK


COMMAND = Command(
    "shims", "list every shim of the project, whether it is active here and why", add_arguments, run
)
