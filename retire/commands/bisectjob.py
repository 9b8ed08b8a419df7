"""``patchlane bisect SHIM --executor slurm``: the bisection as one Slurm job
(retire/runs/slurmbisect.py) asking for the reproducer's GPUs; its records merged into the
manifest as a lane job's are, and what the job printed printed here."""

from __future__ import annotations

import argparse
import dataclasses
import json
import uuid
from pathlib import Path

from retire.bisect.job import BisectJob
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


def run(project: Project, job: BisectJob, *, as_json: bool = False) -> int:
    """Submit, wait, merge the job's records, print its result (``as_json``: its ``--json``
    document): its exit status is the bisection's; a job Slurm refused or ended is one line
    saying so (exit 1). The job's `patchlane bisect` is given ``job`` as its options."""
    # deferred: `patchlane --help` does not load them, and start-up time counts
    from retire.evidence import validation
    from retire.runs import reaper
    from retire.runs.slurmbisect import BisectFiles, submit_bisection
    from retire.runs.slurmconfig import load_slurm

    manifest = project.manifests().get(job.shim)
    if manifest is None:
        raise InputError(
            None,
            None,
            f"unknown shim {job.shim!r}",
            "use an id listed by `patchlane shim list`",
        )
    settings = load_slurm(project.root)
    stamp = times.now().strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    files = BisectFiles(project.inside(".patchlane", "slurm", f"bisect-{stamp}"), job.shim)
    # -j N: the job asks for a set of the reproducer's GPUs for each candidate it runs at once
    needs = manifest.reproducer.gpu_needs
    if needs.count and job.width > 1:
        needs = dataclasses.replace(needs, count=needs.count * job.width)
    say(f"bisect {job.shim}: one Slurm job, needs {needs}", level=Level.PROGRESS)
    with reaper.terminate_on_sigterm():
        slurm = submit_bisection(
            needs,
            settings,
            files,
            root=project.root,
            bisect_args=[*job.arguments(), *(["--json"] if as_json else [])],
            progress=lambda label, line: say(f"[{label}] {line}", level=Level.PROGRESS),
        )
    if (target := job.records) is not None and files.records.exists():
        merged = validation.merge([files.records])
        added = validation.append(target, merged)
        say(
            f"merged {len(merged)} record(s) from job {slurm.job_id} into {shown(target)} "
            f"({added} new)"
        )
    printed = files.result.read_text(encoding="utf-8") if files.result.exists() else ""
    code = slurm.exit_code
    if slurm.job_id is None:
        raise PatchlaneError(f"sbatch refused the bisection's job: {slurm.refused}")
    if code is None or not printed.strip():
        ended = slurm.state.words() if slurm.state else "is unknown to Slurm"
        raise PatchlaneError(
            f"Slurm job {slurm.job_id} {ended}: the bisection printed no result "
            f"(its output: {shown(files.output)})"
        )
    if as_json:
        emit_json(json.loads(printed))
    else:
        emit_text(printed)
    return ExitCode.OK if code == 0 else ExitCode.FAILED
