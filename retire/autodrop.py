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

**The floor rule** (:func:`raise_floor`), for every requirement, constraint and override naming
the distribution, with ``F`` the floor:

- already at or above the floor — a pin ``==V`` with ``V >= F``, or a lower bound
  (``>=``, ``>``, ``~=``, ``==V.*``) at or above ``F`` — stays as written (``==0.16.1`` stays
  a pin when the floor is 0.16);
- a pin below the floor becomes ``==F`` (a pin stays a pin, at the release proven fixed);
- otherwise the lower bounds below ``F`` are replaced by ``>=F`` (``~=L`` keeps its upper
  bound as ``<U``); other clauses (``<``, ``!=``) stay. A bare name gains ``>=F``;
- when what remains cannot hold ``F`` (``<0.17`` against a floor of 0.18, a direct URL), the
  plan is aborted with a one-line reason: that lane needs a human.

A lane whose lock holds the distribution only as a dependency (no requirement names it) gets
``<dist>>=F`` appended to its ``constraints`` (``[matrix.base]`` for a matrix), so its lock
cannot keep the broken release.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.atomic import atomic_write, locked
from retire.errors import ConfigError, PatchlaneError
from retire.gitops import GitError, git, rev_parse, toplevel, worktree_paths
from retire.lanes import SHIM_ID

__all__ = [
    "BRANCH_PREFIX",
    "DropOutcome",
    "DropPlan",
    "FloorConflict",
    "PullRequests",
    "apply",
    "edit_lane_text",
    "main",
    "plan_from_bisect",
    "raise_floor",
]

BRANCH_PREFIX = "patchlane/retire-"
WORKTREES_DIR = Path(".patchlane") / "worktrees"
PRS_DIR = Path(".patchlane") / "prs"
REQUIREMENT_KEYS = ("requirements", "constraints", "overrides")
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
            raise ConfigError(None, "shim", f"invalid shim id {self.shim_id!r}", "ids match [a-z][a-z0-9_]*")
        floors = {}
        pairs = self.floors.items() if isinstance(self.floors, Mapping) else map(_floor_pair, self.floors)
        for dist, version in pairs:
            try:
                floors[str(canonicalize_name(dist))] = str(Version(str(version)))
            except InvalidVersion:
                raise ConfigError(None, f"floors.{dist}", f"not a version: {version!r}", 'use a release like "0.18.0"') from None
        links = tuple((("link", l) if isinstance(l, str) else (str(l[0]), str(l[1]))) for l in self.upstream_links)
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
        return cls(data["shim_id"], data.get("why", ""), data.get("floors", {}), data.get("evidence_markdown", ""),
                   tuple(links))


