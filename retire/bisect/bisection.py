"""``bisect()``: the first release of a shim's target in which the bug is gone.

``patchlane bisect <shim>`` (``retire.commands.bisect``) orders the target distribution's releases (yanked ones skipped,
pre-releases only when asked), and binary-searches them for the boundary between "reproducer
prints BUG_REPRODUCED" and "it does not", running the reproducer ``--mode without`` once per
candidate in an *overlay environment* (:mod:`retire.bisect.runner`).

The search assumes the bug is monotonic (present up to some release, fixed from then on). It
first checks that assumption at the ends: the oldest candidate must reproduce and the newest
must not; otherwise it reports *no transition* instead of inventing one. A candidate whose run
crashed, timed out, was skipped or whose environment could not be built is *unknown*: it is
reported, never read as broken or fixed; the search steps around it to the nearest untested
neighbour, and if unknowns sit right at the boundary the result says so (*unpinned*) and
proposes the conservative floor (the first release proven fixed).

Each conclusive run is cached on disk (:mod:`retire.bisect.cache`), so a re-run costs no
reproducer runs.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping

from retire.bisect.cache import ResultCache
from retire.bisect.result import BisectResult
from retire.bisect.runner import OverlayRunner, inspect_base
from retire.bisect.search import (
    DEFAULT_MAX_UNKNOWN,
    UNKNOWN,
    CandidateRun,
    search,
    select_candidates,
)
from retire.core.errors import PatchlaneError

__all__ = ["bisect", "list_releases"]


def bisect(
    manifest,
    versions: Iterable[str],
    *,
    yanked: Iterable[str] = (),
    include_prereleases: bool = False,
    since: str | None = None,
    until: str | None = None,
    base_python: str | os.PathLike[str] = sys.executable,
    index_url: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    max_unknown: int = DEFAULT_MAX_UNKNOWN,
    runner: Callable[[str], CandidateRun] | None = None,
    on_step: Callable[[int, CandidateRun], None] | None = None,
) -> BisectResult:
    """Bisect ``manifest``'s target over ``versions`` (any order; yanked ones are skipped).

    ``runner`` replaces the overlay runner (a callable version → CandidateRun), for callers
    that test somewhere else (a recorded manifest of another host, a remote GPU).
    """
    began = time.monotonic()
    distribution = manifest.target.distribution
    candidates = select_candidates(versions, yanked, include_prereleases=include_prereleases, since=since, until=until)
    fingerprint = ""
    if runner is None:
        base = inspect_base(base_python, distribution)
        fingerprint = base.fingerprint
        runner = OverlayRunner(manifest, base, index_url=index_url, work_dir=work_dir, timeout=timeout, env=env,
                               cache=ResultCache(cache_dir) if cache_dir is not None else None)
    step = 0

    def probe(version: str) -> CandidateRun:
        nonlocal step
        run = runner(version)
        step += 1
        if on_step:
            on_step(step, run)
        return run

    status, reason, lo, hi, order = search(candidates.versions, probe, max_unknown=max_unknown)
    last_broken = candidates.versions[lo] if lo is not None else None
    first_fixed = candidates.versions[hi] if hi is not None else None
    between = ()
    if lo is not None and hi is not None and status != "no-transition":
        tested = {r.version: r for r in order}
        between = tuple(v for v in candidates.versions[lo + 1:hi] if v not in tested or tested[v].state == UNKNOWN)
    return BisectResult(
        shim=manifest.id, distribution=distribution, status=status, reason=reason,
        first_fixed=first_fixed if status != "no-transition" else None,
        last_broken=last_broken if status != "no-transition" else None,
        unknown_between=between, runs=sum(1 for r in order if not r.cached and r.outcome != "env-failed"),
        probes=tuple(order), candidates=candidates, base=fingerprint, seconds=round(time.monotonic() - began, 3),
    )


def list_releases(index_url: str, distribution: str, *, client=None) -> tuple[list[str], set[str]]:
    """(versions, yanked versions) of ``distribution``, through the index probe (PEP 691)."""
    from retire.evidence.values import ProbeFailure
    from retire.probes.http import Fetcher, make_client
    from retire.probes.index import probe_releases

    owned = client is None
    client = client or make_client()
    try:
        found = probe_releases(Fetcher(client), distribution, [index_url])
    finally:
        if owned:
            client.close()
    if isinstance(found, ProbeFailure):
        raise PatchlaneError(f"cannot list the releases of {distribution}: {found}")
    return [str(r.version) for r in found.releases], {str(r.version) for r in found.releases if r.yanked}
