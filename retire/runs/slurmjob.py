"""One lane's Slurm job as the run sees it: where it stands, read from what Slurm's own commands
print (``squeue``, ``scontrol show job``, ``sacct``). Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["JobPhase", "JobState", "parse_sacct", "parse_scontrol", "parse_squeue"]


class JobPhase(StrEnum):
    """Where a lane's job stands, in the run's progress line."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


# Slurm's job states, grouped by what they mean for a lane.
_QUEUED = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
_RUNNING = frozenset(
    {"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED"}
)
#: A job that ended as planned (its lane's own outcome decides the rest).
COMPLETED = "COMPLETED"
#: How Slurm says a job ended other than as planned, in words for a lane's ``why``.
ENDINGS = {
    "CANCELLED": "cancelled",
    "TIMEOUT": "killed at its time limit",
    "FAILED": "failed",
    "NODE_FAIL": "lost with its node",
    "PREEMPTED": "preempted",
    "OUT_OF_MEMORY": "killed out of memory",
    "BOOT_FAIL": "never started: its node failed to boot",
    "DEADLINE": "never started: past its deadline",
    "REVOKED": "revoked",
}


@dataclass(frozen=True)
class JobState:
    """A job's Slurm state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``CANCELLED``…), why it waits
    or ended, its exit code, and whether it ever started."""

    state: str
    reason: str = ""
    exit_code: str = ""
    started: bool = True

    @property
    def phase(self) -> JobPhase:
        if self.state in _QUEUED:
            return JobPhase.QUEUED
        if self.state in _RUNNING:
            return JobPhase.RUNNING
        return JobPhase.DONE

    @property
    def ended_badly(self) -> bool:
        """Slurm ended it other than as planned (cancelled, timed out, killed, never started)."""
        return self.phase == JobPhase.DONE and self.state != COMPLETED

    def words(self) -> str:
        """``cancelled before it started``, ``killed at its time limit (exit 0:15)``…"""
        text = ENDINGS.get(self.state, self.state.lower())
        if not self.started and not text.startswith("never started"):
            text += " before it started"
        details = [self.reason] if self.reason not in ("None", "") else []
        if self.exit_code and self.exit_code != "0:0":
            details.append(f"exit {self.exit_code}")
        return text + (f" ({', '.join(details)})" if details else "")


def _fields(line: str) -> dict[str, str]:
    """``Key=Value`` pairs of one ``scontrol -o`` line (values hold no spaces but Reason's
    last)."""
    fields: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


def parse_scontrol(output: str) -> JobState | None:
    """``scontrol show job -o ID``'s line, or None when it names no state."""
    fields = _fields(output.strip().splitlines()[0] if output.strip() else "")
    state = fields.get("JobState")
    if not state:
        return None
    start = fields.get("StartTime", "")
    run_time = fields.get("RunTime", "")
    started = start not in ("", "Unknown", "None") and run_time not in ("", "00:00:00")
    return JobState(state, fields.get("Reason", ""), fields.get("ExitCode", ""), started)


def parse_squeue(output: str) -> dict[str, JobState]:
    """``squeue -h -o %i|%T|%r`` lines: job id → state, for the jobs still known to the queue."""
    states = {}
    for line in output.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            job_id, state, reason = parts
            states[job_id] = JobState(state, reason, "", state not in _QUEUED)
    return states


def parse_sacct(output: str) -> JobState | None:
    """``sacct -n -X -P -o State,ExitCode,Elapsed,Reason -j ID``'s line (accounting's memory of
    a job the controller has forgotten), or None."""
    for line in output.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0]:
            # "CANCELLED by 0"
            state = parts[0].split()[0]
            reason = parts[3] if len(parts) > 3 else ""
            return JobState(state, reason, parts[1], parts[2] not in ("", "00:00:00"))
    return None
