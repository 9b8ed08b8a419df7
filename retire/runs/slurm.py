"""Lanes as Slurm jobs: `patchlane run --executor slurm`.

One job per GPU lane (script: retire/runs/sbatch.py) and one job array for the lanes that need
no GPU, a task per lane (retire/runs/sbatcharray.py), submitted with ``sbatch``; the run then asks
``squeue`` (and, for a job that left the queue, ``scontrol show job`` or ``sacct``) how each lane's
job or array task stands and says so as it changes (queued, running, done), until every one has
ended. Slurm
decides where and when each job runs; nothing here schedules. Each job runs `patchlane run LANE`
on its node, writing its own records and JSON document into ``.patchlane/slurm/<run>/``, which
the caller merges (:func:`retire.evidence.validation.merge`: nothing lost, nothing twice). A job
Slurm refused, cancelled, killed or timed out is reported as such, never as the lane's outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from retire.core import childenv, secrets
from retire.core.atomic import atomic_write
from retire.core.errors import PatchlaneError
from retire.evidence import validation
from retire.evidence.validation import ShimOutcome, ValidationRecord
from retire.lanes.model import Lane
from retire.runs.gpus import lane_needs
from retire.runs.lanerun import LaneRun, LaneStatus, ShimRun, from_summary
from retire.runs.sbatch import JobFiles, job_script, time_limit
from retire.runs.sbatcharray import LaneArray, array_script, array_time_limit, job_groups
from retire.runs.slurmconfig import SlurmSettings
from retire.runs.slurmjob import JobPhase, JobState, parse_sacct, parse_scontrol, parse_squeue
from shims.model import ShimManifest

__all__ = ["LaneJob", "SlurmLane", "run_lanes"]

#: What sbatch says when no node of the cluster can ever give a job what it asks for.
_UNMEETABLE = (
    "Invalid generic resource",
    "Requested node configuration is not available",
    "Invalid feature specification",
    "gres",
)
_SLURM_TIMEOUT_S = 120.0

# (lane, message)
Progress = Callable[[str, str], None]


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


def _environment() -> dict[str, str]:
    """What Slurm's commands (and, through ``--export=ALL``, a job) get: the allow-list uv gets,
    less anything secret-named — Slurm keeps a job's environment in its state files, so a node's
    uv finds index credentials in its own configuration — plus Slurm's own settings, never this
    run's process marker (a job is no child of this run)."""
    env = {k: v for k, v in childenv.for_uv().items() if not secrets.looks_secret(k)}
    env.update({k: v for k, v in os.environ.items() if k.startswith("SLURM_")})
    env.pop(childenv.RUN_TOKEN_ENV, None)
    return env


