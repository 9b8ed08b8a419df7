"""A retirement branch, lane by lane: edit exactly the lanes a shim leaves, re-lock them once, put
back any lane that cannot move.

Inside the branch's worktree (:mod:`retire.branches.autodrop` makes it), for a plan that names its
lanes (:attr:`retire.branches.dropplan.DropPlan.lanes`):

1. each lane file whose lanes leave is edited once (tomlkit, comments kept): the shim's id out of
   its ``shims`` lists; for a *raise* lane the floors raised by
   :func:`retire.lanes.lanedit.raise_floor`, a constraint ``dist>=F`` where the lane holds the
   target only as a dependency, and a target taken from a mirror revision moved (re-locked with
   that package upgraded, so the followed branch's newest commit is taken). A matrix file is
   edited only when every cell that lists the shim leaves (its cells share one shim list);
   otherwise its cells keep the shim and say why. Other lanes' files are not touched;
2. every lane whose lock inputs changed (or whose revision moves) is re-locked in **one**
   ``relock`` call — once per branch, not once per edit;
3. a lane file one of whose lanes does not re-lock, or re-locks below its floor, goes back as it
   was, with its locks; its lanes are reported *blocked* with the reason, and the branch goes on
   without them;
4. ``shims/<id>/`` becomes a guard (its patch removed, its reproducer kept) only when no lane
   lists the id any more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.core.atomic import atomic_write
from retire.core.project import Project
from retire.lanes import lanefile
from retire.lanes.lanedit import FloorConflictError, add_constraint, edit_lane_text
from retire.lanes.model import Lane
from retire.locks import locking
from retire.locks.locking import LockResult
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = ["LaneMove", "Relock", "TreeEdit", "lock_versions", "move_lanes"]

#: ``relock(lanes, lane_upgrades)``: lock these lanes in the worktree's locks folder, with these
#: packages upgraded per lane; one call per branch.
Relock = Callable[[Sequence[Lane], Mapping[str, tuple[str, ...]]], list[LockResult]]


@dataclass(frozen=True)
class LaneMove:
    """What a retirement branch did with one lane of its plan."""

    lane: str
    # drop | raise: the shim leaves the lane on the branch; blocked | keep | hold | unknown: the
    # lane keeps it (the plan said so, or the branch could not move it)
    step: LaneStep
    # the lane file, relative to the project
    file: str = ""
    # what changed ("tilelang==0.1.8 → tilelang==0.1.15", "lock: tilelang 0.1.8 → 0.1.15")
    changes: tuple[str, ...] = ()
    # why the lane keeps the shim: the blocker, the hold's until, the unknown's action
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "step", LaneStep(self.step))

    @property
    def left(self) -> bool:
        """The shim leaves this lane on the branch."""
        return self.step in (LaneStep.DROP, LaneStep.RAISE)


@dataclass(frozen=True)
class TreeEdit:
    """What the edit of one worktree did."""

    # "lanes/cpu.toml: …" lines
    changes: tuple[str, ...] = ()
    # names of the lanes whose locks were re-made
    relocked: tuple[str, ...] = ()
    # "lane: dist old → new" lines
    notes: tuple[str, ...] = ()
    # per lane, for a plan that names its lanes
    moves: tuple[LaneMove, ...] = ()
    # shims/<id>/ was deleted (no lane lists the id any more)
    folder_removed: bool = True
    # how many relock calls the branch made (one at most)
    relock_calls: int = 0


def lock_versions(locks_dir: Path, lane: str) -> dict[str, str]:
    """{canonical name: version} of a lane's lock (a revision: its version label, else
    ``@ commit``)."""
    found: dict[str, str] = {}
    lock = locking.read_lock(locking.lock_path(locks_dir, lane)) or {}
    for package in lock.get("packages", []):
        name = str(canonicalize_name(str(package.get("name", ""))))
        vcs = package.get("vcs") if isinstance(package.get("vcs"), dict) else {}
        version = package.get("version") or (
            f"@ {str(vcs['commit-id'])[:10]}" if vcs.get("commit-id") else None
        )
        if version is not None:
            found[name] = str(version)
    return found


def _named(lane: Lane) -> set[str]:
    names = set()
    for text in (*lane.requirements, *lane.constraints, *lane.overrides):
        with contextlib.suppress(InvalidRequirement):
            names.add(str(canonicalize_name(Requirement(text).name)))
    return names


def _floors(verdict: LaneVerdict) -> dict[str, str]:
    """A raise lane's floors as {canonical dist: version}."""
    return {floor.distribution: str(floor.version) for floor in verdict.floors}


