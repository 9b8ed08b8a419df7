"""``patchlane shim new ID``: scaffold a shim (manifest, patch, reproducer) and add it to a lane."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_json, say, shown
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    new = sub.add_parser(
        "new",
        help="scaffold <catalogue>/ID/ with manifest.toml, patch.py and reproduce.py",
        description="Scaffold a shim that `patchlane shims --check` accepts and add it to lanes.",
    )
    new.add_argument("id", metavar="ID", help="the shim id: a lowercase identifier, e.g. my_fix")
    new.add_argument(
        "--root",
        type=Path,
        default=argparse.SUPPRESS,
        help="project folder (default: the current folder)",
    )
    new.add_argument(
        "--lane",
        action="append",
        default=[],
        metavar="LANE",
        help="add the shim to this lane (repeatable; default: the only lane, if there is one)",
    )
    new.add_argument(
        "--distribution",
        help="the distribution that ships the bug (default: the lane's first requirement)",
    )
    new.add_argument(
        "--module", help="the module the patch applies to (default: the distribution's import name)"
    )
    new.add_argument("--owner", help="who answers for the shim (default: git's user.email)")
    new.add_argument(
        "--json", action="store_true", help="print one JSON document: the files written"
    )


def _owner(project: Project) -> str | None:
    from retire.core.git import Git, GitError

    try:
        return Git(project.root).config("user.email")
    except (GitError, OSError):
        return None


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.scaffold import write
    from retire.scaffold.shim import plan_shim

    plan = plan_shim(
        project,
        args.id,
        lanes=args.lane,
        distribution=args.distribution,
        module=args.module,
        owner=args.owner or _owner(project),
    )
    written = write(plan, command="patchlane shim new")
    if args.json:
        emit_json({"id": args.id, "created": sorted(plan.create), "edited": sorted(plan.edit)})
        return ExitCode.OK
    for path in written:
        say(f"{'edited ' if path in plan.edit else 'created'} {shown(project.root / path)}")
    say("next: write the reproducer, then `patchlane shims --check` and `nox -s lane`")
    return ExitCode.OK


COMMAND = Command("shim", "scaffold a shim: `patchlane shim new ID`", add_arguments, run)
