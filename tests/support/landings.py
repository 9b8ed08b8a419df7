"""A toy upstream whose pull requests land every way upstreams land them: the bug's window of
tests/support/historyrepo.py (add() broken from 1.3, fixed in 1.6; releases ``vX.Y``, built by uv
from any commit, wheels for a loopback index with :func:`historyrepo.release_index`), but

- the breaking change lands by a **merge commit** naming no pull request (``Merge branch
  'rework'``), ``refs/pull/33/head`` at the merged branch's tip;
- the fix (#63, two commits: a note, then the fix) lands **rebased** — each commit copied onto
  main with its own subject, no ``(#N)`` — or **squashed** into one commit whose subject names no
  pull request; ``refs/pull/63/head`` stays at the request's own tip, on no branch;
- with ``squashed_extra``, another request (#71) in 1.7's range lands squashed too.

Only ``git patch-id`` ties the landed commits to their requests. add() sits far below the lines
that change with every commit, so a copied patch keeps its context, as a real one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.gitrepos import git
from tests.support.historyrepo import _BACKEND, _PYPROJECT, FIXED, INTRODUCED, RELEASES, WindowRepo

_SOURCE = (
    '__version__ = "{version}"\n{extra}\n\n\ndef _unused():\n    return None\n\n\n'
    "# add() is what the shim is about\n\n\ndef add(a, b):\n    return a {op} b\n"
)


@dataclass
class LandedRepo(WindowRepo):
    # the squash-landed commit of #71 (``squashed_extra``)
    squashed: str = ""


class _Writer:
    def __init__(self, path: Path) -> None:
        self.path, self.op, self.version, self.extra, self.n = path, "+", "1.0", "", 0

    def write(self, subject: str, *, op: str | None = None, bump: bool = True) -> str:
        """A commit; ``bump`` changes the line every main-line commit changes (a request's own
        commits leave it, as a real request's leave other people's lines)."""
        self.n += 1
        self.op = op or self.op
        if bump:
            self.extra = f"# change {self.n}"
        (self.path / "VERSION").write_text(self.version + "\n")
        (self.path / "toylib" / "__init__.py").write_text(
            _SOURCE.format(version=self.version, extra=self.extra, op=self.op)
        )
        return self.commit(subject)

    def commit(self, subject: str) -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", subject, when=self.when)
        return git(self.path, "rev-parse", "HEAD")

    @property
    def when(self) -> str:
        return f"2026-01-01T{self.n // 60:02d}:{self.n % 60:02d}:00Z"


def _request(path: Path, w: _Writer, branch: str, fix: bool) -> str:
    """A request's two commits on ``branch`` (from main's current commit): a note, then (with
    ``fix``) the fix or (without) a second note; its tip. Main is left checked out, moved on by
    one commit, so landing it means copying."""
    git(path, "checkout", "-q", "-b", branch)
    w.n += 1
    (path / f"{branch}.txt").write_text(f"notes on {branch}\n")
    w.commit(f"Start on {branch}")
    if fix:
        tip = w.write("Fix add()", op="+", bump=False)
    else:
        w.n += 1
        (path / f"{branch}.txt").write_text(f"notes on {branch}\nmore notes\n")
        tip = w.commit(f"Finish {branch}")
    git(path, "checkout", "-q", "main")
    w.op = "-" if fix else w.op
    w.write("Tidy main before the request lands")
    return tip


def _land(path: Path, w: _Writer, branch: str, tip: str, how: str, subject: str) -> str:
    """``branch`` landed on main ``how`` (rebase | squash); the landed commit that ends it."""
    w.n += 1
    if how == "rebase":
        fork = git(path, "merge-base", "main", branch)
        git(path, "cherry-pick", "--allow-empty", f"{fork}..{tip}", when=w.when)
    else:
        git(path, "merge", "-q", "--squash", branch, when=w.when)
        git(path, "commit", "-q", "-m", subject, when=w.when)
    landed = git(path, "rev-parse", "HEAD")
    w.op = "+" if branch == "fix-add" else w.op
    return landed


def make_landed_repo(
    path: Path, *, fix: str = "rebase", squashed_extra: bool = False
) -> LandedRepo:
    """The toy upstream; ``fix`` is how #63 lands (``rebase`` or ``squash``). ``fixed`` is the
    landed commit that fixes add(); ``fix_branch_tip`` is ``refs/pull/63/head``."""
    (path / "_build").mkdir(parents=True)
    (path / "toylib").mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "_build" / "backend.py").write_text(_BACKEND)
    (path / "pyproject.toml").write_text(_PYPROJECT)
    repo, w = LandedRepo(path), _Writer(path)
    for i, version in enumerate(RELEASES):
        for k in range(4):
            number = int(f"{i}{k + 1}")
            if version == INTRODUCED and k == 2:
                repo.introduced = _merged(path, w)
            elif version == FIXED and k == 2:
                repo.fix_branch_tip = _request(path, w, "fix-add", fix=True)
                repo.fixed = _land(path, w, "fix-add", repo.fix_branch_tip, fix, "Fix the sign")
                git(path, "update-ref", "refs/pull/63/head", repo.fix_branch_tip)
            elif squashed_extra and version == "1.7" and k == 2:
                tip = _request(path, w, "docs", fix=False)
                repo.squashed = _land(path, w, "docs", tip, "squash", "Write the docs")
                git(path, "update-ref", "refs/pull/71/head", tip)
            else:
                w.write(f"Tidy {version} (#{number})")
        w.version = version
        w.write(f"Release {version}")
        git(path, "tag", "-a", f"v{version}", "-m", f"toylib {version}")
        repo.tags[version] = git(path, "rev-parse", "HEAD")
    return repo


def _merged(path: Path, w: _Writer) -> str:
    """The breaking change on a branch merged by a merge commit naming no pull request;
    ``refs/pull/33/head`` at the branch's tip. The merge."""
    git(path, "checkout", "-q", "-b", "rework")
    tip = w.write("Rework add()", op="-")
    git(path, "checkout", "-q", "main")
    w.n += 1
    git(path, "merge", "-q", "--no-ff", "-m", "Merge branch 'rework'", "rework", when=w.when)
    git(path, "update-ref", "refs/pull/33/head", tip)
    return git(path, "rev-parse", "HEAD")
