"""``patchlane bisect SHIM --executor slurm``: the bisection as one Slurm job
(retire/runs/slurmbisect.py) asking for the reproducer's GPUs; its records merged into the
manifest as a lane job's are, and what the job printed printed here."""

from __future__ import annotations

import argparse
import dataclasses
import json
import uuid
from pathlib import Path

from retire.commands.base import ExitCode, Level, emit_json, emit_text, say, shown
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import Project
from shims import times

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--no-record``, ``--manifest`` and ``--executor``: whether and where a bisection's runs
    are recorded, and where it runs."""
    p.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="do not append the runs to the validation manifest",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        help="validation manifest to append the runs to (default: validation/manifest.jsonl)",
    )
    p.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local: run the candidates on this host; slurm: submit the bisection as one Slurm "
        "job asking for the reproducer's GPUs (patchlane.toml [slurm]), wait, merge its records "
        "and print its result (docs/commands.md, Slurm)",
    )


def _job_args(args: argparse.Namespace) -> list[str]:
    """The bisection's own options, for the job's `patchlane bisect` (paths made absolute)."""
    passed: list[str] = []
    for flag, value in (
        ("--index", args.index),
        ("--python", args.python),
        ("--lane", args.lane),
        ("--since", args.since),
        ("--until", args.until),
        ("--timeout", args.timeout and f"{args.timeout:g}"),
        ("--isolation", args.isolation),
        ("--max-unknown", str(args.max_unknown)),
        ("--max-not-applicable", str(args.max_not_applicable)),
        ("--sample", str(args.sample)),
        ("--mirrors", args.mirrors and str(Path(args.mirrors).absolute())),
        ("--cache", args.cache and str(Path(args.cache).absolute())),
        ("--jobs", str(args.jobs) if args.jobs > 1 else None),
        ("--max-runs", args.max_runs and str(args.max_runs)),
        ("--max-minutes", args.max_minutes and f"{args.max_minutes:g}"),
    ):
        if value:
            passed += [flag, value]
    for flag, on in (
        ("--all", args.every),
        ("--include-prereleases", args.include_prereleases),
        ("--no-record", not args.record),
        ("--json", args.json),
    ):
        if on:
            passed.append(flag)
    return passed


def run(project: Project, args: argparse.Namespace) -> int:
    """Submit, wait, merge the job's records, print its result: its exit status is the
    bisection's; a job Slurm refused or ended is one line saying so (exit 1). ``args`` are
    `patchlane bisect`'s, checked."""
    # deferred: `patchlane --help` does not load them, and start-up time counts
    from retire.evidence import validation
    from retire.runs import reaper
    from retire.runs.slurmbisect import BisectFiles, submit_bisection
    from retire.runs.slurmconfig import load_slurm

    manifest = project.manifests().get(args.shim)
    if manifest is None:
        raise InputError(
            None,
            None,
            f"unknown shim {args.shim!r}",
            "use an id listed by `patchlane shim list`",
        )
    settings = load_slurm(project.root)
    stamp = times.now().strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    files = BisectFiles(project.inside(".patchlane", "slurm", f"bisect-{stamp}"), args.shim)
    # -j N: the job asks for a set of the reproducer's GPUs for each candidate it runs at once
    needs = manifest.reproducer.gpu_needs
    if needs.count and args.jobs > 1:
        needs = dataclasses.replace(needs, count=needs.count * args.jobs)
    say(f"bisect {args.shim}: one Slurm job, needs {needs}", level=Level.PROGRESS)
    with reaper.terminate_on_sigterm():
        job = submit_bisection(
            needs,
            settings,
            files,
            root=project.root,
            bisect_args=_job_args(args),
            progress=lambda label, line: say(f"[{label}] {line}", level=Level.PROGRESS),
        )
    if args.record and files.records.exists():
        target = project.output_file(args.manifest) if args.manifest else project.validation
        merged = validation.merge([files.records])
        added = validation.append(target, merged)
        say(
            f"merged {len(merged)} record(s) from job {job.job_id} into {shown(target)} "
            f"({added} new)"
        )
    printed = files.result.read_text(encoding="utf-8") if files.result.exists() else ""
    code = job.exit_code
    if job.job_id is None:
        raise PatchlaneError(f"sbatch refused the bisection's job: {job.refused}")
    if code is None or not printed.strip():
        ended = job.state.words() if job.state else "is unknown to Slurm"
        raise PatchlaneError(
            f"Slurm job {job.job_id} {ended}: the bisection printed no result "
            f"(its output: {shown(files.output)})"
        )
    if args.json:
        emit_json(json.loads(printed))
    else:
        emit_text(printed)
    return ExitCode.OK if code == 0 else ExitCode.FAILED
