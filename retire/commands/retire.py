"""``patchlane retire``: the weekly report; with ``--apply``, one branch per shim that some lane
can let go (a retire or retire-in-some verdict), editing exactly those lanes."""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import asdict
from pathlib import Path

from retire.commands import report
from retire.commands.base import Command, ExitCode, Level, emit_json, say
from retire.commands.bisect import candidate_bisections
from retire.core import uv
from retire.core.errors import InputError
from retire.core.project import Project
from retire.evidence import validation


def add_arguments(p: argparse.ArgumentParser) -> None:
    report.add_arguments(p)
    apply = p.add_argument_group("auto-drop (--apply)")
    apply.add_argument(
        "--apply",
        action="store_true",
        help="propose one branch per shim whose verdict is retire or retire-in-some: it edits "
        "exactly the lanes the shim leaves (re-locked with --mirrors and --index-url)",
    )
    apply.add_argument(
        "--no-pr",
        action="store_true",
        help="with --apply: make branches only, open no pull request",
    )
    apply.add_argument("--repo", help="owner/name to open pull requests in (with a GITHUB_TOKEN)")
    apply.add_argument(
        "--base", default="HEAD", help="commit the branches start from (default: HEAD)"
    )
    apply.add_argument(
        "--pr-base", help="branch the pull requests target (default: the --base branch)"
    )
    apply.add_argument(
        "--remote", default="origin", help="remote the branches are pushed to (default: origin)"
    )
    # --json comes from the report's arguments: with --apply it prints {"ok", "proposals": [...]}
    apply.add_argument(
        "--plan",
        type=Path,
        action="append",
        metavar="FILE",
        help="apply these plans (JSON: shim_id, why, floors, evidence_markdown, upstream_links, "
        "and optionally lanes/keeping as in `verdicts --json`'s lane_verdicts; one or a list) "
        "instead of the verdicts' (repeatable)",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    if not args.apply:
        return report.run(project, args)
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches import autodrop
    from retire.branches.options import ApplyOptions

    todo = _plans_from_files(args.plan) if args.plan else _plans_from_verdicts(project, args)
    if not todo:
        say("no shim has a retire or retire-in-some verdict: nothing to propose")
        if args.json:
            emit_json({"ok": True, "proposals": []})
        return ExitCode.OK
    mirrors, host = relock_locations(project, args)
    options = ApplyOptions(
        base=args.base,
        open_prs=not args.no_pr,
        repository=args.repo,
        api_base=args.api_url,
        remote=args.remote,
        pr_base=args.pr_base,
        mirrors=mirrors,
        host=host,
    )
    outcomes = autodrop.apply(
        project.root,
        todo,
        options,
        on_step=lambda shim, step: say(f"  {shim}: {step}", level=Level.PROGRESS),
    )
    for o in outcomes:
        pr = (
            f" [PR: {o.pr_status}{' ' + o.pr_url if o.pr_url else ''}]"
            if o.pr_status.requested
            else ""
        )
        say(f"{o.status:<17} {o.branch}" + (f" — {o.reason}" if o.reason else "") + pr)
        for move in o.lanes:
            said = move.reason or "; ".join(move.changes)
            say(f"  {move.step:<8} {move.lane}" + (f" — {said}" if said else ""))
    # a shim no lane could move is reported, not a failure: its lanes keep it, and say why
    ok = all(o.ok or o.status == autodrop.DropStatus.BLOCKED for o in outcomes)
    if args.json:
        proposals = [{**asdict(o), "pr_status": str(o.pr_status)} for o in outcomes]
        emit_json({"ok": ok, "proposals": proposals})
    return ExitCode.OK if ok else ExitCode.FAILED


def relock_locations(project: Project, args: argparse.Namespace) -> tuple:
    """(mirrors, host indexes) every re-lock of the command uses: ``--mirrors`` (else
    patchlane.toml's folder, under ``--root``) and ``--index-url`` (else uv's configuration)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.config import project_mirrors

    host = uv.host_indexes()
    if getattr(args, "index_url", None):
        host = dataclasses.replace(host, default=args.index_url)
    return project_mirrors(project, getattr(args, "mirrors", None)), host


def _plans_from_verdicts(project: Project, args: argparse.Namespace) -> list:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches.retirement import plans
    from retire.history.mirrored import target_mirror

    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.report.markdown import bisections_text
    from retire.verdicts.gather import GatherOptions, gather

    manifests, lanes = project.manifests(), lanefile.project_lanes(project)
    records_path = args.validation or project.validation
    budget = report.checked_budget(args)

    def gathered() -> list:
        return gather(
            list(manifests.values()),
            lanes,
            project.locks_dir,
            records_path,
            GatherOptions(cache_dir=project.http_cache, **report.gather_options(project, args)),
        )

    verdicts = gathered()
    if budget.asked:
        done = candidate_bisections(project, verdicts, budget, executor=args.bisect_executor)
        for line in bisections_text(done):
            say(line)
        # the new runs are evidence: decide again on them
        if done.runs:
            verdicts = gathered()
    records = validation.load(records_path)
    for verdict in verdicts:
        say(f"{verdict.shim:<28} {verdict.decision:<14} {verdict.why}", level=Level.PROGRESS)
    # the fix commit is named where the target is mirrored on this host
    folder = getattr(args, "mirrors", None)
    return plans(verdicts, manifests, records, lambda m: target_mirror(project, m, folder=folder))


def _plans_from_files(paths: list[Path]) -> list:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches.autodrop import DropPlan

    found = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found += [DropPlan.from_dict(d) for d in (data if isinstance(data, list) else [data])]
        except OSError as exc:
            raise InputError(
                path, None, f"cannot read the plan: {exc.strerror or exc}", "check the path"
            ) from None
        # a value the plan refuses (an invalid shim id): said with the file it came from
        except InputError as exc:
            raise InputError(path, exc.key, exc.problem, exc.fix) from None
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise InputError(
                path,
                None,
                f"not a retirement plan ({type(exc).__name__}: {exc})",
                "give a JSON object (or list) with shim_id, why, floors, evidence_markdown",
            ) from None
    return found


COMMAND = Command(
    "retire",
    "the weekly report; with --apply, one branch per shim some lane can let go",
    add_arguments,
    run,
    "Without --apply: the weekly retirement report (every report option applies). "
    "With --apply: one branch per shim whose verdict is retire or retire-in-some, editing exactly "
    "the lanes the shim leaves (a lane that cannot re-lock is left out and reported blocked), for "
    "a human to merge; never merges.",
)