def _floor_pair(spec: str) -> tuple[str, str]:
    try:
        req = Requirement(spec)
        [clause] = list(req.specifier)
    except (InvalidRequirement, ValueError):
        raise ConfigError(None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"') from None
    if clause.operator != ">=":
        raise ConfigError(None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"')
    return req.name, clause.version


def plan_from_bisect(result, manifest) -> DropPlan:
    """A plan from a bisection that proved a fixed release (``retire.bisect.BisectResult``)."""
    if not result.floor:
        raise Aborted(f"the bisection of {result.distribution} proposes no floor: {result.summary()}")
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
    """What happened to one plan. ``status``: proposed, already-proposed, exists-differs, aborted."""

    shim_id: str
    branch: str
    status: str
    reason: str = ""
    commit: str | None = None
    lane_changes: tuple[str, ...] = ()  # "lanes/cpu.toml: megatron-core>=0.15 → megatron-core>=0.18"
    locks_remade: tuple[str, ...] = ()  # lane names
    pr_body_path: str | None = None
    pr_status: str = "not-requested"  # opened | exists | skipped: … | failed: … | not-requested
    pr_url: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("proposed", "already-proposed")


class FloorConflict(ValueError):
    """A requirement cannot be raised to the floor automatically."""


class Aborted(PatchlaneError):
    """The plan cannot become a branch; nothing was created."""


# ---------------------------------------------------------------------------------------------
# The floor rule and lane edits (pure)


def _compatible_upper(version: str) -> str:
    """``~=1.4.2`` allows ``<1.5``; ``~=0.15`` allows ``<1``."""
    release = Version(version).release
    head = list(release[:-1]) if len(release) > 1 else list(release)
    head[-1] += 1
    return ".".join(map(str, head))


def raise_floor(text: str, floor: str) -> str:
    """``text`` with its lower bound raised to ``floor`` (see the module docstring for the rule)."""
    req = Requirement(text)
    if req.url:
        raise FloorConflict(f"{text!r} points at a URL; raise it to >={floor} by hand")
    f = Version(floor)
    specs = sorted(req.specifier, key=str)
    pinned_below = False
    for spec in specs:
        op, version = spec.operator, spec.version
        if op in ("==", "===") and not version.endswith(".*"):
            try:
                if Version(version) >= f:
                    return text
            except InvalidVersion:
                raise FloorConflict(f"{text!r} pins a non-PEP 440 version; raise it by hand") from None
            pinned_below = True
        elif op in (">=", ">", "~=") and Version(version) >= f:
            return text
        elif op == "==" and Version(version[:-2]) >= f:
            return text
    if pinned_below:
        clauses = [f"=={f}"]
    else:
        clauses = [f">={f}"]
        for spec in specs:
            if spec.operator in (">=", ">"):
                continue
            if spec.operator == "~=":
                clauses.append(f"<{_compatible_upper(spec.version)}")
            else:
                clauses.append(str(spec))
        if not SpecifierSet(",".join(clauses)).contains(f, prereleases=True):
            raise FloorConflict(f"{text!r} excludes {req.name} {f}; the lane needs a human")
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f"; {req.marker}" if req.marker else ""
    return f"{req.name}{extras}{','.join(clauses)}{marker}"


def _edit_body(body, shim_id: str, floors: Mapping[str, str], changes: list[str]) -> None:
    shims = body.get("shims")
    if isinstance(shims, list):
        for i in reversed([i for i, item in enumerate(shims) if item == shim_id]):
            del shims[i]
            changes.append(f"dropped shim {shim_id}")
    for key in REQUIREMENT_KEYS:
        items = body.get(key)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, str):
                continue
            try:
                name = str(canonicalize_name(Requirement(item).name))
            except InvalidRequirement:
                continue
            if name in floors:
                try:
                    raised = raise_floor(str(item), floors[name])
                except FloorConflict as exc:
                    raise FloorConflict(f"{key}[{i}]: {exc}") from None
                if raised != str(item):
                    items[i] = raised
                    changes.append(f"{item} → {raised}")


def edit_lane_text(text: str, shim_id: str, floors: Mapping[str, str]) -> tuple[str, list[str]]:
    """A lane / matrix file with ``shim_id`` dropped and ``floors`` raised; (new text, changes).

    Only the touched array items change: comments, order and layout stay as they were.
    """
    from retire.lanedit import lane_bodies

    doc = tomlkit.parse(text)
    changes: list[str] = []
    canonical = {str(canonicalize_name(k)): v for k, v in floors.items()}
    for body in lane_bodies(doc):
        _edit_body(body, shim_id, canonical, changes)
    return (tomlkit.dumps(doc) if changes else text), changes


def add_constraint(text: str, requirement: str) -> str:
    """Append ``requirement`` to the file's ``[lane]`` (or ``[matrix.base]``) constraints."""
    doc = tomlkit.parse(text)
    if "lane" in doc:
        table = doc["lane"]
    else:
        matrix = doc["matrix"]
        if "base" not in matrix:
            matrix["base"] = tomlkit.table()
        table = matrix["base"]
    if "constraints" in table:
        table["constraints"].append(requirement)
    else:
        table["constraints"] = [requirement]
    return tomlkit.dumps(doc)


# ---------------------------------------------------------------------------------------------
# Pull requests (never merged)


class PullRequests:
    """Find-or-open a pull request through the GitHub REST API. There is no merge method."""

    def __init__(self, client, repository: str, *, api_base: str | None = None, token: str) -> None:
        from retire.probes.codehost import DEFAULT_API_BASE

        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
            raise ConfigError(None, "--repo", f"not an owner/name: {repository!r}", "pass --repo owner/name")
        self.client = client
        self.repository = repository
        self.api_base = (api_base or DEFAULT_API_BASE).rstrip("/")
        self.token = token

    def _headers(self) -> dict[str, str]:
        from retire.probes.codehost import auth_headers

        return {**auth_headers(self.token), "Accept": "application/vnd.github+json"}

    def _error(self, what: str, exc_or_response) -> str:
        from retire.probes.http import redact

        text = getattr(exc_or_response, "text", None)
        detail = f"HTTP {exc_or_response.status_code}: {text[:200]}" if text is not None else str(exc_or_response)
        return redact(f"{what}: {detail}", [self.token])

    def find_or_open(self, *, head: str, base: str, title: str, body: str) -> tuple[str, str | None]:
        """(status, url): ``exists`` when a PR for ``head`` is already there, else ``opened``."""
        import httpx

        owner = self.repository.split("/")[0]
        url = f"{self.api_base}/repos/{self.repository}/pulls"
        try:
            found = self.client.get(url, params={"head": f"{owner}:{head}", "state": "all"}, headers=self._headers())
            if found.status_code == 200 and isinstance(found.json(), list) and found.json():
                return "exists", found.json()[0].get("html_url")
            if found.status_code != 200:
                return "failed: " + self._error("listing pull requests", found), None
            made = self.client.post(url, headers=self._headers(),
                                    json={"title": title, "head": head, "base": base, "body": body,
                                          "maintainer_can_modify": True})
        except (httpx.HTTPError, ValueError) as exc:
            return "failed: " + self._error("the code host is unreachable", exc), None
        if made.status_code == 201:
            return "opened", made.json().get("html_url")
        return "failed: " + self._error("opening the pull request", made), None


# ---------------------------------------------------------------------------------------------
# The branch


@dataclass
class _Context:
    repo: Path
    base_commit: str
    base_branch: str
    author_env: dict[str, str]
    on_step: Callable[[str, str], None] | None


def _step(ctx: _Context, plan: DropPlan, name: str) -> None:
    if ctx.on_step:
        ctx.on_step(plan.shim_id, name)


def cleanup_worktrees(repo: Path) -> list[Path]:
    """Remove worktrees that an earlier, interrupted run left under ``.patchlane/worktrees``."""
    root = (repo / WORKTREES_DIR).resolve()
    removed = []
    for path in worktree_paths(repo):
        if path.resolve().is_relative_to(root):
            git(repo, "worktree", "remove", "--force", str(path), check=False)
            removed.append(path)
    if root.is_dir():
        for leftover in root.iterdir():
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    git(repo, "worktree", "prune")
    return removed


def _lock_versions(locks_dir: Path, lane: str, dist: str) -> str | None:
    from retire.locking import lock_path, read_lock

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
    from retire import lanefile, locking

    shim_dir = work / "shims" / plan.shim_id
    if not (shim_dir / "manifest.toml").is_file():
        raise Aborted(f"shims/{plan.shim_id}/ does not exist at {ctx.base_commit[:12]}: nothing to retire")
    lanes_dir, locks_dir = work / "lanes", work / "locks"
    before = {l.name: l for l in lanefile.load_lanes(lanes_dir, root=work)} if lanes_dir.is_dir() else {}
    shutil.rmtree(shim_dir)
    _step(ctx, plan, "shim-removed")

    changes: list[str] = []
    if lanes_dir.is_dir():
        for path in sorted(lanes_dir.glob("*.toml")):
            text = path.read_text(encoding="utf-8")
            try:
                new, edits = edit_lane_text(text, plan.shim_id, plan.floors)
            except FloorConflict as exc:
                raise Aborted(f"lanes/{path.name}: {exc}") from None
            if edits:
                atomic_write(path, new)
                changes += [f"lanes/{path.name}: {e}" for e in edits]
        # Lanes that hold a floored distribution only as a dependency get a constraint.
        for lane in lanefile.load_lanes(lanes_dir, root=work):
            for dist, floor in plan.floors.items():
                locked_version = _lock_versions(locks_dir, lane.name, dist)
                if locked_version and dist not in _names(lane) and Version(locked_version) < Version(floor):
                    file = lanes_dir / lane.origin.split(" ")[0].removeprefix("lanes/")
                    atomic_write(file, add_constraint(file.read_text(encoding="utf-8"), f"{dist}>={floor}"))
                    changes.append(f"lanes/{file.name}: constraint {dist}>={floor} added (lane {lane.name} locks {dist} {locked_version})")
    _step(ctx, plan, "lanes-edited")

    remaining = {p.parent.name for p in (work / "shims").glob("*/manifest.toml")}
    try:
        after = lanefile.load_lanes(lanes_dir, root=work, known_shims=remaining) if lanes_dir.is_dir() else []
    except ConfigError as exc:
        raise Aborted(f"the edited lanes do not load: {exc}") from None
    relock = [l for l in after if l.name in before and before[l.name].digest != l.digest
              and locking.lock_path(locks_dir, l.name).is_file()]
    notes, old = [], {(l.name, d): _lock_versions(locks_dir, l.name, d) for l in relock for d in plan.floors}
    if relock:
        results = locking.lock_lanes(relock, locks_dir)
        failed = [r for r in results if not r.ok]
        if failed:
            raise Aborted("re-locking failed: " + "; ".join(f"{r.lane}: {r.status} {r.message}" for r in failed))
        for lane in relock:
            for dist, floor in plan.floors.items():
                new_version = _lock_versions(locks_dir, lane.name, dist)
                if new_version and Version(new_version) < Version(floor):
                    raise Aborted(f"lane {lane.name} still locks {dist} {new_version} below the floor {floor}")
                if new_version != old[(lane.name, dist)]:
                    notes.append(f"{lane.name}: {dist} {old[(lane.name, dist)] or '—'} → {new_version or '—'}")
    _step(ctx, plan, "locked")
    return changes, [l.name for l in relock], notes


def commit_message(plan: DropPlan, changes: Sequence[str], relocked: Sequence[str], base: str) -> str:
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
        text = " ".join(line.strip() for line in block.splitlines()
                        if line.strip() and not line.lstrip().startswith(("#", "|", "```")))
        if text:
            return text[:600]
    return ""


def pr_body(plan: DropPlan, changes: Sequence[str], relocked: Sequence[str], lock_notes: Sequence[str]) -> str:
    lines = [f"## Retire shim `{plan.shim_id}`", "", plan.why.strip(), "", "### What this branch changes", "",
             f"- removes `shims/{plan.shim_id}/`"]
    lines += [f"- {c}" for c in changes]
    if relocked:
        lines.append(f"- locks re-made: {', '.join(f'`locks/{n}/pylock.toml`' for n in relocked)}")
        lines += [f"  - {n}" for n in lock_notes]
    if plan.floors:
        lines += ["", "Retirement floor: " + ", ".join(f"`{s}`" for s in plan.floor_specs)]
    if plan.upstream_links:
        lines += ["", "### Upstream", ""] + [f"- {role}: {url}" for role, url in plan.upstream_links]
    if plan.evidence_markdown.strip():
        lines += ["", "### Evidence", "", plan.evidence_markdown.strip()]
    lines += ["", "---", "Proposed by `patchlane retire --apply`. patchlane never merges: review the evidence, "
              "let CI run the lanes, then merge by hand."]
    return "\n".join(lines) + "\n"


def _author_env(repo: Path) -> dict[str, str]:
    """The repository's identity when it has one; a patchlane identity otherwise."""
    env = {}
    if not git(repo, "config", "user.name", check=False):
        env.update(GIT_AUTHOR_NAME="patchlane", GIT_COMMITTER_NAME="patchlane")
    if not git(repo, "config", "user.email", check=False):
        env.update(GIT_AUTHOR_EMAIL="patchlane@localhost", GIT_COMMITTER_EMAIL="patchlane@localhost")
    return env


def _propose(ctx: _Context, plan: DropPlan) -> DropOutcome:
    repo = ctx.repo
    ref = f"refs/heads/{plan.branch}"
    existing = rev_parse(repo, ref)
    marker = f"{_TRAILER}: {plan.shim_id} {plan.identity(ctx.base_commit)}"
    if existing and rev_parse(repo, f"{existing}^") == ctx.base_commit \
            and marker in git(repo, "log", "-1", "--format=%B", existing):
        return DropOutcome(plan.shim_id, plan.branch, "already-proposed", "the branch holds this proposal", existing)

    work = repo / WORKTREES_DIR / f"retire-{plan.shim_id}"
    work.parent.mkdir(parents=True, exist_ok=True)
    try:
        git(repo, "worktree", "add", "--detach", "--quiet", str(work), ctx.base_commit)
        _step(ctx, plan, "worktree")
        changes, relocked, notes = _edit_tree(ctx, plan, work)
        git(work, "add", "--all")
        tree = git(work, "write-tree")
        if existing:
            same = rev_parse(repo, f"{existing}^{{tree}}") == tree
            return DropOutcome(plan.shim_id, plan.branch, "already-proposed" if same else "exists-differs",
                               "the branch already holds this change" if same else
                               f"{plan.branch} exists with other content; left as it is (delete it to re-propose)",
                               existing, tuple(changes), tuple(relocked))
        message = commit_message(plan, changes, relocked, ctx.base_commit)
        env = {**os.environ, **ctx.author_env}
        commit = _git_env(work, env, "commit-tree", tree, "-p", ctx.base_commit, input=message)
        # Creating the ref is the one step that publishes; it fails if the branch appeared meanwhile.
        git(repo, "update-ref", ref, commit, "0" * 40)
        _step(ctx, plan, "committed")
        body = pr_body(plan, changes, relocked, notes)
        return DropOutcome(plan.shim_id, plan.branch, "proposed", "", commit, tuple(changes), tuple(relocked),
                           pr_body_path=_save_body(repo, plan, body))
    finally:
        git(repo, "worktree", "remove", "--force", str(work), check=False)
        shutil.rmtree(work, ignore_errors=True)
        git(repo, "worktree", "prune", check=False)


def _git_env(repo: Path, env: Mapping[str, str], *args: str, input: str) -> str:
    import subprocess

    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=dict(env), input=input)
    if proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def _save_body(repo: Path, plan: DropPlan, body: str) -> str:
    path = repo / PRS_DIR / f"{plan.branch}.md"
    atomic_write(path, body)
    return str(path)


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
    base_commit = rev_parse(repo, f"{base}^{{commit}}")
    if base_commit is None:
        raise ConfigError(None, "--base", f"{base!r} is not a commit in {repo}", "name a branch, tag or commit")
    full = git(repo, "rev-parse", "--symbolic-full-name", base, check=False)
    base_branch = pr_base or (full.removeprefix("refs/heads/") if full.startswith("refs/heads/") else "main")
    ctx = _Context(repo, base_commit, base_branch, _author_env(repo), on_step)
    outcomes = []
    with locked(repo / WORKTREES_DIR / "lock"):  # one auto-drop per repository at a time
        cleanup_worktrees(repo)
        for plan in plans:
            try:
                outcome = _propose(ctx, plan)
            except (Aborted, GitError) as exc:
                outcome = DropOutcome(plan.shim_id, plan.branch, "aborted", str(exc))
            if outcome.ok and open_prs:
                outcome = _open_pr(ctx, plan, outcome, repository=repository, api_base=api_base, remote=remote,
                                   client=client, token=token)
            outcomes.append(outcome)
    return outcomes


