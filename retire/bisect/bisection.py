"""``bisect()``: the first release of a shim's target in which the bug is gone.

``patchlane bisect <shim>`` (:mod:`retire.commands.bisect`) takes the target distribution's
releases from the index (:func:`list_releases`), the range from what the project knows
(:func:`project_bounds`: the newest release recorded broken, up to the newest release), and
binary-searches it (:mod:`retire.bisect.search`), running the reproducer ``--mode without`` once
per candidate in an overlay environment (:mod:`retire.bisect.runner`). Answers already in the
result cache (:mod:`retire.bisect.cache`) cost nothing; every fresh run is appended to the
validation manifest as it ends, so the verdicts use it and an interrupted bisection loses none.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from retire.bisect.bounds import Bounds, broken_evidence, choose_bounds
from retire.bisect.job import BisectJob
from retire.bisect.prober import Prober, Progress
from retire.bisect.result import BisectResult
from retire.bisect.runner import OverlayRunner, inspect_base
from retire.bisect.search import (
    ENV_FAILED,
    UNKNOWN,
    Candidates,
    SearchOutcome,
    Status,
    find_boundary,
)
from retire.core.errors import PatchlaneError
from retire.evidence import validation
from shims.model import ShimManifest

if TYPE_CHECKING:
    import httpx

    from retire.core.project import Project

__all__ = ["bisect", "list_releases", "project_bounds"]


def bisect(
    manifest: ShimManifest,
    versions: Iterable[str],
    job: BisectJob,
    *,
    prober: Prober | None = None,
    progress: Progress | None = None,
) -> BisectResult:
    """Bisect ``manifest``'s target over ``versions`` (any order; ``job.yanked`` ones are
    skipped) inside ``job.bounds`` (default: every release).

    ``job.records``: the validation manifest each fresh reproducer run is appended to, under
    ``job.record_lane``. ``prober`` replaces the overlay runner, for callers that test
    somewhere else. ``job.isolation``: how the overlay runner runs
    the reproducer (``process`` | ``launcher``; default: launcher when the reproducer declares
    ``preload``, see :class:`~retire.bisect.runner.OverlayRunner`). ``progress`` hears each run
    consulted and what the launcher did (its imports, a fall-back to process isolation), and its
    budget (:class:`~retire.bisect.budget.Meter`) is asked before each fresh run: a reason ends
    the search there, with what it found so far (each run is cached and recorded, so a later
    bisection resumes for free).
    """
    began = time.monotonic()
    bounds, progress = job.bounds, progress or Progress()
    candidates = job.candidates(versions)
    journal = _Journal(job.records) if job.records is not None else None
    fingerprint = ""
    if prober is None:
        base = inspect_base(job.base_python, manifest.target.distribution)
        fingerprint = base.fingerprint
        on_record = journal.append if journal is not None else None
        prober = OverlayRunner(manifest, base, job, on_record=on_record, say=progress.note)
    try:
        outcome = find_boundary(
            candidates.versions,
            prober,
            known_broken=bounds.known_broken,
            limits=job.limits,
            progress=progress,
        )
    finally:
        prober.close()
    return _result(
        manifest,
        candidates,
        outcome,
        bounds,
        base=fingerprint,
        added=journal.added if journal is not None else 0,
        seconds=round(time.monotonic() - began, 3),
    )


class _Journal:
    """Appends each fresh reproducer run to a validation manifest as it ends, and counts them;
    candidates that run side by side append from their own threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.added = 0
        self._lock = threading.Lock()

    def append(self, run: validation.ValidationRecord) -> None:
        with self._lock:
            self.added += validation.append(self.path, [run])


def _result(
    manifest: ShimManifest,
    candidates: Candidates,
    outcome: SearchOutcome,
    bounds: Bounds,
    *,
    base: str,
    added: int,
    seconds: float,
) -> BisectResult:
    """The bisection's answer: a boundary only where the search found one."""
    found = outcome.status != Status.NO_TRANSITION
    between = tuple(
        b if isinstance(b, str) else b.version
        for b in outcome.between
        if isinstance(b, str) or b.state == UNKNOWN
    )
    return BisectResult(
        shim=manifest.id,
        distribution=manifest.target.distribution,
        status=outcome.status,
        reason=outcome.reason,
        first_fixed=outcome.first_fixed if found else None,
        last_broken=outcome.last_broken if found else None,
        unknown_between=between,
        runs=sum(1 for r in outcome.runs if not r.cached and r.outcome != ENV_FAILED),
        probes=outcome.runs,
        candidates=candidates,
        base=base,
        seconds=seconds,
        range_note=bounds.note,
        last_broken_evidence=bounds.evidence if found and not outcome.broken_here else "",
        not_applicable_between=tuple(
            b.version for b in outcome.between if not isinstance(b, str) and b.state != UNKNOWN
        ),
        records_added=added,
    )


def project_bounds(
    project: Project,
    manifest: ShimManifest,
    versions: Iterable[str],
    *,
    since: str | None = None,
    until: str | None = None,
    every: bool = False,
) -> Bounds:
    """The range for ``manifest``'s bisection from what ``project`` knows: its validation
    manifest, the locks of the lanes carrying the shim, the manifest's ``affected`` range."""
    from retire.lanes import lanefile
    from retire.locks import locking

    distribution = manifest.target.distribution
    if every:
        return choose_bounds(distribution, (), until=until, every=True)
    target = canonicalize_name(distribution)
    lane_locks = {}
    for lane in lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ():
        if manifest.id in lane.shims:
            lock = locking.read_lock(locking.lock_path(project.locks_dir, lane.name)) or {}
            lane_locks[lane.name] = next(
                (
                    str(p.get("version"))
                    for p in lock.get("packages", [])
                    if canonicalize_name(p.get("name", "")) == target and p.get("version")
                ),
                None,
            )
    evidence = broken_evidence(
        manifest.id,
        distribution,
        validation.load(project.validation),
        lane_locks=lane_locks,
        affected=manifest.target.affected,
        releases=versions,
    )
    return choose_bounds(distribution, evidence, since=since, until=until)


def list_releases(
    index_url: str, distribution: str, *, client: httpx.Client | None = None
) -> tuple[list[str], set[str]]:
    """(versions, yanked versions) of ``distribution``, through the index probe."""
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
    return [str(r.version) for r in found.releases], {
        str(r.version) for r in found.releases if r.yanked
    }
