"""Gathering evidence for every shim (I/O, concurrent) and deciding each with the pure rules.

:func:`gather` goes plan → run → assemble:

- **plan** reads the local evidence (locks, recorded runs) and lists every distinct look-up as a
  typed job (:mod:`retire.verdicts.jobs`) — releases from the indexes the lanes take the target
  from, issue and pull-request states from the code host, landed commits, release tags and
  branch tips from local mirrors;
- **run** runs each job once, concurrently, then a second round for the merge commits of merged
  pull requests;
- **assemble** gives each shim its :class:`ShimEvidence` and calls
  :func:`retire.verdicts.rules.decide`.

It never raises: an internal error becomes an *unknown* verdict with the reason.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
from packaging.utils import canonicalize_name

from retire.core import uv
from retire.core.secrets import remember
from retire.evidence.values import (
    BranchTip,
    ExecutionHistory,
    MirrorPull,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
)
from retire.lanes.model import IndexSpec, Lane
from retire.locks import locking
from retire.mirrors.config import MirrorSet
from retire.probes import codehost, records
from retire.probes.codehost import LinkState
from retire.probes.http import Fetcher, HttpCache, RetryPolicy, make_client
from retire.verdicts.jobs import CommitJob, LinksJob, Probes, PullJob, ReleasesJob, TipJob, start
from retire.verdicts.mirrored import OpenMirrors
from retire.verdicts.model import Decision, ShimEvidence, Verdict
from retire.verdicts.options import FROM_ENV, GatherOptions
from retire.verdicts.rules import decide, link_urls
from shims.model import ShimManifest

__all__ = ["GatherOptions", "gather", "lane_index_urls"]

#: canonical package name → version, of one lane's lock (None: the lane has no readable lock)
LockPackages = Mapping[str, str] | None

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


def _lock_packages(locks_dir: Path, lane_name: str) -> LockPackages:
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
    # one job for every link (None: no link to ask about)
    links: LinksJob | None
    releases: tuple[ReleasesJob, ...]
    commits: tuple[CommitJob, ...]
    pulls: tuple[PullJob, ...]
    tips: tuple[TipJob, ...]


def _release_lookups(
    manifest: ShimManifest, lanes: Sequence[Lane], sources: Sources
) -> tuple[ReleaseLookup, ...]:
    """A look-up per lane for each condition that reads the index (version-floor, pr-released)."""
    found: list[ReleaseLookup] = []
    for condition in manifest.retirement.conditions:
        if condition.kind not in ("version-floor", "pr-released") or not condition.distribution:
            continue
        dist = canonicalize_name(condition.distribution)
        for lane in lanes:
            urls = lane_index_urls(lane, dist, named=sources.named, default=sources.default)
            found.append(ReleaseLookup(lane.name, dist, ReleasesJob(dist, urls)))
    return tuple(found)


def _commit_jobs(manifest: ShimManifest) -> list[CommitJob]:
    return [
        CommitJob(c.repository, c.commit)
        for c in manifest.retirement.conditions
        if c.kind == "commit-in-tag" and c.repository and c.commit
    ]


def _mirrored_links(
    manifest: ShimManifest, sources: Sources
) -> tuple[list[str], list[PullJob], list[str]]:
    """(every issue / PR URL the code host is asked about, the pull requests a mirror is asked
    about, the mirrored repositories the links name)."""
    urls: list[str] = []
    pulls: list[PullJob] = []
    repositories: dict[str, None] = {}
    for url in link_urls(manifest):
        ref = codehost.parse_link(url, web_host=sources.web_host)
        if ref is None:
            continue
        urls.append(url)
        if sources.mirrors.for_repository(ref.repository) is None:
            continue
        repositories[ref.repository] = None
        if ref.kind == "pull":
            pulls.append(PullJob(url, ref.repository, ref.number))
    return urls, pulls, list(repositories)


def _tip_jobs(
    manifest: ShimManifest,
    history: ExecutionHistory | ProbeFailure | None,
    repositories: Iterable[str],
) -> list[TipJob]:
    """Runs on an upstream revision: is it the newest commit of a followed branch?"""
    if not isinstance(history, ExecutionHistory):
        return []
    target = canonicalize_name(manifest.target.distribution)
    commits = [commit for run in history.runs if (commit := run.revision(target))]
    return [TipJob(repository, commit) for commit in commits for repository in repositories]


def _unique(jobs: Iterable[_J]) -> tuple[_J, ...]:
    return tuple(dict.fromkeys(jobs))


def _plan(
    manifests: Sequence[ShimManifest],
    lanes: Sequence[Lane],
    locks_dir: Path,
    validation_path: str | os.PathLike[str],
    sources: Sources,
) -> GatherPlan:
    listing = {m.id: tuple(lane for lane in lanes if m.id in lane.shims) for m in manifests}
    active = [m for m in manifests if listing[m.id]]
    lock_names = sorted({lane.name for m in active for lane in listing[m.id]})
    histories = records.histories(records.load_records(validation_path), [m.id for m in active])
    shims: list[ShimPlan] = []
    links: list[str] = []
    commits: list[CommitJob] = []
    pulls: list[PullJob] = []
    tips: list[TipJob] = []
    for manifest in manifests:
        if not listing[manifest.id]:
            shims.append(ShimPlan(manifest, ()))
            continue
        shims.append(
            ShimPlan(
                manifest,
                listing[manifest.id],
                _release_lookups(manifest, listing[manifest.id], sources),
            )
        )
        commits += _commit_jobs(manifest)
        urls, mirrored, repositories = _mirrored_links(manifest, sources)
        links += urls
        pulls += mirrored
        tips += _tip_jobs(manifest, histories.get(manifest.id), repositories)
    return GatherPlan(
        tuple(shims),
        {name: _lock_packages(locks_dir, name) for name in lock_names},
        histories,
        LinksJob(_unique(links)) if links else None,
        _unique(lookup.job for shim in shims for lookup in shim.releases),
        _unique(commits),
        _unique(pulls),
        _unique(tips),
    )


# ---------------------------------------------------------------------------------------------
# Run: every job once, concurrently


@dataclass
class Answers:
    """What the jobs answered, keyed as :class:`ShimEvidence` reads it."""

    releases: dict[ReleasesJob, ReleaseList | ProbeFailure] = field(default_factory=dict)
    links: dict[str, LinkState] = field(default_factory=dict)
    mirror_pulls: dict[str, MirrorPull | ProbeFailure] = field(default_factory=dict)
    tags: dict[tuple[str, str], TagContainment | ProbeFailure] = field(default_factory=dict)
    tips: dict[tuple[str, str], BranchTip | ProbeFailure] = field(default_factory=dict)


def _pool_size(workers: int, jobs: int) -> int:
    return max(1, min(workers, jobs))


def _first_round(plan: GatherPlan, probes: Probes) -> Answers:
    links = (plan.links,) if plan.links else ()
    size = len(links) + len(plan.releases) + len(plan.commits) + len(plan.pulls) + len(plan.tips)
    with ThreadPoolExecutor(max_workers=_pool_size(probes.workers, size)) as pool:
        # first: it fans out itself
        asked = start(pool, probes, links)
        releases = start(pool, probes, plan.releases)
        commits = start(pool, probes, plan.commits)
        pulls = start(pool, probes, plan.pulls)
        tips = start(pool, probes, plan.tips)
    answers = Answers(
        releases={job: f.result() for job, f in zip(plan.releases, releases, strict=True)},
        mirror_pulls={job.url: f.result() for job, f in zip(plan.pulls, pulls, strict=True)},
        tags={
            (job.repository, job.commit): f.result()
            for job, f in zip(plan.commits, commits, strict=True)
        },
        tips={
            (job.repository, job.commit): f.result() for job, f in zip(plan.tips, tips, strict=True)
        },
    )
    for job, future in zip(links, asked, strict=True):
        states = future.result()
        for url in job.urls:
            answers.links[url] = states if isinstance(states, ProbeFailure) else states[url]
    return answers


def _merge_commit_jobs(answers: Answers, sources: Sources) -> tuple[CommitJob, ...]:
    """Second round: merge commits of merged PRs, checked against a mirror when there is one."""
    jobs: list[CommitJob] = []
    for url, state in answers.links.items():
        if not isinstance(state, PullState) or not state.merge_commit_sha:
            continue
        ref = codehost.parse_link(url, web_host=sources.web_host)
        if ref and sources.mirrors.for_repository(ref.repository) is not None:
            jobs.append(CommitJob(ref.repository, state.merge_commit_sha))
    return _unique(jobs)


def _run(plan: GatherPlan, probes: Probes, sources: Sources) -> Answers:
    answers = _first_round(plan, probes)
    second = _merge_commit_jobs(answers, sources)
    if second:
        with ThreadPoolExecutor(max_workers=_pool_size(probes.workers, len(second))) as pool:
            futures = start(pool, probes, second)
        answers.tags.update(
            {
                (job.repository, job.commit): f.result()
                for job, f in zip(second, futures, strict=True)
            }
        )
    return answers


# ---------------------------------------------------------------------------------------------
# Assemble: each shim's evidence, decided


def _releases_of(shim: ShimPlan, answers: Answers) -> dict[str, ReleaseList | ProbeFailure]:
    """Per distribution, the releases of every lane's indexes merged; a failure of one lane's
    look-up stands for the distribution (a release list that misses an index could mislead)."""
    releases: dict[str, ReleaseList | ProbeFailure] = {}
    for lookup in shim.releases:
        value = answers.releases[lookup.job]
        previous = releases.get(lookup.distribution)
        if isinstance(previous, ProbeFailure):
            continue
        if isinstance(value, ProbeFailure) or previous is None:
            releases[lookup.distribution] = value
        else:
            releases[lookup.distribution] = previous.merged(value)
    return releases


def _evidence(shim: ShimPlan, plan: GatherPlan, answers: Answers) -> ShimEvidence:
    return ShimEvidence(
        locks={lane.name: plan.locks.get(lane.name) for lane in shim.lanes},
        releases=_releases_of(shim, answers),
        links=answers.links,
        mirror_pulls=answers.mirror_pulls,
        tags=answers.tags,
        tips=answers.tips,
        execution=plan.histories.get(shim.manifest.id),
    )


def _internal_error(shim: str, target: str, exc: Exception) -> Verdict:
    failure = ProbeFailure("engine", target, f"internal error: {type(exc).__name__}: {exc}")
    return Verdict(shim, Decision.UNKNOWN, str(failure), failures=(failure,))


def _decide_safely(
    manifest: ShimManifest,
    lanes: Sequence[Lane],
    ev: ShimEvidence,
    now: _dt.datetime,
    stale_after_days: int,
) -> Verdict:
    try:
        return decide(manifest, lanes, ev, now=now, stale_after_days=stale_after_days)
    except Exception as exc:  # noqa: BLE001 - one shim's broken evidence must not stop the others
        return _internal_error(manifest.id, manifest.id, exc)


def _assemble(
    plan: GatherPlan, answers: Answers, lanes: Sequence[Lane], options: GatherOptions
) -> list[Verdict]:
    now = options.clock()
    return [
        _decide_safely(
            shim.manifest, lanes, _evidence(shim, plan, answers), now, options.stale_after_days
        )
        for shim in plan.shims
    ]


# ---------------------------------------------------------------------------------------------
# The whole


def _sources(options: GatherOptions) -> Sources:
    try:
        host = uv.host_indexes()
        named, default = host.named, options.index_url or uv.default_index()
    except Exception:  # noqa: BLE001 - a broken uv.toml: only explicit URLs are usable
        named, default = {}, options.index_url
    return Sources(
        named,
        default,
        options.web_host or codehost.DEFAULT_WEB_HOST,
        MirrorSet.coerce(options.mirrors),
    )


def _token(options: GatherOptions) -> str | None:
    secret = codehost.token_from_env() if options.token is FROM_ENV else options.token
    if secret is not None:
        # whatever carries it out of the process later is scrubbed too
        remember(secret)
    return secret


def _probes(
    options: GatherOptions, client: httpx.Client, policy: RetryPolicy, sources: Sources
) -> Probes:
    token = _token(options)
    fetcher = Fetcher(
        client,
        cache=HttpCache(Path(options.cache_dir)) if options.cache_dir else None,
        policy=policy,
        secrets=(token,) if token is not None else (),
    )
    return Probes(
        fetcher,
        OpenMirrors(sources.mirrors),
        options.api_base or codehost.DEFAULT_API_BASE,
        sources.web_host,
        token,
        options.workers,
    )


def gather(
    manifests: Sequence[ShimManifest],
    lanes: Sequence[Lane],
    locks_dir: str | os.PathLike[str],
    validation_path: str | os.PathLike[str],
    options: GatherOptions | None = None,
) -> list[Verdict]:
    """Probe upstream for every shim concurrently and decide each; never raises.

    ``options`` (:class:`GatherOptions`) says how to probe: the client, indexes, code host, token
    (default ``GITHUB_TOKEN`` / ``GH_TOKEN``), HTTP cache, mirrors. Each distinct probe runs once
    even when many shims need it.
    """
    options = options or GatherOptions()
    policy = options.policy or RetryPolicy()
    client = options.client or make_client(timeout=policy.timeout)
    try:
        sources = _sources(options)
        probes = _probes(options, client, policy, sources)
        plan = _plan(manifests, lanes, Path(locks_dir), validation_path, sources)
        answers = _run(plan, probes, sources)
        return _assemble(plan, answers, lanes, options)
    except Exception as exc:  # noqa: BLE001 - gather never raises: every shim becomes unknown
        return [_internal_error(m.id, "gather", exc) for m in manifests]
    finally:
        if options.client is None:
            client.close()
