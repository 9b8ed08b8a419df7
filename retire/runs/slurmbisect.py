"""A bisection as one Slurm job: `patchlane bisect SHIM --executor slurm`, and each of the weekly
report's candidate bisections with ``--bisect-executor slurm`` (retire/commands/candidatejobs.py:
submitted together, :func:`start_bisection` each, then one :func:`wait_bisections`).

The job asks for the reproducer's GPUs (``[reproducer] gpus``, as ``--gres``) and what
``[slurm]`` says of every job, and runs `patchlane bisect SHIM` on its node with the caller's
options, its records going to a file of its own. Its candidates still run one after another
inside the job (a search decides each next one from the last). The caller waits with the same
progress as lanes' jobs (retire/runs/slurmclient.py), merges the records, and prints what the job
printed; a job Slurm refused, cancelled, timed out or killed is reported as such.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.runs.sbatch import directives
from retire.runs.slurmclient import Progress, sbatch, wait
from retire.runs.slurmconfig import SlurmSettings
from retire.runs.slurmjob import JobState
from shims.gpuneeds import GpuNeeds

__all__ = [
    "BisectFiles",
    "SlurmBisection",
    "bisect_script",
    "start_bisection",
    "submit_bisection",
    "wait_bisections",
]


@dataclass(frozen=True)
class BisectFiles:
    """Where a bisection's job keeps its things (``.patchlane/slurm/<bisection>/``)."""

    folder: Path
    shim: str

    @property
    def script(self) -> Path:
        return self.folder / f"bisect-{self.shim}.sbatch"

    @property
    def output(self) -> Path:
        """Its progress (a line per candidate) and Slurm's own lines."""
        return self.folder / f"bisect-{self.shim}.out"

    @property
    def result(self) -> Path:
        """What `patchlane bisect` printed: its summary, or its ``--json`` document."""
        return self.folder / f"bisect-{self.shim}.result"

    @property
    def records(self) -> Path:
        """The job's validation records, merged into the project's when it ends."""
        return self.folder / f"bisect-{self.shim}.jsonl"

    @property
    def label(self) -> str:
        """What its progress lines say it is (``[bisect toy] job 12: running``)."""
        return f"bisect {self.shim}"


@dataclass(frozen=True)
class SlurmBisection:
    """The bisection's job: its id and last state, or why sbatch refused it."""

    files: BisectFiles
    job_id: str | None
    state: JobState | None
    refused: str = ""

    @property
    def exit_code(self) -> int | None:
        """The bisection's own exit status, where it ran to its end (Slurm says ``FAILED`` for
        a job that exits 1: here, no fixed release found)."""
        if self.state is None or self.state.state not in ("COMPLETED", "FAILED"):
            return None
        code, _, signal = self.state.exit_code.partition(":")
        return int(code) if code.isdigit() and signal in ("", "0") else None


def bisect_script(
    needs: GpuNeeds,
    settings: SlurmSettings,
    files: BisectFiles,
    *,
    root: Path,
    bisect_args: Sequence[str],
    limit: str | None = None,
) -> str:
    """The job's script: directives (``--time``: ``limit``, a capped bisection's minutes with
    a margin, else ``[slurm] time-limit``: how many candidates a search takes is not known
    before; else the partition's default), then `patchlane bisect SHIM` printing into
    ``files.result``."""
    command = [
        *settings.patchlane,
        "--root",
        str(root),
        "bisect",
        files.shim,
        *bisect_args,
        "--manifest",
        str(files.records),
    ]
    options = directives(
        f"bisect-{files.shim}", files.output, needs, settings, limit or settings.time_limit, root
    )
    written = "written by `patchlane bisect --executor slurm`"
    lines = [
        "#!/bin/bash",
        f"# bisection of shim {files.shim}: {written}; needs {needs}",
        *(f"#SBATCH {shlex.quote(option)}" for option in options),
        "set -u",
        f"exec {shlex.join(command)} > {shlex.quote(str(files.result))}",
    ]
    return "\n".join(lines) + "\n"


def start_bisection(
    needs: GpuNeeds,
    settings: SlurmSettings,
    files: BisectFiles,
    *,
    root: Path,
    bisect_args: Sequence[str],
    progress: Progress,
    limit: str | None = None,
) -> SlurmBisection:
    """Write the job's script and ``sbatch`` it: its job id (no state yet), or why sbatch
    refused it."""
    files.folder.mkdir(parents=True, exist_ok=True)
    script = bisect_script(needs, settings, files, root=root, bisect_args=bisect_args, limit=limit)
    atomic_write(files.script, script, within=root)
    for stale in (files.result, files.records):
        stale.unlink(missing_ok=True)
    job_id, why = sbatch(files.script)
    if job_id is None:
        progress(files.label, f"refused by sbatch: {why}")
        return SlurmBisection(files, None, None, why)
    progress(
        files.label, f"submitted job {job_id} ({files.script.name}); its progress: {files.output}"
    )
    return SlurmBisection(files, job_id, None)


def wait_bisections(
    jobs: Sequence[SlurmBisection], settings: SlurmSettings, progress: Progress
) -> list[SlurmBisection]:
    """Wait for every submitted job at once, saying each change (Ctrl-C or SIGTERM cancels
    those still queued or running): each with its final state, the refused ones as they were."""
    labels = {job.job_id: job.files.label for job in jobs if job.job_id is not None}
    states = wait(labels, settings, progress) if labels else {}
    return [
        replace(job, state=states.get(job.job_id)) if job.job_id is not None else job
        for job in jobs
    ]


def submit_bisection(
    needs: GpuNeeds,
    settings: SlurmSettings,
    files: BisectFiles,
    *,
    root: Path,
    bisect_args: Sequence[str],
    progress: Progress,
) -> SlurmBisection:
    """Write the job's script, ``sbatch`` it and wait for it (Ctrl-C or SIGTERM cancels it)."""
    job = start_bisection(
        needs, settings, files, root=root, bisect_args=bisect_args, progress=progress
    )
    [done] = wait_bisections([job], settings, progress)
    return done
