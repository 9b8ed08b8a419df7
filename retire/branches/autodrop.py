"""Auto-drop: turn a *retire* decision into a branch with the evidence, for a human to merge.

For each :class:`DropPlan`, in a separate git worktree under ``.patchlane/worktrees/`` (the
user's checkout, index and current branch are never touched):

1. a plan made from a verdict names its lanes: exactly the lanes the shim leaves are edited and
   re-locked, once per branch, and a lane that cannot move is put back and reported *blocked*
   while the branch goes on without it; ``shims/<id>/`` is deleted only when no lane lists the
   id afterwards (:mod:`retire.branches.lanemoves`). A plan without lanes (a ``--plan`` file that
   names none, a bisection's plan) removes ``shims/<id>/``, drops the id from every lane file,
   raises every floor (a constraint where a lane holds the target only as a dependency) and is
   abandoned when one lane cannot be re-locked;
2. lane files are edited with tomlkit: comments, order and formatting of everything else survive
   byte for byte; every re-lock gets the command's mirrors and indexes;
3. one commit whose message says, per lane, what changed and which lanes keep the shim and why,
   and the branch ``patchlane/retire-<id>`` pointing at it;
4. the PR body (Markdown, with the evidence) is saved as ``.patchlane/prs/<branch>.md`` and,
   with a token and a reachable API, the branch is pushed and a pull request opened. patchlane
   never merges.

Running twice creates nothing new: a branch whose tree equals what would be committed is
reported as *already proposed*. Work happens in try/finally; a run killed outright leaves at
most a worktree folder, which the next run removes (with ``git worktree prune``) before it starts.

The floor rule and the lane edits live in :mod:`retire.lanes.lanedit`.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from retire.bisect.result import BisectResult
from retire.branches import guards, proposals
from retire.branches.dropmessage import TRAILER, commit_message, kept_moves, pr_body, title
from retire.branches.dropplan import BRANCH_PREFIX, DropPlan
from retire.branches.lanemoves import LaneMove, TreeEdit, lock_versions, move_lanes
from retire.branches.options import ApplyOptions
from retire.branches.proposals import BranchStatus
from retire.branches.prstatus import NOT_REQUESTED, PrStatus
from retire.core import uv
from retire.core.atomic import atomic_write
from retire.core.errors import InputError, PatchlaneError
from retire.core.git import GitError, toplevel
from retire.core.project import Project, contained
from retire.lanes import lanefile
from retire.lanes.lanedit import FloorConflictError, add_constraint, edit_lane_text, raise_floor
from retire.lanes.model import Lane
from retire.lanes.revisions import MirrorLookup
from retire.locks import locking
from retire.locks.locking import LockResult
from shims import times
from shims.model import ShimManifest

__all__ = [
    "BRANCH_PREFIX",
    "AbortedError",
    "DropOutcome",
    "DropPlan",
    "DropStatus",
    "FloorConflictError",
    "LaneMove",
    "apply",
    "edit_lane_text",
    "plan_from_bisect",
    "raise_floor",
]


# ---------------------------------------------------------------------------------------------
# Values


def plan_from_bisect(result: BisectResult, manifest: ShimManifest) -> DropPlan:
    """A plan from a bisection that proved a fixed release (``retire.bisect.BisectResult``)."""
    floor = result.floor
    if floor is None or result.first_fixed is None:
        raise AbortedError(
            f"the bisection of {result.distribution} proposes no floor: {result.summary()}"
        )
    return DropPlan(
        manifest.id,
        why=f"{manifest.title}: fixed upstream in {result.distribution} {result.first_fixed} "
        f"(the reproducer no longer reproduces without the shim).",
        floors=(floor,),
        evidence_markdown=result.markdown(),
        upstream_links=tuple((link.role, link.url) for link in manifest.upstream.links),
    )


class DropStatus(enum.StrEnum):
    """What happened to one plan: the branch's :class:`BranchStatus`, or aborted."""

    PROPOSED = "proposed"
    ALREADY_PROPOSED = "already-proposed"
    EXISTS_DIFFERS = "exists-differs"
    #: no lane of the plan could move (each was put back, with its reason): no branch
    BLOCKED = "blocked"
    #: the plan could not become a branch; nothing was created
    ABORTED = "aborted"


@dataclass(frozen=True)
class DropOutcome:
    """What happened to one plan."""

    shim_id: str
    branch: str
    status: DropStatus
    reason: str = ""
    commit: str | None = None
    # "lanes/cpu.toml: megatron-core>=0.15 → megatron-core>=0.18"
    lane_changes: tuple[str, ...] = ()
    # lane names
    locks_remade: tuple[str, ...] = ()
    pr_body_path: str | None = None
    pr_status: PrStatus = NOT_REQUESTED
    pr_url: str | None = None
    # a plan that names its lanes: per lane, what the branch did or why the lane keeps the shim
    lanes: tuple[LaneMove, ...] = ()
    # shims/<id>/ is deleted on the branch (None: no branch was made)
    folder_removed: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", DropStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status in (DropStatus.PROPOSED, DropStatus.ALREADY_PROPOSED)


