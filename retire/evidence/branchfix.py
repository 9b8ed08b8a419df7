"""A fix on a followed branch, as the recorded runs pin it and a mirror orders them (a value, no
I/O): the commit after which the reproducer runs clean without the shim, past the newest release
it reproduced in — in no release yet, or in one nobody ran — and which revision lanes' locked
commits contain it (by ancestry in the mirror)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BranchFix"]


@dataclass(frozen=True)
class BranchFix:
    repository: str
    branch: str
    # the full sha of the first clean commit
    sha: str
    subject: str
    pull: int | None = None
    # the oldest release whose tag contains it (None: in no release yet)
    released_in: str | None = None
    # (a revision lane's locked commit, whether it contains the fix)
    contains: tuple[tuple[str, bool], ...] = ()

    @property
    def short(self) -> str:
        return self.sha[:12]

    def describe(self) -> str:
        """``fixed on main at 0a1b2c3d4e5f (#92), in no release yet`` (or ``first released in
        1.9``, once a release tag contains it)."""
        pull = f" (#{self.pull})" if self.pull is not None else ""
        where = f"first released in {self.released_in}" if self.released_in else "in no release yet"
        return f"fixed on {self.branch} at {self.short}{pull}, {where}"

    def reached_by(self, commit: str) -> bool | None:
        """Whether ``commit`` (a revision lane's locked commit) contains the fix; None when the
        mirror was not asked."""
        return dict(self.contains).get(commit)

    def to_json(self) -> dict[str, object]:
        return {
            "repository": self.repository,
            "branch": self.branch,
            "sha": self.sha,
            "subject": self.subject,
            "pull": self.pull,
            "released_in": self.released_in,
            "line": self.describe(),
        }
