"""Bugs' windows made by hand for tests that need one (retire.history): a window whose fix is on a
followed branch, in no release yet."""

from __future__ import annotations

from dataclasses import replace

from retire.history.edge import CommitSpan, EdgeKind, EdgeState
from retire.history.reading import read
from retire.history.window import BranchFix, Window
from retire.mirrors.history import Commit
from tests.support.reportshop import record


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