class AbortedError(PatchlaneError):
    """The plan cannot become a branch; nothing was created."""


# ---------------------------------------------------------------------------------------------
# The branch


@dataclass(frozen=True)
class _Context:
    repo: Path
    base_commit: str
    base_branch: str
    on_step: Callable[[str, str], None] | None
    # every re-lock gets the command's location overrides
    mirrors: MirrorLookup | None = None
    host: uv.HostIndexes | None = None

    def relock(
        self, lanes: Sequence[Lane], locks_dir: Path, upgrades: Mapping[str, tuple[str, ...]]
    ) -> list[LockResult]:
        """One ``lock_lanes`` call for every lane the branch re-locks."""
        return locking.lock_lanes(
            list(lanes), locks_dir, host=self.host, mirrors=self.mirrors, lane_upgrades=upgrades
        )


def _step(ctx: _Context, plan: DropPlan, name: str) -> None:
    if ctx.on_step:
        ctx.on_step(plan.shim_id, name)


def _lock_versions(locks_dir: Path, lane: str, dist: str) -> str | None:
    return lock_versions(locks_dir, lane).get(dist)


def _names(lane: Lane) -> set[str]:
    names = set()
    for text in (*lane.requirements, *lane.constraints, *lane.overrides):
        with contextlib.suppress(InvalidRequirement):
            names.add(str(canonicalize_name(Requirement(text).name)))
    return names


def _shim_dir(ctx: _Context, plan: DropPlan, tree: Project) -> Path:
    """The folder of the shim to remove; there must be one at the base commit."""
    # removed with everything under it: never through a link
    shim_dir = contained(tree.root, tree.shims_dir / plan.shim_id)
    if not (shim_dir / "manifest.toml").is_file():
        raise AbortedError(
            f"{shim_dir.relative_to(tree.root).as_posix()}/ does not exist at "
            f"{ctx.base_commit[:12]}: nothing to retire"
        )
    return shim_dir


def _load_lanes(tree: Project, *, known_shims: set[str] | None = None) -> list[Lane]:
    if not tree.lanes_dir.is_dir():
        return []
    return lanefile.load_lanes(tree.lanes_dir, root=tree.root, known_shims=known_shims)


