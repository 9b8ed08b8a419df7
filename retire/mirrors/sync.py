"""``patchlane mirrors sync``: clone or update each mirror where the network allows.

Where it does not (an air-gapped cluster, a proxy that refuses), nothing changes and the result
says so in one line — the mirror keeps answering from what it has, and verdicts name what it lacks.
Mirrors are bare clones (``git clone --mirror``); an update fetches every branch and tag, pruning
what upstream deleted.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from retire.core.git import Git, GitError
from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror

__all__ = ["SyncResult", "sync"]

#: Seconds a clone or fetch may take.
TIMEOUT = 1800.0
_UNREACHABLE = (
    "could not resolve host",
    "unable to access",
    "connection refused",
    "connection timed out",
    "network is unreachable",
    "could not read from remote",
    "failed to connect",
    "no route to host",
    "name or service not known",
    "temporary failure in name resolution",
    "does not appear to be a git repository",
)


class SyncStatus(StrEnum):
    """How syncing one mirror ended."""

    CLONED = "cloned"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    #: the code host could not be reached from here: the mirror is kept as it was
    UNREACHABLE = "unreachable"
    FAILED = "failed"


@dataclass(frozen=True)
class SyncResult:
    repository: str
    path: Path
    status: SyncStatus
    detail: str = ""
    newest_commit_at: _dt.datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", SyncStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status != SyncStatus.FAILED


def _state(mirror: Mirror) -> tuple[str, _dt.datetime | None]:
    """A fingerprint of the refs (to tell updated from unchanged) and the newest commit time."""
    repo = open_mirror(mirror)
    if not isinstance(repo, MirrorRepo):
        return "", None
    try:
        refs = repo.git.run("for-each-ref", "--format=%(objectname) %(refname)")
        return refs, repo.newest_commit_at
    except GitError:
        return "", None


def _why(exc: GitError) -> tuple[str, str]:
    text = str(exc)
    status = "unreachable" if any(marker in text.lower() for marker in _UNREACHABLE) else "failed"
    return status, text


def sync(mirror: Mirror, *, timeout: float = TIMEOUT) -> SyncResult:
    """Clone ``mirror`` if it is missing, else fetch into it; never raises."""
    path = mirror.path
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            Git(path.parent, search_parents=False, timeout=timeout).run(
                "clone", "--mirror", "--quiet", "--", mirror.fetch_url, path.name
            )
        except GitError as exc:
            status, text = _why(exc)
            return SyncResult(
                mirror.repository,
                path,
                SyncStatus(status),
                f"could not clone {mirror.fetch_url}: {text}",
            )
        except OSError as exc:
            return SyncResult(
                mirror.repository,
                path,
                SyncStatus.FAILED,
                f"cannot create {path.parent}: {exc.strerror or exc}",
            )
        _, newest = _state(mirror)
        return SyncResult(
            mirror.repository, path, SyncStatus.CLONED, f"from {mirror.fetch_url}", newest
        )
    before, newest = _state(mirror)
    git = Git(path, search_parents=False, timeout=timeout)
    try:
        if git.run("rev-parse", "--is-bare-repository") == "true":
            git.run(
                "fetch",
                "--quiet",
                "--prune",
                "--",
                mirror.fetch_url,
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            )
        # a working clone: update its remote-tracking refs and tags only
        else:
            git.run(
                "fetch",
                "--quiet",
                "--prune",
                "--tags",
                "--",
                mirror.fetch_url,
                "+refs/heads/*:refs/remotes/origin/*",
            )
    except GitError as exc:
        status, text = _why(exc)
        fresh = f" (newest commit {newest.date()})" if newest else ""
        return SyncResult(
            mirror.repository,
            path,
            SyncStatus(status),
            f"could not fetch {mirror.fetch_url}: {text}; the mirror is unchanged{fresh}",
            newest,
        )
    after, newest = _state(mirror)
    return SyncResult(
        mirror.repository,
        path,
        SyncStatus.UPDATED if after != before else SyncStatus.UNCHANGED,
        "",
        newest,
    )
