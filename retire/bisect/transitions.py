"""``bisect_window()``: a bug's window on the target's releases, and the commits that opened and
closed it.

The releases come first (:func:`retire.bisect.window.locate_window`, one overlay env per release,
:class:`~retire.bisect.runner.OverlayRunner`). Where an edge then lies between two adjacent
releases and the target's repository is mirrored, the search goes on in the first-parent commits
between their tags (:mod:`retire.mirrors.history`), each candidate the package built from the
mirror at that commit (:class:`~retire.bisect.revision.RevisionRunner`), and the answer names the
commit, its subject, date and pull request. A target that cannot be built from source cheaply
(unless its shim names the command that builds its wheel: ``Source.build``), a release with no
tag in the mirror, or no mirror at all stops that edge at the release edge, and the result says
why.

Every fresh run is appended to the validation manifest as it ends (commit runs carry their commit
in the host stamp), and answers are cached, as for :func:`retire.bisect.bisect`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from retire.bisect.bisection import DEFAULT_OPTIONS, _Journal
from retire.bisect.cache import ResultCache
from retire.bisect.options import BisectOptions
from retire.bisect.revision import RevisionRunner
from retire.bisect.runner import BaseEnv, OverlayRunner, inspect_base
from retire.bisect.search import ENV_FAILED, FIXED, CandidateRun, Limits, normal
from retire.bisect.sidebyside import SideBySide, serialized
from retire.bisect.window import DEFAULT_SAMPLE, locate_edge, locate_window
from retire.bisect.windowresult import BRANCH, WindowResult
from retire.core.git import GitError
from retire.evidence.validation import ValidationRecord
from retire.history.edge import CommitSpan, Edge, EdgeKind, EdgeState
from retire.history.window import BranchFix, Window
from retire.mirrors.history import Commit, build_obstacle, commits_between, release_tag
from retire.mirrors.repo import MirrorRepo
from shims.model import ShimManifest
from shims.wheelbuild import WheelBuild

__all__ = ["Source", "bisect_window"]

Probe = Callable[[str], CandidateRun]


@dataclass(frozen=True)
class Source:
    """Where the target's commits come from: a readable mirror and the package's folder in it;
    or, with ``repo`` None, why there are none (``why``)."""

    repo: MirrorRepo | None
    subdirectory: str | None = None
    why: str = ""
    # the branch a lane follows (``[lane.revisions]``): where a fix in no release is looked for
    branch: str | None = None
    # the command that builds the target's wheel from a checkout (a shim's ``[target] build``,
    # else a lane revision's ``build``): compiled sources no longer stop the search
    build: WheelBuild | None = None

    def revision_runner(
        self, manifest: ShimManifest, base: BaseEnv, **options: Any
    ) -> RevisionRunner:
        """The runner of ``manifest``'s reproducer against the target built from this mirror at
        a commit (``options``: :class:`~retire.bisect.runner.OverlayRunner`'s)."""
        if self.repo is None:
            raise ValueError(f"no mirror to build commits from: {self.why}")
        return RevisionRunner(
            manifest,
            base,
            mirror=self.repo.mirror.path,
            repository=self.repo.mirror.repository,
            subdirectory=self.subdirectory,
            build=self.build,
            **options,
        )


@dataclass
class _Probes:
    """The release and commit runners of one window bisection, and the count of steps."""

    release: Probe
    commit: Probe | None
    on_step: Callable[[int, CandidateRun], None] | None
    # the fresh runs a budget has left (no round starts more)
    room: Callable[[], int | None] | None = None
    steps: int = 0

    def consulted(self, run: CandidateRun) -> None:
        self.steps += 1
        if self.on_step is not None:
            self.on_step(self.steps, run)

    def close(self) -> None:
        for runner in (self.release, self.commit):
            close = getattr(runner, "close", None)
            if callable(close):
                close()


def bisect_window(
    manifest: ShimManifest,
    versions: Iterable[str],
    options: BisectOptions = DEFAULT_OPTIONS,
    *,
    source: Source | None = None,
    sample: int = DEFAULT_SAMPLE,
    runner: Probe | None = None,
    commit_runner: Probe | None = None,
    on_step: Callable[[int, CandidateRun], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    stop: Callable[[], str | None] | None = None,
    room: Callable[[], int | None] | None = None,
) -> WindowResult:
    """The window of ``manifest``'s bug on its target's ``versions`` inside ``options.bounds``
    (the evidence's release, ``bounds.known_broken``, is the broken release the search starts
    from; without one it looks for one, trying at most ``sample`` older releases), continued into
    ``source``'s commits where an edge lies between two adjacent releases, and on its branch when
    the newest release is still broken. ``runner`` / ``commit_runner`` replace the overlay
    runners (callables version or commit → CandidateRun), for callers that test somewhere else;
    with ``options.jobs`` above 1 each round runs that many candidates at once
    (:mod:`retire.bisect.sidebyside`), no more than ``room`` (the fresh runs a budget has left);
    the rest is :func:`retire.bisect.bisect`'s."""
    began = time.monotonic()
    o, bounds = options, options.bounds
    candidates = o.candidates(versions)
    journal = _Journal(o.record_to) if o.record_to is not None else None
    fingerprint = ""
    if runner is None:
        base = inspect_base(o.base_python, manifest.target.distribution)
        fingerprint = base.fingerprint
        on_record = journal.append if journal is not None else None
        runner, made = _runners(manifest, base, source, o, on_record, on_note)
        commit_runner = commit_runner or made
    probes = _Probes(runner, commit_runner, on_step, room)
    try:
        known_broken = _in(candidates.versions, bounds.known_broken)
        found = locate_window(
            candidates.versions,
            runner,
            **_searching(runner, candidates.versions, o.limits, probes, stop),
            known_broken=known_broken,
            sample=sample,
        )
        searched, stops = _commit_edges(
            found.window.fixed, found.window.introduced, source, probes, o.limits, stop
        )
    finally:
        probes.close()
    commit_runs = {key: runs for key, (_, runs) in searched.items()}
    return WindowResult(
        manifest.id,
        manifest.target.distribution,
        _extended(found.window, searched, found.runs, commit_runs, source),
        candidates,
        found.runs,
        commit_runs,
        stops,
        base=fingerprint,
        seconds=round(time.monotonic() - began, 3),
        range_note=bounds.note,
        evidence=bounds.evidence,
        records_added=journal.added if journal is not None else 0,
    )


def _runners(
    manifest: ShimManifest,
    base: BaseEnv,
    source: Source | None,
    o: BisectOptions,
    on_record: Callable[[ValidationRecord], None] | None,
    on_note: Callable[[str], None] | None,
) -> tuple[Probe, Probe | None]:
    """The release runner, and the commit runner where there is a mirror to build from; with
    ``o.jobs`` above 1, each runs rounds of candidates side by side."""
    if o.jobs > 1:
        on_note = serialized(on_note)
    options: dict[str, Any] = {
        "index_url": o.index_url,
        "work_dir": o.work_dir,
        "timeout": o.timeout,
        "env": o.env,
        "cache": ResultCache(o.cache_dir) if o.cache_dir is not None else None,
        "lane": o.lane,
        "lock_digest": o.lock_digest,
        "on_record": on_record,
        "isolation": o.isolation,
        "say": on_note,
    }

    releases = functools.partial(OverlayRunner, manifest, base, **options)
    commits = None
    if source is not None and source.repo is not None:
        commits = functools.partial(source.revision_runner, manifest, base, **options)
    if o.jobs <= 1:
        return releases(), commits() if commits is not None else None
    needs = manifest.reproducer.gpu_needs
    side = SideBySide(releases, o.jobs, needs, say=on_note)
    if on_note is not None:
        on_note(f"candidates: up to {side.width} at once" + _on_gpus(side))
    if commits is None:
        return side, None
    return side, SideBySide(commits, o.jobs, needs, say=on_note)


def _on_gpus(side: SideBySide) -> str:
    """How the candidates running at once share out the host's GPUs, for the note."""
    if side.pool is None:
        return ""
    return f", each on {side.needs} of its own ({len(side.pool.gpus)} on this host)"


def _searching(
    runner: Probe,
    items: Iterable[str],
    limits: Limits,
    probes: _Probes,
    stop: Callable[[], str | None] | None,
) -> dict[str, Any]:
    """What every search of one bisection shares: the cache's answers for ``items``, the
    limits, the step counter, the budget; and how many candidates a round may run at once (the
    runner's ``width``, through its batch probe ``many``)."""
    return {
        "known": _cached(runner, items),
        "limits": limits,
        "on_run": probes.consulted,
        "stop": stop,
        "width": getattr(runner, "width", 1),
        "probe_many": getattr(runner, "many", None),
        "room": probes.room,
    }


def _in(versions: tuple[str, ...], version: str | None) -> str | None:
    """``version`` as ``versions`` spell it (``1.0`` for ``1.0.0``), or None."""
    if version is None:
        return None
    return next((v for v in versions if normal(v) == normal(version)), None)


def _cached(runner: Probe, items: Iterable[str]) -> dict[str, CandidateRun]:
    cached = getattr(runner, "cached", None)
    return {v: hit for v in items if cached and (hit := cached(v)) is not None}


#: An edge searched in the commits: its span, and the runs that placed it.
_Searched = tuple[CommitSpan, tuple[CandidateRun, ...]]


def _extended(
    window: Window,
    searched: dict[str, _Searched],
    release_runs: tuple[CandidateRun, ...],
    commit_runs: dict[str, tuple[CandidateRun, ...]],
    source: Source | None,
) -> Window:
    """``window`` with its edges continued into the commits searched, the fix found on a branch,
    and the bisection's fresh runs in its provenance."""
    introduced, fixed = window.introduced, window.fixed
    if str(EdgeKind.INTRODUCED) in searched:
        introduced = replace(introduced, commits=searched[str(EdgeKind.INTRODUCED)][0])
    if str(EdgeKind.FIXED) in searched:
        fixed = replace(fixed, commits=searched[str(EdgeKind.FIXED)][0])
    branch = None
    if BRANCH in searched and source is not None and source.branch is not None:
        repository = source.repo.mirror.repository if source.repo is not None else ""
        branch = BranchFix(source.branch, searched[BRANCH][0], repository)
    runs = release_runs + tuple(r for more in commit_runs.values() for r in more)
    fresh = sum(1 for r in runs if not r.cached and r.outcome != ENV_FAILED)
    return replace(
        window,
        introduced=introduced,
        fixed=fixed,
        branch_fix=branch,
        source=replace(window.source, bisection=fresh),
    )


def _commit_edges(
    fixed: Edge,
    introduced: Edge,
    source: Source | None,
    probes: _Probes,
    limits: Limits,
    stop: Callable[[], str | None] | None,
) -> tuple[dict[str, _Searched], tuple[str, ...]]:
    """Each release edge found between two adjacent releases, continued in the commits (keyed by
    the edge's kind; ``branch`` for a fix on a followed branch)."""
    edges: dict[str, _Searched] = {}
    stops: list[str] = []
    for edge in (fixed, introduced):
        if edge.state != EdgeState.FOUND or edge.before is None or edge.after is None:
            continue
        found = _in_commits(edge, source, probes, limits, stop)
        if isinstance(found, str):
            stops.append(f"The {edge.kind} edge stops at {edge.before} → {edge.after}: {found}")
        else:
            edges[str(edge.kind)] = found
    if fixed.state == EdgeState.OPEN and source is not None:
        # still broken in the newest release: a fix may be on the branch a lane follows
        branch = _on_branch(fixed, source, probes, limits, stop)
        if isinstance(branch, tuple):
            edges[BRANCH] = branch
        stops += [branch] if isinstance(branch, str) else []
    return edges, tuple(stops)


def _span(
    kind: EdgeKind,
    tags: tuple[str, str],
    commits: tuple[Commit, ...],
    edge: Edge,
    source: Source,
) -> CommitSpan:
    """The commit-level ``edge`` as the window holds it: the commit named only when pinned."""
    pinned = edge.state == EdgeState.FOUND
    named = next((c for c in commits if c.sha == edge.after), None) if pinned else None
    return CommitSpan(
        kind,
        tags,
        len(commits),
        edge.state if named is not None or not pinned else EdgeState.UNPINNED,
        edge.before,
        edge.after,
        edge.between,
        edge.note,
        named,
        build=source.build.describe() if source.build is not None else None,
    )


def _on_branch(
    fixed: Edge,
    source: Source,
    probes: _Probes,
    limits: Limits,
    stop: Callable[[], str | None] | None,
) -> _Searched | str | None:
    """Still broken at the newest release: is the followed branch's newest commit clean, and if
    so, which commit since that release fixed it (a fix in no release yet)? None when there is no
    branch to look at or nothing on it since the release."""
    repo, branch = source.repo, source.branch
    if repo is None or branch is None or probes.commit is None or fixed.before is None:
        return None
    tag = release_tag(repo, fixed.before)
    if tag is None:
        return f"the mirror of {repo.mirror.repository} has no release tag for {fixed.before}"
    head = f"refs/heads/{branch}"
    named_build = source.build is not None
    if (
        obstacle := build_obstacle(repo, head, source.subdirectory, named_build=named_build)
    ) is not None:
        return f"{branch} since {fixed.before} is not searched: {obstacle}"
    try:
        commits = commits_between(repo, tag, head)
        old_sha = repo.git.rev_parse(f"{tag}^{{commit}}") or tag
    except GitError as exc:
        return f"cannot read {branch} since {tag}: {exc}"
    if not commits or (stop is not None and (why := stop()) is not None):
        return None if not commits else f"{branch} since {fixed.before} is not searched: {why}"
    tip = probes.commit(commits[-1].sha)
    probes.consulted(tip)
    if tip.state != FIXED:
        return f"still {tip.state} on {branch} at {commits[-1].short}"
    items = [c.sha for c in commits[:-1]]
    search = locate_edge(
        items,
        probes.commit,
        kind=EdgeKind.FIXED,
        before=old_sha,
        after=commits[-1].sha,
        **_searching(probes.commit, items, limits, probes, stop),
    )
    span = _span(EdgeKind.FIXED, (tag, head), commits, search.edge, source)
    return span, (tip, *search.runs)


def _in_commits(
    edge: Edge,
    source: Source | None,
    probes: _Probes,
    limits: Limits,
    stop: Callable[[], str | None] | None,
) -> _Searched | str:
    """The commit that made ``edge``, or why the search stays at the release edge."""
    if source is None or source.repo is None or probes.commit is None:
        return (
            source.why if source is not None else ""
        ) or "the target's repository is not mirrored"
    repo = source.repo
    if edge.before is None or edge.after is None:
        return "the release edge is not pinned"
    old, new = release_tag(repo, edge.before), release_tag(repo, edge.after)
    if old is None or new is None:
        missing = edge.before if old is None else edge.after
        return (
            f"the mirror of {repo.mirror.repository} has no release tag for {missing} (behind? "
            "`patchlane mirrors sync`)"
        )
    named_build = source.build is not None
    if (
        obstacle := build_obstacle(repo, new, source.subdirectory, named_build=named_build)
    ) is not None:
        return obstacle
    try:
        commits = commits_between(repo, old, new)
        old_sha = repo.git.rev_parse(f"{old}^{{commit}}") or old
    except GitError as exc:
        return f"cannot read the commits between {old} and {new}: {exc}"
    if not commits:
        return f"no commit between {old} and {new} on the first-parent history"
    items = [c.sha for c in commits[:-1]]
    search = locate_edge(
        items,
        probes.commit,
        kind=edge.kind,
        before=old_sha,
        after=commits[-1].sha,
        **_searching(probes.commit, items, limits, probes, stop),
    )
    return _span(edge.kind, (old, new), commits, search.edge, source), search.runs
