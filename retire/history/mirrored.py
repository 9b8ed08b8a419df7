"""What a local mirror says for a bug's history (I/O: read-only git; the reading and the placer
stay pure).

- :func:`read_mirrored` — the one reading (:func:`retire.history.reading.read`) with the commit
  runs ordered by the target's mirror: the commits between each pinned release edge's tags, and
  from the newest broken release's tag along each followed branch; the first release that
  contains a fix found on a branch.
- :func:`shim_window` — the same for a shim's manifest, the mirror opened only where commit runs
  of the shim are on record and an edge could use them; :func:`project_window` with the target's
  mirror as every command finds it (:func:`target_mirror`: :mod:`retire.mirrors.resolve`).
- :func:`contains` — ancestry answers: whether each locked commit contains each of the window's
  pinned commits (what :func:`retire.history.place.place` reads for a revision lane).
- :func:`lane_targets` — every lane carrying a shim, with what it locks of the target and the
  mirror's answers about a locked commit (``patchlane bisect`` places them).

The mirror is never fetched; a tag it lacks, a commit it does not have, or an unreadable range
leaves the answer at the releases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.core.git import GitError
from retire.core.project import Project
from retire.evidence.validation import ValidationRecord
from retire.evidence.values import Ancestry, TagContainment
from retire.history.edge import EdgeState
from retire.history.place import Target
from retire.history.reading import CommitOrder, read
from retire.history.window import Window
from retire.mirrors.history import commits_between, release_tag
from retire.mirrors.repo import MirrorRepo, open_mirror
from retire.mirrors.resolve import Resolved, Unresolved, project_repository
from shims.model import ShimManifest

__all__ = [
    "TargetMirror",
    "contains",
    "first_release",
    "lane_targets",
    "project_window",
    "read_mirrored",
    "shim_window",
    "target_mirror",
]


@dataclass(frozen=True)
class TargetMirror:
    """The opened mirror of a shim's target, and how the one resolver found it (what a window's
    :class:`~retire.history.window.Provenance` says)."""

    repo: MirrorRepo
    found: Resolved


def _order(
    repo: MirrorRepo, releases: tuple[str, str], old: str, new: str, branch: str | None = None
) -> CommitOrder | None:
    try:
        commits = commits_between(repo, old, new)
        base = repo.git.rev_parse(f"{old}^{{commit}}") or old
    except GitError:
        return None
    return CommitOrder(releases, (old, new), base, commits, branch) if commits else None


def commit_orders(
    repo: MirrorRepo, window: Window, branches: Sequence[str] = ()
) -> tuple[CommitOrder, ...]:
    """The mirror's commits for each release edge of ``window`` pinned between two releases, and
    from the newest broken release along each of ``branches`` while no release is fixed."""
    orders: list[CommitOrder] = []
    for edge in (window.introduced, window.fixed):
        if edge.state != EdgeState.FOUND or edge.before is None or edge.after is None:
            continue
        old, new = release_tag(repo, edge.before), release_tag(repo, edge.after)
        if old is not None and new is not None:
            found = _order(repo, (edge.before, edge.after), old, new)
            orders += [found] if found is not None else []
    last = window.fixed.before
    tag = release_tag(repo, last) if last is not None else None
    if window.fixed.state == EdgeState.OPEN and last is not None and tag is not None:
        for branch in branches:
            found = _order(repo, (last, branch), tag, f"refs/heads/{branch}", branch)
            orders += [found] if found is not None else []
    return tuple(orders)


def first_release(repo: MirrorRepo, sha: str) -> str | None:
    """The oldest release (by version) whose tag contains ``sha``, or None."""
    tags = repo.probe_commit(sha)
    if not isinstance(tags, TagContainment):
        return None
    versions = [v for tag in tags.release_tags if (v := tags.version_of(tag)) is not None]
    return str(min(versions)) if versions else None


def read_mirrored(
    records: Sequence[ValidationRecord],
    shim: str,
    distribution: str,
    mirror: TargetMirror | None,
    branches: Sequence[str] = (),
) -> Window | None:
    """:func:`~retire.history.reading.read`, the commit runs ordered by ``mirror`` (the target's)
    where it has the tags; ``branches``: the followed branches a fix in no release is looked for
    on."""
    window = read(records, shim, distribution)
    if window is None or mirror is None or not window.seen or window.source.commit_runs == 0:
        return window
    repo = mirror.repo
    orders = commit_orders(repo, window, branches)
    if not orders:
        return window
    window = read(records, shim, distribution, orders=orders, mirror=mirror.found)
    fix = window.branch_fix if window is not None else None
    if window is None or fix is None or fix.commit is None:
        return window
    released = replace(fix, released_in=first_release(repo, fix.commit.sha))
    return replace(window, branch_fix=released)


def shim_window(
    manifest: ShimManifest,
    records: Sequence[ValidationRecord],
    mirror_of: Callable[[ShimManifest], TargetMirror | None] | None = None,
    branches: Sequence[str] = (),
) -> Window | None:
    """``manifest``'s shim's window on its target; ``mirror_of`` (the target's mirror, or None) is
    called only where commit runs of the shim are on record."""
    mine = [r for r in records if r.shim == manifest.id]
    dist = manifest.target.distribution
    on_commits = mirror_of is not None and any(r.revisions for r in mine)
    mirror = mirror_of(manifest) if mirror_of is not None and on_commits else None
    return read_mirrored(mine, manifest.id, dist, mirror, branches)


def target_mirror(
    project: Project,
    manifest: ShimManifest,
    *,
    folder: Path | None = None,
    links: Sequence[str] = (),
) -> TargetMirror | None:
    """The mirror of ``manifest``'s target on this host, opened, as every command finds it
    (:func:`retire.mirrors.resolve.project_repository`: a lane revision, a link — the shim's and
    ``links`` —, a declared mirror named as the package with its release tags); None when there
    is none or it cannot be read (``patchlane mirrors`` says why)."""
    found = project_repository(project, manifest, folder=folder, links=links)
    if isinstance(found, Unresolved):
        return None
    opened = open_mirror(found.mirror, project.mirror_cache)
    return TargetMirror(opened, found) if isinstance(opened, MirrorRepo) else None


def project_window(
    project: Project,
    manifest: ShimManifest,
    records: Sequence[ValidationRecord],
    *,
    folder: Path | None = None,
    links: Sequence[str] = (),
) -> Window | None:
    """:func:`shim_window` with the target's mirror (:func:`target_mirror`), resolved only where
    commit runs of the shim are on record."""
    return shim_window(
        manifest, records, lambda m: target_mirror(project, m, folder=folder, links=links)
    )


def contains(
    repo: MirrorRepo, pinned: Iterable[str], locked: Iterable[str]
) -> dict[str, tuple[tuple[str, bool], ...]]:
    """locked commit → (pinned commit, whether the locked commit contains it), for each answer the
    mirror gives (a commit it does not have is left out: not placed, never guessed)."""
    wanted = tuple(pinned)
    answers: dict[str, tuple[tuple[str, bool], ...]] = {}
    for commit in locked:
        found = []
        for sha in wanted:
            try:
                found.append((sha, repo.git.is_ancestor(sha, commit)))
            except GitError:
                continue
        answers[commit] = tuple(found)
    return answers


def lane_targets(
    project: Project, manifest: ShimManifest, window: Window | None, repo: MirrorRepo | None
) -> tuple[Target, ...]:
    """Every lane carrying ``manifest``'s shim: the release its lock has of the target, the
    commit a revision lane locks, and ``repo``'s answers about that commit."""
    # deferred: a reader of a window does not pay for the lane and lock readers
    from retire.lanes import lanefile
    from retire.lanes.revisions import vcs_entries
    from retire.locks import locking

    dist = canonicalize_name(manifest.target.distribution)
    lanes = lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ()
    found = []
    for lane in lanes:
        if manifest.id not in lane.shims:
            continue
        lock = locking.read_lock(locking.lock_path(project.locks_dir, lane.name)) or {}
        version = next(
            (
                str(p.get("version"))
                for p in lock.get("packages", [])
                if canonicalize_name(str(p.get("name", ""))) == dist and p.get("version")
            ),
            None,
        )
        vcs = vcs_entries(lock).get(dist)
        commit = str(vcs["commit-id"]) if vcs and vcs.get("commit-id") else None
        target = Target(lane.name, dist, version, commit)
        found.append(_answered(target, window, repo) if commit else target)
    return tuple(found)


def _answered(target: Target, window: Window | None, repo: MirrorRepo | None) -> Target:
    """``target`` with ``repo``'s answers about its locked commit."""
    if repo is None or target.commit is None:
        return replace(target, unplaced="no mirror of the target")
    pinned = window.pinned_commits() if window is not None else ()
    ancestry = repo.probe_ancestry(target.commit)
    return replace(
        target,
        ancestry=ancestry if isinstance(ancestry, Ancestry) else None,
        contains=contains(repo, pinned, [target.commit])[target.commit],
        unplaced="" if isinstance(ancestry, Ancestry) else ancestry.reason,
    )
