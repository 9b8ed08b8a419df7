"""Where each lane carrying a shim stands against its bug's window: before it (the lane's
release never had the bug: the shim is not needed there), inside it, or after it (fixed: the shim
can go). A release lane is placed by the release it locks; a revision lane by the commit it locks,
against the commits that opened and closed the window, by ancestry in the mirror (at or past the
fix commit, it can drop the shim — a fix in no release included)."""

from __future__ import annotations

from packaging.utils import canonicalize_name

from retire.bisect.transitions import Source
from retire.bisect.window import LanePlace, Place
from retire.bisect.windowresult import WindowResult
from retire.core.git import GitError
from retire.core.project import Project
from retire.lanes.revisions import vcs_entries
from shims.model import ShimManifest

__all__ = ["lane_places"]


def lane_places(
    project: Project, manifest: ShimManifest, result: WindowResult, source: Source | None
) -> tuple[LanePlace, ...]:
    """Every lane carrying ``manifest``'s shim, placed against ``result``'s window."""
    from retire.lanes import lanefile
    from retire.locks import locking

    target = canonicalize_name(manifest.target.distribution)
    lanes = lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ()
    placed = []
    for lane in lanes:
        if manifest.id not in lane.shims:
            continue
        lock = locking.read_lock(locking.lock_path(project.locks_dir, lane.name)) or {}
        version = next(
            (
                str(p.get("version"))
                for p in lock.get("packages", [])
                if canonicalize_name(str(p.get("name", ""))) == target and p.get("version")
            ),
            None,
        )
        vcs = vcs_entries(lock).get(target)
        commit = str(vcs["commit-id"]) if vcs and vcs.get("commit-id") else None
        if commit is not None:
            placed.append(_by_commit(lane.name, version, commit, result, source))
        else:
            placed.append(_by_release(lane.name, version, result))
    return tuple(placed)


def _by_release(lane: str, version: str | None, result: WindowResult) -> LanePlace:
    dist, window = result.distribution, result.window
    if version is None:
        return LanePlace(lane, None, None, Place.UNKNOWN, f"lane {lane} locks no {dist}")
    place = window.place(version)
    at = f"lane {lane} ({dist} {version})"
    if place == Place.BEFORE:
        says = f"{at}: before the window — the bug came in with {window.introduced.after}: the "
        says += "shim is not needed there"
    elif place == Place.AFTER:
        says = f"{at}: after the window — fixed since {window.fixed.after}: the shim can go"
    elif place == Place.INSIDE:
        says = f"{at}: inside the window — the shim is needed"
        branch = result.unreleased
        if branch is not None and branch.commit is not None:
            says += (
                f"; fixed on {branch.branch} at {branch.commit.short} "
                f"({f'#{branch.commit.pull}, ' if branch.commit.pull else ''}in no release yet)"
            )
    else:
        says = f"{at}: not placed (the window's edges are not pinned there)"
    return LanePlace(lane, version, None, place, says)


def _by_commit(
    lane: str, version: str | None, commit: str, result: WindowResult, source: Source | None
) -> LanePlace:
    at = f"lane {lane} ({result.distribution} at {commit[:12]})"
    fix, repo = result.fix_commit, source.repo if source is not None else None
    if repo is None or not result.window.seen:
        return LanePlace(lane, version, commit, Place.UNKNOWN, f"{at}: not placed (no mirror)")
    introduced = result.commit_edge("introduced")
    try:
        if fix is not None and repo.git.is_ancestor(fix.sha, commit):
            says = f"{at}: at or past the fix {fix.short} — the shim can go there"
            return LanePlace(lane, version, commit, Place.AFTER, says)
        if (
            introduced is not None
            and introduced.commit is not None
            and not repo.git.is_ancestor(introduced.commit.sha, commit)
        ):
            says = f"{at}: before {introduced.commit.short} brought the bug in — not needed there"
            return LanePlace(lane, version, commit, Place.BEFORE, says)
    except GitError as exc:
        return LanePlace(lane, version, commit, Place.UNKNOWN, f"{at}: not placed ({exc})")
    if fix is not None:
        says = f"{at}: before the fix {fix.short} — the shim is needed"
        return LanePlace(lane, version, commit, Place.INSIDE, says)
    return LanePlace(lane, version, commit, Place.UNKNOWN, f"{at}: not placed (no fix commit)")
