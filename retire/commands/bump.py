"""``patchlane bump``: re-lock lanes with upgrades on a branch, with the diff and the suites'
outcome."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import TYPE_CHECKING

from retire.bisect.budget import Budget
from retire.commands.base import (
    Command,
    ExitCode,
    Level,
    add_mirrors_option,
    emit_json,
    positive_float,
    positive_int,
    say,
    utc_moment,
    whole_days,
)
from retire.commands.retire import relock_locations
from retire.core.project import Project

if TYPE_CHECKING:
    from retire.bisect.budget import Budget
    from retire.branches.options import BumpOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME",
        help="upgrade only NAME (repeatable); default: every package",
    )
    p.add_argument(
        "--cooldown",
        type=whole_days,
        default=7,
        metavar="DAYS",
        help="releases younger than DAYS are not taken, transitive ones included (default 7)",
    )
    p.add_argument(
        "--no-run", action="store_true", help="do not run the shim suites on the bumped locks"
    )
    p.add_argument("--no-pr", action="store_true", help="make the branch only")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="make no branch and no pull request, write nothing: print what would move (each "
        "lane's version changes) and what the suites would run",
    )
    p.add_argument("--repo", help="owner/name to open the pull request in (with a GITHUB_TOKEN)")
    p.add_argument("--api-url", help="code host REST API base URL")
    add_mirrors_option(p, used_for="the lanes pinned to revisions")
    p.add_argument(
        "--index-url",
        help="default package index when a lane names none (default: uv's configuration)",
    )
    p.add_argument("--base", default="HEAD", help="commit the branch starts from (default: HEAD)")
    culprits = p.add_argument_group(
        "culprits (what the bump broke: each lock change alone, then together, then the "
        "culprit's releases; cached runs are free, a stopped search resumes next time)"
    )
    culprits.add_argument(
        "--bisect-budget",
        type=positive_int,
        metavar="RUNS",
        help="at most RUNS fresh reproducer runs over all culprit searches (default 40)",
    )
    culprits.add_argument(
        "--bisect-minutes",
        type=positive_float,
        metavar="M",
        help="at most M minutes of culprit searches (default 30)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document: the branch, each lane's diff, the PR",
    )
    # tests: evaluate as of this UTC time
    p.add_argument("--now", type=utc_moment, help=argparse.SUPPRESS)


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches.bump import bump
    from retire.branches.options import BumpOptions

    mirrors, host = relock_locations(project, args)
    options = BumpOptions(
        lanes=tuple(args.lanes),
        packages=tuple(args.package),
        cooldown_days=args.cooldown,
        now=args.now,
        base=args.base,
        run_suites=not args.no_run,
        open_pr=not args.no_pr,
        repository=args.repo,
        api_base=args.api_url,
        mirrors=mirrors,
        host=host,
        culprit_budget=_culprit_budget(args),
    )
    if args.dry_run:
        return _dry_run(project, options, json=args.json)
    result = bump(project.root, options, say=lambda line: say(line, level=Level.PROGRESS))
    for lane in result.lanes:
        for culprit in lane.culprits:
            say(f"  culprit: {culprit.line()}")
        say(
            f"  {lane.status:<9} {lane.lane}: "
            + (f"{len(lane.changes)} package(s) changed" if lane.changes else lane.why)
        )
    say(f"{result.status}: {result.branch}" + (f" — {result.reason}" if result.reason else ""))
    if result.body_path:
        say(f"PR body: {result.body_path}")
    if result.pr_status.requested:
        say(f"PR: {result.pr_status}" + (f" {result.pr_url}" if result.pr_url else ""))
    if args.json:
        document = asdict(result)
        document["pr_status"] = str(result.pr_status)
        document["lanes"] = [
            {
                **asdict(lane),
                "changes": [change.to_json() for change in lane.changes],
                "outcomes": [
                    {"shim": s, "now": now, "before": before} for s, now, before in lane.outcomes
                ],
                "culprits": [culprit.to_json() for culprit in lane.culprits],
            }
            for lane in result.lanes
        ]
        document["retirement_candidates"] = [
            {"lane": lane, "shim": shim} for lane, shim in result.retirement_candidates
        ]
        emit_json(document)
    return ExitCode.OK


def _dry_run(project: Project, options: BumpOptions, *, json: bool) -> int:
    """``bump --dry-run``: what would move and what would run, one line each; nothing written."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches.bump import dry_run

    plan = dry_run(project.root, options, say=lambda line: say(line, level=Level.PROGRESS))
    say("dry run: no branch, no pull request, nothing written")
    for lane in plan.lanes:
        moved = f"{len(lane.changes)} package(s) would change" if lane.changes else lane.why
        say(f"  {'would bump' if lane.changes else lane.status:<10} {lane.lane}: {moved}")
        for change in lane.changes:
            say(f"      {change.name} {change.old or '—'} → {change.new or '—'} ({change.kind})")
    for name, subjects, skipped in plan.runs:
        ran = ", ".join(subjects) or "no shim or guard"
        say(f"  would run  {name}: {ran}" + (f" — not here: {skipped}" if skipped else ""))
    if any(lane.changes for lane in plan.lanes):
        say(
            f"would make branch {plan.branch} from {plan.base[:12]} (nothing uploaded after "
            f"{plan.cutoff})"
            + (f", and open its pull request in {plan.pull_request}" if plan.pull_request else "")
        )
    else:
        say("would make no branch: no lane has anything newer to take")
    if json:
        emit_json(plan.to_json())
    return ExitCode.OK


def _culprit_budget(args: argparse.Namespace) -> Budget | None:
    """The budget the command names for culprit searches, or None (the default budget)."""
    if args.bisect_budget is None and args.bisect_minutes is None:
        return None
    return Budget(args.bisect_budget, args.bisect_minutes)


COMMAND = Command(
    "bump",
    "re-lock lanes with upgrades on a branch, with the diff and the suites' outcome",
    add_arguments,
    run,
    "Re-lock lanes with upgrades on a branch, with the version diff and the shim suites' outcome; "
    "never merges.",
)
