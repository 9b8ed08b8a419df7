"""The look-ups of one gather as typed values: each distinct one is planned once and run once.

A job is a frozen value (equal jobs are one job) with the probe ``kind`` and ``target`` a failure
names, and ``run``, which asks through the :class:`Probes` every job of a gather shares.
:func:`start` runs jobs on a pool; a job that raises becomes a :class:`ProbeFailure`, so one
broken probe never stops the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from retire.evidence.values import (
    Ancestry,
    BranchTip,
    MirrorPull,
    ProbeFailure,
    ReleaseList,
    TagContainment,
)
from retire.probes import codehost, index
from retire.probes.codehost import LinkState
from retire.probes.http import Fetcher
from retire.verdicts.mirrored import OpenMirrors

__all__ = [
    "AncestryJob",
    "CommitJob",
    "Job",
    "LinksJob",
    "Probes",
    "PullJob",
    "ReleasesJob",
    "TipJob",
    "start",
]

_R_co = TypeVar("_R_co", covariant=True)
_R = TypeVar("_R")


@dataclass(frozen=True)
class Probes:
    """What every job of one gather asks through."""

    fetcher: Fetcher
    mirrors: OpenMirrors
    api_base: str
    web_host: str
    token: str | None
    workers: int


class Job(Protocol[_R_co]):
    #: the probe a failure names (index, git, mirror-pull, tip, codehost)
    kind: ClassVar[str]

    @property
    def target(self) -> str: ...

    def run(self, probes: Probes) -> _R_co: ...


@dataclass(frozen=True)
class ReleasesJob:
    """The releases of ``distribution`` on the indexes a lane takes it from."""

    kind: ClassVar[str] = "index"
    distribution: str
    # in uv's priority order, or why no index is known
    urls: tuple[str, ...] | ProbeFailure

    @property
    def target(self) -> str:
        return self.distribution

    def run(self, probes: Probes) -> ReleaseList | ProbeFailure:
        if isinstance(self.urls, ProbeFailure):
            return self.urls
        return index.probe_releases(probes.fetcher, self.distribution, self.urls)


@dataclass(frozen=True)
class CommitJob:
    """Which release tags of the mirror of ``repository`` contain ``commit``."""

    kind: ClassVar[str] = "git"
    repository: str
    commit: str

    @property
    def target(self) -> str:
        return self.repository

    def run(self, probes: Probes) -> TagContainment | ProbeFailure:
        return probes.mirrors.commit(self.repository, self.commit)


@dataclass(frozen=True)
class PullJob:
    """What the mirror of ``repository`` says of pull request ``number`` (linked as ``url``)."""

    kind: ClassVar[str] = "mirror-pull"
    url: str
    repository: str
    number: int

    @property
    def target(self) -> str:
        return self.url

    def run(self, probes: Probes) -> MirrorPull | ProbeFailure:
        return probes.mirrors.pull(self.repository, self.number)


@dataclass(frozen=True)
class TipJob:
    """Whether ``commit`` (a run was built from it) is the newest of a branch the mirror follows."""

    kind: ClassVar[str] = "tip"
    repository: str
    commit: str

    @property
    def target(self) -> str:
        return self.repository

    def run(self, probes: Probes) -> BranchTip | ProbeFailure:
        return probes.mirrors.tip(self.repository, self.commit)


@dataclass(frozen=True)
class AncestryJob:
    """Where ``rev`` (a commit a lane locked or a run was built from, or a branch a lane follows:
    its newest commit) stands among the release tags of the mirror of ``repository``."""

    kind: ClassVar[str] = "ancestry"
    repository: str
    rev: str

    @property
    def target(self) -> str:
        return self.repository

    def run(self, probes: Probes) -> Ancestry | ProbeFailure:
        return probes.mirrors.ancestry(self.repository, self.rev)


@dataclass(frozen=True)
class LinksJob:
    """Every issue and pull-request URL at once: GraphQL batches with a token, REST without (it
    fans out itself)."""

    kind: ClassVar[str] = "codehost"
    urls: tuple[str, ...]

    @property
    def target(self) -> str:
        return "every link"

    def run(self, probes: Probes) -> Mapping[str, LinkState]:
        return codehost.probe_links(
            probes.fetcher,
            list(self.urls),
            api_base=probes.api_base,
            token=probes.token,
            web_host=probes.web_host,
            workers=probes.workers,
        )


def _guarded(job: Job[_R], probes: Probes) -> _R | ProbeFailure:
    try:
        return job.run(probes)
    except Exception as exc:  # noqa: BLE001 - a probe bug must not stop the other shims
        return ProbeFailure(job.kind, job.target, f"internal error: {type(exc).__name__}: {exc}")


def start(
    pool: Executor, probes: Probes, jobs: Sequence[Job[_R]]
) -> list[Future[_R | ProbeFailure]]:
    """One future per job, in the jobs' order (zip them back together)."""
    return [pool.submit(_guarded, job, probes) for job in jobs]
