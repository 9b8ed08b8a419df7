"""``patchlane retire``: the weekly report; with ``--apply``, one auto-drop branch per retire
verdict."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from retire.commands import report
from retire.commands.base import Command, ExitCode, Level, emit_json, say
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    report.add_arguments(p)
    apply = p.add_argument_group("auto-drop (--apply)")
    apply.add_argument(
        "--apply", action="store_true", help="propose one branch per shim whose verdict is retire"
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
        help="apply these plans (JSON: shim_id, why, floors, evidence_markdown, upstream_links; "
        "one or a list) instead of the verdicts' (repeatable)",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    if not args.apply:
        return report.run(project, args)
    from retire.branches import autodrop

    todo = _plans_from_files(args.plan) if args.plan else _plans_from_verdicts(project, args)
    if not todo:
        say("no shim has a retire verdict: nothing to propose")
        if args.json:
            emit_json({"ok": True, "proposals": []})
        return ExitCode.OK
    outcomes = autodrop.apply(
        project.root,
        todo,
        base=args.base,
        open_prs=not args.no_pr,
        repository=args.repo,
        api_base=args.api_url,
        remote=args.remote,
        pr_base=args.pr_base,
        on_step=lambda shim, step: say(f"  {shim}: {step}", level=Level.PROGRESS),
    )
    for o in outcomes:
        pr = (
            f" [PR: {o.pr_status}{' ' + o.pr_url if o.pr_url else ''}]"
            if o.pr_status != "not-requested"
            else ""
        )
        say(f"{o.status:<17} {o.branch}" + (f" — {o.reason}" if o.reason else "") + pr)
    ok = all(o.ok for o in outcomes)
    if args.json:
        emit_json({"ok": ok, "proposals": [asdict(o) for o in outcomes]})
    return ExitCode.OK if ok else ExitCode.FAILED


def _plans_from_verdicts(project: Project, args: argparse.Namespace) -> list:
    from retire.branches.retirement import plans
    from retire.commands.bisect import candidate_bisections
    from retire.evidence import validation
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
        done = candidate_bisections(project, verdicts, budget)
        for line in bisections_text(done):
            say(line)
        # the new runs are evidence: decide again on them
        if done.runs:
            verdicts = gathered()
    records = validation.load(records_path)
    for verdict in verdicts:
        say(f"{verdict.shim:<28} {verdict.decision:<8} {verdict.why}", level=Level.PROGRESS)
    return plans(verdicts, manifests, records)


def _plans_from_files(paths: list[Path]) -> list:
    from retire.branches.autodrop import DropPlan
    from retire.core.errors import InputError

    found = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found += [DropPlan.from_dict(d) for d in (data if isinstance(data, list) else [data])]
        except OSError as exc:
            raise InputError(
                path, None, f"cannot read the plan: {exc.strerror or exc}", "check the path"
            ) from None
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
    "the weekly report; with --apply, one auto-drop branch per retire verdict",
    add_arguments,
    run,
    "Without --apply: the weekly retirement report (every report option applies). "
    "With --apply: one branch per shim whose verdict is retire, for a human to merge; never "
    "merges.",
)
