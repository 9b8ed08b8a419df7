"""Gathering evidence for every shim (I/O, concurrent) and deciding each with the pure rules.

:func:`gather` runs each distinct probe once, concurrently — releases from the indexes the lanes
take the target from, issue and pull-request states from the code host, landed commits and
release tags from local mirrors, the recorded reproducer runs — then calls
:func:`retire.verdicts.rules.decide` per shim. It never raises: an internal error becomes an
*unknown* verdict with the reason.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.core.secrets import remember
from retire.evidence.values import ExecutionHistory, ProbeFailure, PullState, ReleaseList
from retire.verdicts.model import Decision, ShimEvidence, Verdict
from retire.verdicts.rules import DEFAULT_STALE_DAYS, decide, link_urls
from shims import times

__all__ = ["gather", "lane_index_urls"]


def lane_index_urls(
    lane, distribution: str, *, named: Mapping[str, str], default: str | None
) -> tuple[str, ...] | str:
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
        return (
            (url,)
            if url
            else f"lane {lane.name}: index {pinned!r} has no URL on this host (set "
            f"UV_INDEX={pinned}=<url>)"
        )
    explicit = set(sources.values())
    extras = [
        url for i in lane.indexes if not i.default and i.name not in explicit and (url := url_of(i))
    ]
    lane_default = next((url_of(i) for i in lane.indexes if i.default), None)
    chosen = lane_default or default
    urls = tuple(extras + ([chosen] if chosen else []))
    if not urls:
        return (
            f"lane {lane.name}: no index URL for {name} — set UV_DEFAULT_INDEX or pass --index-url"
        )
    return urls


def _lock_packages(locks_dir: Path, lane_name: str) -> dict[str, str] | None:
    """{canonical name: version} of a lane's lock (None: no readable lock). A package the lock takes
    from a git revision ([lane.revisions]) is left out: its version names no release of the
    index."""
    from retire.locks import locking

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
    policy=None,
    clock: Callable[[], _dt.datetime] = times.now,
    stale_after_days: int = DEFAULT_STALE_DAYS,
    workers: int = 100,
) -> list[Verdict]:
    """Probe upstream for every shim concurrently and decide each; never raises.

    ``client`` is an injected ``httpx.Client`` (one is made and closed when None); ``token``
    defaults to ``GITHUB_TOKEN`` / ``GH_TOKEN``; ``cache_dir`` holds the HTTP cache (None: no
    cache); ``mirrors`` is a :class:`~retire.mirrors.config.MirrorSet` (or ``{url: path}``, or a
    folder of ``<owner>/<repo>`` clones). Each distinct probe runs once even when many shims need
    it.
    """
    from retire.mirrors.config import MirrorSet
    from retire.probes import codehost, index, records
    from retire.probes.http import Fetcher, HttpCache, RetryPolicy, make_client

    policy = policy or RetryPolicy()
    api_base = api_base or codehost.DEFAULT_API_BASE
    web_host = web_host or codehost.DEFAULT_WEB_HOST
    mirrored = _Mirrors(MirrorSet.coerce(mirrors))
    secret = codehost.token_from_env() if token is _FROM_ENV else token
    if isinstance(secret, str):
        # whatever carries it out of the process later is scrubbed too
        remember(secret)
    owned = client is None
    client = client or make_client(timeout=policy.timeout)
    fetcher = Fetcher(
        client,
        cache=HttpCache(cache_dir) if cache_dir else None,
        policy=policy,
        secrets=(secret,) if isinstance(secret, str) else (),
    )
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
        # every issue / PR URL, asked in one batched job below
        links: dict[str, None] = {}
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
                            jobs[key] = lambda reason=urls, d=dist: ProbeFailure("index", d, reason)
                        else:
                            jobs[key] = lambda d=dist, u=urls: index.probe_releases(fetcher, d, u)
                        wanted.setdefault(dist, []).append(key)
                elif condition.kind == "commit-in-tag":
                    key = ("git", condition.repository, condition.commit)
                    jobs[key] = lambda r=condition.repository, c=condition.commit: mirrored.commit(
                        r, c
                    )
            repositories: dict[str, None] = {}
            for url in link_urls(manifest):
                ref = codehost.parse_link(url, web_host=web_host)
                if ref is None:
                    continue
                links[url] = None
                if mirrored.has(ref.repository):
                    repositories[ref.repository] = None
                    if ref.kind == "pull":
                        jobs[("mirror-pull", url)] = lambda r=ref: mirrored.pull(
                            r.repository, r.number
                        )
            # Runs on an upstream revision: is it the newest commit of a followed branch?
            history = histories.get(manifest.id)
            target = canonicalize_name(manifest.target.distribution)
            for run in history.runs if isinstance(history, ExecutionHistory) else ():
                commit = run.revision(target)
                for repository in repositories if commit else ():
                    jobs[("tip", repository, commit)] = lambda r=repository, c=commit: mirrored.tip(
                        r, c
                    )

        # one job, first (it fans out itself): GraphQL batches with a token, REST per link without
        if links:
            jobs = {
                ("codehost", "every link"): (
                    lambda: codehost.probe_links(
                        fetcher,
                        list(links),
                        api_base=api_base,
                        token=secret,
                        web_host=web_host,
                        workers=workers,
                    )
                ),
                **jobs,
            }
        results = _run_all(jobs, workers)
        states = results.pop(("codehost", "every link"), {})
        results.update(
            {
                ("link", url): states if isinstance(states, ProbeFailure) else states[url]
                for url in links
            }
        )
        # Second round: merge commits of merged PRs, checked against a mirror when there is one.
        second: dict[tuple, Callable[[], object]] = {}
        for (kind, *rest), value in list(results.items()):
            if kind == "link" and isinstance(value, PullState) and value.merge_commit_sha:
                ref = codehost.parse_link(rest[0], web_host=web_host)
                if ref and mirrored.has(ref.repository):
                    second[("git", ref.repository, value.merge_commit_sha)] = (
                        lambda r=ref.repository, c=value.merge_commit_sha: mirrored.commit(r, c)
                    )
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
                mirror_pulls={
                    key[1]: value for key, value in results.items() if key[0] == "mirror-pull"
                },
                tags={(key[1], key[2]): value for key, value in results.items() if key[0] == "git"},
                tips={(key[1], key[2]): value for key, value in results.items() if key[0] == "tip"},
                execution=histories.get(manifest.id),
            )
            verdicts.append(_decide_safely(manifest, lanes, ev, now, stale_after_days))
        return verdicts
    except Exception as exc:  # noqa: BLE001 - gather never raises: every shim becomes unknown
        failure = ProbeFailure("engine", "gather", f"internal error: {type(exc).__name__}: {exc}")
        return [
            Verdict(m.id, Decision.UNKNOWN, str(failure), failures=(failure,)) for m in manifests
        ]
    finally:
        if owned:
            client.close()


class _Mirrors:
    """The mirrors of one gather: each opened and read once, shared by every shim's probes."""

    def __init__(self, mirrors) -> None:
        self.mirrors = mirrors
        self._open: dict[str, object] = {}
        self._lock = threading.Lock()

    def has(self, repository: str) -> bool:
        return self.mirrors.for_repository(repository) is not None

    def _repo(self, repository: str):
        from retire.mirrors.repo import open_mirror

        mirror = self.mirrors.for_repository(repository)
        if mirror is None:
            return ProbeFailure(
                "git",
                repository,
                f"no mirror of {repository}: declare one in patchlane.toml "
                "([[mirrors.repository]]) and run `patchlane mirrors sync`, or pass --mirrors DIR",
            )
        with self._lock:
            if mirror.repository not in self._open:
                self._open[mirror.repository] = open_mirror(mirror)
            return self._open[mirror.repository]

    def pull(self, repository: str, number: int):
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_pull(number)

    def commit(self, repository: str, commit: str):
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_commit(commit)

    def tip(self, repository: str, commit: str):
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_tip(commit)


def _run_all(jobs: Mapping[tuple, Callable[[], object]], workers: int) -> dict[tuple, object]:
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = {
            key: pool.submit(_guarded, key[0], str(key[1]), job) for key, job in jobs.items()
        }
        return {key: future.result() for key, future in futures.items()}


def _decide_safely(
    manifest, lanes, ev: ShimEvidence, now: _dt.datetime, stale_after_days: int
) -> Verdict:
    try:
        return decide(manifest, lanes, ev, now=now, stale_after_days=stale_after_days)
    except Exception as exc:  # noqa: BLE001
        failure = ProbeFailure(
            "engine", manifest.id, f"internal error: {type(exc).__name__}: {exc}"
        )
        return Verdict(manifest.id, Decision.UNKNOWN, str(failure), failures=(failure,))