@dataclass
class _File:
    """One lane file the branch edits, and what it needs to be put back."""

    path: str
    text: str
    leaving: list[LaneVerdict]
    members: list[Lane]
    changes: list[str] = field(default_factory=list)
    upgrades: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _coupled(file: _File, shim_id: str) -> str | None:
    """Why a matrix file's leaving cells keep the shim: another cell of it does not leave."""
    leaving = {v.lane for v in file.leaving}
    staying = [m.name for m in file.members if shim_id in m.shims and m.name not in leaving]
    if not staying:
        return None
    return f"{file.path}'s cells share one shim list; {', '.join(staying)} keep(s) it"


def _edit_file(tree: Project, file: _File, shim_id: str) -> str | None:
    """Edit one lane file in place; None, or why it cannot be edited (the lanes keep the shim)."""
    members = {m.name: m for m in file.members}
    moved = {r.distribution for m in file.members for r in m.revisions}
    raises = [v for v in file.leaving if v.step == LaneStep.RAISE]
    text_floors = {d: f for v in raises for d, f in _floors(v).items() if d not in moved}
    try:
        text, edits = edit_lane_text(file.text, shim_id, text_floors)
    except FloorConflictError as exc:
        return f"{file.path}: {exc}"
    for verdict in raises:
        floors = _floors(verdict)
        lane = members[verdict.lane]
        for dist, floor in floors.items():
            if dist not in moved and dist not in _named(lane):
                edited = add_constraint(text, f"{dist}>={floor}")
                if edited != text:
                    text = edited
                    edits.append(f"constraint {dist}>={floor} added")
            elif dist in moved:
                edits.append(f"{dist}: revision moved to its branch's newest commit")
        file.upgrades[verdict.lane] = tuple(floors)
    atomic_write(tree.root / file.path, text, within=tree.root)
    file.changes = [f"{file.path}: {e}" for e in edits]
    return None


def _plan_files(
    plan_lanes: Sequence[LaneVerdict], lanes: Sequence[Lane], shim_id: str
) -> tuple[list[_File], list[LaneMove]]:
    """The lane files to edit, and the moves already decided (lanes missing, or not carrying)."""
    by_name = {lane.name: lane for lane in lanes}
    files: dict[str, _File] = {}
    decided: list[LaneMove] = []
    for verdict in plan_lanes:
        lane = by_name.get(verdict.lane)
        if lane is None:
            why = "no such lane at the base commit"
            decided.append(LaneMove(verdict.lane, LaneStep.BLOCKED, verdict.file, reason=why))
            continue
        if shim_id not in lane.shims:
            why = "the lane does not list the shim at the base commit"
            decided.append(LaneMove(lane.name, LaneStep.KEEP, lane.file, reason=why))
            continue
        if lane.file not in files:
            members = [m for m in lanes if m.file == lane.file]
            files[lane.file] = _File(lane.file, "", [], members)
        files[lane.file].leaving.append(verdict)
    return list(files.values()), decided


def _put_back(tree: Project, file: _File, saved: Mapping[str, bytes | None]) -> None:
    """A lane file and its lanes' locks as they were at the base."""
    atomic_write(tree.root / file.path, file.text, within=tree.root)
    for member in file.members:
        path = locking.lock_path(tree.locks_dir, member.name)
        before = saved.get(member.name)
        if before is not None:
            atomic_write(path, before.decode("utf-8"), within=tree.root)


def _relock_problem(file: _File, results: Mapping[str, LockResult], locks_dir: Path) -> str | None:
    """Why the file must go back (a lane of it did not re-lock, or re-locked below a floor), or
    None."""
    for member in file.members:
        result = results.get(member.name)
        if result is not None and not result.ok:
            return f"re-locking {member.name} failed: {result.status} {result.message}"
    for verdict in file.leaving:
        if verdict.step != LaneStep.RAISE:
            continue
        now = lock_versions(locks_dir, verdict.lane)
        moved = {r.distribution for m in file.members for r in m.revisions}
        for dist, floor in _floors(verdict).items():
            version = now.get(dist)
            with contextlib.suppress(InvalidVersion):
                if version and dist not in moved and Version(version) < Version(floor):
                    return f"{verdict.lane} still locks {dist} {version}, below {floor}"
    return None


