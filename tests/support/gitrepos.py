"""Real git repositories for tests: an upstream with releases, a fix branch merged by a merge
commit, and tags — the shape the git probe reads in a mirror."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from retire.core.git import Git

_ENV = {
    "GIT_AUTHOR_NAME": "upstream", "GIT_AUTHOR_EMAIL": "upstream@example.org",
    "GIT_COMMITTER_NAME": "upstream", "GIT_COMMITTER_EMAIL": "upstream@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    return Git(repo, env=_ENV).run(*args).strip()


def commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Upstream:
    path: Path
    first: str  # in v1.0
    fix: str  # the fix commit on its branch
    merge: str  # the merge commit of the fix (in v1.1)
    unreleased: str  # a later fix, in no release tag


def make_upstream(path: Path) -> Upstream:
    """v1.0 → fix branch merged with a merge commit → v1.1 (+ a non-release tag) → an unreleased commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    first = commit(path, "toylib.py", "def add(a, b):\n    return a - b\n", "toylib 1.0")
    git(path, "tag", "v1.0")
    git(path, "checkout", "-q", "-b", "fix-add")
    fix = commit(path, "toylib.py", "def add(a, b):\n    return a + b\n", "fix add()")
    git(path, "checkout", "-q", "main")
    commit(path, "README", "toylib\n", "docs")
    git(path, "merge", "-q", "--no-ff", "-m", "Merge pull request #2 from fix-add", "fix-add")
    merge = git(path, "rev-parse", "HEAD")
    git(path, "tag", "-a", "v1.1", "-m", "toylib 1.1")
    git(path, "tag", "nightly-2026-03-01")
    unreleased = commit(path, "CHANGES", "more\n", "another fix")
    return Upstream(path, first, fix, merge, unreleased)
