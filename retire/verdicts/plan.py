"""The plan of one gather (no network): the local evidence, and every distinct look-up as a job.

:func:`plan` reads the lanes' locks and the recorded runs, and lists what the shims' conditions
and links need asked — the releases of a distribution per lane (on the indexes the lane takes it
from, :func:`lane_index_urls`), the mirrors' view of linked pull requests and of fix commits,
whether a run's upstream revision is a followed branch's tip (in the target's mirror, found by the
one resolver: :mod:`retire.mirrors.resolve`), every issue and pull-request state — each job once,
however many shims need it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from retire.evidence.validation import ValidationRecord
from retire.evidence.values import ExecutionHistory, ProbeFailure
from retire.history.reading import read
from retire.history.window import Window
from retire.lanes.model import IndexSpec, Lane
from retire.lanes.revisions import vcs_entries
from retire.locks import locking
from retire.mirrors.config import MirrorSet
from retire.mirrors.resolve import Resolved, release_versions, resolve
from retire.probes import codehost, records
from retire.verdicts.jobs import AncestryJob, CommitJob, LinksJob, PullJob, ReleasesJob, TipJob
from shims.model import CommitInTag, PrReleased, ShimManifest, VersionFloor

__all__ = [
    "GatherPlan",
    "LockPackages",
    "ReleaseLookup",
    "ShimPlan",
    "Sources",
    "lane_index_urls",
    "lock_commits",
    "lock_packages",
    "plan",
    "unique",
]

#: canonical package name → version, of one lane's lock (None: the lane has no readable lock)
LockPackages = Mapping[str, str] | None

#: A full or abbreviated commit sha (a rev that is none of these is a branch or a tag).
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")

_J = TypeVar("_J", bound=Hashable)


def lane_index_urls(
    lane: Lane, distribution: str, *, named: Mapping[str, str], default: str | None
) -> tuple[str, ...] | ProbeFailure:
    """Where ``lane`` takes ``distribution`` from, in uv's priority order (the index it is
    pinned to; else the lane's extra indexes, then its default — the lane's own, else
    ``default``), or why none is known (an ``index`` failure naming the distribution)."""
    name = canonicalize_name(distribution)
    sources = {canonicalize_name(package): index for package, index in lane.sources}

    def url_of(spec: IndexSpec) -> str | None:
        return spec.url or named.get(spec.name)

    pinned = sources.get(name)
    if pinned is not None:
        spec = lane.index(pinned)
        url = url_of(spec) if spec else None
        if url:
            return (url,)
        return ProbeFailure(
            "index",
            name,
            f"lane {lane.name}: index {pinned!r} has no URL on this host (set "
            f"UV_INDEX={pinned}=<url>)",
        )
    explicit = set(sources.values())
    extras = [
        url for i in lane.indexes if not i.default and i.name not in explicit and (url := url_of(i))
    ]
    lane_default = next((url_of(i) for i in lane.indexes if i.default), None)
    chosen = lane_default or default
    urls = tuple(extras + ([chosen] if chosen else []))
    if not urls:
        return ProbeFailure(
            "index",
            name,
            f"lane {lane.name}: no index URL for {name} — set UV_DEFAULT_INDEX or pass --index-url",
        )
    return urls


def lock_packages(locks_dir: Path, lane_name: str) -> LockPackages:
    """{canonical name: version} of a lane's lock (None: no readable lock). A package the lock takes
    from a git revision ([lane.revisions]) is left out: its version names no release of the
    index."""
    try:
        lock = locking.read_lock(locking.lock_path(Path(locks_dir), lane_name))
    except ValueError:
        return None
    if lock is None:
        return None
    return {
        canonicalize_name(p["name"]): str(p.get("version") or "")
        for p in lock.get("packages", [])
        if isinstance(p, dict) and "name" in p and "vcs" not in p
    }


def lock_commits(locks_dir: Path, lane_name: str) -> Mapping[str, str]:
    """{canonical name: commit} of the packages a lane's lock takes from a git revision
    ([lane.revisions]: the lock's ``vcs.commit-id``); empty without a readable lock."""
    try:
        lock = locking.read_lock(locking.lock_path(Path(locks_dir), lane_name))
    except ValueError:
        return {}
    if lock is None:
        return {}
    return {
        name: str(vcs["commit-id"])
        for name, vcs in vcs_entries(lock).items()
        if isinstance(vcs.get("commit-id"), str)
    }


# ---------------------------------------------------------------------------------------------
# Plan: the local evidence, and every distinct look-up as a job


@dataclass(frozen=True)
class ReleaseLookup:
    """One lane's look-up of the releases of a distribution a shim's conditions name."""

    lane: str
    distribution: str
    job: ReleasesJob


@dataclass(frozen=True)
class ShimPlan:
    manifest: ShimManifest
    # the lanes that list the shim
    lanes: tuple[Lane, ...]
    releases: tuple[ReleaseLookup, ...] = ()
    # the mirror of the target, as every command finds it (retire.mirrors.resolve); None when
    # no run was made on a commit of the target (nothing to order) or none is on this host
    mirror: Resolved | None = None


@dataclass(frozen=True)
class Sources:
    """Where releases and links are looked up: the host's named indexes and default index, the
    code host's web host, the mirrors."""

    named: Mapping[str, str]
    default: str | None
    web_host: str
    mirrors: MirrorSet


@dataclass(frozen=True)
class GatherPlan:
    shims: tuple[ShimPlan, ...]
    locks: Mapping[str, LockPackages]
    histories: Mapping[str, ExecutionHistory | ProbeFailure]
    # lane → {canonical name: commit} of what its lock takes from a git revision
    locked_commits: Mapping[str, Mapping[str, str]]
    # one job for every link (None: no link to ask about)
    links: LinksJob | None
    releases: tuple[ReleasesJob, ...]
    commits: tuple[CommitJob, ...]
    pulls: tuple[PullJob, ...]
    tips: tuple[TipJob, ...]
    ancestry: tuple[AncestryJob, ...] = ()
    # shim → its window on its target's releases, from every recorded run (retire.history; no
    # shim when no run counts)
    windows: Mapping[str, Window] = field(default_factory=dict)
    # every record of the validation manifest (none when it could not be read)
    records: tuple[ValidationRecord, ...] = ()


def _release_lookups(
    manifest: ShimManifest, lanes: Sequence[Lane], sources: Sources
) -> tuple[ReleaseLookup, ...]:
    """A look-up per lane for each condition that reads the index (version-floor, pr-released),
    and for the target itself, always: releases newer than any run covers make a candidate."""
    wanted = {canonicalize_name(manifest.target.distribution): None}
    for condition in manifest.retirement.conditions:
        if isinstance(condition, VersionFloor | PrReleased):
            wanted[canonicalize_name(condition.distribution)] = None
    found: list[ReleaseLookup] = []
    for dist in wanted:
        for lane in lanes:
            urls = lane_index_urls(lane, dist, named=sources.named, default=sources.default)
            found.append(ReleaseLookup(lane.name, dist, ReleasesJob(dist, urls)))
    return tuple(found)


def _commit_jobs(manifest: ShimManifest) -> list[CommitJob]:
    return [
        CommitJob(c.repository, c.commit)
        for c in manifest.retirement.conditions
        if isinstance(c, CommitInTag)
    ]


def _mirrored_links(manifest: ShimManifest, sources: Sources) -> tuple[list[str], list[PullJob]]:
    """(every issue / PR URL the code host is asked about, the pull requests a mirror is asked
    about)."""
    urls: list[str] = []
    pulls: list[PullJob] = []
    for url in manifest.upstream_urls:
        ref = codehost.parse_link(url, web_host=sources.web_host)
        if ref is None:
            continue
        urls.append(url)
        if ref.kind == "pull" and sources.mirrors.for_repository(ref.repository) is not None:
            pulls.append(PullJob(url, ref.repository, ref.number))
    return urls, pulls


def _built(manifest: ShimManifest, history: ExecutionHistory | ProbeFailure | None) -> list[str]:
    """The commits the shim's runs built its target from (runs on an upstream revision)."""
    if not isinstance(history, ExecutionHistory):
        return []
    target = canonicalize_name(manifest.target.distribution)
    return [commit for run in history.runs if (commit := run.revision(target))]


def _tip_jobs(built: Sequence[str], mirror: Resolved | None) -> list[TipJob]:
    """Runs on an upstream revision: is it the newest commit of a followed branch?"""
    if mirror is None:
        return []
    return [TipJob(mirror.mirror.repository, commit) for commit in built]


def _ancestry_jobs(
    carrying: Sequence[Lane],
    commits: Mapping[str, Mapping[str, str]],
    built: Sequence[str],
    mirror: Resolved | None,
) -> list[AncestryJob]:
    """Revisions ordered against releases by ancestry: each revision lane's locked commit and the
    newest commit of the branch it follows, and every commit a run's target was built from (in
    the target's mirror)."""
    jobs: list[AncestryJob] = []
    for lane in carrying:
        for revision in lane.revisions:
            locked = commits.get(lane.name, {}).get(revision.distribution)
            if locked:
                jobs.append(AncestryJob(revision.repository, locked))
            if not _SHA.fullmatch(revision.rev):
                jobs.append(AncestryJob(revision.repository, revision.rev))
    if mirror is not None:
        jobs += [AncestryJob(mirror.mirror.repository, commit) for commit in built]
    return jobs


def _target_mirror(
    manifest: ShimManifest,
    lanes: Sequence[Lane],
    sources: Sources,
    window: Window | None,
) -> Resolved | None:
    """The mirror of the shim's target, by the one resolver (:mod:`retire.mirrors.resolve`) as
    every command finds it: a lane's revision, a link, or the one declared mirror named as the
    package whose release tags hold the releases the records name. Not the package's metadata
    URLs: they are read beside a wheel on the index, a look-up this plan makes no room for (and
    an offline host cannot make)."""
    mirrors = sources.mirrors
    found = resolve(
        manifest.target.distribution,
        mirrors,
        revisions=[revision for lane in lanes for revision in lane.revisions],
        links=manifest.upstream_urls,
        versions=window.history if window is not None else (),
        tags_of=lambda mirror: release_versions(mirror, mirrors.cache),
    )
    return found if isinstance(found, Resolved) else None


def unique(jobs: Iterable[_J]) -> tuple[_J, ...]:
    return tuple(dict.fromkeys(jobs))


def plan(
    manifests: Sequence[ShimManifest],
    lanes: Sequence[Lane],
    locks_dir: Path,
    validation_path: str | os.PathLike[str],
    sources: Sources,
) -> GatherPlan:
    listing = {m.id: tuple(lane for lane in lanes if m.id in lane.shims) for m in manifests}
    active = [m for m in manifests if listing[m.id]]
    lock_names = sorted({lane.name for m in active for lane in listing[m.id]})
    loaded = records.load_records(validation_path)
    histories = records.histories(loaded, [m.id for m in active])
    shims: list[ShimPlan] = []
    links: list[str] = []
    commits: list[CommitJob] = []
    pulls: list[PullJob] = []
    tips: list[TipJob] = []
    ancestry: list[AncestryJob] = []
    locked = {name: lock_commits(locks_dir, name) for name in lock_names}
    windows = _windows(active, loaded)
    for manifest in manifests:
        if not listing[manifest.id]:
            shims.append(ShimPlan(manifest, ()))
            continue
        urls, mirrored = _mirrored_links(manifest, sources)
        built = _built(manifest, histories.get(manifest.id))
        # a mirror is asked only about commits a run was built from
        window = windows.get(manifest.id)
        mirror = _target_mirror(manifest, lanes, sources, window) if built else None
        shims.append(
            ShimPlan(
                manifest,
                listing[manifest.id],
                _release_lookups(manifest, listing[manifest.id], sources),
                mirror,
            )
        )
        commits += _commit_jobs(manifest)
        links += urls
        pulls += mirrored
        tips += _tip_jobs(built, mirror)
        ancestry += _ancestry_jobs(listing[manifest.id], locked, built, mirror)
    return GatherPlan(
        tuple(shims),
        {name: lock_packages(locks_dir, name) for name in lock_names},
        histories,
        locked,
        LinksJob(unique(links)) if links else None,
        unique(lookup.job for shim in shims for lookup in shim.releases),
        unique(commits),
        unique(pulls),
        unique(tips),
        unique(ancestry),
        windows,
        () if isinstance(loaded, ProbeFailure) else tuple(loaded),
    )


def _windows(
    manifests: Sequence[ShimManifest], loaded: Sequence[ValidationRecord] | ProbeFailure
) -> dict[str, Window]:
    """Each shim's window on its target's releases, from every recorded run (not only the
    latest per lane: a lane's older release runs place the window's edges too): the one reading,
    :func:`retire.history.reading.read` (the gather orders its commit runs by the mirrors)."""
    if isinstance(loaded, ProbeFailure):
        return {}
    found = {m.id: read(loaded, m.id, m.target.distribution) for m in manifests}
    return {shim: window for shim, window in found.items() if window is not None}