def _lock_notes(
    lanes: Sequence[str],
    floors: Mapping[str, set[str]],
    before: Mapping[str, dict[str, str]],
    locks_dir: Path,
) -> dict[str, list[str]]:
    """Per lane: "lock: dist old → new" for the floored targets the re-lock moved."""
    notes: dict[str, list[str]] = {}
    for lane in lanes:
        now = lock_versions(locks_dir, lane)
        for dist in sorted(floors.get(lane, ())):
            old, new = before.get(lane, {}).get(dist), now.get(dist)
            if old != new:
                notes.setdefault(lane, []).append(f"lock: {dist} {old or '—'} → {new or '—'}")
    return notes


def move_lanes(
    tree: Project, shim_id: str, plan_lanes: Sequence[LaneVerdict], relock: Relock
) -> TreeEdit:
    """Edit, re-lock (once) and, where a lane cannot move, put back the plan's lanes in ``tree``;
    say whether ``shims/<shim_id>/`` leaves the catalogue (no lane lists it any more)."""
    before = _load(tree)
    files, moves = _plan_files(plan_lanes, before, shim_id)
    edited: list[_File] = []
    for file in files:
        file.text = (tree.root / file.path).read_text(encoding="utf-8")
        coupled = _coupled(file, shim_id)
        why = coupled or _edit_file(tree, file, shim_id)
        if why is None:
            edited.append(file)
            continue
        step = LaneStep.KEEP if coupled else LaneStep.BLOCKED
        moves += [LaneMove(v.lane, step, file.path, reason=why) for v in file.leaving]
    after = {lane.name: lane for lane in _load(tree)}
    old = {lane.name: lane for lane in before}
    upgrades = {k: v for f in edited for k, v in f.upgrades.items()}
    todo = [
        lane
        for f in edited
        for m in f.members
        if (lane := after.get(m.name)) is not None
        and (lane.digest != old[m.name].digest or m.name in upgrades)
        and locking.lock_path(tree.locks_dir, m.name).is_file()
    ]
    saved = {
        m.name: _read_bytes(locking.lock_path(tree.locks_dir, m.name))
        for f in edited
        for m in f.members
    }
    versions = {lane.name: lock_versions(tree.locks_dir, lane.name) for lane in todo}
    results = {r.lane: r for r in relock(todo, upgrades)} if todo else {}
    floored = {v.lane: set(_floors(v)) for f in edited for v in f.leaving}
    notes = _lock_notes([lane.name for lane in todo], floored, versions, tree.locks_dir)
    changes: list[str] = []
    relocked: list[str] = []
    put_back: set[str] = set()
    for file in edited:
        problem = _relock_problem(file, results, tree.locks_dir)
        if problem is not None:
            _put_back(tree, file, saved)
            put_back.add(file.path)
            moves += [
                LaneMove(v.lane, LaneStep.BLOCKED, file.path, reason=problem) for v in file.leaving
            ]
            continue
        changes += file.changes
        relocked += [m.name for m in file.members if m.name in results]
        for verdict in file.leaving:
            lane_changes = (*file.changes, *notes.get(verdict.lane, ()))
            moves.append(LaneMove(verdict.lane, verdict.step, file.path, lane_changes))
    # the lanes as they end up: edited, or put back as they were
    final = [
        *(m for m in after.values() if m.file not in put_back),
        *(m for m in before if m.file in put_back),
    ]
    removed = _remove_folder(tree, shim_id, final)
    order = {v.lane: i for i, v in enumerate(plan_lanes)}
    moves.sort(key=lambda m: order.get(m.lane, len(order)))
    return TreeEdit(
        tuple(changes),
        tuple(relocked),
        tuple(
            f"{lane}: {n.removeprefix('lock: ')}" for lane in relocked for n in notes.get(lane, ())
        ),
        tuple(moves),
        removed,
        1 if todo else 0,
    )


def _read_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _load(tree: Project) -> list[Lane]:
    if not tree.lanes_dir.is_dir():
        return []
    return lanefile.load_lanes(tree.lanes_dir, root=tree.root)


def _remove_folder(tree: Project, shim_id: str, lanes: Sequence[Lane]) -> bool:
    """Whether the shim leaves the catalogue: no lane lists the id any more. The caller turns
    ``shims/<id>/`` into a guard (:func:`retire.branches.guards.leave_guard`)."""
    return not any(shim_id in lane.shims for lane in lanes)
