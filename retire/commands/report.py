"""``patchlane report``: write the weekly retirement report and print its short version."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.bisect.budget import Budget
from retire.commands.base import (
    Command,
    ExitCode,
    add_mirrors_option,
    emit_text,
    existing_file,
    say,
    shown,
)
from retire.commands.bisect import add_budget_arguments, budget_of, candidate_bisections
from retire.core.errors import InputError
from retire.core.project import Project


def add_evidence_arguments(p: argparse.ArgumentParser) -> None:
    """Where verdicts get their evidence: shared by report, retire and verdicts-like commands."""
    p.add_argument(
        "--validation",
        type=existing_file,
        help="validation manifest (default: validation/manifest.jsonl)",
    )
    add_mirrors_option(p, used_for="landed pull requests, release tags and revisions")
    p.add_argument(
        "--index-url",
        help="default package index when a lane names none (default: uv's configuration)",
    )
    p.add_argument("--api-url", help="code host REST API base URL (default: the public API)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--week", help="ISO week to report, e.g. 2026-W47 (default: this week)")
    p.add_argument("--out", type=Path, help="folder for the report files (default: reports/)")
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="use cached evidence only (HTTP cache, local mirrors, records): no network",
    )
    p.add_argument(
        "--json", action="store_true", help="print the JSON report instead of the short version"
    )
    add_evidence_arguments(p)
    add_budget_arguments(p)


def gather_options(project: Project, args: argparse.Namespace) -> dict:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.config import project_mirrors

    pairs = (("index_url", args.index_url), ("api_base", args.api_url))
    return {
        "mirrors": project_mirrors(project, args.mirrors),
        "scratch_dir": project.trial_dir,
        "trial_cache": project.trial_cache,
        **{key: value for key, value in pairs if value is not None},
    }


def checked_budget(args: argparse.Namespace) -> Budget:
    """The candidate-bisection budget; with ``--no-probe`` (no request at all) there is none."""
    budget = budget_of(args)
    if budget.asked and args.no_probe:
        raise InputError(
            None,
            "--bisect-budget" if args.bisect_budget is not None else "--bisect-minutes",
            "a bisection installs releases from the index, and --no-probe makes no request",
            "drop --no-probe, or the bisection budget",
        )
    return budget


def run(project: Project, args: argparse.Namespace) -> int:
    """0 when the report was written (whatever it says), 2 for bad input, 1 when it could not be
    written."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.report import markdown, weekly

    budget = checked_budget(args)
    written = weekly.generate(
        project,
        week=args.week,
        out=args.out,
        probe=not args.no_probe,
        gather_options=gather_options(project, args),
        records_path=args.validation,
        bisect=(
            (
                lambda verdicts: candidate_bisections(
                    project, verdicts, budget, executor=args.bisect_executor
                )
            )
            if budget.asked
            else None
        ),
    )
    if args.json:
        for note in (*written.report.notes, *written.report.advice):
            say(f"patchlane: note: {note}", err=True)
        emit_text(written.json_text)
    else:
        say(markdown.short_text(written.report, [shown(p) for p in written.paths]))
    return ExitCode.OK


COMMAND = Command(
    "report",
    "write the weekly retirement report (reports/<year>-W<week>.md/.json/.html)",
    add_arguments,
    run,
    "Write the weekly retirement report (reports/<week>.md, .html, .json) and print the short "
    "version.",
)