def _open_pr(ctx: _Context, plan: DropPlan, outcome: DropOutcome, *, repository, api_base, remote, client,
             token) -> DropOutcome:
    from dataclasses import replace

    from retire.probes.codehost import token_from_env
    from retire.probes.http import redact

    token = token or token_from_env()
    if not token:
        return replace(outcome, pr_status="skipped: no GITHUB_TOKEN; the PR body is saved beside the branch")
    if not repository:
        return replace(outcome, pr_status="skipped: no repository (owner/name) to open the PR in")
    body_path = ctx.repo / PRS_DIR / f"{plan.branch}.md"
    body = body_path.read_text(encoding="utf-8") if body_path.is_file() else pr_body(plan, outcome.lane_changes, outcome.locks_remade, ())
    try:
        git(ctx.repo, "push", "--quiet", remote, f"refs/heads/{plan.branch}:refs/heads/{plan.branch}")
    except GitError as exc:
        return replace(outcome, pr_status="failed: " + redact(str(exc), [token]))
    owned = client is None
    if owned:
        from retire.probes.http import make_client

        client = make_client()
    try:
        title = f"Retire shim {plan.shim_id}" + (f" ({', '.join(plan.floor_specs)})" if plan.floors else "")
        status, url = PullRequests(client, repository, api_base=api_base, token=token).find_or_open(
            head=plan.branch, base=ctx.base_branch, title=title, body=body)
    finally:
        if owned:
            client.close()
    return replace(outcome, pr_status=status, pr_url=url)


