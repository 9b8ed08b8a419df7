"""``patchlane init [PATH]``: scaffold a working patchlane project (lanes, shims, locks, CI)."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_json, say, shown
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", type=Path, help="the project folder (default: --root, the current folder)")
    p.add_argument("--action", metavar="OWNER/REPO@REF",
                   help="patchlane's GitHub Action and hooks the workflows use (default: patchlane/patchlane@v<version>)")
    p.add_argument("--python", metavar="X.Y", help="the CPU lane's Python (default: the one running patchlane)")
    p.add_argument("--json", action="store_true", help="print one JSON document: the files written")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.scaffold import write
    from retire.scaffold.project import plan_init

    root = (args.path if args.path is not None else project.root).resolve()
    plan = plan_init(root, action=args.action, python=args.python)
    written = write(plan, command="patchlane init")
    if args.json:
        emit_json({"root": str(root), "created": sorted(plan.create), "edited": sorted(plan.edit)})
        return ExitCode.OK
    for path in written:
        say(f"{'edited ' if path in plan.edit else 'created'} {shown(root / path)}")
    say(f"next: cd {shown(root)} && patchlane shim new my_fix && nox -s lock && nox -s lane")
    return ExitCode.OK


COMMAND = Command("init", "scaffold a patchlane project: a CPU lane, shims/, locks/, noxfile.py, CI workflows", add_arguments, run)
