"""Reading a local mirror: which commit landed pull request #N, which release tags contain a
commit, how fresh the mirror is. Read-only; nothing here fetches (``retire.mirrors.sync`` does).

One :class:`MirrorRepo` per mirror and gather: the branch history is read once (one ``git log``
of the followed branches) and every pull-request look-up is a dictionary access, so a hundred
shims cost one read per repository.

How a pull request lands, as upstreams do it:

- a squash merge: the subject ends with ``(#N)`` (``Fix the FLCE backward (#1298)``);
- a merge commit: ``Merge pull request #N from owner/branch``;
- a cherry-pick onto a release branch that keeps the number: another commit whose subject has
  ``(#N)``, possibly next to the pick's own number (``cp: `Fix (#4711)` into `core_r0.19.0`
(#4790)``).

Every such commit counts (the release tags of any of them contain the fix), except reverts.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import re
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from packaging.version import InvalidVersion, Version

from retire.core.git import Git, GitError, revision
from retire.evidence.values import Ancestry, BranchTip, MirrorPull, ProbeFailure, TagContainment
from retire.mirrors.config import Mirror

__all__ = ["Landing", "MirrorRepo", "open_mirror"]

_SQUASH = re.compile(r"\(#(\d+)\)")
_MERGE = re.compile(r"^Merge pull request #(\d+)\b")
_REVERT = re.compile(r"^Revert\b", re.IGNORECASE)
_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
#: Seconds one read of a mirror may take (a large monorepo's history included).
TIMEOUT = 120.0
#: Seconds matching every tag of a mirror against its release-tag pattern may take (the patterns
#: are checked when read, so this is a last bound, as a probe's deadline is).
TAGS_BUDGET_S = 30.0


class TagsTooSlowError(GitError):
    """Matching the tags took past :data:`TAGS_BUDGET_S`: a failure of the look-up, never a hang."""


@dataclass(frozen=True)
class Landing:
    sha: str
    # committer time, epoch seconds
    time: int
    # squash | merge
    how: str
    subject: str


def _sync_hint(mirror: Mirror) -> str:
    return f"`patchlane mirrors sync` (or clone {mirror.fetch_url} to {mirror.path})"


class MirrorRepo:
    """Cached reads of one mirror. Construct with :func:`open_mirror`."""

    def __init__(self, mirror: Mirror, git: Git, cache: Path | None = None) -> None:
        self.mirror = mirror
        self.git = git
        # where answers computed from the mirror are kept (the pull requests found by patch)
        self.cache = cache
        self._lock = threading.Lock()

    # -- history ------------------------------------------------------------------------------
    def _branch_args(self) -> list[str] | None:
        """The followed branches as explicit refs (git's own ``--branches=NAME`` would read a plain
        name as ``NAME/*``), None for every branch. A pattern that matches nothing follows
        nothing."""
        if not self.mirror.branches:
            return None
        heads = self.git.run(
            "for-each-ref", "--format=%(refname:strip=2)", "refs/heads"
        ).splitlines()
        return [f"refs/heads/{head}" for head in heads if self._follows(head)]

    def _follows(self, head: str) -> bool:
        """Whether the branch named ``head`` is followed (every branch when none is configured)."""
        return not self.mirror.branches or any(
            fnmatch.fnmatchcase(head, p) for p in self.mirror.branches
        )

    @cached_property
    def _history(self) -> tuple[dict[int, list[Landing]], int | None]:
        refs = self._branch_args()
        if refs is None:
            out = self.git.run("log", "--format=%H%x1f%ct%x1f%s", "--branches", paths=[])
        else:
            out = (
                self.git.run("log", "--format=%H%x1f%ct%x1f%s", revs=refs, paths=[]) if refs else ""
            )
        landed: dict[int, list[Landing]] = {}
        newest: int | None = None
        # git log lists newest first; landings are kept oldest first
        for line in reversed(out.splitlines()):
            sha, _, rest = line.partition("\x1f")
            when, _, subject = rest.partition("\x1f")
            if not when.isdigit():
                continue
            newest = max(newest or 0, int(when))
            if _REVERT.match(subject):
                continue
            merge = _MERGE.match(subject)
            numbers = {int(merge.group(1))} if merge else {int(n) for n in _SQUASH.findall(subject)}
            for number in numbers:
                landed.setdefault(number, []).append(
                    Landing(sha, int(when), "merge" if merge else "squash", subject)
                )
        return landed, newest

    def landings(self, number: int) -> list[Landing]:
        """Every commit that landed ``#number``, oldest first."""
        with self._lock:
            landed, _ = self._history
        # stable: ties keep history order
        return sorted(landed.get(number, []), key=lambda landing: landing.time)

    @property
    def newest_commit_at(self) -> _dt.datetime | None:
        with self._lock:
            _, newest = self._history
        return _dt.datetime.fromtimestamp(newest, _dt.UTC) if newest else None

    # -- tags -----------------------------------------------------------------------------------
    @cached_property
    def _tags(self) -> tuple[tuple[str, str], ...] | TagsTooSlowError:
        """(tag, version) of every release tag: the mirror's pattern matched and the version is
        PEP 440; or, kept so that no other look-up waits again, why the tags could not be read in
        time."""
        out = self.git.run("for-each-ref", "--format=%(refname:strip=2)", "refs/tags")
        found = []
        began = time.monotonic()
        for count, tag in enumerate(out.splitlines()):
            if count % 64 == 0 and time.monotonic() - began > TAGS_BUDGET_S:
                return TagsTooSlowError(
                    f"matching its tags against the pattern {self.mirror.tags!r} took over "
                    f"{TAGS_BUDGET_S:g}s ({count} tags): simplify tags in patchlane.toml"
                )
            text = self.mirror.tag_version(tag.strip())
            if text is None:
                continue
            try:
                Version(text)
            except InvalidVersion:
                continue
            found.append((tag.strip(), text))
        return tuple(found)

    def tag_versions(self) -> tuple[tuple[str, str], ...]:
        with self._lock:
            found = self._tags
        if isinstance(found, TagsTooSlowError):
            raise found
        return found

    def containment(self, commits: list[str]) -> TagContainment:
        """The tags containing any of ``commits`` (the first is named as *the* commit)."""
        release = dict(self.tag_versions())
        containing: list[str] = []
        for sha in commits:
            for tag in self.git.run("tag", "--contains", revision(sha)).splitlines():
                if tag.strip() and tag.strip() not in containing:
                    containing.append(tag.strip())
        release_tags = tuple(t for t in containing if t in release)
        return TagContainment(
            self.mirror.repository, commits[0], tuple(containing), release_tags, self.tag_versions()
        )

    # -- probes (never raise) -------------------------------------------------------------------
    def probe_pull(self, number: int) -> MirrorPull | ProbeFailure:
        """What the mirror says of pull request ``#number``."""
        target = f"{self.mirror.repository}#{number}"
        try:
            found = self.landings(number)
            newest = self.newest_commit_at
            if not found:
                return MirrorPull(
                    self.mirror.repository, number, None, "none", newest_commit_at=newest
                )
            first = found[0]
            return MirrorPull(
                self.mirror.repository,
                number,
                first.sha,
                first.how,
                first.subject,
                self.containment([landing.sha for landing in found]),
                newest,
            )
        except GitError as exc:
            return ProbeFailure(
                "git", target, f"reading the mirror at {self.mirror.path} failed: {exc}"
            )

    def _probe(self, commit: str, read, *, target: str | None = None):
        """``read(full sha)`` for a commit of the mirror (or a ``refs/heads/`` branch), or why not
        (never raises); a commit the mirror lacks is a retryable failure: the mirror may be
        behind."""
        target = f"{self.mirror.repository}@{(target or commit)[:12]}"
        if not commit.startswith("refs/heads/") and not _COMMIT.fullmatch(commit):
            return ProbeFailure("git", target, f"not a commit sha: {commit!r}")
        try:
            full = self.git.rev_parse(f"{commit}^{{commit}}")
            if full is None:
                return ProbeFailure(
                    "git",
                    target,
                    f"commit {commit[:12]} is not in the mirror at {self.mirror.path}: "
                    f"the mirror is behind, or the sha is wrong — {_sync_hint(self.mirror)}",
                    retryable=True,
                )
            return read(full)
        except GitError as exc:
            return ProbeFailure(
                "git", target, f"reading the mirror at {self.mirror.path} failed: {exc}"
            )

    def probe_commit(self, commit: str) -> TagContainment | ProbeFailure:
        """Which release tags contain ``commit``."""
        return self._probe(commit, lambda full: self.containment([full]))

    def _release_bounds(
        self, listing: str
    ) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
        """(newest, oldest) release tag by version among ``git tag`` output ``listing``."""
        versions = dict(self.tag_versions())
        tags = {line.strip() for line in listing.splitlines()} & versions.keys()
        found = sorted((Version(versions[tag]), tag) for tag in tags)
        if not found:
            return None, None
        high, low = found[-1][1], found[0][1]
        return (high, versions[high]), (low, versions[low])

    def probe_ancestry(self, rev: str) -> Ancestry | ProbeFailure:
        """Where ``rev`` (a commit, or a followed branch: its newest commit) stands among the
        release tags: the newest release it contains and the oldest release that contains it."""
        branch = rev if not _COMMIT.fullmatch(rev) and self._is_branch(rev) else None
        asked = f"refs/heads/{rev}" if branch else rev

        def read(full: str) -> Ancestry:
            contains, _ = self._release_bounds(self.git.run("tag", "--merged", revision(full)))
            _, within = self._release_bounds(self.git.run("tag", "--contains", revision(full)))
            return Ancestry(self.mirror.repository, full, contains, within, branch)

        return self._probe(asked, read, target=rev)

    def _is_branch(self, name: str) -> bool:
        return self.git.rev_parse(f"refs/heads/{name}") is not None

    def probe_tip(self, commit: str) -> BranchTip | ProbeFailure:
        """Which followed branches end at ``commit`` (a revision a reproducer ran on)."""

        def read(full: str) -> BranchTip:
            heads = self.git.run(
                "for-each-ref",
                "--points-at",
                revision(full),
                "--format=%(refname:strip=2)",
                "refs/heads",
            )
            branches = tuple(sorted(h for h in heads.split() if self._follows(h)))
            return BranchTip(self.mirror.repository, full, branches, self.newest_commit_at)

        return self._probe(commit, read)


def open_mirror(mirror: Mirror, cache: Path | None = None) -> MirrorRepo | ProbeFailure:
    """A readable mirror, or why not (missing folder, not a repository); ``cache``: where answers
    computed from it are kept (:attr:`MirrorSet.cache`)."""
    target = mirror.repository
    if not mirror.path.exists():
        return ProbeFailure(
            "git",
            target,
            f"no mirror of {mirror.repository} at {mirror.path}: {_sync_hint(mirror)}",
        )
    git = Git(mirror.path, search_parents=False, timeout=TIMEOUT)
    try:
        if not git.is_repository():
            return ProbeFailure(
                "git", target, f"{mirror.path} is not a git repository: {_sync_hint(mirror)}"
            )
    except GitError as exc:
        return ProbeFailure("git", target, f"{mirror.path}: {exc}")
    return MirrorRepo(mirror, git, cache)
