"""The commits between two release tags in a mirror, as a history a bisection can search, and what
each one is: subject, date, pull request, whether it merges a branch. Read-only.

The history is git's first-parent chain from the newer tag back to (not including) the older one:
on a branch that merges pull requests with merge commits, each merge is one step, and the pull
request it brought in is named from its subject (``Merge pull request #N``), or from
``refs/pull/N/head`` pointing at its second parent; a squash-merged commit names it in its subject
(``Fix the FLCE backward (#1298)``) or is itself some ``refs/pull/N/head``; a commit of a rebase
or squash merge that none of these name has the patch of some ``refs/pull/N/head``
(:mod:`retire.mirrors.patchids`: ``git patch-id --stable``, once per range, cached).

Whether the package can be built from source cheaply at a commit is read from the tree too: a
tree with a ``pyproject.toml`` or ``setup.py`` and no compiled sources (C, C++, CUDA, Cython,
Rust, a CMake project) is built by uv in seconds; anything else stops the search at the release
edge, and :func:`build_obstacle` says why — unless a shim or lane names the command that builds
its wheel (:mod:`shims.wheelbuild`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from packaging.version import InvalidVersion, Version

from retire.core.git import GitError
from retire.mirrors.packagetree import BUILD_FILES, beyond_the_package, projects
from retire.mirrors.patchids import pulls_by_patch
from retire.mirrors.repo import MirrorRepo

__all__ = ["Commit", "build_obstacle", "commits_between", "release_tag"]

_SQUASH = re.compile(r"\(#(\d+)\)")
_MERGE = re.compile(r"^Merge pull request #(\d+)\b")
_PULL_REF = re.compile(r"^refs/pull/(\d+)/head$")
#: Files whose presence means a compiled extension: not built from source in seconds.
_COMPILED = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".pyx", ".rs")
_COMPILED_NAMES = ("CMakeLists.txt", "Cargo.toml")


@dataclass(frozen=True)
class Commit:
    """One commit of a release range."""

    sha: str
    subject: str
    # committer date, ISO 8601
    date: str
    # the pull request it landed, when the mirror says
    pull: int | None = None
    # whether it merges a branch (its first parent is the step before it)
    merge: bool = False

    @property
    def short(self) -> str:
        return self.sha[:12]

    def describe(self) -> str:
        """``abc123def456 "Fix add() (#7)" (2026-03-01, #7)``."""
        pull = f", #{self.pull}" if self.pull is not None else ""
        return f'{self.short} "{self.subject}" ({self.date[:10]}{pull})'


def release_tag(repo: MirrorRepo, version: str) -> str | None:
    """The mirror's release tag of ``version`` (PEP 440 equal), or None."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    for tag, text in repo.tag_versions():
        if Version(text) == wanted:
            return tag
    return None


def commits_between(repo: MirrorRepo, old: str, new: str) -> tuple[Commit, ...]:
    """First-parent commits in ``old..new`` (revisions: tags or shas), oldest first; ``new``'s
    commit is the last. Raises GitError when either is not in the mirror."""
    out = repo.git.run(
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H%x1f%cI%x1f%P%x1f%s",
        revs=[f"{old}^{{commit}}..{new}^{{commit}}"],
        paths=[],
    )
    pulls = _pull_heads(repo)
    found = []
    for line in out.splitlines():
        sha, date, parents, subject = [*line.split("\x1f", 3), "", "", ""][:4]
        if not sha:
            continue
        parent_list = parents.split()
        found.append(
            Commit(
                sha, subject, date, _pull_of(sha, subject, parent_list, pulls), len(parent_list) > 1
            )
        )
    return _named_by_patch(repo, tuple(found), old, new, pulls)


def _named_by_patch(
    repo: MirrorRepo, commits: tuple[Commit, ...], old: str, new: str, pulls: dict[str, int]
) -> tuple[Commit, ...]:
    """``commits`` with the pull requests of rebase and squash merges named where the cheaper
    rules named none (:mod:`retire.mirrors.patchids`; merges are named by their own rules)."""
    unnamed = [c.sha for c in commits if c.pull is None and not c.merge]
    if not unnamed or not pulls:
        return commits
    ends = [repo.git.rev_parse(f"{end}^{{commit}}") or end for end in (old, new)]
    found = pulls_by_patch(repo.git, unnamed, ends[0], ends[1], pulls, repo.cache)
    return tuple(replace(c, pull=found[c.sha]) if c.sha in found else c for c in commits)


def _pull_heads(repo: MirrorRepo) -> dict[str, int]:
    """{commit: pull request number} of every ``refs/pull/N/head`` in the mirror."""
    try:
        out = repo.git.run("for-each-ref", "--format=%(objectname) %(refname)", "refs/pull")
    except GitError:
        return {}
    heads = {}
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        if found := _PULL_REF.match(ref):
            heads[sha] = int(found.group(1))
    return heads


def _pull_of(sha: str, subject: str, parents: list[str], heads: dict[str, int]) -> int | None:
    """The pull request a commit landed: a merge's subject or its merged head, else the number a
    squash subject ends with, else a pull request whose head is the commit itself."""
    if merged := _MERGE.match(subject):
        return int(merged.group(1))
    if len(parents) > 1 and parents[1] in heads:
        return heads[parents[1]]
    numbers = _SQUASH.findall(subject)
    if numbers:
        # a cherry-pick names the picked PR and its own last: the last is this commit's
        return int(numbers[-1])
    return heads.get(sha)


def build_obstacle(
    repo: MirrorRepo, commit: str, subdirectory: str | None = None, *, named_build: bool = False
) -> str | None:
    """Why the package cannot be built from source cheaply at ``commit``, or None when it can: no
    build file, or compiled sources in its tree. With ``named_build`` (a shim or lane names the
    command that builds its wheel) only a missing folder stops it: the command knows the rest."""
    try:
        listing = repo.git.run(
            "ls-tree", "-r", "--name-only", revs=[commit], paths=[subdirectory or "."]
        )
    except GitError as exc:
        return f"cannot read the tree at {commit[:12]}: {exc}"
    paths = [PurePosixPath(line) for line in listing.splitlines() if line]
    root = PurePosixPath(subdirectory or ".")
    if named_build:
        return None if paths else f"nothing at {root} in {repo.mirror.repository} at {commit[:12]}"
    builds = [p for p in paths if p.parent == root and p.name in BUILD_FILES]
    if not builds:
        return (
            f"no pyproject.toml or setup.py at {root} in {repo.mirror.repository}: no build named"
        )
    compiled = _compiled(root, paths)
    if compiled:
        return (
            f"{repo.mirror.repository} has compiled sources ({compiled[0]}"
            f"{f' and {len(compiled) - 1} more' if len(compiled) > 1 else ''}): not built from "
            "source cheaply"
        )
    return None


def _compiled(root: PurePosixPath, paths: list[PurePosixPath]) -> list[PurePosixPath]:
    """The compiled sources the package's own build would meet: not those of a separate project
    in the tree (a folder with a build file of its own, such as Liger-Kernel's CMake
    ``liger_cute_kernels``), nor those of tests, benchmarks, examples or docs."""
    separate = projects(root, paths)
    return [
        path
        for path in paths
        if (path.suffix in _COMPILED or path.name in _COMPILED_NAMES)
        and not beyond_the_package(path, root, separate)
    ]
