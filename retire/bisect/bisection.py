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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from retire.bisect.bounds import Bounds, broken_evidence, choose_bounds
from retire.bisect.cache import ResultCache
from retire.bisect.options import BisectOptions
from retire.bisect.result import BisectResult
from retire.bisect.runner import OverlayRunner, inspect_base
from retire.bisect.search import (
    ENV_FAILED,
    UNKNOWN,
    CandidateRun,
    Candidates,
    Limits,
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

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_OPTIONS",
    "EVERY_RELEASE",
    "bisect",
    "list_releases",
    "project_bounds",
]


#: The defaults of :func:`bisect` (immutable, so one value serves every call).
EVERY_RELEASE = Bounds()
DEFAULT_LIMITS = Limits()
DEFAULT_OPTIONS = BisectOptions()


def bisect(
    manifest: ShimManifest,
    versions: Iterable[str],
    options: BisectOptions = DEFAULT_OPTIONS,
    *,
    runner: Callable[[str], CandidateRun] | None = None,
    on_step: Callable[[int, CandidateRun], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    stop: Callable[[], str | None] | None = None,
) -> BisectResult:
    """Bisect ``manifest``'s target over ``versions`` (any order; ``options.yanked`` ones are
    skipped) inside ``options.bounds`` (default: every release).

    ``options.record_to``: the validation manifest each fresh reproducer run is appended to,
    under ``options.lane``. ``runner`` replaces the overlay runner (a callable version →
    CandidateRun, with an optional ``cached(version)``), for callers that test somewhere else.
    ``options.isolation``: how the overlay runner runs the reproducer (``process`` |
    ``launcher``; default: launcher when the reproducer declares ``preload``, see
    :class:`~retire.bisect.runner.OverlayRunner`); ``on_note`` hears what the launcher did (its
    imports, a fall-back to process isolation). ``stop`` is asked before each fresh run (a
    budget, :class:`~retire.bisect.budget.Meter`): a reason ends the search there, with what it
    found so far (each run is cached and recorded, so a later bisection resumes for free).
    """
    began = time.monotonic()
    o, bounds = options, options.bounds
    candidates = o.candidates(versions)
    journal = _Journal(o.record_to) if o.record_to is not None else None
    fingerprint = ""
    if runner is None:
        base = inspect_base(o.base_python, manifest.target.distribution)
        fingerprint = base.fingerprint
        runner = OverlayRunner(
            manifest,
            base,
            index_url=o.index_url,
            work_dir=o.work_dir,
            timeout=o.timeout,
            env=o.env,
            cache=ResultCache(o.cache_dir) if o.cache_dir is not None else None,
            lane=o.lane,
            lock_digest=o.lock_digest,
            on_record=journal.append if journal is not None else None,
            isolation=o.isolation,
            say=on_note,
        )
    outcome = _search(candidates, runner, bounds, o.limits, on_step, stop)
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


def _search(
    candidates: Candidates,
    runner: Callable[[str], CandidateRun],
    bounds: Bounds,
    limits: Limits,
    on_step: Callable[[int, CandidateRun], None] | None,
    stop: Callable[[], str | None] | None = None,
) -> SearchOutcome:
    """The search over ``candidates``: what the runner's cache knows first, then fresh runs;
    the runner is closed however it ends."""
    cached = getattr(runner, "cached", None)
    known = {v: hit for v in candidates.versions if cached and (hit := cached(v)) is not None}
    steps = 0

    def consulted(run: CandidateRun) -> None:
        nonlocal steps
        steps += 1
        if on_step:
            on_step(steps, run)

    try:
        return find_boundary(
            candidates.versions,
            runner,
            known=known,
            known_broken=bounds.known_broken,
            limits=limits,
            on_run=consulted,
            stop=stop,
            # a runner that runs rounds of candidates at once (retire.bisect.sidebyside)
            width=getattr(runner, "width", 1),
            probe_many=getattr(runner, "many", None),
        )
    finally:
        close = getattr(runner, "close", None)
        if callable(close):
            close()


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
