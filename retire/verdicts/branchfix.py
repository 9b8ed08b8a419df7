"""Fixes on a followed branch, for every shim of one gather (I/O: local mirrors only): where a
revision lane carrying the shim follows a branch of a mirrored repository, the commit that fixed
the bug there as the recorded runs pin it (:func:`retire.mirrors.recorded.branch_fix`), whether a
release tag contains it yet, and which revision lanes' locked commits contain it, by ancestry."""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.utils import canonicalize_name

from retire.core.git import GitError
from retire.evidence.branchfix import BranchFix
from retire.evidence.validation import ValidationRecord
from retire.evidence.values import TagContainment
from retire.mirrors.history import Commit
from retire.mirrors.recorded import branch_fix
from retire.mirrors.repo import MirrorRepo
from retire.verdicts.mirrored import OpenMirrors
from retire.verdicts.plan import GatherPlan, ShimPlan

__all__ = ["branch_fixes"]

#: A rev that is a commit sha, not a branch.
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def branch_fixes(plan: GatherPlan, mirrors: OpenMirrors) -> dict[str, BranchFix]:
    """shim → its fix on a branch one of its revision lanes follows (shims without one are
    absent)."""
    found: dict[str, BranchFix] = {}
    for shim in plan.shims:
        fix = _shim_fix(shim, plan, plan.records, mirrors)
        if fix is not None:
            found[shim.manifest.id] = fix
    return found


def _shim_fix(
    shim: ShimPlan, plan: GatherPlan, records: Sequence[ValidationRecord], mirrors: OpenMirrors
) -> BranchFix | None:
    dist = canonicalize_name(shim.manifest.target.distribution)
    if not any(r.shim == shim.manifest.id and r.revisions for r in records):
        return None
    followed = {
        (revision.repository, revision.rev): None
        for lane in shim.lanes
        for revision in lane.revisions
        if revision.distribution == dist and not _SHA.fullmatch(revision.rev)
    }
    for repository, branch in followed:
        repo = mirrors.repo(repository)
        if not isinstance(repo, MirrorRepo):
            continue
        commit = branch_fix(records, shim.manifest.id, dist, repo, branch)
        if commit is None:
            continue
        locked = {
            c
            for lane in shim.lanes
            for revision in lane.revisions
            if revision.repository == repository and revision.distribution == dist
            if (c := plan.locked_commits.get(lane.name, {}).get(dist))
        }
        return _value(repo, repository, branch, commit, sorted(locked))
    return None


def _value(
    repo: MirrorRepo, repository: str, branch: str, commit: Commit, locked: Sequence[str]
) -> BranchFix:
    contains = []
    for sha in locked:
        try:
            contains.append((sha, repo.git.is_ancestor(commit.sha, sha)))
        # a locked commit the mirror does not have: not placed, never guessed
        except GitError:
            continue
    return BranchFix(
        repository,
        branch,
        commit.sha,
        commit.subject,
        commit.pull,
        _first_release(repo.probe_commit(commit.sha)),
        tuple(contains),
    )


def _first_release(tags: object) -> str | None:
    """The oldest release whose tag contains the fix, by version."""
    if not isinstance(tags, TagContainment):
        return None
    versions = [v for tag in tags.release_tags if (v := tags.version_of(tag)) is not None]
    return str(min(versions)) if versions else None