# ---------------------------------------------------------------------------------------------
# CLI: `patchlane retire --apply` maps verdicts onto plans; this entry takes plans as JSON.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="patchlane retire-apply",
                                     description="Propose one branch per retire plan; never merges.")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project folder (a git checkout)")
    parser.add_argument("--plan", type=Path, action="append", required=True,
                        help="JSON file with a plan (or a list): shim_id, why, floors, evidence_markdown, upstream_links")
    parser.add_argument("--base", default="HEAD", help="commit or branch the proposals start from (default: HEAD)")
    parser.add_argument("--pr-base", help="branch the pull requests target (default: the --base branch)")
    parser.add_argument("--repo", help="owner/name to open pull requests in")
    parser.add_argument("--api", help="code host REST API base URL")
    parser.add_argument("--remote", default="origin", help="remote the branch is pushed to (default: origin)")
    parser.add_argument("--no-pr", action="store_true", help="make branches only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        plans = []
        for path in args.plan:
            data = json.loads(path.read_text(encoding="utf-8"))
            plans += [DropPlan.from_dict(d) for d in (data if isinstance(data, list) else [data])]
        outcomes = apply(args.root, plans, base=args.base, open_prs=not args.no_pr, repository=args.repo,
                         api_base=args.api, remote=args.remote, pr_base=args.pr_base,
                         on_step=None if args.json else lambda shim, step: print(f"  {shim}: {step}", flush=True))
    except (ConfigError, PatchlaneError, OSError, ValueError, KeyError) as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        from dataclasses import asdict

        print(json.dumps([asdict(o) for o in outcomes], indent=2))
    else:
        for o in outcomes:
            print(f"{o.status:<17} {o.branch}" + (f" — {o.reason}" if o.reason else "")
                  + (f" [PR: {o.pr_status}{' ' + o.pr_url if o.pr_url else ''}]" if o.pr_status != "not-requested" else ""))
    return 0 if all(o.ok for o in outcomes) else 1
