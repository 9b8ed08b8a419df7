"""``[slurm]`` of ``patchlane.toml``: how `patchlane run --executor slurm` asks a shop's cluster for
each lane's job. Every key is optional::

    [slurm]
    partition = "gpu"            # sbatch --partition (default: the cluster's)
    account = "ml-infra"         # sbatch --account
    qos = "normal"               # sbatch --qos
    constraint = "hopper"        # sbatch --constraint, for every job
    time-limit = "04:00:00"      # sbatch --time (default: worked out from each lane's reproducers)
    build-minutes = 60           # added to a worked-out time limit for the env build
    gpu-type = true              # --gres=gpu:<name>:N for a lane whose gpus name a kind
    cpus-per-lane = 8            # sbatch --cpus-per-task
    sbatch-args = ["--exclusive"] # more sbatch options, passed as written
    patchlane = ["/shared/venv/bin/patchlane"]  # how a job calls patchlane (default: this one)
    poll-seconds = 10            # how often the run asks Slurm how its jobs are

A job's script, output and records live in ``.patchlane/slurm/<run id>/`` of the project, which
every node must see (a shared file system, as the lanes' envs and locks are). Bad values are one
line naming ``patchlane.toml``, the key and the fix.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from shims import tomlreader
from shims.tomlreader import Table

__all__ = ["SlurmSettings", "load_slurm"]

_KEYS = (
    "partition",
    "account",
    "qos",
    "constraint",
    "time-limit",
    "build-minutes",
    "gpu-type",
    "cpus-per-lane",
    "sbatch-args",
    "patchlane",
    "poll-seconds",
)
# Slurm's --time forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"[0-9]+|[0-9]+:[0-9]{2}(:[0-9]{2})?|[0-9]+-[0-9]{1,2}(:[0-9]{2}){0,2}")
# partition, account, qos names: what Slurm accepts without quoting
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# a constraint expression: features joined by & | , and brackets, counts with *
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|,\[\]()*:-]{1,512}")


@dataclass(frozen=True)
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time_limit: str | None = None
    build_minutes: int = 60
    gpu_type: bool = False
    cpus_per_lane: int | None = None
    sbatch_args: tuple[str, ...] = ()
    # how a job calls patchlane: the interpreter this run uses unless the shop says otherwise
    patchlane: tuple[str, ...] = (sys.executable, "-m", "retire")
    poll_seconds: float = 10.0


def _name(table: Table, key: str, example: str) -> str | None:
    text = table.string(key, None, fix=f'write {key} = "{example}"')
    if text is not None and not _NAME.fullmatch(text):
        raise table.error(key, f"not a Slurm name: {text[:60]!r}", f'write {key} = "{example}"')
    return text


def _settings(table: Table) -> SlurmSettings:
    """The checked values of one ``[slurm]`` table."""
    limit = table.string("time-limit", None, fix='write time-limit = "04:00:00"')
    if limit is not None and not _TIME.fullmatch(limit):
        raise table.error(
            "time-limit",
            f"not a Slurm time: {limit[:40]!r}",
            'write minutes or "HH:MM:SS" or "D-HH:MM:SS", e.g. time-limit = "04:00:00"',
        )
    constraint = table.string("constraint", None, fix='write constraint = "hopper"')
    if constraint is not None and not _CONSTRAINT.fullmatch(constraint):
        raise table.error(
            "constraint",
            f"not a Slurm constraint: {constraint[:60]!r}",
            'write features joined by & or |, e.g. constraint = "hopper&ib"',
        )
    extra = table.get("sbatch-args", []).strings(fix='write sbatch-args = ["--exclusive"]')
    for index, arg in enumerate(extra):
        if not arg.startswith("--") or "\n" in arg:
            raise table.error(
                f"sbatch-args[{index}]",
                f"not a long sbatch option: {arg[:60]!r}",
                'write each as "--option=value", e.g. sbatch-args = ["--exclusive"]',
            )
    command = table.get("patchlane", []).strings(
        fix='write patchlane = ["/shared/venv/bin/patchlane"]', empty_ok=False
    )
    cpus = table.get("cpus-per-lane")
    return SlurmSettings(
        partition=_name(table, "partition", "gpu"),
        account=_name(table, "account", "ml-infra"),
        qos=_name(table, "qos", "normal"),
        constraint=constraint,
        time_limit=limit,
        build_minutes=int(
            table.get("build-minutes", 60).number(
                integer=True, minimum=0, maximum=10_000, fix="write build-minutes = 60"
            )
        ),
        gpu_type=table.get("gpu-type", False).boolean(fix="write gpu-type = true"),
        cpus_per_lane=int(
            cpus.number(integer=True, positive=True, maximum=4096, fix="write cpus-per-lane = 8")
        )
        if cpus is not None
        else None,
        sbatch_args=tuple(extra),
        patchlane=tuple(command) or SlurmSettings.patchlane,
        poll_seconds=float(
            table.get("poll-seconds", 10).number(
                positive=True, maximum=3600, fix="write poll-seconds = 10"
            )
        ),
    )


def load_slurm(root: Path) -> SlurmSettings:
    """The ``[slurm]`` settings of the project at ``root`` (defaults when it has none)."""
    path = root / "patchlane.toml"
    if not path.is_file():
        return SlurmSettings()
    doc = tomlreader.read(path, "patchlane.toml")
    value = doc.get("slurm")
    if value is None:
        return SlurmSettings()
    table = value.table(fix="write [slurm] with keys such as partition and time-limit")
    return _settings(table.check_keys(_KEYS))
