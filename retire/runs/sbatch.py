"""The ``sbatch`` script of one lane's Slurm job: what it asks Slurm for (GPUs, constraint,
partition, time limit, from the lane's needs and ``[slurm]``) and the one `patchlane run` it
starts. Pure: the caller writes and submits it (retire/runs/slurm.py)."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retire.lanes.model import Lane
from retire.runs.slurmconfig import SlurmSettings
from shims.gpuneeds import GpuNeeds
from shims.model import ShimManifest

__all__ = [
    "JobFiles",
    "as_time",
    "directives",
    "job_script",
    "lane_command",
    "lane_minutes",
    "time_limit",
]

#: The job name's prefix: `squeue --name` and `scancel --name` find a run's jobs by it.
JOB_PREFIX = "patchlane-"


@dataclass(frozen=True)
class JobFiles:
    """Where one lane's job keeps its things (``.patchlane/slurm/<run>/``, seen by every node)."""

    folder: Path
    lane: str

    @property
    def script(self) -> Path:
        return self.folder / f"{self.lane}.sbatch"

    @property
    def output(self) -> Path:
        """What the job printed (the pytest view, progress; Slurm's own messages)."""
        return self.folder / f"{self.lane}.out"

    @property
    def result(self) -> Path:
        """The job's `patchlane run --json` document."""
        return self.folder / f"{self.lane}.json"

    @property
    def records(self) -> Path:
        """The job's own validation records, merged into the run's manifest when it ends."""
        return self.folder / f"{self.lane}.jsonl"


def lane_minutes(lane: Lane, manifests: Mapping[str, ShimManifest], settings: SlurmSettings) -> int:
    """The lane's reproducers' timeouts (both modes) plus ``build-minutes``, in whole minutes."""
    seconds = sum(2 * manifests[s].reproducer.timeout for s in lane.shims if s in manifests)
    return max(math.ceil(seconds / 60) + settings.build_minutes, 1)


def as_time(minutes: int) -> str:
    """Whole minutes as Slurm's ``HH:MM:00``."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def time_limit(lane: Lane, manifests: Mapping[str, ShimManifest], settings: SlurmSettings) -> str:
    """``[slurm] time-limit``, else the lane's reproducers' timeouts (both modes) plus
    ``build-minutes``, in whole minutes as ``HH:MM:00``."""
    if settings.time_limit:
        return settings.time_limit
    return as_time(lane_minutes(lane, manifests, settings))


def _gres(needs: GpuNeeds, settings: SlurmSettings) -> str | None:
    """``gpu:N`` (or ``gpu:<name>:N`` with ``gpu-type``), None for a lane without GPUs."""
    if not needs.count:
        return None
    if settings.gpu_type and needs.name:
        return f"gpu:{needs.name.lower()}:{needs.count}"
    return f"gpu:{needs.count}"


def directives(
    name: str,
    output: Path,
    needs: GpuNeeds,
    settings: SlurmSettings,
    limit: str | None,
    root: Path,
) -> list[str]:
    """The ``#SBATCH`` options of a job named ``name`` (a lane, an array of lanes, a
    bisection), in a fixed order; no ``--time`` without a ``limit`` (the partition's default)."""
    options = [f"--job-name={JOB_PREFIX}{name}", f"--output={output}", f"--chdir={root}"]
    if limit is not None:
        options.append(f"--time={limit}")
    options += ["--nodes=1", "--ntasks=1"]
    for flag, value in (
        ("partition", settings.partition),
        ("account", settings.account),
        ("qos", settings.qos),
        ("constraint", settings.constraint),
        ("gres", _gres(needs, settings)),
        ("cpus-per-task", settings.cpus_per_lane),
    ):
        if value is not None:
            options.append(f"--{flag}={value}")
    options.extend(settings.sbatch_args)
    return options


def lane_command(
    lane: Lane, settings: SlurmSettings, files: JobFiles, *, root: Path, run_args: Sequence[str]
) -> list[str]:
    """The job's `patchlane run LANE`, writing its records into ``files`` (``run_args``: the
    run's own options, passed on)."""
    return [
        *settings.patchlane,
        "--root",
        str(root),
        "run",
        lane.name,
        "--manifest",
        str(files.records),
        "--no-summary",
        "--json",
        *run_args,
    ]


def job_script(
    lane: Lane,
    needs: GpuNeeds,
    settings: SlurmSettings,
    files: JobFiles,
    limit: str,
    *,
    root: Path,
    run_args: Sequence[str],
) -> str:
    """The whole script: directives, then `patchlane run LANE` writing its records and its JSON
    document into ``files`` (``run_args``: the run's own options, passed on)."""
    command = lane_command(lane, settings, files, root=root, run_args=run_args)
    options = directives(lane.name, files.output, needs, settings, limit, root)
    lines = [
        "#!/bin/bash",
        f"# lane {lane.name}: written by `patchlane run --executor slurm`; needs {needs}",
        *(f"#SBATCH {shlex.quote(option)}" for option in options),
        "set -u",
        # the job's stdout is the run's JSON document; the pytest view goes to the job's output
        f"exec {shlex.join(command)} > {shlex.quote(str(files.result))}",
    ]
    return "\n".join(lines) + "\n"
