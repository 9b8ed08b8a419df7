"""What a proposing run takes (values): where its branches start, where their pull requests go,
and where their re-locks find mirrors and indexes — for retirement branches (``ApplyOptions``)
and lock bumps (``BumpOptions``)."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import httpx

from retire.bisect.budget import Budget
from retire.core import uv
from retire.lanes.revisions import MirrorLookup

__all__ = ["ApplyOptions", "BumpOptions"]


@dataclass(frozen=True)
class ApplyOptions:
    """How :func:`retire.branches.autodrop.apply` proposes its branches."""

    # the commit (or branch) every branch starts from
    base: str = "HEAD"
    # push each branch to ``remote`` and find or open its pull request
    open_prs: bool = True
    # owner/name on the code host
    repository: str | None = None
    api_base: str | None = None
    remote: str = "origin"
    # the branch pull requests go to (default: the branch ``base`` names, else main)
    pr_base: str | None = None
    # default: GITHUB_TOKEN / GH_TOKEN from the environment
    token: str | None = None
    client: httpx.Client | None = None
    # every re-lock: this host's git mirrors (lanes pinned to revisions) and index URLs
    mirrors: MirrorLookup | None = None
    host: uv.HostIndexes | None = None


@dataclass(frozen=True)
class BumpOptions:
    """What :func:`retire.branches.bump.bump` bumps, and where its branch goes."""

    # lane names or globs (default: every lane)
    lanes: tuple[str, ...] = ()
    # only these packages move (default: everything the cooldown lets through)
    packages: tuple[str, ...] = ()
    cooldown_days: int = 7
    # the moment the cooldown counts back from (default: now)
    now: _dt.datetime | None = None
    base: str = "HEAD"
    run_suites: bool = True
    open_pr: bool = False
    repository: str | None = None
    api_base: str | None = None
    pr_base: str | None = None
    # link each moved package's release notes (the index is asked)
    release_notes_links: bool = True
    mirrors: MirrorLookup | None = None
    host: uv.HostIndexes | None = None
    # what the culprit searches of newly broken lanes may spend (None: retire.branches.breaks')
    culprit_budget: Budget | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lanes", tuple(self.lanes))
        object.__setattr__(self, "packages", tuple(self.packages))
