"""The weekly candidate bisections as Slurm jobs (`patchlane report` / `retire`
``--bisect-executor slurm``): every bisection the budget reaches is submitted at once, one job
each (retire/runs/slurmbisect.py: the reproducer's GPUs, times ``--bisect-jobs`` sets), running
`patchlane bisect SHIM` with the action's own bounds, its share of the runs (``--max-runs``) and
the minutes (``--max-minutes``, and the job's ``--time`` with a margin). The caller waits with
the lanes' progress lines, merges every job's records into the validation manifest once, and
reads each bisection's end from its ``--json`` document; a job Slurm refused or ended is a
``failed`` row saying so, its records kept."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from retire.bisect.budget import Budget
from retire.bisect.job import BisectJob
from retire.commands.base import Level, say, shown
from retire.core.project import Project
from retire.report.model import BisectionLeft, BisectionRan
from retire.runs.slurmbisect import (
    BisectFiles,
    SlurmBisection,
    start_bisection,
    wait_bisections,
)
from retire.runs.slurmclient import cancel
from retire.runs.slurmconfig import SlurmSettings
from retire.verdicts.actions import Bisect
from shims import times
from shims.model import ShimManifest

__all__ = ["CandidateJobs", "bisect_args", "job_minutes", "on_slurm"]


@dataclass(frozen=True)
class CandidateJobs:
    """What the Slurm jobs of one weekly run came to: a row per bisection the budget reached
    (in order) and those it did not."""

    ran: tuple[BisectionRan, ...]
    left: tuple[BisectionLeft, ...]


def bisect_args(project: Project, action: Bisect, budget: Budget, runs: int | None) -> list[str]:
    """The job's `patchlane bisect` options: the bisection ``action`` asks for (its bounds) with
    its share of the runs, the minutes and the width (``--bisect-jobs``), and ``--json``."""
    share = Budget(runs, budget.minutes, budget.jobs)
    return [*BisectJob.of_action(action, project, share).arguments(), "--json"]


def job_minutes(budget: Budget, manifest: ShimManifest, settings: SlurmSettings) -> int | None:
    """A minutes-capped bisection's ``--time``: the minutes, plus the candidate still running
    when they end (its reproducer's timeout) and ``[slurm] build-minutes`` (the job's start and
    the candidates' envs); None without a minutes cap (``[slurm] time-limit`` or the
    partition's default then)."""
    if budget.minutes is None:
        return None
    timeout = manifest.reproducer.timeout / 60
    return math.ceil(budget.minutes + timeout) + settings.build_minutes


def _start(
    project: Project,
    folder: Path,
    manifest: ShimManifest,
    action: Bisect,
    *,
    budget: Budget,
    runs: int | None,
    settings: SlurmSettings,
) -> SlurmBisection:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs.sbatch import as_time

    needs = manifest.reproducer.gpu_needs
    if needs.count and budget.jobs > 1:
        needs = dataclasses.replace(needs, count=needs.count * budget.jobs)
    minutes = job_minutes(budget, manifest, settings)
    return start_bisection(
        needs,
        settings,
        BisectFiles(folder, action.shim),
        root=project.root,
        bisect_args=bisect_args(project, action, budget, runs),
        progress=_progress,
        limit=as_time(minutes) if minutes is not None else None,
    )


def _progress(label: str, line: str) -> None:
    say(f"[{label}] {line}", level=Level.PROGRESS)


def _merge(project: Project, jobs: Sequence[SlurmBisection]) -> None:
    """Every job's records into the validation manifest, each once (a job Slurm ended keeps
    the runs it made)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.evidence import validation

    files = [job.files.records for job in jobs if job.files.records.exists()]
    if not files:
        return
    merged = validation.merge(files)
    added = validation.append(project.validation, merged)
    say(
        f"merged {len(merged)} record(s) from {len(files)} bisection job(s) into "
        f"{shown(project.validation)} ({added} new)"
    )


def _row(job: SlurmBisection, command: str) -> BisectionRan:
    """The bisection's end, from the job's ``--json`` document; ``failed`` saying why where
    Slurm refused or ended the job, or it printed no document (its recorded runs counted)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.evidence import validation

    shim = job.files.shim
    made = len(validation.load(job.files.records)) if job.files.records.exists() else 0
    if job.job_id is None:
        return BisectionRan(shim, command, "failed", f"Slurm refused the job: {job.refused}")
    printed = job.files.result.read_text(encoding="utf-8") if job.files.result.exists() else ""
    try:
        document = json.loads(printed) if job.exit_code is not None else None
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or "status" not in document:
        ended = job.state.words() if job.state else "is unknown to Slurm"
        why = f"Slurm job {job.job_id} {ended}: the bisection printed no result"
        return BisectionRan(
            shim, command, "failed", f"{why} (its output: {shown(job.files.output)})", made
        )
    return BisectionRan(
        shim,
        command,
        str(document["status"]),
        str(document.get("summary", "")),
        int(document.get("runs", made)),
        document.get("floor"),
        document.get("stopped"),
    )


def on_slurm(
    project: Project, picked: Sequence[tuple[ShimManifest, Bisect]], budget: Budget
) -> CandidateJobs:
    """Submit the bisections the budget reaches (each with its share of the runs: the shares
    add up to the budget), wait for them all, merge their records, and read their ends."""
    # deferred: `patchlane --help` does not load them, and start-up time counts
    from retire.runs import reaper
    from retire.runs.slurmconfig import load_slurm

    shares = budget.shares(len(picked))
    left = tuple(
        BisectionLeft(
            action.shim,
            str(action),
            f"the budget of {budget.runs} reproducer runs is spent: one run each for the "
            f"first {len(shares)} bisection(s)",
        )
        for _, action in picked[len(shares) :]
    )
    settings = load_slurm(project.root)
    stamp = times.now().strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    folder = project.inside(".patchlane", "slurm", f"weekly-{stamp}")
    say(f"candidate bisections: {len(shares)} Slurm job(s)", level=Level.PROGRESS)
    started: list[SlurmBisection] = []
    with reaper.terminate_on_sigterm():
        try:
            for (manifest, action), runs in zip(picked, shares, strict=False):
                job = _start(
                    project, folder, manifest, action, budget=budget, runs=runs, settings=settings
                )
                started.append(job)
        except BaseException:
            # interrupted between two submissions: nothing is left queued or running
            cancel([job.job_id for job in started if job.job_id is not None])
            raise
        done = wait_bisections(started, settings, _progress)
    _merge(project, done)
    ran = tuple(_row(job, str(action)) for job, (_, action) in zip(done, picked, strict=False))
    return CandidateJobs(ran, left)
