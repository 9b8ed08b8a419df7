"""Gathering evidence for every shim (I/O, concurrent) and deciding each with the pure rules.

:func:`gather` goes plan → run → assemble:

- **plan** (:mod:`retire.verdicts.plan`) reads the local evidence (locks, recorded runs) and
  lists every distinct look-up as a typed job (:mod:`retire.verdicts.jobs`) — releases from the
  indexes the lanes take the target from, issue and pull-request states from the code host,
  landed commits, release tags and branch tips from local mirrors;
- **run** runs each job once, concurrently, then a second round for the merge commits of merged
  pull requests;
- **assemble** gives each shim its :class:`ShimEvidence` and calls
  :func:`retire.verdicts.rules.decide`, which gives each lane carrying the shim its step;
- **trial** re-locks, once per (lane, floors), every follow lane a raise is proposed for
  (:data:`GatherOptions.resolver`), and assembles again with the trials as evidence: a raise
  that resolves stands, one that does not is *blocked* by the resolver's explanation.

It never raises: an internal error becomes an *unknown* verdict with the reason.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from retire.core import uv
from retire.core.secrets import remember
from retire.evidence.floor import Floor, floor_map
from retire.evidence.values import (
    Ancestry,
    BranchTip,
    MirrorPull,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
)
from retire.lanes.model import Lane
from retire.locks import trial
from retire.locks.trial import RaiseTrial
from retire.mirrors.config import MirrorSet
from retire.probes import codehost
from retire.probes.codehost import LinkState
from retire.probes.http import Fetcher, HttpCache, RetryPolicy, make_client
from retire.verdicts.jobs import CommitJob, Probes, ReleasesJob, start
from retire.verdicts.lanes import trial_key
from retire.verdicts.mirrored import OpenMirrors
from retire.verdicts.model import Decision, LaneStep, ShimEvidence, Verdict
from retire.verdicts.options import FROM_ENV, GatherOptions, Resolver
from retire.verdicts.plan import GatherPlan, ShimPlan, Sources, unique
from retire.verdicts.plan import plan as make_plan
from retire.verdicts.rules import decide
from retire.verdicts.served import served_digest
from retire.verdicts.windows import MirroredWindow, mirrored_windows
from shims.model import ShimManifest

__all__ = ["GatherOptions", "gather"]


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
    ancestry: dict[tuple[str, str], Ancestry | ProbeFailure] = field(default_factory=dict)
    # shim → its window, commit runs ordered by its target's mirror (retire.verdicts.windows)
    windows: dict[str, MirroredWindow] = field(default_factory=dict)


#: (lane, floors) → the trial re-lock of that lane with those floors raised
Trials = Mapping[tuple[str, tuple[Floor, ...]], RaiseTrial]


def _pool_size(workers: int, jobs: int) -> int:
    return max(1, min(workers, jobs))


def _first_round(plan: GatherPlan, probes: Probes) -> Answers:
    links = (plan.links,) if plan.links else ()
    size = len(links) + len(plan.releases) + len(plan.commits) + len(plan.pulls) + len(plan.tips)
    size += len(plan.ancestry)
    with ThreadPoolExecutor(max_workers=_pool_size(probes.workers, size)) as pool:
        # first: it fans out itself
        asked = start(pool, probes, links)
        releases = start(pool, probes, plan.releases)
        commits = start(pool, probes, plan.commits)
        pulls = start(pool, probes, plan.pulls)
        tips = start(pool, probes, plan.tips)
        ancestry = start(pool, probes, plan.ancestry)
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
        ancestry={
            (job.repository, job.rev): f.result()
            for job, f in zip(plan.ancestry, ancestry, strict=True)
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
    return unique(jobs)


def _run(plan: GatherPlan, probes: Probes, sources: Sources) -> Answers:
    answers = _first_round(plan, probes)
    answers.windows = mirrored_windows(plan, probes.mirrors)
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


def _evidence(shim: ShimPlan, plan: GatherPlan, answers: Answers, trials: Trials) -> ShimEvidence:
    mirrored = answers.windows.get(shim.manifest.id)
    window = mirrored.window if mirrored is not None else plan.windows.get(shim.manifest.id)
    return ShimEvidence(
        locks={lane.name: plan.locks.get(lane.name) for lane in shim.lanes},
        releases=_releases_of(shim, answers),
        links=answers.links,
        mirror_pulls=answers.mirror_pulls,
        tags=answers.tags,
        tips=answers.tips,
        execution=plan.histories.get(shim.manifest.id),
        commits={lane.name: plan.locked_commits.get(lane.name, {}) for lane in shim.lanes},
        ancestry=answers.ancestry,
        trials=trials,
        window=window,
        contains=mirrored.contains if mirrored is not None else {},
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
    plan: GatherPlan,
    answers: Answers,
    lanes: Sequence[Lane],
    options: GatherOptions,
    trials: Trials | None = None,
) -> list[Verdict]:
    now = options.clock()
    return [
        _decide_safely(
            shim.manifest,
            lanes,
            _evidence(shim, plan, answers, trials or {}),
            now,
            options.stale_after_days,
        )
        for shim in plan.shims
    ]


# ---------------------------------------------------------------------------------------------
# Trial: one re-lock per (lane, floors) a raise is proposed for


def _try(resolver: Resolver, lane: Lane, floors: tuple[Floor, ...]) -> RaiseTrial | None:
    wanted = {dist: str(version) for dist, version in floor_map(floors).items()}
    try:
        return resolver(lane, wanted)
    except NotImplementedError:
        # the trial re-lock is not built into this version yet: the raise stays "not re-locked"
        return None
    except Exception as exc:  # noqa: BLE001 - one lane's broken trial must not stop the others
        return RaiseTrial(lane.name, floors, False, failure=f"{type(exc).__name__}: {exc}")


def _trials(
    verdicts: Sequence[Verdict], lanes: Sequence[Lane], resolver: Resolver, workers: int
) -> dict[tuple[str, tuple[Floor, ...]], RaiseTrial]:
    by_name = {lane.name: lane for lane in lanes}
    wanted = unique(
        trial_key(lv.lane, lv.floors)
        for verdict in verdicts
        for lv in verdict.lane_verdicts
        if lv.step == LaneStep.RAISE and lv.floors and lv.lane in by_name
    )
    if not wanted:
        return {}
    with ThreadPoolExecutor(max_workers=_pool_size(workers, len(wanted))) as pool:
        futures = [pool.submit(_try, resolver, by_name[name], floors) for name, floors in wanted]
    return {
        key: result
        for key, future in zip(wanted, futures, strict=True)
        if (result := future.result()) is not None
    }


@contextmanager
def _resolver(
    options: GatherOptions, locks_dir: Path, sources: Sources, fetcher: Fetcher
) -> Iterator[Resolver]:
    """The options' resolver, or :func:`retire.locks.trial.try_raise` bound to the locks, a
    scratch folder (the options', else a temporary one), the trial cache, the mirrors and the
    indexes the probes use (``--index-url`` included), as every re-lock of the command."""
    if options.resolver is not None:
        yield options.resolver
        return
    with tempfile.TemporaryDirectory(prefix="patchlane-trial-") as temporary:
        scratch = Path(options.scratch_dir) if options.scratch_dir else Path(temporary)
        yield functools.partial(
            trial.try_raise,
            locks_dir=locks_dir,
            scratch_dir=scratch,
            mirrors=sources.mirrors,
            host=uv.HostIndexes(dict(sources.named), sources.default),
            cache_dir=Path(options.trial_cache) if options.trial_cache else None,
            # a cached answer counts while the indexes serve what it saw
            served=functools.partial(served_digest, fetcher, sources),
        )


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
    (default ``GITHUB_TOKEN`` / ``GH_TOKEN``), HTTP cache, mirrors, and how to re-lock a lane on
    trial. Each distinct probe runs once even when many shims need it, and each (lane, floors)
    is re-locked once even when many shims propose it.
    """
    options = options or GatherOptions()
    policy = options.policy or RetryPolicy()
    client = options.client or make_client(timeout=policy.timeout)
    try:
        sources = _sources(options)
        probes = _probes(options, client, policy, sources)
        plan = make_plan(manifests, lanes, Path(locks_dir), validation_path, sources)
        answers = _run(plan, probes, sources)
        verdicts = _assemble(plan, answers, lanes, options)
        if not options.resolve:
            return verdicts
        with _resolver(options, Path(locks_dir), sources, probes.fetcher) as resolver:
            trials = _trials(verdicts, lanes, resolver, options.trial_workers)
        return _assemble(plan, answers, lanes, options, trials) if trials else verdicts
    except Exception as exc:  # noqa: BLE001 - gather never raises: every shim becomes unknown
        return [_internal_error(m.id, "gather", exc) for m in manifests]
    finally:
        if options.client is None:
            client.close()
