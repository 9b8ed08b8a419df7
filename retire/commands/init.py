"""``patchlane init [PATH]``: scaffold a working patchlane project (lanes, shims, locks, CI)."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, Level, emit_json, say, shown
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="the project folder (default: --root, the current folder)",
    )
    p.add_argument(
        "--action",
        metavar="OWNER/REPO@REF",
        help="patchlane's GitHub Action and hooks the workflows use (default: "
        "patchlane/patchlane@v<version>)",
    )
    p.add_argument(
        "--python", metavar="X.Y", help="the CPU lane's Python (default: the one running patchlane)"
    )
    p.add_argument(
        "--no-lock", action="store_true", help="do not lock the new lane now (it needs its index)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document: the files written")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.scaffold import write
    from retire.scaffold.project import plan_init

    root = (args.path if args.path is not None else project.root).resolve()
    plan = plan_init(root, action=args.action, python=args.python)
    written = write(plan, command="patchlane init")
    for path in written:
        say(
            f"{'edited ' if path in plan.edit else 'created'} {shown(root / path)}",
            level=Level.PROGRESS,
        )
    locked = [] if args.no_lock else _lock(Project(root))
    if args.json:
        emit_json(
            {
                "root": str(root),
                "created": sorted(plan.create),
                "edited": sorted(plan.edit),
                "locked": locked,
            }
        )
        return ExitCode.OK
    say(
        f"initialised {shown(root)}: {len(plan.create)} file(s) created, {len(plan.edit)} edited"
        + (f", {len(locked)} lane(s) locked" if locked else "")
    )
    say(f"next: cd {shown(root)} && patchlane shim new my_fix && nox -s lock && nox -s lane")
    return ExitCode.OK


def _lock(project: Project) -> list[str]:
    """Lock the new project's lanes now, so `nox -s lock -- --check` passes at once; an index that
    cannot be reached here is a note (the files are written either way)."""
    from retire.lanes import lanefile
    from retire.locks import locking

    results = locking.lock_lanes(lanefile.project_lanes(project), project.locks_dir)
    for result in results:
        if not result.ok:
            say(
                f"note: {result.lane} is not locked yet ({result.status}: {result.message}) — run "
                f"`nox -s lock` "
                "where its index is reachable"
            )
    return [result.lane for result in results if result.ok]


COMMAND = Command(
    "init",
    "scaffold a patchlane project: a CPU lane, shims/, locks/, noxfile.py, CI workflows",
    add_arguments,
    run,
)
