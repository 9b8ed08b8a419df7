"""Auto-drop: turn a *retire* decision into a branch with the evidence, for a human to merge.

For each :class:`DropPlan`, in a separate git worktree under ``.patchlane/worktrees/`` (the
user's checkout, index and current branch are never touched):

1. ``shims/<id>/`` is removed;
2. every lane file drops the id from its ``shims`` lists and gets its requirement floors raised
   (tomlkit: comments, order and formatting of everything else survive byte for byte);
3. the locks of lanes whose definition changed are re-made with ``retire.locking``; if a lane
   cannot be re-locked the branch is abandoned and nothing is created;
4. one commit whose message says why, and the branch ``patchlane/retire-<id>`` pointing at it;
5. the PR body (Markdown, with the evidence) is saved as ``.patchlane/prs/<branch>.md`` and,
   with a token and a reachable API, the branch is pushed and a pull request opened. patchlane
   never merges.

Running twice creates nothing new: a branch whose tree equals what would be committed is
reported as *already proposed*. Work happens in try/finally; a run killed outright leaves at
most a worktree folder, which the next run removes (with ``git worktree prune``) before it starts.

The floor rule and the lane edits live in :mod:`retire.lanedit`.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.bisect.result import BisectResult
from retire.branches import proposals
from retire.branches.proposals import BranchStatus
from retire.core.atomic import atomic_write
from retire.core.errors import InputError, PatchlaneError
from retire.core.git import GitError, toplevel
from retire.core.project import Project, contained
from retire.lanes import lanefile
from retire.lanes.lanedit import FloorConflictError, add_constraint, edit_lane_text, raise_floor
from retire.lanes.model import SHIM_ID, Lane
from retire.locks import locking
from shims.model import ShimManifest

__all__ = [
    "BRANCH_PREFIX",
    "AbortedError",
    "DropOutcome",
    "DropPlan",
    "DropStatus",
    "FloorConflictError",
    "apply",
    "edit_lane_text",
    "plan_from_bisect",
    "raise_floor",
]

BRANCH_PREFIX = "patchlane/retire-"
_TRAILER = "Patchlane-Retire"


# ---------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class DropPlan:
    """One retire decision: which shim goes, why, and the floors that replace it.

    ``floors`` maps a distribution to the first fixed version (``{"megatron-core": "0.18.0"}``),
    or lists floors as requirements (``("megatron-core>=0.18.0",)``, a Verdict's ``floors``);
    ``upstream_links`` holds URLs, or ``(role, url)`` pairs.
    """

    shim_id: str
    why: str
    floors: Mapping[str, str] | Sequence[str] = field(default_factory=dict)
    evidence_markdown: str = ""
    upstream_links: tuple[str | tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not SHIM_ID.fullmatch(self.shim_id):
            raise InputError(
                None, "shim", f"invalid shim id {self.shim_id!r}", "ids match [a-z][a-z0-9_]*"
            )
        object.__setattr__(self, "floors", _floor_versions(self.floors))
        object.__setattr__(self, "upstream_links", _link_pairs(self.upstream_links))

    @property
    def floor_versions(self) -> dict[str, str]:
        """``floors`` as {canonical distribution: version}, sorted."""
        return _floor_versions(self.floors)

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        """``upstream_links`` as (role, URL) pairs."""
        return _link_pairs(self.upstream_links)

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.shim_id

    @property
    def floor_specs(self) -> list[str]:
        return [f"{dist}>={version}" for dist, version in self.floor_versions.items()]

    def identity(self, base_commit: str) -> str:
        """What decides the branch's tree: the shim, the floors, the base commit."""
        blob = json.dumps([self.shim_id, self.floor_versions, base_commit], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DropPlan:
        """A plan from its JSON form (KeyError / TypeError say what is missing or wrong)."""
        floors = data.get("floors", {})
        if not isinstance(floors, Mapping | list | tuple):
            raise TypeError(f"floors: not an object or a list: {floors!r}")
        links = [
            tuple(link) if isinstance(link, list) else link
            for link in _sequence(data.get("upstream_links", ()))
        ]
        return cls(
            _text(data["shim_id"]),
            _text(data.get("why", "")),
            floors,
            _text(data.get("evidence_markdown", "")),
            _link_pairs(links),
        )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _sequence(value: object) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"not a list: {value!r}")
    return value


def _floor_versions(floors: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """{canonical distribution: version}, sorted, from a mapping or ``dist>=version`` specs."""
    pairs = floors.items() if isinstance(floors, Mapping) else map(_floor_pair, floors)
    found: dict[str, str] = {}
    for dist, version in pairs:
        try:
            found[str(canonicalize_name(dist))] = str(Version(str(version)))
        except InvalidVersion:
            raise InputError(
                None,
                f"floors.{dist}",
                f"not a version: {version!r}",
                'use a release like "0.18.0"',
            ) from None
    return dict(sorted(found.items()))


def _link_pairs(links: Iterable[object]) -> tuple[tuple[str, str], ...]:
    """(role, URL) pairs; a bare URL has the role ``link``."""
    pairs: list[tuple[str, str]] = []
    for link in links:
        if isinstance(link, str):
            pairs.append(("link", link))
        elif isinstance(link, list | tuple):
            pairs.append((str(link[0]), str(link[1])))
        else:
            raise TypeError(f"not a link: {link!r}")
    return tuple(pairs)


def _floor_pair(spec: str) -> tuple[str, str]:
    try:
        req = Requirement(spec)
        [clause] = list(req.specifier)
    except (InvalidRequirement, ValueError):
        raise InputError(
            None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"'
        ) from None
    if clause.operator != ">=":
        raise InputError(
            None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"'
        )
    return req.name, clause.version


def plan_from_bisect(result: BisectResult, manifest: ShimManifest) -> DropPlan:
    """A plan from a bisection that proved a fixed release (``retire.bisect.BisectResult``)."""
    if not result.floor or result.first_fixed is None:
        raise AbortedError(
            f"the bisection of {result.distribution} proposes no floor: {result.summary()}"
        )
    return DropPlan(
        manifest.id,
        why=f"{manifest.title}: fixed upstream in {result.distribution} {result.first_fixed} "
        f"(the reproducer no longer reproduces without the shim).",
        floors={result.distribution: result.first_fixed},
        evidence_markdown=result.markdown(),
        upstream_links=tuple((link.role, link.url) for link in manifest.upstream.links),
    )


class DropStatus(enum.StrEnum):
    """What happened to one plan: the branch's :class:`BranchStatus`, or aborted."""

    PROPOSED = "proposed"
    ALREADY_PROPOSED = "already-proposed"
    EXISTS_DIFFERS = "exists-differs"
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
    # opened | exists | skipped: … | failed: … | not-requested
    pr_status: str = "not-requested"
    pr_url: str | None = None

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


def _step(ctx: _Context, plan: DropPlan, name: str) -> None:
    if ctx.on_step:
        ctx.on_step(plan.shim_id, name)


def _lock_versions(locks_dir: Path, lane: str, dist: str) -> str | None:
    for package in (locking.read_lock(locking.lock_path(locks_dir, lane)) or {}).get(
        "packages", []
    ):
        if canonicalize_name(package.get("name", "")) == dist:
            version = package.get("version")
            return str(version) if version is not None else None
    return None


def _names(lane: Lane) -> set[str]:
    names = set()
    for text in (*lane.requirements, *lane.constraints, *lane.overrides):
        with contextlib.suppress(InvalidRequirement):
            names.add(str(canonicalize_name(Requirement(text).name)))
    return names


@dataclass(frozen=True)
class TreeEdit:
    """What the edit of one worktree did."""

    # "lanes/cpu.toml: …" lines
    changes: tuple[str, ...] = ()
    # names of the lanes whose locks were re-made
    relocked: tuple[str, ...] = ()
    # "lane: dist old → new" lines
    notes: tuple[str, ...] = ()


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


def _relock(plan: DropPlan, lanes: Sequence[Lane], locks_dir: Path) -> list[str]:
    """Re-make the locks; every lane must lock at or above the floors. The notes say what moved."""
    floors = plan.floor_versions
    old = {
        (lane.name, d): _lock_versions(locks_dir, lane.name, d) for lane in lanes for d in floors
    }
    failed = [r for r in locking.lock_lanes(list(lanes), locks_dir) if not r.ok]
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


def _edit_tree(ctx: _Context, plan: DropPlan, work: Path) -> TreeEdit:
    """Make the change inside the worktree: shim removed, lanes edited, locks re-made."""
    # the proposal's worktree is a project with the same layout ([catalogue] path included)
    tree = Project(work)
    shim_dir = _shim_dir(ctx, plan, tree)
    before = {lane.name: lane for lane in _load_lanes(tree)}
    shutil.rmtree(shim_dir)
    _step(ctx, plan, "shim-removed")
    changes: list[str] = []
    if tree.lanes_dir.is_dir():
        changes += _drop_from_lane_files(plan, tree.lanes_dir)
        changes += _constrain_dependencies(plan, tree)
    _step(ctx, plan, "lanes-edited")
    relock = _to_relock(before, _edited_lanes(tree), tree.locks_dir)
    notes = _relock(plan, relock, tree.locks_dir) if relock else []
    _step(ctx, plan, "locked")
    return TreeEdit(tuple(changes), tuple(lane.name for lane in relock), tuple(notes))


def commit_message(
    plan: DropPlan, changes: Sequence[str], relocked: Sequence[str], base: str
) -> str:
    first = plan.why.strip().splitlines()[0] if plan.why.strip() else "upstream fixed the bug"
    lines = [f"Retire shim {plan.shim_id}: {first}"[:72], "", plan.why.strip() or first, ""]
    if plan.floor_versions:
        lines.append("Floors: " + ", ".join(plan.floor_specs))
    if plan.links:
        lines.append("Upstream:")
        lines += [f"- {role}: {url}" for role, url in plan.links]
    if changes:
        lines.append("Lanes:")
        lines += [f"- {c}" for c in changes]
    if relocked:
        lines.append("Locks re-made: " + ", ".join(relocked))
    summary = _evidence_summary(plan.evidence_markdown)
    if summary:
        lines += ["", "Evidence:", summary]
    lines += ["", f"{_TRAILER}: {plan.shim_id} {plan.identity(base)}"]
    return "\n".join(lines) + "\n"


def _evidence_summary(markdown: str) -> str:
    """The first paragraph of the evidence that is prose, not a heading or table."""
    for block in markdown.split("\n\n"):
        text = " ".join(
            line.strip()
            for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith(("#", "|", "```"))
        )
        if text:
            return text[:600]
    return ""


def pr_body(
    plan: DropPlan, changes: Sequence[str], relocked: Sequence[str], lock_notes: Sequence[str]
) -> str:
    lines = [
        f"## Retire shim `{plan.shim_id}`",
        "",
        plan.why.strip(),
        "",
        "### What this branch changes",
        "",
        f"- removes `shims/{plan.shim_id}/`",
    ]
    lines += [f"- {c}" for c in changes]
    if relocked:
        lines.append(f"- locks re-made: {', '.join(f'`locks/{n}/pylock.toml`' for n in relocked)}")
        lines += [f"  - {n}" for n in lock_notes]
    if plan.floor_versions:
        lines += ["", "Retirement floor: " + ", ".join(f"`{s}`" for s in plan.floor_specs)]
    if plan.links:
        lines += ["", "### Upstream", ""] + [f"- {role}: {url}" for role, url in plan.links]
    if plan.evidence_markdown.strip():
        lines += ["", "### Evidence", "", plan.evidence_markdown.strip()]
    lines += [
        "",
        "---",
        (
            "Proposed by `patchlane retire --apply`. patchlane never merges: review the evidence, "
            "let CI run the lanes, then merge by hand."
        ),
    ]
    return "\n".join(lines) + "\n"


def _propose(ctx: _Context, plan: DropPlan) -> DropOutcome:
    # what the edit did, when it ran (an already-proposed branch needs no edit)
    edited: list[TreeEdit] = []

    def edit(work: Path) -> str:
        _step(ctx, plan, "worktree")
        edited.append(_edit_tree(ctx, plan, work))
        return commit_message(plan, edited[0].changes, edited[0].relocked, ctx.base_commit)

    marker = f"{_TRAILER}: {plan.shim_id} {plan.identity(ctx.base_commit)}"
    branch = proposals.propose_branch(
        ctx.repo,
        base_commit=ctx.base_commit,
        branch=plan.branch,
        marker=marker,
        folder=f"retire-{plan.shim_id}",
        edit=edit,
    )
    done = edited[0] if edited else TreeEdit()
    outcome = DropOutcome(
        plan.shim_id,
        plan.branch,
        DropStatus(branch.status),
        branch.reason,
        branch.commit,
        done.changes,
        done.relocked,
    )
    if branch.status != BranchStatus.PROPOSED:
        return outcome
    _step(ctx, plan, "committed")
    body = pr_body(plan, done.changes, done.relocked, done.notes)
    return replace(outcome, pr_body_path=str(proposals.save_body(ctx.repo, plan.branch, body)))


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
    body = (
        body_path.read_text(encoding="utf-8")
        if body_path.is_file()
        else pr_body(plan, outcome.lane_changes, outcome.locks_remade, ())
    )
    title = f"Retire shim {plan.shim_id}" + (
        f" ({', '.join(plan.floor_specs)})" if plan.floor_versions else ""
    )
    status, url = proposals.open_pull_request(
        repo,
        branch=plan.branch,
        base_branch=target.base_branch,
        title=title,
        body=body,
        repository=target.repository,
        api_base=target.api_base,
        remote=target.remote,
        client=target.client,
        token=target.token,
    )
    return replace(outcome, pr_status=status, pr_url=url)


def apply(
    project: str | os.PathLike[str],
    plans: Iterable[DropPlan],
    *,
    base: str = "HEAD",
    open_prs: bool = True,
    repository: str | None = None,
    api_base: str | None = None,
    remote: str = "origin",
    client: httpx.Client | None = None,
    token: str | None = None,
    on_step: Callable[[str, str], None] | None = None,
    pr_base: str | None = None,
) -> list[DropOutcome]:
    """Propose one branch per plan. Never touches the checkout; never merges.

    With ``open_prs``, a token (``token`` or ``GITHUB_TOKEN``/``GH_TOKEN``) and a ``repository``
    (``owner/name``), each new or existing branch is pushed to ``remote`` (never forced) and a
    pull request is found or opened against ``pr_base`` (default: the branch ``base`` names, else
    ``main``).
    """
    repo = toplevel(project)
    base_commit, base_branch = proposals.base_of(repo, base, pr_base)
    ctx = _Context(repo, base_commit, base_branch, on_step)
    target = _PullRequestTarget(base_branch, repository, api_base, remote, client, token)
    outcomes = []
    # one proposing run per repository at a time
    with proposals.session(repo):
        for plan in plans:
            try:
                outcome = _propose(ctx, plan)
            except (AbortedError, GitError) as exc:
                outcome = DropOutcome(plan.shim_id, plan.branch, DropStatus.ABORTED, str(exc))
            if outcome.ok and open_prs:
                outcome = _open_pull_request(repo, plan, outcome, target)
            outcomes.append(outcome)
    return outcomes


# ---------------------------------------------------------------------------------------------
# CLI: `patchlane retire --apply` maps verdicts onto plans; this entry takes plans as JSON.
