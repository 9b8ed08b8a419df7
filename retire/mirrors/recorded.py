"""A shim's window as its recorded runs show it, for every reader that is not ``patchlane bisect``:
the first release its bug is gone in and the last one it reproduced in, from the validation
records of release runs; and, where a mirror orders them, the commit that fixed it, from the
records of commit runs (their host stamp names the commit, ``ValidationRecord.revisions``).

Only runs *without* the shim that prove something count (the bug, or its absence); the newest run
of a release or a commit decides. Without a mirror the answer stays at the releases: commits
cannot be ordered. The mirror is only read (``git log``), never fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.core import mdsafe
from retire.core.git import GitError
from retire.evidence.validation import FIXED, PROVING, ValidationRecord
from retire.mirrors.history import Commit, commits_between, release_tag
from retire.mirrors.repo import MirrorRepo
from shims.model import ShimManifest

__all__ = ["RecordedFix", "branch_fix", "recorded_fix", "shim_fix"]


@dataclass(frozen=True)
class RecordedFix:
    """The fixed edge of a shim's window on record: ``first_fixed`` and ``last_broken`` are
    adjacent among the releases run; ``commit`` is the first clean commit between their tags,
    when commit runs pin it."""

    shim: str
    distribution: str
    first_fixed: str
    last_broken: str
    commit: Commit | None = None

    def line(self) -> str:
        """``fixed in 0.8.2 (last broken 0.8.1), by 03b730e60c50 "Fix the FLCE backward" (#1298)``
        (plain text: the subject is upstream's)."""
        said = f"fixed in {self.first_fixed} (last broken {self.last_broken})"
        if self.commit is not None:
            said += f', by {self.commit.short} "{self.commit.subject}"{_pull(self.commit)}'
        return said

    def markdown(self) -> str:
        """:meth:`line` for a Markdown document: versions and sha as code, the subject inert."""
        said = (
            f"fixed in {mdsafe.code(self.first_fixed)} "
            f"(last broken {mdsafe.code(self.last_broken)})"
        )
        if self.commit is not None:
            said += (
                f", by {mdsafe.code(self.commit.short)} "
                f'"{mdsafe.text(self.commit.subject, 120)}"{_pull(self.commit)}'
            )
        return said

    def to_json(self) -> dict[str, object]:
        commit = self.commit
        return {
            "first_fixed": self.first_fixed,
            "last_broken": self.last_broken,
            "commit": None
            if commit is None
            else {"sha": commit.sha, "subject": commit.subject, "pull": commit.pull},
            "line": self.line(),
        }


def _pull(commit: Commit) -> str:
    return f" (#{commit.pull})" if commit.pull is not None else ""


def recorded_fix(
    records: Iterable[ValidationRecord],
    shim: str,
    distribution: str,
    repo: MirrorRepo | None = None,
) -> RecordedFix | None:
    """``shim``'s fixed edge on ``distribution``'s releases as ``records`` show it, with the fix
    commit where ``repo`` (the target's mirror) orders the recorded commit runs; None when no
    release run shows the bug and a newer one its absence."""
    releases, commits = _states(records, shim, distribution)
    edge = _release_edge(releases)
    if edge is None:
        return None
    last_broken, first_fixed = edge
    commit = _fix_commit(repo, last_broken, first_fixed, commits) if repo is not None else None
    return RecordedFix(shim, distribution, first_fixed, last_broken, commit)


def shim_fix(
    manifest: ShimManifest,
    records: Sequence[ValidationRecord],
    mirror_of: Callable[[ShimManifest], MirrorRepo | None] | None = None,
) -> RecordedFix | None:
    """:func:`recorded_fix` of ``manifest``'s shim on its target; ``mirror_of`` (the target's
    mirror, or None) is called only where the releases show an edge and commit runs of the shim
    are on record."""
    mine = [r for r in records if r.shim == manifest.id]
    dist = manifest.target.distribution
    found = recorded_fix(mine, manifest.id, dist)
    if found is None or mirror_of is None or not any(r.revisions for r in mine):
        return found
    return recorded_fix(mine, manifest.id, dist, mirror_of(manifest))


def _states(
    records: Iterable[ValidationRecord], shim: str, distribution: str
) -> tuple[dict[Version, bool], dict[str, bool]]:
    """{release: fixed?} of the release runs and {commit: fixed?} of the commit runs, the newest
    run of each deciding."""
    target = canonicalize_name(distribution)
    newest: dict[tuple[str, str], ValidationRecord] = {}
    for record in records:
        if record.shim != shim or record.mode != "without" or record.outcome not in PROVING:
            continue
        revisions = {canonicalize_name(k): v for k, v in record.revisions.items()}
        versions = {canonicalize_name(k): v for k, v in record.versions.items()}
        if target in revisions:
            key = ("commit", revisions[target])
        elif versions.get(target):
            key = ("release", str(versions[target]))
        else:
            continue
        seen = newest.get(key)
        if seen is None or record.started_at >= seen.started_at:
            newest[key] = record
    releases: dict[Version, bool] = {}
    commits: dict[str, bool] = {}
    for (kind, item), record in newest.items():
        fixed = record.outcome in FIXED
        if kind == "commit":
            commits[item] = fixed
        elif (version := _version(item)) is not None:
            releases[version] = fixed
    return releases, commits


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _release_edge(releases: Mapping[Version, bool]) -> tuple[str, str] | None:
    """(last broken, first fixed): the newest release the bug showed in, and the oldest newer
    one it was gone in; None without both."""
    broken = [v for v, fixed in releases.items() if not fixed]
    if not broken:
        return None
    last = max(broken)
    clean = [v for v, fixed in releases.items() if fixed and v > last]
    if not clean:
        return None
    return str(last), str(min(clean))


def _fix_commit(
    repo: MirrorRepo, last_broken: str, first_fixed: str, runs: Mapping[str, bool]
) -> Commit | None:
    """The first clean commit between the two releases' tags, when the runs pin it: the commit
    after the newest broken one (the older tag when none) was run and clean (the newer tag's
    commit is clean by the release run)."""
    old, new = release_tag(repo, last_broken), release_tag(repo, first_fixed)
    if old is None or new is None:
        return None
    try:
        commits = commits_between(repo, old, new)
    except GitError:
        return None
    states = {i: runs[c.sha] for i, c in enumerate(commits) if c.sha in runs}
    if not states:
        return None
    states.setdefault(len(commits) - 1, True)
    broken = [i for i, fixed in states.items() if not fixed]
    after = max(broken) + 1 if broken else 0
    if after >= len(commits) or not states.get(after):
        return None
    return commits[after]


def branch_fix(
    records: Iterable[ValidationRecord],
    shim: str,
    distribution: str,
    repo: MirrorRepo,
    branch: str,
) -> Commit | None:
    """The commit that fixed ``shim``'s bug on ``branch`` after its newest broken release, when no
    newer release was run clean (a fix in no release, or in one nobody ran yet): the first-parent
    commit after the newest broken commit run from that release's tag (the tag itself when none)
    was run clean. None when the records do not pin it, or the mirror cannot say."""
    releases, commits = _states(records, shim, distribution)
    broken = [v for v, fixed in releases.items() if not fixed]
    if not broken or not commits:
        return None
    last = max(broken)
    if any(fixed and v > last for v, fixed in releases.items()):
        return None
    old = release_tag(repo, str(last))
    if old is None:
        return None
    try:
        history = commits_between(repo, old, f"refs/heads/{branch}")
    except GitError:
        return None
    states = {i: commits[c.sha] for i, c in enumerate(history) if c.sha in commits}
    bugs = [i for i, fixed in states.items() if not fixed]
    after = max(bugs) + 1 if bugs else 0
    return history[after] if states.get(after) else None
