"""Lanes as Slurm jobs: `patchlane run --executor slurm`.

One job per GPU lane (script: retire/runs/sbatch.py) and one job array for the lanes that need
no GPU, a task per lane (retire/runs/sbatcharray.py), submitted with ``sbatch``; the run then
waits for every lane's job or array task, saying each change (retire/runs/slurmclient.py). Each
job runs `patchlane run LANE` on its node, writing its own records and JSON document into
``.patchlane/slurm/<run>/``, which the caller merges (:func:`retire.evidence.validation.merge`:
nothing lost, nothing twice). A job Slurm refused, cancelled, killed or timed out is reported as
such, never as the lane's outcome.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.evidence import validation
from retire.evidence.validation import ShimOutcome, ValidationRecord
from retire.lanes.model import Lane
from retire.runs.gpus import lane_needs
from retire.runs.lanerun import LaneRun, LaneStatus, ShimRun, from_summary
from retire.runs.sbatch import JobFiles, job_script, time_limit
from retire.runs.sbatcharray import LaneArray, array_script, array_time_limit, plan
from retire.runs.slurmclient import Progress, sbatch, wait
from retire.runs.slurmconfig import SlurmSettings
from retire.runs.slurmjob import JobState
from shims.model import ShimManifest

__all__ = ["LaneJob", "SlurmLane", "run_lanes"]

#: What sbatch says when no node of the cluster can ever give a job what it asks for.
_UNMEETABLE = (
    "Invalid generic resource",
    "Requested node configuration is not available",
    "Invalid feature specification",
    "gres",
)


@dataclass(frozen=True)
class LaneJob:
    """A lane's job as submitted: its script, its id (``12``; an array task's ``12_0``), or why
    Slurm refused it."""

    lane: Lane
    files: JobFiles
    script: Path
    job_id: str | None
    refused: str = ""


@dataclass(frozen=True)
class SlurmLane:
    """A lane's outcome from its job, the job's last state, and the records it made."""

    run: LaneRun
    job: LaneJob
    state: JobState | None
    records: tuple[ValidationRecord, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.job.job_id,
            "state": self.state.state if self.state else "REFUSED",
            "ended": self.state.words() if self.state else self.job.refused,
            "script": str(self.job.script),
            "output": str(self.job.files.output),
        }


def submit(
    lane: Lane,
    manifests: Mapping[str, ShimManifest],
    settings: SlurmSettings,
    folder: Path,
    *,
    root: Path,
    run_args: Sequence[str],
) -> LaneJob:
    """Write the lane's job script and ``sbatch`` it."""
    files = JobFiles(folder, lane.name)
    needs = lane_needs(lane, manifests)
    script = job_script(
        lane,
        needs,
        settings,
        files,
        time_limit(lane, manifests, settings),
        root=root,
        run_args=run_args,
    )
    atomic_write(files.script, script, within=root)
    _clear(files)
    job_id, why = sbatch(files.script)
    return LaneJob(lane, files, files.script, job_id, why)


def submit_array(
    array: LaneArray,
    manifests: Mapping[str, ShimManifest],
    settings: SlurmSettings,
    *,
    root: Path,
    run_args: Sequence[str],
) -> list[LaneJob]:
    """Write the array's script and ``sbatch`` it once: each lane's job is its task, ``12_0``…"""
    limit = array_time_limit(array.lanes, manifests, settings)
    script = array_script(array, settings, limit, root=root, run_args=run_args)
    atomic_write(array.script, script, within=root)
    every = [JobFiles(array.folder, lane.name) for lane in array.lanes]
    for files in every:
        _clear(files)
    job_id, why = sbatch(array.script)
    return [
        LaneJob(lane, files, array.script, f"{job_id}_{task}" if job_id else None, why)
        for task, (lane, files) in enumerate(zip(array.lanes, every, strict=True))
    ]


def _clear(files: JobFiles) -> None:
    """Remove what an earlier job of the same run id left (its result would pass for this one's)."""
    for stale in (files.result, files.records):
        stale.unlink(missing_ok=True)


def collect(
    job: LaneJob, state: JobState | None, manifests: Mapping[str, ShimManifest]
) -> SlurmLane:
    """The lane's outcome from what its job left: its own run's document where it finished one,
    else why it did not (refused, cancelled, timed out, killed), with any records it made."""
    lane = job.lane
    records = tuple(validation.load(job.files.records)) if job.files.records.exists() else ()
    if job.job_id is None or state is None:
        return SlurmLane(_refused(job, manifests), job, None, records)
    document = _document(job.files.result)
    lanes = document.get("lanes") if isinstance(document, dict) else None
    if isinstance(lanes, list) and lanes and isinstance(lanes[0], dict):
        run = _with_records(from_summary(lanes[0]), records)
        return SlurmLane(run, job, state, records)
    why = f"Slurm job {job.job_id} {state.words()}"
    if not state.ended_badly:
        why += f": it left no result (its output: {job.files.output})"
    run = LaneRun(lane.name, LaneStatus.JOB_FAILED, lane.shims, why)
    return SlurmLane(run, job, state, records)


def _refused(job: LaneJob, manifests: Mapping[str, ShimManifest]) -> LaneRun:
    """A lane Slurm would not take: skipped where no node can meet its needs, else failed."""
    lane = job.lane
    needs = lane_needs(lane, manifests)
    if any(words in job.refused for words in _UNMEETABLE):
        why = f"Slurm cannot meet the lane's needs ({needs}): {job.refused}"
        shims = tuple(ShimRun(lane.name, s, ShimOutcome.SKIPPED, why) for s in lane.shims)
        return LaneRun(lane.name, LaneStatus.SKIPPED, lane.shims, why, shims=shims)
    return LaneRun(
        lane.name, LaneStatus.JOB_FAILED, lane.shims, f"sbatch refused the job: {job.refused}"
    )


def _document(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _with_records(run: LaneRun, records: Sequence[ValidationRecord]) -> LaneRun:
    """The lane run with each shim's records of this run attached (the pytest view shows them)."""
    mine = {(r.shim, r.mode): r for r in records if r.lane == run.lane}
    shims = tuple(
        replace(s, without=mine.get((s.shim, "without")), with_shim=mine.get((s.shim, "with")))
        for s in run.shims
    )
    return replace(run, shims=shims)


def run_lanes(
    lanes: Sequence[Lane],
    manifests: Mapping[str, ShimManifest],
    settings: SlurmSettings,
    folder: Path,
    *,
    root: Path,
    run_args: Sequence[str],
    progress: Progress,
) -> list[SlurmLane]:
    """Submit a job per GPU lane and one job array for the others, wait for them all, collect
    what each lane's job left (in lane order)."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs: list[LaneJob] = []
    for planned in plan(lanes, manifests, settings, folder, root):
        if isinstance(planned, LaneArray):
            submitted = submit_array(planned, manifests, settings, root=root, run_args=run_args)
        else:
            submitted = [submit(planned, manifests, settings, folder, root=root, run_args=run_args)]
        for job in submitted:
            progress(
                job.lane.name,
                f"submitted job {job.job_id} ({job.script.name})"
                if job.job_id
                else f"refused by sbatch: {job.refused}",
            )
        jobs += submitted
    labels = {job.job_id: job.lane.name for job in jobs if job.job_id is not None}
    states = wait(labels, settings, progress)
    by_lane = {job.lane.name: job for job in jobs}
    return [
        collect(by_lane[lane.name], states.get(by_lane[lane.name].job_id or ""), manifests)
        for lane in lanes
    ]
