"""``patchlane culprit LANE ID``: which change between two locks broke a lane."""

from __future__ import annotations

import argparse

from retire.bisect.budget import Budget, Meter
from retire.commands.base import (
    Command,
    ExitCode,
    Level,
    emit_json,
    positive_float,
    positive_int,
    say,
)
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.project import Project
from retire.evidence import validation
from retire.evidence.validation import Mode


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lane", metavar="LANE", help="the lane that broke")
    p.add_argument("id", metavar="ID", help="the shim or guard whose reproducer broke")
    p.add_argument(
        "--since",
        metavar="REV",
        help="the commit whose lock was clean (default: HEAD when the checkout's lock differs "
        "from it, else the parent of the last commit that changed the lock)",
    )
    p.add_argument(
        "--mode",
        choices=("without", "with"),
        default="without",
        help="which run broke: without the shim (default; a guard has only this) or with it",
    )
    p.add_argument(
        "--bisect-budget",
        type=positive_int,
        metavar="RUNS",
        help="at most RUNS fresh reproducer runs (default 40; cached answers are free)",
    )
    p.add_argument(
        "--bisect-minutes", type=positive_float, metavar="M", help="at most M minutes (default 30)"
    )
    p.add_argument(
        "--no-record", action="store_true", help="record neither the runs nor the culprit"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the answer as one JSON document (progress goes to stderr)",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `--help` loads none of these (start-up time; the runtime-only install lacks them)
    from retire.branches import breaks

    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.locks import locking

    [lane] = lanefile.select(lanefile.project_lanes(project), [args.lane])
    subjects = {**project.manifests(), **project.guards()}
    if args.id not in subjects:
        raise InputError(
            None, "ID", f"no shim or guard {args.id!r}", "name one of `patchlane shim list`"
        )
    old_bytes, rev = breaks.old_lock_at(project, lane.name, args.since)
    old_lock = project.inside(".patchlane", "culprit", lane.name, "old", "pylock.toml")
    atomic_write(old_lock, old_bytes, within=project.root)
    say(
        f"culprit of {args.id} in lane {lane.name}: lock at {rev} → the checkout's",
        level=Level.PROGRESS,
    )
    given = args.bisect_budget is not None or args.bisect_minutes is not None
    budget = Budget(args.bisect_budget, args.bisect_minutes) if given else breaks.DEFAULT_BUDGET
    [found] = breaks.find_breaks(
        project,
        lane,
        old_lock,
        locking.lock_path(project.locks_dir, lane.name),
        [(subjects[args.id], Mode(args.mode))],
        meter=Meter(budget),
        on_record=None if args.no_record else lambda r: validation.append(project.validation, [r]),
        say=lambda line: say(line, level=Level.PROGRESS),
    )
    if not args.no_record:
        breaks.record(project, [found])
    # the one result: a line, or the document
    if args.json:
        emit_json(found.to_json())
    else:
        say(found.line())
    return ExitCode.OK if found.found else ExitCode.FAILED


COMMAND = Command(
    "culprit",
    "which change between two locks broke a lane: the package, its release",
    add_arguments,
    run,
    "Find the smallest change between a lane's old lock and its lock now that breaks a shim's or "
    "guard's reproducer: each package of the lock diff moved alone, then the interacting set, then "
    "the culprit's releases between the locks (dated nightlies included). A run that could not "
    "be told (a crash, a time-out, a candidate that would not install) is reported, never taken "
    "for clean or broken. Exit 1 when none is found (the old lock is broken too or could not be "
    "told, nothing moved breaks it, a run it rests on could not be told, or the budget ran out).",
)
