"""Slurm's client commands as the engine uses them, whatever a job runs (a lane, an array of
lanes, a bisection): ``sbatch`` a script, ask how jobs stand (``squeue -r``, else ``scontrol show
job``, else ``sacct``), wait for them saying each change, ``scancel`` what is left when
interrupted. Slurm decides where and when a job runs; nothing here schedules."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from retire.core import childenv, secrets, tooltext
from retire.core.errors import PatchlaneError
from retire.runs.slurmconfig import SlurmSettings
from retire.runs.slurmjob import JobPhase, JobState, parse_sacct, parse_scontrol, parse_squeue

__all__ = ["Progress", "cancel", "environment", "poll", "sbatch", "wait"]

_SLURM_TIMEOUT_S = 120.0

# (what the job is: a lane's name, "bisect toy"; message)
Progress = Callable[[str, str], None]


def environment() -> dict[str, str]:
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
        proc = subprocess.run(
            [found, *args[1:]],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=environment(),
            timeout=_SLURM_TIMEOUT_S,
        )
        # a refusal is relayed to people: no escape sequence of Slurm's (or a wrapper's) with it
        return subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout, tooltext.plain(proc.stderr)
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"{args[0]} gave no answer")


def sbatch(script: Path) -> tuple[str | None, str]:
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
    labels: Mapping[str, str], settings: SlurmSettings, progress: Progress
) -> dict[str, JobState]:
    """The final state of every job in ``labels`` (job id → what it is, for progress lines),
    saying each change as it happens (``[lane] job 12: running``) and the counts (``slurm: 1
    queued, 2 running, 3 done``). Ctrl-C or SIGTERM cancels the jobs still queued or running."""
    active = dict(labels)
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
                    progress(active[job_id], f"job {job_id}: {state.phase} — {words}")
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