def _slurm(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """One Slurm client command, its output captured (a missing one is a PatchlaneError)."""
    found = shutil.which(args[0])
    if found is None:
        raise PatchlaneError(
            f"{args[0]} is not on PATH: --executor slurm needs Slurm's client commands (sbatch, "
            "squeue, scontrol, scancel) on this host"
        )
    try:
        return subprocess.run(
            [found, *args[1:]],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=_environment(),
            timeout=_SLURM_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"{args[0]} gave no answer")


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
    job_id, why = _sbatch(files.script)
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
    job_id, why = _sbatch(array.script)
    return [
        LaneJob(lane, files, array.script, f"{job_id}_{task}" if job_id else None, why)
        for task, (lane, files) in enumerate(zip(array.lanes, every, strict=True))
    ]


def _clear(files: JobFiles) -> None:
    """Remove what an earlier job of the same run id left (its result would pass for this one's)."""
    for stale in (files.result, files.records):
        stale.unlink(missing_ok=True)


def _sbatch(script: Path) -> tuple[str | None, str]:
    """``sbatch`` the script: its job id, or None and sbatch's last line on why not."""
    proc = _slurm(["sbatch", "--parsable", "--export=ALL", str(script)])
    job_id = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not job_id.isdigit():
        said = [line for line in proc.stderr.splitlines() if line.strip()]
        return None, secrets.scrub(said[-1] if said else f"sbatch exited {proc.returncode}")
    return job_id, ""


def poll(job_ids: Sequence[str]) -> dict[str, JobState]:
    """How each job (or array task, ``12_0``) stands: from the queue, else the controller's
    memory of it, else accounting's; a job none of them knows is ``UNKNOWN``."""
    # the queue is asked for whole arrays, a line per task (-r: else a pending array is one
    # line, 12_[0-3])
    asked = dict.fromkeys(job_id.split("_")[0] for job_id in job_ids)
    queue = _slurm(["squeue", "-r", "-h", "-j", ",".join(asked), "-o", "%i|%T|%r"])
    queued = parse_squeue(queue.stdout) if queue.returncode == 0 else {}
    states = {job_id: queued[job_id] for job_id in job_ids if job_id in queued}
    for job_id in job_ids:
        if job_id in states:
            continue
        shown = _slurm(["scontrol", "show", "job", "-o", job_id])
        found = parse_scontrol(shown.stdout) if shown.returncode == 0 else None
        if found is None:
            acct = _slurm(
                ["sacct", "-n", "-X", "-P", "-o", "State,ExitCode,Elapsed,Reason", "-j", job_id]
            )
            found = parse_sacct(acct.stdout) if acct.returncode == 0 else None
        states[job_id] = found or JobState("UNKNOWN", "Slurm no longer knows the job")
    return states


def cancel(job_ids: Sequence[str]) -> None:
    """``scancel`` the jobs and array tasks (an interrupted run leaves nothing queued or
    running; an array's finished tasks keep their records)."""
    if job_ids:
        _slurm(["scancel", *job_ids])


def wait(
    jobs: Sequence[LaneJob], settings: SlurmSettings, progress: Progress
) -> dict[str, JobState]:
    """Every submitted job's final state, saying each change as it happens (``[lane] job 12:
    running``) and the counts (``slurm: 1 queued, 2 running, 3 done``). Ctrl-C or SIGTERM cancels
    the jobs still queued or running."""
    active = {job.job_id: job for job in jobs if job.job_id is not None}
    seen: dict[str, JobState] = {}
    counts = ""
    try:
        while True:
            pending = [i for i in active if i not in seen or seen[i].phase != JobPhase.DONE]
            if not pending:
                return seen
            for job_id, state in poll(pending).items():
                if seen.get(job_id) != state:
                    words = state.state + (
                        f" ({state.reason})" if state.reason not in ("", "None") else ""
                    )
                    progress(active[job_id].lane.name, f"job {job_id}: {state.phase} — {words}")
                seen[job_id] = state
            now = _counts(seen.values())
            if now != counts:
                progress("slurm", now)
                counts = now
            if any(state.phase != JobPhase.DONE for state in seen.values()):
                time.sleep(settings.poll_seconds)
    except BaseException:
        cancel([i for i in active if i not in seen or seen[i].phase != JobPhase.DONE])
        raise


def _counts(states: Iterable[JobState]) -> str:
    phases = [state.phase for state in states]
    return ", ".join(f"{phases.count(phase)} {phase}" for phase in JobPhase)


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
    for index, group in enumerate(job_groups(lanes, manifests, settings, root)):
        if len(group) == 1:
            submitted = [
                submit(group[0], manifests, settings, folder, root=root, run_args=run_args)
            ]
        else:
            name = "cpu-lanes" if index == 0 else f"cpu-lanes-{index}"
            array = LaneArray(folder, group, name)
            submitted = submit_array(array, manifests, settings, root=root, run_args=run_args)
        for job in submitted:
            progress(
                job.lane.name,
                f"submitted job {job.job_id} ({job.script.name})"
                if job.job_id
                else f"refused by sbatch: {job.refused}",
            )
        jobs += submitted
    states = wait(jobs, settings, progress)
    by_lane = {job.lane.name: job for job in jobs}
    return [
        collect(by_lane[lane.name], states.get(by_lane[lane.name].job_id or ""), manifests)
        for lane in lanes
    ]
