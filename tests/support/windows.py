"""Bugs' windows made by hand for tests that need one (retire.history): a window whose fix is on a
followed branch, in no release yet; a mirror as the one resolver finds it by a shim's link."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from retire.history.edge import CommitSpan, EdgeKind, EdgeState
from retire.history.mirrored import TargetMirror
from retire.history.reading import read
from retire.history.window import BranchFix, Window
from retire.mirrors.config import Mirror
from retire.mirrors.history import Commit
from retire.mirrors.repo import MirrorRepo
from retire.mirrors.resolve import Found, Resolved
from tests.support.reportshop import record


def by_link(repository: str, path: Path = Path("/mirrors/toylib.git")) -> Resolved:
    """The mirror of toylib declared in patchlane.toml, found by the shim's link to a pull request
    (:mod:`retire.mirrors.resolve`, rule 2)."""
    because = f"named by the link {repository}/pull/63"
    return Resolved("toylib", Mirror(repository, path), Found.LINK, because, True)


def linked(repo: MirrorRepo) -> TargetMirror:
    """An opened mirror, as :func:`by_link` finds it."""
    return TargetMirror(repo, by_link(repo.mirror.repository, repo.mirror.path))


def branch_fixed(
    repository: str,
    sha: str,
    subject: str,
    pull: int | None = None,
    *,
    branch: str = "main",
    released_in: str | None = None,
    shim: str = "toy",
    broken: str = "1.3",
) -> Window:
    """The window of runs that reproduced the bug on ``broken`` (the newest release run), fixed on
    ``branch`` by ``sha`` — as the one reading makes it from commit runs ordered by a mirror."""
    runs = [record(shim, "gpu", "without", "bug-reproduced", "2026-06-01", version=broken)]
    window = read(runs, shim, "toylib")
    assert window is not None
    commit = Commit(sha, subject, "2026-06-01T00:00:00+00:00", pull)
    span = CommitSpan(
        EdgeKind.FIXED,
        (f"v{broken}", f"refs/heads/{branch}"),
        2,
        EdgeState.FOUND,
        "b" * 40,
        sha,
        commit=commit,
    )
    return replace(window, branch_fix=BranchFix(branch, span, repository, released_in))
