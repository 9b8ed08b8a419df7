"""``patchlane lanes``: the expanded lanes and the state of their locks."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, NotRequired, TypedDict

from retire.commands.base import Command, ExitCode, emit_json, say
from retire.core.project import Project
from retire.lanes.model import freeze_text
from shims.gpuneeds import GpuNeeds

if TYPE_CHECKING:
    from retire.lanes.model import Lane
    from retire.locks.locking import LockState
    from shims.gpuneeds import GpuNeeds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes")
    p.add_argument("--json", action="store_true", help="machine-readable output")


class RevisionRow(TypedDict):
    repository: str
    # as the lane file writes it: a tag, a branch or a commit
    rev: str
    # the commit the current lock resolved it to (None: not locked yet)
    commit: str | None


class LaneRow(TypedDict):
    """One lane as ``patchlane lanes --json`` prints it (docs/commands.md)."""

    name: str
    python: str
    platform: str
    requirements: list[str]
    indexes: list[str]
    exclude_newer: str | None
    cooldown: str | None
    # the absolute cutoff the current lock was made with (a cooldown resolved at lock time)
    cutoff: str | None
    exclude_newer_package: dict[str, str | bool]
    shims: list[str]
    needs_cuda: bool
    # what the lane is given of a host's GPUs (its own gpus, or what its reproducers need)
    gpus: dict[str, object]
    lock: str
    lock_why: str
    origin: str
    description: str
    # only for a lane with [lane.revisions]
    revisions: NotRequired[dict[str, RevisionRow]]


def _freeze_words(row: LaneRow) -> str:
    """`frozen 2026-11-15`, `cooldown 7 days → 2026-11-16`, `cooldown 7 days (not locked yet)`."""
    if row["cooldown"]:
        cutoff = f"→ {row['cutoff'][:10]}" if row["cutoff"] else "(not locked yet)"
        words = f"cooldown {row['cooldown']} {cutoff}"
    elif row["exclude_newer"]:
        words = f"frozen {row['exclude_newer'][:10]}"
    else:
        return ""
    exempt = [name for name, value in row["exclude_newer_package"].items() if value is False]
    own = [name for name, value in row["exclude_newer_package"].items() if value is not False]
    words += f", not {', '.join(exempt)}" if exempt else ""
    words += f", own dates: {', '.join(own)}" if own else ""
    return " " + words


def _revision_words(row: LaneRow) -> str:
    """`, megatron-core@dev → d48bd6be0a85`: each revision and the commit its current lock took."""
    return "".join(
        f", {name}@{r['rev']}" + (f" → {r['commit'][:12]}" if r["commit"] else "")
        for name, r in row.get("revisions", {}).items()
    )


def _gpu_words(row: LaneRow) -> str:
    """`, 2 GPUs (h100, compute capability ≥ 9.0)` for a lane that is given GPUs."""
    gpus = row["gpus"]
    count = gpus["count"]
    if not isinstance(count, int) or not count:
        return ""
    memory = gpus["min_memory_gib"]
    needs = GpuNeeds(
        count,
        _text(gpus["min_compute_capability"]),
        float(memory) if isinstance(memory, int | float) else None,
        _text(gpus["name"]),
        gpus["share"] is True,
    )
    return f", {needs}"


def _text(value: object) -> str | None:
    """A provenance value that should be text, or None (absent, or not what patchlane writes)."""
    return value if isinstance(value, str) else None


def _locked_commits(recorded: Mapping[str, object]) -> dict[str, str | None]:
    """Distribution → the commit the current lock resolved its revision to."""
    revisions = recorded.get("revisions")
    if not isinstance(revisions, Mapping):
        return {}
    return {
        str(name): _text(entry.get("commit")) if isinstance(entry, Mapping) else None
        for name, entry in revisions.items()
    }


def _row(lane: Lane, state: LockState, recorded: Mapping[str, object], gpus: GpuNeeds) -> LaneRow:
    """The lane, its lock's state and what its current lock recorded (``recorded``: empty when
    the lock is not current)."""
    row = LaneRow(
        name=lane.name,
        python=lane.python,
        platform=lane.platform,
        requirements=list(lane.requirements),
        indexes=[i.name for i in lane.indexes],
        exclude_newer=lane.exclude_newer.isoformat() if lane.exclude_newer else None,
        cooldown=str(lane.cooldown) if lane.cooldown else None,
        cutoff=_text(recorded.get("exclude-newer")),
        exclude_newer_package={p.name: freeze_text(p.freeze) for p in lane.exclude_newer_package},
        shims=list(lane.shims),
        needs_cuda=lane.needs_cuda,
        gpus=gpus.to_json(),
        lock=str(state.freshness),
        lock_why=state.why,
        origin=lane.origin,
        description=lane.description,
    )
    if lane.revisions:
        commits = _locked_commits(recorded)
        row["revisions"] = {
            r.distribution: RevisionRow(
                repository=r.repository, rev=r.rev, commit=commits.get(r.distribution)
            )
            for r in lane.revisions
        }
    return row


def _table(rows: list[LaneRow]) -> None:
    """One line per lane, then a note per foreign lock."""
    width = max([len(r["name"]) for r in rows] + [4])
    say(
        f"{'lane':<{width}}  {'python':<6}  {'platform':<22}  {'lock':<7}  {'packages'}  shims  "
        f"from"
    )
    for r in rows:
        say(
            f"{r['name']:<{width}}  {r['python']:<6}  {r['platform']:<22}  {r['lock']:<7}  "
            f"{len(r['requirements']):>8}  {len(r['shims']):>5}  "
            f"{r['origin']}{_freeze_words(r)}{_revision_words(r)}{_gpu_words(r)}"
        )
    for r in rows:
        if r["lock"] == "foreign":
            say(
                f"note: {r['name']}: the lock is foreign ({r['lock_why']}); `patchlane lock "
                f"{r['name']}` replaces it"
            )
    say(f"{len(rows)} lanes")


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `--help` loads none of these (start-up time; the runtime-only install lacks them)
    from retire.lanes import lanefile
    from retire.locks import locking

    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs.gpus import lane_needs

    lanes = lanefile.select(lanefile.project_lanes(project), args.lanes)
    # a needs-cuda lane without its own gpus is given what its reproducers ask for
    manifests = (
        project.manifests() if any(lane.needs_cuda and lane.gpus is None for lane in lanes) else {}
    )
    rows = []
    for lane in lanes:
        state = locking.lock_state(lane, project.locks_dir)
        provenance = (
            locking.read_provenance(locking.lock_path(project.locks_dir, lane.name))
            if state.current
            else None
        )
        rows.append(_row(lane, state, provenance or {}, lane_needs(lane, manifests)))
    if args.json:
        emit_json(rows)
    else:
        _table(rows)
    return ExitCode.OK


COMMAND = Command(
    "lanes", "list the expanded lanes and the state of their locks", add_arguments, run
)
