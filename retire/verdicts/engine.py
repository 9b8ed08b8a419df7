"""Verdicts: for each shim, from its retirement conditions and the evidence, what to do with it.

:func:`decide` is a pure function of a ``ShimManifest``, the lanes and the evidence
(``retire.evidence`` values, gathered by ``retire.probes``). :func:`gather` runs the probes
concurrently and decides every shim; it never raises. :func:`main` is ``patchlane verdicts``.

Verdicts
--------

``drift``    the shim is dead code: no lane lists it, or its target distribution is in no lock of
             the lanes that do.
``unknown``  evidence is missing or a probe failed. Never acted on; ``why`` and ``failures`` say
             what to fix (a token, a mirror to fetch, a reproducer to run).
``retire``   the retirement conditions hold (``mode`` all / any) **and** a without-shim run of
             the reproducer on a version inside the proposed floor printed ``FIX_VALIDATED``,
             with no run on such a version reproducing the bug. ``floors`` carries the new
             requirement floors (``megatron-core>=0.18.0``).
``keep``     the bug is still present: the conditions do not hold, or they do but the reproducer
             still reproduces on the "fixed" version (execution beats metadata).
``stale``    a keep whose upstream is silent: no upstream link although the status is not
             ``not-applicable`` (nobody filed it), or no activity on any linked issue / pull
             request for ``stale_after_days``.

Precedence (first match wins)
-----------------------------

1. ``drift`` — it does not depend on upstream at all.
2. ``unknown`` — any probe this shim needs failed (also a probe of a link that only feeds the
   staleness check: a retire never rests on a failed probe).
3. conditions hold → ``retire`` if execution confirms on the floor's versions; ``keep`` if a run
   there still reproduces the bug; else ``unknown`` (a retire never rests on missing evidence —
   a reproducer that was only ever skipped, e.g. for want of a GPU, confirms nothing).
4. conditions undecided (three-valued: ``all`` fails if one fails, ``any`` holds if one holds)
   → ``unknown``.
5. conditions fail → ``stale`` if upstream is silent, else ``keep``.

Conditions
----------

- ``version-floor``: an installable (not yanked) release inside the specifier exists on the
  lane's index; floor = the first such release.
- ``pr-released``: the pull request is merged, and a release contains it — by the release tags of
  a local mirror that contain the merge commit when there is one (a release on the index whose tag
  the mirror lacks makes it unknown), else by upload time: the first release uploaded after the
  merge that was the newest version when it appeared (a backport to an old branch is passed over;
  final releases before pre-releases). Floor = that release.
- ``commit-in-tag``: a release tag of the local mirror contains the commit; floor = the first
  such tag's version, for the target distribution.
- ``reproducer-clean``: the latest without-shim runs (per lane and host) printed
  ``FIX_VALIDATED`` and every run that reproduced the bug was on an older version; floor = the
  oldest clean version.

When several floors name one distribution the highest wins (the fix is surely in it).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from retire.core import times
from retire.evidence.values import (
    ExecutionEvidence,
    ExecutionHistory,
    IssueState,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
    to_json,
)
from retire.evidence.validation import FIXED

__all__ = [
    "DEFAULT_STALE_DAYS",
    "VERDICTS",
    "ConditionResult",
    "ShimEvidence",
    "Verdict",
    "decide",
    "gather",
    "lane_index_urls",
    "main",
]

VERDICTS = ("keep", "retire", "unknown", "stale", "drift")
KEEP, RETIRE, UNKNOWN, STALE, DRIFT = VERDICTS
HOLDS, FAILS, UNDECIDED = "holds", "fails", "unknown"
DEFAULT_STALE_DAYS = 180


@dataclass(frozen=True)
class ConditionResult:
    kind: str
    state: str  # holds | fails | unknown
    why: str
    floor: str | None = None  # "dist>=version" when the condition holds at a known release


@dataclass(frozen=True)
class Verdict:
    shim: str
    kind: str  # one of VERDICTS
    why: str  # one line
    lanes: tuple[str, ...] = ()
    conditions: tuple[ConditionResult, ...] = ()
    evidence: tuple[object, ...] = ()
    failures: tuple[ProbeFailure, ...] = ()
    floors: tuple[str, ...] = ()  # proposed requirement floors when retiring

    def __post_init__(self) -> None:
        if self.kind not in VERDICTS:
            raise ValueError(f"unknown verdict {self.kind!r}")
        object.__setattr__(self, "why", " ".join(self.why.split()))

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(str(f) for f in self.failures)

    def to_json(self) -> dict:
        return {
            "shim": self.shim, "verdict": self.kind, "why": self.why, "lanes": list(self.lanes),
            "floors": list(self.floors), "conditions": to_json(self.conditions),
            "failures": to_json(self.failures), "evidence": to_json(self.evidence),
        }


@dataclass(frozen=True)
class ShimEvidence:
    """Everything probed for one shim. Missing keys mean "not probed" (also undecidable)."""

    #: lane name → canonical names of the packages in its lock (None: the lane has no lock).
    locks: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    #: canonical distribution → releases on the indexes of the lanes that list the shim.
    releases: Mapping[str, ReleaseList | ProbeFailure] = field(default_factory=dict)
    #: web URL → issue / pull request state.
    links: Mapping[str, PullState | IssueState | ProbeFailure] = field(default_factory=dict)
    #: (repository URL, commit) → containment in the mirror's tags.
    tags: Mapping[tuple[str, str], TagContainment | ProbeFailure] = field(default_factory=dict)
    execution: ExecutionHistory | ProbeFailure | None = None


# ---------------------------------------------------------------------------------------------
# Deciding one shim (pure)


class _Used:
    """The evidence and failures a decision rested on, each once, in the order met."""

    def __init__(self) -> None:
        self.evidence: list[object] = []
        self.failures: list[ProbeFailure] = []

    def add(self, value: object) -> None:
        bucket = self.failures if isinstance(value, ProbeFailure) else self.evidence
        if value is not None and not any(value is seen for seen in bucket):
            bucket.append(value)


def _day(moment: _dt.datetime | None) -> str:
    return moment.date().isoformat() if moment else "?"


def _floor(distribution: str, version: Version) -> str:
    return f"{distribution}>={version}"


def _version_floor(condition, ev: ShimEvidence, used: _Used) -> ConditionResult:
    dist = canonicalize_name(condition.distribution)
    releases = ev.releases.get(dist)
    used.add(releases)
    if releases is None:
        return ConditionResult(condition.kind, UNDECIDED, f"releases of {dist} not probed")
    if isinstance(releases, ProbeFailure):
        return ConditionResult(condition.kind, UNDECIDED, f"releases of {dist}: {releases.reason}")
    inside = releases.matching(condition.version)
    if inside:
        first = inside[0]
        return ConditionResult(condition.kind, HOLDS,
                               f"{dist} {first.version} released {_day(first.upload_time)} (inside {condition.version})",
                               _floor(dist, first.version))
    newest = releases.latest
    return ConditionResult(condition.kind, FAILS, f"no release of {dist} inside {condition.version} "
                           f"(newest {newest.version if newest else 'none'})")


def _pr_released(condition, ev: ShimEvidence, used: _Used) -> ConditionResult:
    from retire.probes.codehost import parse_link

    kind, dist = condition.kind, canonicalize_name(condition.distribution)
    state = ev.links.get(condition.url)
    used.add(state)
    if state is None:
        return ConditionResult(kind, UNDECIDED, f"{condition.url} not probed (only GitHub pull requests are)")
    if isinstance(state, ProbeFailure):
        return ConditionResult(kind, UNDECIDED, f"{condition.url}: {state.reason}")
    if isinstance(state, IssueState):
        return ConditionResult(kind, UNDECIDED, f"{condition.url} is an issue, not a pull request")
    if not state.merged:
        how = "open" if state.state == "open" else "closed without merging"
        return ConditionResult(kind, FAILS, f"{state.label} is {how}")
    releases = ev.releases.get(dist)
    used.add(releases)
    if not isinstance(releases, ReleaseList):
        reason = releases.reason if isinstance(releases, ProbeFailure) else "not probed"
        return ConditionResult(kind, UNDECIDED, f"{state.label} merged; releases of {dist}: {reason}")
    merged_at = state.merged_at
    ref = parse_link(condition.url, web_host=_host_of(condition.url))
    containment = ev.tags.get((ref.repository, state.merge_commit_sha)) if (ref and state.merge_commit_sha) else None
    used.add(containment)
    if isinstance(containment, ProbeFailure):
        return ConditionResult(kind, UNDECIDED, f"{state.label} merged; {containment.reason}")
    if isinstance(containment, TagContainment):
        inside = [v for v in containment.released_versions()
                  if (r := releases.get(v)) is not None and not r.yanked]
        if inside:
            return ConditionResult(kind, HOLDS, f"{state.label} merged {_day(merged_at)}, in release {inside[0]} "
                                   f"(tag contains {containment.commit[:12]})", _floor(dist, inside[0]))
        known = containment.known_versions()
        untagged = [r for r in releases.available()
                    if merged_at and r.upload_time and r.upload_time > merged_at and r.version not in known]
        if untagged:
            return ConditionResult(kind, UNDECIDED, f"{state.label} merged; release {untagged[0].version} has no tag "
                                   f"in the mirror of {containment.repository}: fetch its tags (git fetch --tags)")
        return ConditionResult(kind, FAILS, f"{state.label} merged {_day(merged_at)}, in no release tag yet")
    if merged_at is None:
        return ConditionResult(kind, UNDECIDED, f"{state.label} merged, but the API gave no merge time")
    timed = [r for r in releases.available() if r.upload_time is not None]
    if not timed:
        return ConditionResult(kind, UNDECIDED, f"{state.label} merged; the index gives no upload times for {dist}")
    first = _first_release_after(timed, merged_at, finals_only=True) or _first_release_after(timed, merged_at, finals_only=False)
    if first is None:
        return ConditionResult(kind, FAILS, f"{state.label} merged {_day(merged_at)}, no {dist} release since")
    return ConditionResult(kind, HOLDS, f"{state.label} merged {_day(merged_at)}, {dist} {first.version} released "
                           f"{_day(first.upload_time)} (by upload time: no mirror to check tags)", _floor(dist, first.version))


def _first_release_after(timed, moment: _dt.datetime, *, finals_only: bool):
    """The first release uploaded after ``moment`` that was the newest version at its upload:
    a backport (1.0.1 uploaded after 1.2) is on an old branch and may well lack the fix."""
    newest: Version | None = None
    for release in sorted(timed, key=lambda r: (r.upload_time, r.version)):
        if finals_only and release.prerelease:
            continue
        if release.upload_time > moment and (newest is None or release.version > newest):
            return release
        newest = release.version if newest is None else max(newest, release.version)
    return None


def _commit_in_tag(condition, target_dist: str, ev: ShimEvidence, used: _Used) -> ConditionResult:
    kind = condition.kind
    containment = ev.tags.get((condition.repository, condition.commit))
    used.add(containment)
    if containment is None:
        return ConditionResult(kind, UNDECIDED, f"{condition.repository}@{condition.commit[:12]} not probed")
    if isinstance(containment, ProbeFailure):
        return ConditionResult(kind, UNDECIDED, containment.reason)
    if containment.contained:
        versions = containment.released_versions()
        floor = _floor(target_dist, versions[0]) if versions else None
        return ConditionResult(kind, HOLDS, f"commit {containment.commit[:12]} is in release tag(s) "
                               f"{', '.join(containment.release_tags[:3])}", floor)
    newest = max(containment.known_versions(), default=None)
    return ConditionResult(kind, FAILS, f"commit {containment.commit[:12]} is in no release tag yet "
                           f"(newest release tag {newest or 'none'})")


@dataclass(frozen=True)
class _Execution:
    state: str  # clean | bug | none
    why: str
    floor: Version | None = None
    runs: tuple[ExecutionEvidence, ...] = ()


def _runs_phrase(runs: Sequence[ExecutionEvidence], dist: str) -> str:
    run = runs[-1]
    version = run.version(dist)
    more = f" and {len(runs) - 1} more" if len(runs) > 1 else ""
    return f"{dist} {version or '?'} ({run.where}{more})"


def _execution(history: ExecutionHistory, dist: str, floors: Mapping[str, Version] | None) -> _Execution:
    """What the without-shim runs say about ``dist``; with ``floors``, only runs on releases inside
    every floor count (a retirement proposes all of them, so each must have been run)."""
    runs = list(history.runs)
    if not runs:
        return _Execution("none", "no run of the reproducer without the shim is recorded")
    if floors:
        runs = [r for r in runs
                if all((v := r.version(d)) is not None and v >= floor for d, floor in floors.items())]
        if not runs:
            wanted = ", ".join(f"{d}>={floor}" for d, floor in sorted(floors.items()))
            seen = sorted({str(v) for r in history.runs if (v := r.version(dist))}) or ["unrecorded versions"]
            return _Execution("none", f"no without-shim run on {wanted} (runs were on {', '.join(seen)})")
    clean = [r for r in runs if r.outcome in FIXED]
    bug = [r for r in runs if r.outcome == "bug-reproduced"]
    if clean:
        clean_versions = [v for r in clean if (v := r.version(dist)) is not None]
        oldest_clean = min(clean_versions) if clean_versions else None
        newer_bug = [r for r in bug if floors or oldest_clean is None
                     or (v := r.version(dist)) is None or v >= oldest_clean]
        if not newer_bug:
            return _Execution("clean", f"FIX_VALIDATED without the shim on {_runs_phrase(clean, dist)}",
                              oldest_clean, tuple(clean))
        return _Execution("bug", f"BUG_REPRODUCED without the shim on {_runs_phrase(newer_bug, dist)}",
                          runs=tuple(newer_bug))
    if bug:
        return _Execution("bug", f"BUG_REPRODUCED without the shim on {_runs_phrase(bug, dist)}", runs=tuple(bug))
    other = runs[-1]
    detail = f": {other.detail}" if other.detail else ""
    return _Execution("none", f"the reproducer never ran to a verdict ({other.outcome} on {other.where}{detail})")


def _reproducer_clean(condition, dist: str, ev: ShimEvidence, used: _Used) -> ConditionResult:
    used.add(ev.execution)
    if ev.execution is None:
        return ConditionResult(condition.kind, UNDECIDED, "execution records not probed")
    if isinstance(ev.execution, ProbeFailure):
        return ConditionResult(condition.kind, UNDECIDED, ev.execution.reason)
    found = _execution(ev.execution, dist, None)
    state = {"clean": HOLDS, "bug": FAILS, "none": UNDECIDED}[found.state]
    return ConditionResult(condition.kind, state, found.why, _floor(dist, found.floor) if found.floor else None)


def _combine(mode: str, states: Sequence[str]) -> str:
    if mode == "any":
        return HOLDS if HOLDS in states else (UNDECIDED if UNDECIDED in states else FAILS)
    return FAILS if FAILS in states else (UNDECIDED if UNDECIDED in states else HOLDS)


def _highest_floors(results: Iterable[ConditionResult]) -> dict[str, Version]:
    floors: dict[str, Version] = {}
    for result in results:
        if result.state == HOLDS and result.floor:
            dist, _, version = result.floor.partition(">=")
            floors[dist] = max(floors.get(dist, Version(version)), Version(version))
    return floors


def _host_of(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


def _link_urls(manifest) -> list[str]:
    urls = [link.url for link in manifest.upstream.links]
    urls += [c.url for c in manifest.retirement.conditions if c.kind == "pr-released" and c.url]
    return list(dict.fromkeys(urls))


def decide(manifest, lanes: Sequence, evidence: ShimEvidence, *, now: _dt.datetime,
           stale_after_days: int = DEFAULT_STALE_DAYS) -> Verdict:
    """The verdict for one shim (pure: no I/O). See the module docstring for the rules."""
    shim, dist = manifest.id, canonicalize_name(manifest.target.distribution)
    listing = tuple(lane.name for lane in lanes if manifest.id in lane.shims)
    if not listing:
        return Verdict(shim, DRIFT, "no lane lists this shim: it is dead code")
    used = _Used()
    locks = {name: evidence.locks.get(name) for name in listing}
    holding = [name for name, packages in locks.items() if packages is not None and dist in packages]
    unlocked = [name for name, packages in locks.items() if packages is None]
    if not holding and not unlocked:
        return Verdict(shim, DRIFT, f"{dist} is in no lock of the lanes that list this shim ({', '.join(listing)})", listing)
    if not holding:
        used.add(ProbeFailure("lock", ", ".join(unlocked), f"no lock to tell whether {dist} is installed: "
                              f"run `nox -s lock -- {' '.join(unlocked)}`"))

    results: list[ConditionResult] = []
    for condition in manifest.retirement.conditions:
        if condition.kind == "version-floor":
            results.append(_version_floor(condition, evidence, used))
        elif condition.kind == "pr-released":
            results.append(_pr_released(condition, evidence, used))
        elif condition.kind == "commit-in-tag":
            results.append(_commit_in_tag(condition, dist, evidence, used))
        else:
            results.append(_reproducer_clean(condition, dist, evidence, used))
    states = [r.state for r in results]
    combined = _combine(manifest.retirement.mode, states)
    link_states = [evidence.links[url] for url in _link_urls(manifest) if url in evidence.links]
    for state in link_states:
        used.add(state)

    def verdict(kind: str, why: str, floors: Sequence[str] = ()) -> Verdict:
        return Verdict(shim, kind, why, listing, tuple(results), tuple(used.evidence), tuple(used.failures), tuple(floors))

    if used.failures:
        first = used.failures[0]
        more = f" (+{len(used.failures) - 1} more)" if len(used.failures) > 1 else ""
        return verdict(UNKNOWN, f"{first}{more}")
    if combined == HOLDS:
        reached = [r for r in results if r.state == HOLDS]
        floors = _highest_floors(reached)
        checked = dist if dist in floors else next(iter(floors), dist)
        history = evidence.execution
        used.add(history)
        held = "; ".join(f"{r.kind}: {r.why}" for r in reached)
        if not isinstance(history, ExecutionHistory):
            return verdict(UNKNOWN, f"conditions hold ({held}) but no execution records to confirm them")
        found = _execution(history, checked, dict(floors))
        if found.state == "clean":
            if not floors and found.floor is not None:
                floors[checked] = found.floor
            proposal = [_floor(d, v) for d, v in sorted(floors.items())]
            return verdict(RETIRE, f"{held}; confirmed: {found.why}", proposal)
        if found.state == "bug":
            return verdict(KEEP, f"upstream looks fixed ({held}) but {found.why}")
        hint = f" — run it on {', '.join(_floor(d, v) for d, v in sorted(floors.items()))}" if floors else ""
        return verdict(UNKNOWN, f"conditions hold ({held}) but nothing confirms it: {found.why}{hint}")
    if combined == UNDECIDED:
        undecided = "; ".join(f"{r.kind}: {r.why}" for r in results if r.state == UNDECIDED)
        return verdict(UNKNOWN, undecided)
    failing = "; ".join(f"{r.kind}: {r.why}" for r in results if r.state == FAILS)
    if not manifest.upstream.links and manifest.upstream.status != "not-applicable":
        return verdict(STALE, f"no upstream link (status {manifest.upstream.status}): file it upstream and link it; {failing}")
    moments = [m for s in link_states if isinstance(s, (PullState, IssueState)) and (m := s.updated_at or s.closed_at)]
    if moments:
        last = max(moments)
        idle = (now - last).days
        if idle > stale_after_days:
            return verdict(STALE, f"no upstream movement since {last.date()} ({idle} days); {failing}")
    return verdict(KEEP, failing)


# ---------------------------------------------------------------------------------------------
# Gathering evidence (I/O, concurrent) and deciding every shim


def lane_index_urls(lane, distribution: str, *, named: Mapping[str, str], default: str | None) -> tuple[str, ...] | str:
    """Where ``lane`` takes ``distribution`` from, in uv's priority order (the index it is
    pinned to; else the lane's extra indexes, then its default — the lane's own, else
    ``default``), or why none is known."""
    name = canonicalize_name(distribution)
    sources = {canonicalize_name(package): index for package, index in lane.sources}

    def url_of(spec) -> str | None:
        return spec.url or named.get(spec.name)

    pinned = sources.get(name)
    if pinned is not None:
        spec = lane.index(pinned)
        url = url_of(spec) if spec else None
        return (url,) if url else f"lane {lane.name}: index {pinned!r} has no URL on this host (set UV_INDEX={pinned}=<url>)"
    explicit = set(sources.values())
    extras = [url for i in lane.indexes if not i.default and i.name not in explicit and (url := url_of(i))]
    lane_default = next((url_of(i) for i in lane.indexes if i.default), None)
    chosen = lane_default or default
    urls = tuple(extras + ([chosen] if chosen else []))
    if not urls:
        return f"lane {lane.name}: no index URL for {name} — set UV_DEFAULT_INDEX or pass --index-url"
    return urls


def _lock_packages(locks_dir: Path, lane_name: str) -> frozenset[str] | None:
    from retire.locks import locking

    try:
        lock = locking.read_lock(locking.lock_path(Path(locks_dir), lane_name))
    except ValueError:
        return None
    if lock is None:
        return None
    return frozenset(canonicalize_name(p["name"]) for p in lock.get("packages", []) if isinstance(p, dict) and "name" in p)


def _guarded(kind: str, target: str, action: Callable[[], object]) -> object:
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - a probe bug must not stop the other shims
        return ProbeFailure(kind, target, f"internal error: {type(exc).__name__}: {exc}")


_FROM_ENV = object()


def gather(
    manifests: Sequence,
    lanes: Sequence,
    locks_dir: str | os.PathLike[str],
    validation_path: str | os.PathLike[str],
    *,
    client=None,
    index_url: str | None = None,
    api_base: str | None = None,
    web_host: str | None = None,
    token: object = _FROM_ENV,
    cache_dir: str | os.PathLike[str] | None = None,
    mirrors=None,
    release_tag: str | None = None,
    policy=None,
    clock: Callable[[], _dt.datetime] = times.now,
    stale_after_days: int = DEFAULT_STALE_DAYS,
    workers: int = 100,
) -> list[Verdict]:
    """Probe upstream for every shim concurrently and decide each; never raises.

    ``client`` is an injected ``httpx.Client`` (one is made and closed when None); ``token``
    defaults to ``GITHUB_TOKEN`` / ``GH_TOKEN``; ``cache_dir`` holds the HTTP cache (None: no
    cache); ``mirrors`` maps repository URLs to local clones, or is a folder of
    ``<owner>/<repo>`` clones. Each distinct probe runs once even when many shims need it.
    """
    from retire.probes import codehost, gitrepo, index, records
    from retire.probes.http import Fetcher, HttpCache, RetryPolicy, make_client

    policy = policy or RetryPolicy()
    api_base = api_base or codehost.DEFAULT_API_BASE
    web_host = web_host or codehost.DEFAULT_WEB_HOST
    release_tag = release_tag or gitrepo.DEFAULT_RELEASE_TAG
    secret = codehost.token_from_env() if token is _FROM_ENV else token
    owned = client is None
    client = client or make_client(timeout=policy.timeout)
    fetcher = Fetcher(client, cache=HttpCache(cache_dir) if cache_dir else None, policy=policy,
                      secrets=(secret,) if isinstance(secret, str) else ())
    try:
        from retire.core import uv

        host = uv.host_indexes()
        named, default = host.named, index_url or uv.default_index()
    except Exception:  # noqa: BLE001 - a broken uv.toml: only explicit URLs are usable
        named, default = {}, index_url

    try:
        by_shim = {m.id: tuple(lane for lane in lanes if m.id in lane.shims) for m in manifests}
        active = [m for m in manifests if by_shim[m.id]]
        lock_names = sorted({lane.name for m in active for lane in by_shim[m.id]})
        locks = {name: _lock_packages(Path(locks_dir), name) for name in lock_names}
        loaded = records.load_records(validation_path)
        histories = records.histories(loaded, [m.id for m in active])

        jobs: dict[tuple, Callable[[], object]] = {}
        plan_releases: dict[str, dict[str, list[tuple]]] = {}
        for manifest in active:
            wanted = plan_releases.setdefault(manifest.id, {})
            for condition in manifest.retirement.conditions:
                if condition.kind in ("version-floor", "pr-released"):
                    dist = canonicalize_name(condition.distribution)
                    for lane in by_shim[manifest.id]:
                        urls = lane_index_urls(lane, dist, named=named, default=default)
                        key = ("index", dist, urls)
                        if isinstance(urls, str):
                            jobs[key] = (lambda reason=urls, d=dist: ProbeFailure("index", d, reason))
                        else:
                            jobs[key] = (lambda d=dist, u=urls: index.probe_releases(fetcher, d, u))
                        wanted.setdefault(dist, []).append(key)
                elif condition.kind == "commit-in-tag":
                    key = ("git", condition.repository, condition.commit)
                    jobs[key] = _git_job(condition.repository, condition.commit, mirrors, release_tag)
            for url in _link_urls(manifest):
                if codehost.parse_link(url, web_host=web_host) is not None:
                    jobs[("link", url)] = (lambda u=url: codehost.probe_link(
                        fetcher, u, api_base=api_base, token=secret, web_host=web_host))

        results = _run_all(jobs, workers)
        # Second round: merge commits of merged PRs, checked against a mirror when there is one.
        second: dict[tuple, Callable[[], object]] = {}
        for (kind, *rest), value in list(results.items()):
            if kind == "link" and isinstance(value, PullState) and value.merge_commit_sha:
                ref = codehost.parse_link(rest[0], web_host=web_host)
                if ref and gitrepo.mirror_for(ref.repository, mirrors) is not None:
                    second[("git", ref.repository, value.merge_commit_sha)] = _git_job(
                        ref.repository, value.merge_commit_sha, mirrors, release_tag)
        results.update(_run_all(second, workers))

        now = clock()
        verdicts = []
        for manifest in manifests:
            releases: dict[str, ReleaseList | ProbeFailure] = {}
            for dist, keys in plan_releases.get(manifest.id, {}).items():
                for key in keys:
                    value = results[key]
                    previous = releases.get(dist)
                    if isinstance(previous, ProbeFailure):
                        continue
                    if isinstance(value, ProbeFailure) or previous is None:
                        releases[dist] = value
                    else:
                        releases[dist] = previous.merged(value)
            ev = ShimEvidence(
                locks={lane.name: locks.get(lane.name) for lane in by_shim[manifest.id]},
                releases=releases,
                links={key[1]: value for key, value in results.items() if key[0] == "link"},
                tags={(key[1], key[2]): value for key, value in results.items() if key[0] == "git"},
                execution=histories.get(manifest.id),
            )
            verdicts.append(_decide_safely(manifest, lanes, ev, now, stale_after_days))
        return verdicts
    except Exception as exc:  # noqa: BLE001 - gather never raises: every shim becomes unknown
        failure = ProbeFailure("engine", "gather", f"internal error: {type(exc).__name__}: {exc}")
        return [Verdict(m.id, UNKNOWN, str(failure), failures=(failure,)) for m in manifests]
    finally:
        if owned:
            client.close()


def _git_job(repository: str, commit: str, mirrors, release_tag: str) -> Callable[[], object]:
    from retire.probes import gitrepo

    def job() -> object:
        path = gitrepo.mirror_for(repository, mirrors)
        if path is None:
            return ProbeFailure("git", f"{repository}@{commit[:12]}",
                                f"no local mirror of {repository}: clone it and pass --mirrors")
        return gitrepo.probe_containment(path, commit, repository=repository, release_tag=release_tag)

    return job


def _run_all(jobs: Mapping[tuple, Callable[[], object]], workers: int) -> dict[tuple, object]:
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = {key: pool.submit(_guarded, key[0], str(key[1]), job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


def _decide_safely(manifest, lanes, ev: ShimEvidence, now: _dt.datetime, stale_after_days: int) -> Verdict:
    try:
        return decide(manifest, lanes, ev, now=now, stale_after_days=stale_after_days)
    except Exception as exc:  # noqa: BLE001
        failure = ProbeFailure("engine", manifest.id, f"internal error: {type(exc).__name__}: {exc}")
        return Verdict(manifest.id, UNKNOWN, str(failure), failures=(failure,))


# ---------------------------------------------------------------------------------------------
# patchlane verdicts


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchlane verdicts",
                                     description="Probe upstream and say, for each shim, keep / retire / unknown / stale / drift.")
    parser.add_argument("shims", nargs="*", metavar="SHIM", help="only these shims (default: all)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project folder (default: .)")
    parser.add_argument("--json", action="store_true", help="machine-readable output with the evidence")
    parser.add_argument("--index-url", help="default package index when a lane names none (default: uv's configuration)")
    parser.add_argument("--api-url", help="GitHub REST API base URL (default: the public API)")
    parser.add_argument("--mirrors", type=Path, help="folder of local clones as <owner>/<repo> for tag checks")
    parser.add_argument("--cache-dir", type=Path, help="HTTP cache folder (default: <root>/.patchlane/cache/http)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the HTTP cache")
    parser.add_argument("--validation", type=Path, help="validation manifest (default: <root>/validation/manifest.jsonl)")
    parser.add_argument("--stale-after", type=int, default=DEFAULT_STALE_DAYS, metavar="DAYS",
                        help=f"days without upstream activity before a shim is stale (default {DEFAULT_STALE_DAYS})")
    parser.add_argument("--jobs", type=int, default=100, help="probes in flight at once (default 100)")
    return parser


def _load(root: Path, wanted: Sequence[str]):
    from retire.lanes import lanefile
    from retire.core.errors import ConfigError
    from shims.manifest import ManifestError, discover

    folder = root / "shims"
    try:
        manifests = discover(folder if folder.is_dir() else None)
    except ManifestError as exc:
        raise ConfigError(None, None, str(exc)) from None
    known = {m.id for m in manifests}
    lanes = lanefile.load_lanes(root / "lanes", root=root, known_shims=known)
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise ConfigError(None, None, f"unknown shim {unknown[0]!r}", f"known shims: {', '.join(sorted(known)) or 'none'}")
    if wanted:
        manifests = [m for m in manifests if m.id in set(wanted)]
    return manifests, lanes


def main(argv: Sequence[str] | None = None) -> int:
    from retire.core.errors import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.stale_after < 0 or args.jobs < 1:
            raise ConfigError(None, "--stale-after/--jobs", "must be positive", "e.g. --stale-after 180 --jobs 32")
        manifests, lanes = _load(root, args.shims)
    except ConfigError as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return 2
    cache_dir = None if args.no_cache else (args.cache_dir or root / ".patchlane" / "cache" / "http")
    verdicts = gather(
        manifests, lanes, root / "locks", args.validation or root / "validation" / "manifest.jsonl",
        index_url=args.index_url, api_base=args.api_url, cache_dir=cache_dir, mirrors=args.mirrors,
        stale_after_days=args.stale_after, workers=args.jobs,
    )
    if args.json:
        print(json.dumps([v.to_json() for v in verdicts], indent=2))
        return 0
    width = max([len(v.shim) for v in verdicts] + [4])
    print(f"{'shim':<{width}}  {'verdict':<7}  why")
    for v in verdicts:
        floors = f" → {', '.join(v.floors)}" if v.floors else ""
        print(f"{v.shim:<{width}}  {v.kind:<7}  {v.why}{floors}")
    counts = {kind: sum(v.kind == kind for v in verdicts) for kind in VERDICTS}
    print(", ".join(f"{n} {kind}" for kind, n in counts.items() if n) or "no shims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
