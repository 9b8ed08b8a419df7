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
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.branches import proposals
from retire.core.atomic import atomic_write
from retire.core.errors import InputError, PatchlaneError
from retire.core.git import GitError, toplevel
from retire.lanes.lanedit import FloorConflictError, add_constraint, edit_lane_text, raise_floor
from retire.lanes.model import SHIM_ID

__all__ = [
    "BRANCH_PREFIX",
    "DropOutcome",
    "DropPlan",
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
    floors: Mapping[str, str] = field(default_factory=dict)
    evidence_markdown: str = ""
    upstream_links: tuple = ()

    def __post_init__(self) -> None:
        if not SHIM_ID.fullmatch(self.shim_id):
            raise InputError(
                None, "shim", f"invalid shim id {self.shim_id!r}", "ids match [a-z][a-z0-9_]*"
            )
        floors = {}
        pairs = (
            self.floors.items()
            if isinstance(self.floors, Mapping)
            else map(_floor_pair, self.floors)
        )
        for dist, version in pairs:
            try:
                floors[str(canonicalize_name(dist))] = str(Version(str(version)))
            except InvalidVersion:
                raise InputError(
                    None,
                    f"floors.{dist}",
                    f"not a version: {version!r}",
                    'use a release like "0.18.0"',
                ) from None
        links = tuple(
            (("link", l) if isinstance(l, str) else (str(l[0]), str(l[1])))
            for l in self.upstream_links
        )
        object.__setattr__(self, "floors", dict(sorted(floors.items())))
        object.__setattr__(self, "upstream_links", links)

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.shim_id

    @property
    def floor_specs(self) -> list[str]:
        return [f"{dist}>={version}" for dist, version in self.floors.items()]

    def identity(self, base_commit: str) -> str:
        """What decides the branch's tree: the shim, the floors, the base commit."""
        blob = json.dumps([self.shim_id, self.floors, base_commit], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Mapping) -> DropPlan:
        links = [tuple(l) if isinstance(l, list) else l for l in data.get("upstream_links", ())]
        return cls(
            data["shim_id"],
            data.get("why", ""),
            data.get("floors", {}),
            data.get("evidence_markdown", ""),
            tuple(links),
        )


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


def plan_from_bisect(result, manifest) -> DropPlan:
    """A plan from a bisection that proved a fixed release (``retire.bisect.BisectResult``)."""
    if not result.floor:
        raise Aborted(
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


@dataclass(frozen=True)
class DropOutcome:
    """What happened to one plan. ``status``: proposed, already-proposed, exists-differs,
    aborted."""

    shim_id: str
    branch: str
    status: str
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

    @property
    def ok(self) -> bool:
        return self.status in ("proposed", "already-proposed")


class Aborted(PatchlaneError):
    """The plan cannot become a branch; nothing was created."""


# ---------------------------------------------------------------------------------------------
# The branch


@dataclass
class _Context:
    repo: Path
    base_commit: str
    base_branch: str
    on_step: Callable[[str, str], None] | None


def _step(ctx: _Context, plan: DropPlan, name: str) -> None:
    if ctx.on_step:
        ctx.on_step(plan.shim_id, name)


def _lock_versions(locks_dir: Path, lane: str, dist: str) -> str | None:
    from retire.locks.locking import lock_path, read_lock

    for package in (read_lock(lock_path(locks_dir, lane)) or {}).get("packages", []):
        if canonicalize_name(package.get("name", "")) == dist:
            return package.get("version")
    return None


def _names(lane) -> set[str]:
    names = set()
    for text in (*lane.requirements, *lane.constraints, *lane.overrides):
        with contextlib.suppress(InvalidRequirement):
            names.add(str(canonicalize_name(Requirement(text).name)))
    return names


def _edit_tree(ctx: _Context, plan: DropPlan, work: Path) -> tuple[list[str], list[str], list[str]]:
    """Make the change inside the worktree; (lane changes, re-made locks, lock version notes)."""
    from retire.core.project import Project
    from retire.lanes import lanefile
    from retire.locks import locking

    # the proposal's worktree is a project with the same layout
    tree = Project(work)
    # [catalogue] path of the worktree's patchlane.toml
    shim_dir = tree.shims_dir / plan.shim_id
    if not (shim_dir / "manifest.toml").is_file():
        raise Aborted(
            f"{shim_dir.relative_to(work.resolve()).as_posix()}/ does not exist at "
            f"{ctx.base_commit[:12]}: nothing to retire"
        )
    lanes_dir, locks_dir = tree.lanes_dir, tree.locks_dir
    before = (
        {l.name: l for l in lanefile.load_lanes(lanes_dir, root=work)} if lanes_dir.is_dir() else {}
    )
    shutil.rmtree(shim_dir)
    _step(ctx, plan, "shim-removed")

    changes: list[str] = []
    if lanes_dir.is_dir():
        for path in sorted(lanes_dir.glob("*.toml")):
            text = path.read_text(encoding="utf-8")
            try:
                new, edits = edit_lane_text(text, plan.shim_id, plan.floors)
            except FloorConflictError as exc:
                raise Aborted(f"lanes/{path.name}: {exc}") from None
            if edits:
                atomic_write(path, new)
                changes += [f"lanes/{path.name}: {e}" for e in edits]
        # Lanes that hold a floored distribution only as a dependency get a constraint.
        for lane in lanefile.load_lanes(lanes_dir, root=work):
            for dist, floor in plan.floors.items():
                locked_version = _lock_versions(locks_dir, lane.name, dist)
                if (
                    locked_version
                    and dist not in _names(lane)
                    and Version(locked_version) < Version(floor)
                ):
                    file = work / lane.file
                    text = file.read_text(encoding="utf-8")
                    edited = add_constraint(text, f"{dist}>={floor}")
                    # a matrix's cells share one base: constrain it once
                    if edited != text:
                        atomic_write(file, edited)
                        changes.append(
                            f"lanes/{file.name}: constraint {dist}>={floor} added "
                            f"(lane {lane.name} locks {dist} {locked_version})"
                        )
    _step(ctx, plan, "lanes-edited")

    remaining = {p.parent.name for p in tree.shims_dir.glob("*/manifest.toml")}
    try:
        after = (
            lanefile.load_lanes(lanes_dir, root=work, known_shims=remaining)
            if lanes_dir.is_dir()
            else []
        )
    except InputError as exc:
        raise Aborted(f"the edited lanes do not load: {exc}") from None
    relock = [
        l
        for l in after
        if l.name in before
        and before[l.name].digest != l.digest
        and locking.lock_path(locks_dir, l.name).is_file()
    ]
    notes, old = (
        [],
        {(l.name, d): _lock_versions(locks_dir, l.name, d) for l in relock for d in plan.floors},
    )
    if relock:
        results = locking.lock_lanes(relock, locks_dir)
        failed = [r for r in results if not r.ok]
        if failed:
            raise Aborted(
                "re-locking failed: "
                + "; ".join(f"{r.lane}: {r.status} {r.message}" for r in failed)
            )
        for lane in relock:
            for dist, floor in plan.floors.items():
                new_version = _lock_versions(locks_dir, lane.name, dist)
                if new_version and Version(new_version) < Version(floor):
                    raise Aborted(
                        f"lane {lane.name} still locks {dist} {new_version} below the floor {floor}"
                    )
                if new_version != old[(lane.name, dist)]:
                    notes.append(
                        f"{lane.name}: {dist} {old[(lane.name, dist)] or '—'} → "
                        f"{new_version or '—'}"
                    )
    _step(ctx, plan, "locked")
    return changes, [l.name for l in relock], notes


def commit_message(
    plan: DropPlan, changes: Sequence[str], relocked: Sequence[str], base: str
) -> str:
    first = plan.why.strip().splitlines()[0] if plan.why.strip() else "upstream fixed the bug"
    lines = [f"Retire shim {plan.shim_id}: {first}"[:72], "", plan.why.strip() or first, ""]
    if plan.floors:
        lines.append("Floors: " + ", ".join(plan.floor_specs))
    if plan.upstream_links:
        lines.append("Upstream:")
        lines += [f"- {role}: {url}" for role, url in plan.upstream_links]
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
    if plan.floors:
        lines += ["", "Retirement floor: " + ", ".join(f"`{s}`" for s in plan.floor_specs)]
    if plan.upstream_links:
        lines += ["", "### Upstream", ""] + [
            f"- {role}: {url}" for role, url in plan.upstream_links
        ]
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
    found: dict = {}

    def edit(work: Path) -> str:
        _step(ctx, plan, "worktree")
        found["changes"], found["relocked"], found["notes"] = _edit_tree(ctx, plan, work)
        return commit_message(plan, found["changes"], found["relocked"], ctx.base_commit)

    marker = f"{_TRAILER}: {plan.shim_id} {plan.identity(ctx.base_commit)}"
    branch = proposals.propose_branch(
        ctx.repo,
        base_commit=ctx.base_commit,
        branch=plan.branch,
        marker=marker,
        folder=f"retire-{plan.shim_id}",
        edit=edit,
    )
    changes, relocked = tuple(found.get("changes", ())), tuple(found.get("relocked", ()))
    if branch.status != "proposed":
        return DropOutcome(
            plan.shim_id,
            plan.branch,
            branch.status,
            branch.reason,
            branch.commit,
            changes,
            relocked,
        )
    _step(ctx, plan, "committed")
    body = pr_body(plan, changes, relocked, found["notes"])
    return DropOutcome(
        plan.shim_id,
        plan.branch,
        "proposed",
        "",
        branch.commit,
        changes,
        relocked,
        pr_body_path=str(proposals.save_body(ctx.repo, plan.branch, body)),
    )


def apply(
    project: str | os.PathLike[str],
    plans: Iterable[DropPlan],
    *,
    base: str = "HEAD",
    open_prs: bool = True,
    repository: str | None = None,
    api_base: str | None = None,
    remote: str = "origin",
    client=None,
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
    outcomes = []
    # one proposing run per repository at a time
    with proposals.session(repo):
        for plan in plans:
            try:
                outcome = _propose(ctx, plan)
            except (Aborted, GitError) as exc:
                outcome = DropOutcome(plan.shim_id, plan.branch, "aborted", str(exc))
            if outcome.ok and open_prs:
                body_path = repo / proposals.PRS_DIR / f"{plan.branch}.md"
                body = (
                    body_path.read_text(encoding="utf-8")
                    if body_path.is_file()
                    else pr_body(plan, outcome.lane_changes, outcome.locks_remade, ())
                )
                title = f"Retire shim {plan.shim_id}" + (
                    f" ({', '.join(plan.floor_specs)})" if plan.floors else ""
                )
                status, url = proposals.open_pull_request(
                    repo,
                    branch=plan.branch,
                    base_branch=base_branch,
                    title=title,
                    body=body,
                    repository=repository,
                    api_base=api_base,
                    remote=remote,
                    client=client,
                    token=token,
                )
                outcome = replace(outcome, pr_status=status, pr_url=url)
            outcomes.append(outcome)
    return outcomes


# ---------------------------------------------------------------------------------------------
# CLI: `patchlane retire --apply` maps verdicts onto plans; this entry takes plans as JSON.
