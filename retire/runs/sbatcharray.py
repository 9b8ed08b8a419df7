"""The cpu lanes of a run as one Slurm job array: which lanes go together, and the array's
``sbatch`` script. Pure: the caller writes and submits it (retire/runs/slurm.py).

A lane that needs no GPU asks a node for the same things as every other such lane (partition,
account, qos, constraint, CPUs, ``sbatch-args``: all from ``[slurm]``), so those lanes go to Slurm
as one job with ``--array=0-N``: one submission, one queue entry, and array task ``i`` runs the
``i``-th lane, picked by ``$SLURM_ARRAY_TASK_ID`` in a ``case`` whose arms are the lanes'
commands, quoted as a job script's (no ``eval``). A GPU lane stays one job of its own: its
``--gres`` is its own, and so is its time limit (a short GPU job backfills where a long one
cannot).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from retire.lanes.model import Lane
from retire.runs.gpus import lane_needs
from retire.runs.sbatch import JobFiles, as_time, directives, lane_command, lane_minutes
from retire.runs.slurmconfig import SlurmSettings
from shims.gpuneeds import GpuNeeds
from shims.model import ShimManifest

__all__ = ["LaneArray", "array_script", "array_time_limit", "job_groups", "plan"]

#: The directives that are each lane's own; lanes whose other directives are equal share an array.
_PER_JOB = ("--job-name=", "--output=", "--time=")


@dataclass(frozen=True)
class LaneArray:
    """Lanes submitted as one job array: task ``i`` runs ``lanes[i]``. Its files begin with
    ``_`` (no lane's name does), beside the lanes' own (retire.runs.sbatch.JobFiles)."""

    folder: Path
    lanes: tuple[Lane, ...]
    name: str = "cpu-lanes"

    @property
    def script(self) -> Path:
        return self.folder / f"_{self.name}.sbatch"

    @property
    def output(self) -> Path:
        """Slurm's own lines for each task (``%a``: the task id), such as its time-limit kill;
        each lane's pytest view goes to the lane's own output."""
        return self.folder / f"_{self.name}.%a.out"


def job_groups(
    lanes: Sequence[Lane],
    manifests: Mapping[str, ShimManifest],
    settings: SlurmSettings,
    root: Path,
) -> list[tuple[Lane, ...]]:
    """The run's jobs, in the order of their first lanes: each GPU lane alone; the lanes that
    need no GPU and whose directives differ only in name, output and time limit, together."""
    shared: dict[tuple[str, ...], list[Lane]] = {}
    groups: list[list[Lane]] = []
    for lane in lanes:
        needs = lane_needs(lane, manifests)
        if needs.count:
            groups.append([lane])
            continue
        options = directives(lane.name, root, needs, settings, "", root)
        key = tuple(option for option in options if not option.startswith(_PER_JOB))
        if key in shared:
            shared[key].append(lane)
        else:
            shared[key] = [lane]
            groups.append(shared[key])
    return [tuple(group) for group in groups]


def plan(
    lanes: Sequence[Lane],
    manifests: Mapping[str, ShimManifest],
    settings: SlurmSettings,
    folder: Path,
    root: Path,
) -> list[Lane | LaneArray]:
    """What the run submits, one entry per ``sbatch``: a lane alone (a GPU lane, or the only
    lane of its kind) or an array (``cpu-lanes``; a second one, were the directives ever to
    differ, ``cpu-lanes-2``)."""
    jobs: list[Lane | LaneArray] = []
    for group in job_groups(lanes, manifests, settings, root):
        if len(group) == 1:
            jobs.append(group[0])
            continue
        count = sum(isinstance(job, LaneArray) for job in jobs)
        jobs.append(LaneArray(folder, group, f"cpu-lanes-{count + 1}" if count else "cpu-lanes"))
    return jobs


def array_time_limit(
    lanes: Sequence[Lane], manifests: Mapping[str, ShimManifest], settings: SlurmSettings
) -> str:
    """``[slurm] time-limit``, else the longest of the lanes' worked-out limits: every task of an
    array has the array's limit."""
    if settings.time_limit:
        return settings.time_limit
    return as_time(max(lane_minutes(lane, manifests, settings) for lane in lanes))


def array_script(
    array: LaneArray,
    settings: SlurmSettings,
    limit: str,
    *,
    root: Path,
    run_args: Sequence[str],
) -> str:
    """The array's script: its directives with ``--array=0-N``, then a ``case`` on
    ``$SLURM_ARRAY_TASK_ID`` whose ``i``-th arm runs the ``i``-th lane as a lane's own job would,
    its JSON document and its pytest view in the lane's own files."""
    options = [
        *directives(array.name, array.output, GpuNeeds(), settings, limit, root),
        f"--array=0-{len(array.lanes) - 1}",
    ]
    names = ", ".join(lane.name for lane in array.lanes)
    lines = [
        "#!/bin/bash",
        f"# lanes {names}: written by `patchlane run --executor slurm`; a task per lane, no GPU",
        *(f"#SBATCH {shlex.quote(option)}" for option in options),
        "set -u",
        'case "${SLURM_ARRAY_TASK_ID:-}" in',
    ]
    for task, lane in enumerate(array.lanes):
        files = JobFiles(array.folder, lane.name)
        command = lane_command(lane, settings, files, root=root, run_args=run_args)
        lines.append(
            f"  {task}) exec {shlex.join(command)} > {shlex.quote(str(files.result))} "
            f"2> {shlex.quote(str(files.output))} ;;"
        )
    lines += [
        '  *) echo "no lane for array task ${SLURM_ARRAY_TASK_ID:-(none)}" >&2; exit 2 ;;',
        "esac",
    ]
    return "\n".join(lines) + "\n"