def _drop_from_lane_files(plan: DropPlan, lanes_dir: Path) -> list[str]:
    """Every lane file: the shim out of its ``shims`` lists, its floors raised."""
    changes: list[str] = []
    for path in sorted(lanes_dir.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        try:
            new, edits = edit_lane_text(text, plan.shim_id, plan.floor_versions)
        except FloorConflictError as exc:
            raise AbortedError(f"lanes/{path.name}: {exc}") from None
        if edits:
            atomic_write(path, new, within=lanes_dir.parent)
            changes += [f"lanes/{path.name}: {e}" for e in edits]
    return changes


def _constrain_dependencies(plan: DropPlan, tree: Project) -> list[str]:
    """Lanes that hold a floored distribution only as a dependency, locked below the floor, get
    a constraint."""
    changes: list[str] = []
    for lane in _load_lanes(tree):
        for dist, floor in plan.floor_versions.items():
            locked_version = _lock_versions(tree.locks_dir, lane.name, dist)
            if (
                not locked_version
                or dist in _names(lane)
                or Version(locked_version) >= Version(floor)
            ):
                continue
            file = tree.root / lane.file
            text = file.read_text(encoding="utf-8")
            edited = add_constraint(text, f"{dist}>={floor}")
            # a matrix's cells share one base: constrain it once
            if edited != text:
                atomic_write(file, edited, within=tree.root)
                changes.append(
                    f"lanes/{file.name}: constraint {dist}>={floor} added "
                    f"(lane {lane.name} locks {dist} {locked_version})"
                )
    return changes


def _edited_lanes(tree: Project) -> list[Lane]:
    """The lanes as edited, checked against the shims that remain."""
    remaining = {p.parent.name for p in tree.shims_dir.glob("*/manifest.toml")}
    try:
        return _load_lanes(tree, known_shims=remaining)
    except InputError as exc:
        raise AbortedError(f"the edited lanes do not load: {exc}") from None


def _to_relock(before: Mapping[str, Lane], after: Sequence[Lane], locks_dir: Path) -> list[Lane]:
    """Locked lanes whose definition the edit changed."""
    return [
        lane
        for lane in after
        if lane.name in before
        and before[lane.name].digest != lane.digest
        and locking.lock_path(locks_dir, lane.name).is_file()
    ]


def _relock(ctx: _Context, plan: DropPlan, lanes: Sequence[Lane], locks_dir: Path) -> list[str]:
    """Re-make the locks; every lane must lock at or above the floors. The notes say what moved."""
    floors = plan.floor_versions
    old = {
        (lane.name, d): _lock_versions(locks_dir, lane.name, d) for lane in lanes for d in floors
    }
    failed = [r for r in ctx.relock(lanes, locks_dir, {}) if not r.ok]
    if failed:
        raise AbortedError(
            "re-locking failed: " + "; ".join(f"{r.lane}: {r.status} {r.message}" for r in failed)
        )
    notes: list[str] = []
    for lane in lanes:
        for dist, floor in floors.items():
            new_version = _lock_versions(locks_dir, lane.name, dist)
            if new_version and Version(new_version) < Version(floor):
                raise AbortedError(
                    f"lane {lane.name} still locks {dist} {new_version} below the floor {floor}"
                )
            if new_version != old[(lane.name, dist)]:
                notes.append(
                    f"{lane.name}: {dist} {old[(lane.name, dist)] or '—'} → {new_version or '—'}"
                )
    return notes


def _leave_guard(ctx: _Context, plan: DropPlan, shim_dir: Path, carried: Sequence[str]) -> None:
    """The shim's patch goes; its reproducer stays as a guard in the lanes that carried it."""
    guards.leave_guard(
        shim_dir,
        reason=plan.why,
        patch_commit=ctx.base_commit,
        lanes=carried,
        retired=times.now().date(),
    )


def _edit_lanes(ctx: _Context, plan: DropPlan, tree: Project) -> TreeEdit:
    """A plan that names its lanes: exactly those lanes edited, re-locked once, put back where
    they cannot move; the shim becomes a guard only when no lane lists it any more."""
    shim_dir = _shim_dir(ctx, plan, tree)
    carried = [lane.name for lane in _load_lanes(tree) if plan.shim_id in lane.shims]
    done = move_lanes(
        tree,
        plan.shim_id,
        plan.lanes or (),
        lambda lanes, upgrades: ctx.relock(lanes, tree.locks_dir, upgrades),
    )
    _step(ctx, plan, "lanes-edited")
    _step(ctx, plan, "locked")
    if done.folder_removed:
        _leave_guard(ctx, plan, shim_dir, carried)
        _step(ctx, plan, "shim-removed")
    return done


def _edit_tree(ctx: _Context, plan: DropPlan, work: Path) -> TreeEdit:
    """Make the change inside the worktree: shim removed, lanes edited, locks re-made."""
    # the proposal's worktree is a project with the same layout ([catalogue] path included)
    tree = Project(work)
    if plan.per_lane:
        return _edit_lanes(ctx, plan, tree)
    shim_dir = _shim_dir(ctx, plan, tree)
    before = {lane.name: lane for lane in _load_lanes(tree)}
    carried = [lane.name for lane in before.values() if plan.shim_id in lane.shims]
    _leave_guard(ctx, plan, shim_dir, carried)
    _step(ctx, plan, "shim-removed")
    changes: list[str] = []
    if tree.lanes_dir.is_dir():
        changes += _drop_from_lane_files(plan, tree.lanes_dir)
        changes += _constrain_dependencies(plan, tree)
    _step(ctx, plan, "lanes-edited")
    relock = _to_relock(before, _edited_lanes(tree), tree.locks_dir)
    notes = _relock(ctx, plan, relock, tree.locks_dir) if relock else []
    _step(ctx, plan, "locked")
    return TreeEdit(
        tuple(changes),
        tuple(lane.name for lane in relock),
        tuple(notes),
        relock_calls=1 if relock else 0,
    )


def _propose(ctx: _Context, plan: DropPlan) -> DropOutcome:
    # what the edit did, when it ran (an already-proposed branch needs no edit)
    edited: list[TreeEdit] = []

    def edit(work: Path) -> str | None:
        _step(ctx, plan, "worktree")
        done = _edit_tree(ctx, plan, work)
        edited.append(done)
        if plan.per_lane and not done.changes and not done.folder_removed:
            # every lane was put back: nothing to propose
            return None
        return commit_message(plan, done, ctx.base_commit)

    marker = f"{TRAILER}: {plan.shim_id} {plan.identity(ctx.base_commit)}"
    branch = proposals.propose_branch(
        ctx.repo,
        base_commit=ctx.base_commit,
        branch=plan.branch,
        marker=marker,
        folder=f"retire-{plan.shim_id}",
        edit=edit,
        # saved before the branch exists: never a branch without its body
        body=lambda: pr_body(plan, edited[0]),
    )
    done = edited[0] if edited else _planned(plan)
    blocked = branch.status == BranchStatus.UNCHANGED
    outcome = DropOutcome(
        plan.shim_id,
        plan.branch,
        DropStatus.BLOCKED if blocked else DropStatus(branch.status),
        "no lane of the plan could move: " + _blocked_reasons(done) if blocked else branch.reason,
        branch.commit,
        done.changes,
        done.relocked,
        lanes=(*done.moves, *kept_moves(plan)) if plan.per_lane else (),
        folder_removed=None if blocked else done.folder_removed,
    )
    if branch.status != BranchStatus.PROPOSED:
        return outcome
    _step(ctx, plan, "committed")
    return replace(outcome, pr_body_path=str(branch.body_path))


def _planned(plan: DropPlan) -> TreeEdit:
    """What an already proposed branch did, as its plan says (the branch is not edited again)."""
    moves = tuple(
        LaneMove(lane.lane, lane.step, lane.file, tuple(map(str, lane.floors)))
        for lane in plan.lanes or ()
    )
    return TreeEdit(moves=moves, folder_removed=not plan.keeping)


def _blocked_reasons(done: TreeEdit) -> str:
    return "; ".join(f"{m.lane}: {m.reason}" for m in done.moves if not m.left) or "none left"


@dataclass(frozen=True)
class _PullRequestTarget:
    """Where the pull requests of one run go."""

    base_branch: str
    repository: str | None
    api_base: str | None
    remote: str
    client: httpx.Client | None
    token: str | None


def _open_pull_request(
    repo: Path, plan: DropPlan, outcome: DropOutcome, target: _PullRequestTarget
) -> DropOutcome:
    """Push the branch and find or open its pull request, with the saved body."""
    body_path = repo / proposals.PRS_DIR / f"{plan.branch}.md"
    edit = TreeEdit(
        outcome.lane_changes,
        outcome.locks_remade,
        moves=tuple(m for m in outcome.lanes if m.left),
        folder_removed=outcome.folder_removed is not False,
    )
    body = body_path.read_text(encoding="utf-8") if body_path.is_file() else pr_body(plan, edit)
    status, url = proposals.open_pull_request(
        repo,
        branch=plan.branch,
        base_branch=target.base_branch,
        title=title(plan, edit),
        body=body,
        repository=target.repository,
        api_base=target.api_base,
        remote=target.remote,
        client=target.client,
        token=target.token,
    )
    return replace(outcome, pr_status=status, pr_url=url)


def _check_faults(repo: Path, project: Project, base_commit: str) -> None:
    """Before the first change: the files the verdicts were decided from are the base's."""
    config = project.root / "patchlane.toml"
    proposals.check_tree(
        repo, base_commit, (project.lanes_dir, project.shims_dir, project.locks_dir, config)
    )


DEFAULT_APPLY = ApplyOptions()


def apply(
    project: str | os.PathLike[str],
    plans: Iterable[DropPlan],
    options: ApplyOptions = DEFAULT_APPLY,
    *,
    on_step: Callable[[str, str], None] | None = None,
) -> list[DropOutcome]:
    """Propose one branch per plan. Never touches the checkout; never merges.

    ``options.mirrors`` (this host's git mirrors, for lanes pinned to revisions) and
    ``options.host`` (the index URLs; default: this host's uv configuration) reach every re-lock
    the branches make.

    With ``open_prs``, a token (``token`` or ``GITHUB_TOKEN``/``GH_TOKEN``) and a ``repository``
    (``owner/name``), each new or existing branch is pushed to ``remote`` (never forced) and a
    pull request is found or opened against ``pr_base`` (default: the branch ``base`` names, else
    ``main``).
    """
    o = options
    repo = toplevel(project)
    base_commit, base_branch = proposals.base_of(repo, o.base, o.pr_base)
    plans = list(plans)
    if plans:
        _check_faults(repo, Project(Path(project)), base_commit)
    ctx = _Context(repo, base_commit, base_branch, on_step, o.mirrors, o.host)
    target = _PullRequestTarget(base_branch, o.repository, o.api_base, o.remote, o.client, o.token)
    outcomes = []
    # one proposing run per repository at a time; every output checked before the first change
    with proposals.session(repo, [plan.branch for plan in plans]):
        for plan in plans:
            try:
                outcome = _propose(ctx, plan)
            except (AbortedError, GitError) as exc:
                outcome = DropOutcome(plan.shim_id, plan.branch, DropStatus.ABORTED, str(exc))
            if outcome.ok and o.open_prs:
                outcome = _open_pull_request(repo, plan, outcome, target)
            outcomes.append(outcome)
    return outcomes
