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

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from retire.bisect.bisection import _Journal
from retire.bisect.informed import TouchedSpan, informed_edge
from retire.bisect.job import BisectJob
from retire.bisect.prober import Prober, Progress
from retire.bisect.revision import BuildCount, RevisionRunner
from retire.bisect.runner import (
    BaseEnv,
    OverlayRunner,
    inspect_base,
    isolation_of,
    launcher_pool,
)
from retire.bisect.search import ENV_FAILED, FIXED, CandidateRun, normal
from retire.bisect.sidebyside import SideBySide, host_gpus, serialized, width_for
from retire.bisect.window import EdgeSearch, locate_edge, locate_window
from retire.bisect.windowresult import BRANCH, WindowResult
from retire.core.git import GitError
from retire.evidence.validation import ValidationRecord
from retire.history.edge import CommitSearch, CommitSpan, Edge, EdgeKind, EdgeState
from retire.history.window import BranchFix, Window
from retire.mirrors.history import Commit, build_obstacle, commits_between, release_tag
from retire.mirrors.repo import MirrorRepo
from retire.mirrors.touching import shim_modules, touching
from retire.runs.isolation import Isolation
from shims.model import ShimManifest
from shims.wheelbuild import WheelBuild

if TYPE_CHECKING:
    from retire.runs.launcher import Launcher
    from retire.runs.launcherpool import LauncherPool

__all__ = ["Source", "bisect_window"]


@dataclass(frozen=True)
class ReleaseRange:
    """The first-parent commits between two releases' tags in a mirror, oldest first (the newer
    tag's commit last), and the older tag's commit."""

    tags: tuple[str, str]
    base: str
    commits: tuple[Commit, ...]

    @property
    def items(self) -> list[str]:
        """The candidates strictly between the two releases (the newer tag's commit is known)."""
        return [c.sha for c in self.commits[:-1]]


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
    # how the mirror was found, in words (retire.mirrors.resolve: "mirror of X: declared in …")
    says: str = ""

    def between(self, older: str, newer: str) -> ReleaseRange | str:
        """The commits between releases ``older`` and ``newer`` in this mirror, or why a search
        stays at that release edge: no mirror, no release tag, a target not built from source
        cheaply, git's error, no commit between the tags."""
        if self.repo is None:
            return self.why or "the target's repository is not mirrored"
        repo = self.repo
        old, new = release_tag(repo, older), release_tag(repo, newer)
        if old is None or new is None:
            missing = older if old is None else newer
            return (
                f"the mirror of {repo.mirror.repository} has no release tag for {missing} (behind? "
                "`patchlane mirrors sync`)"
            )
        named_build = self.build is not None
        if (
            obstacle := build_obstacle(repo, new, self.subdirectory, named_build=named_build)
        ) is not None:
            return obstacle
        try:
            commits = commits_between(repo, old, new)
            base = repo.git.rev_parse(f"{old}^{{commit}}") or old
        except GitError as exc:
            return f"cannot read the commits between {old} and {new}: {exc}"
        if not commits:
            return f"no commit between {old} and {new} on the first-parent history"
        return ReleaseRange((old, new), base, commits)

    def revision_runner(
        self,
        manifest: ShimManifest,
        base: BaseEnv,
        job: BisectJob,
        *,
        count: BuildCount | None = None,
        on_record: Callable[[ValidationRecord], None] | None = None,
        say: Callable[[str], None] | None = None,
        launchers: LauncherPool[Launcher] | None = None,
    ) -> RevisionRunner:
        """The runner of ``manifest``'s reproducer against the target built from this mirror at
        a commit, as ``job`` says (its cache, kept wheels, lane, timeout); ``count``: the
        search's builds, shared by its runners; ``launchers``: the bisection's warm ones."""
        if self.repo is None:
            raise ValueError(f"no mirror to build commits from: {self.why}")
        return RevisionRunner(
            manifest,
            base,
            job,
            mirror=self.repo.mirror.path,
            repository=self.repo.mirror.repository,
            subdirectory=self.subdirectory,
            build=self.build,
            count=count,
            on_record=on_record,
            say=say,
            launchers=launchers,
        )


@dataclass
class _Probers:
    """The release and commit probers of one window bisection, and its progress."""

    release: Prober
    commit: Prober | None
    progress: Progress
    # the commit builds of the search under way, of about how many (said with each build)
    count: BuildCount = field(default_factory=BuildCount)
    # the warm launchers both probers' runners borrow from (None: process isolation)
    launchers: LauncherPool[Launcher] | None = None

    def close(self) -> None:
        try:
            for prober in (self.release, self.commit):
                if prober is not None:
                    prober.close()
        finally:
            if self.launchers is not None:
                self.launchers.close()


def bisect_window(
    manifest: ShimManifest,
    versions: Iterable[str],
    job: BisectJob,
    *,
    source: Source | None = None,
    prober: Prober | None = None,
    progress: Progress | None = None,
) -> WindowResult:
    """The window of ``manifest``'s bug on its target's ``versions`` inside ``job.bounds``
    (the evidence's release, ``bounds.known_broken``, is the broken release the search starts
    from; without one it looks for one, trying at most ``job.sample`` older releases), continued
    into ``source``'s commits where an edge lies between two adjacent releases, and on its branch
    when the newest release is still broken. ``prober`` replaces the release runner (and then no
    commit is searched), for callers that test somewhere else; with ``job.width`` above 1 each
    round runs that many candidates at once (:mod:`retire.bisect.sidebyside`), no more than the
    budget of ``progress`` has left; the rest is :func:`retire.bisect.bisect`'s."""
    began = time.monotonic()
    bounds, progress = job.bounds, progress or Progress()
    candidates = job.candidates(versions)
    journal = _Journal(job.records) if job.records is not None else None
    fingerprint = ""
    if prober is None:
        base = inspect_base(job.base_python, manifest.target.distribution)
        fingerprint = base.fingerprint
        probers = _probers(manifest, base, source, job, journal, progress)
    else:
        probers = _Probers(prober, None, progress)
    try:
        found = locate_window(
            candidates.versions,
            probers.release,
            known_broken=_in(candidates.versions, bounds.known_broken),
            limits=job.limits,
            sample=job.sample,
            progress=progress,
        )
        window = found.window
        edges = (window.fixed, window.introduced)
        searched, stops = _commit_edges(edges, source, probers, job, shim_modules(manifest))
    finally:
        probers.close()
    commit_runs = {key: runs for key, (_, runs) in searched.items()}
    return WindowResult(
        manifest.id,
        manifest.target.distribution,
        _extended(window, searched, found.runs, commit_runs, source),
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


def _probers(
    manifest: ShimManifest,
    base: BaseEnv,
    source: Source | None,
    job: BisectJob,
    journal: _Journal | None,
    progress: Progress,
) -> _Probers:
    """The release runner, and the commit runner where there is a mirror to build from; with
    ``job.width`` above 1, each runs candidates side by side. One pool of warm launchers, a slot
    per candidate running at once, serves both (:func:`retire.bisect.runner.launcher_pool`)."""
    # runners side by side and the launchers warming on threads of their own speak one line at a
    # time
    say = serialized(progress.note) or progress.note
    on_record = journal.append if journal is not None else None
    count = BuildCount()
    needs = manifest.reproducer.gpu_needs
    gpus = host_gpus(needs) if job.width > 1 else ()
    width = width_for(needs, job.width, gpus)
    pool = None
    if isolation_of(manifest, job) == Isolation.LAUNCHER:
        pool = launcher_pool(manifest, base, job.env, width, say)

    def releases() -> Prober:
        return OverlayRunner(manifest, base, job, on_record=on_record, say=say, launchers=pool)

    def commits() -> Prober:
        assert source is not None
        return source.revision_runner(
            manifest, base, job, count=count, on_record=on_record, say=say, launchers=pool
        )

    mirrored = source is not None and source.repo is not None
    if job.width <= 1:
        return _Probers(releases(), commits() if mirrored else None, progress, count, pool)
    side = SideBySide(releases, job.width, needs, gpus=gpus, say=say)
    progress.note(f"candidates: up to {side.width} at once" + _on_gpus(side, pool))
    commit = SideBySide(commits, job.width, needs, gpus=gpus, say=say) if mirrored else None
    return _Probers(side, commit, progress, count, pool)


def _on_gpus(side: SideBySide, launchers: LauncherPool[Launcher] | None) -> str:
    """How the candidates running at once share out the host's GPUs and the launchers, for the
    note."""
    said = ""
    if side.pool is not None:
        said = f", each on {side.needs} of its own ({len(side.pool.gpus)} on this host)"
    if launchers is not None:
        said += f"; {launchers.slots} warm launcher(s) for releases and commits alike"
    return said


def _in(versions: tuple[str, ...], version: str | None) -> str | None:
    """``version`` as ``versions`` spell it (``1.0`` for ``1.0.0``), or None."""
    if version is None:
        return None
    return next((v for v in versions if normal(v) == normal(version)), None)


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
    release_edges: tuple[Edge, Edge],
    source: Source | None,
    probers: _Probers,
    job: BisectJob,
    modules: tuple[str, ...],
) -> tuple[dict[str, _Searched], tuple[str, ...]]:
    """Each release edge (fixed, introduced) found between two adjacent releases, continued in
    the commits (keyed by the edge's kind; ``branch`` for a fix on a followed branch); the
    commits that touch ``modules`` (the shim's) first."""
    edges: dict[str, _Searched] = {}
    stops: list[str] = []
    fixed, _ = release_edges
    for edge in release_edges:
        if edge.state != EdgeState.FOUND or edge.before is None or edge.after is None:
            continue
        found = _in_commits(edge, source, probers, job, modules)
        if isinstance(found, str):
            stops.append(f"The {edge.kind} edge stops at {edge.before} → {edge.after}: {found}")
        else:
            edges[str(edge.kind)] = found
    if fixed.state == EdgeState.OPEN and source is not None:
        # still broken in the newest release: a fix may be on the branch a lane follows
        branch = _on_branch(fixed, source, probers, job)
        if isinstance(branch, tuple):
            edges[BRANCH] = branch
        stops += [branch] if isinstance(branch, str) else []
    return edges, tuple(stops)


def _span(
    kind: EdgeKind,
    tags: tuple[str, str],
    commits: Sequence[Commit],
    search: EdgeSearch,
    source: Source,
    prober: Prober,
    how: _How | None = None,
) -> CommitSpan:
    """The commit-level edge as the window holds it: the commit named only when pinned, why it
    is not where its commits could not be built, and how its commits were searched (``how``;
    None: every one, by a binary search)."""
    edge = search.edge
    named = _named(commits, edge)
    how = how or _How(CommitSearch.FULL, "")
    return CommitSpan(
        kind,
        tags,
        len(commits),
        edge.state if named is not None or edge.state != EdgeState.FOUND else EdgeState.UNPINNED,
        edge.before,
        edge.after,
        edge.between,
        edge.note,
        named,
        build=source.build.describe() if source.build is not None else None,
        unbuilt=_unbuilt(prober, search),
        search=how.search,
        search_note=how.note,
        paths=how.paths,
        touching=how.touching,
    )


def _on_branch(
    fixed: Edge, source: Source, probers: _Probers, job: BisectJob
) -> _Searched | str | None:
    """Still broken at the newest release: is the followed branch's newest commit clean, and if
    so, which commit since that release fixed it (a fix in no release yet)? None when there is no
    branch to look at or nothing on it since the release."""
    repo, branch = source.repo, source.branch
    prober = probers.commit
    if repo is None or branch is None or prober is None or fixed.before is None:
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
    if not commits or (why := prober.blocked or probers.progress.stop()) is not None:
        return None if not commits else f"{branch} since {fixed.before} is not searched: {why}"
    # the tip, then a binary search of the rest
    probers.count.expect(len(commits) - 1, runs=1 + math.ceil(math.log2(len(commits))))
    tip = prober.run(commits[-1].sha)
    probers.progress.consulted(tip)
    if tip.state != FIXED:
        told = f" ({tip.detail})" if not tip.conclusive and tip.detail else ""
        return f"still {tip.state} on {branch} at {commits[-1].short}{told}"
    search = locate_edge(
        [c.sha for c in commits[:-1]],
        prober,
        kind=EdgeKind.FIXED,
        before=old_sha,
        after=commits[-1].sha,
        limits=job.limits,
        progress=probers.progress,
    )
    span = _span(EdgeKind.FIXED, (tag, head), commits, search, source, prober)
    return span, (tip, *search.runs)


def _named(commits: Sequence[Commit], edge: Edge) -> Commit | None:
    """The commit a pinned edge names (its first commit on the new side); an unpinned edge names
    none: its range and the commits left in it say where it is."""
    if edge.state != EdgeState.FOUND:
        return None
    return next((c for c in commits if c.sha == edge.after), None)


def _unbuilt(prober: Prober, search: EdgeSearch) -> str | None:
    """Why the edge stayed unpinned where commits of it could not be built here: the last build
    that failed (its reason and fix), else what keeps every build from starting (the prober is
    blocked: its search stopped at once); None when it is pinned or no build failed."""
    if search.edge.state == EdgeState.FOUND:
        return None
    failed = [run.detail for run in search.runs if run.outcome == ENV_FAILED]
    return failed[-1] if failed else prober.blocked


def _in_commits(
    edge: Edge, source: Source | None, probers: _Probers, job: BisectJob, modules: tuple[str, ...]
) -> _Searched | str:
    """The commit that made ``edge``, or why the search stays at the release edge."""
    if source is None or source.repo is None or probers.commit is None:
        return (
            source.why if source is not None else ""
        ) or "the target's repository is not mirrored"
    if edge.before is None or edge.after is None:
        return "the release edge is not pinned"
    between = source.between(edge.before, edge.after)
    if isinstance(between, str):
        return between
    (old, new), commits = between.tags, between.commits
    span = TouchedSpan(edge.kind, between.base, tuple(between.items), commits[-1].sha, frozenset())
    search, how = _informed(span, (old, new), source, modules, probers, job)
    probers.progress.note(f"the {edge.kind} edge in {old}..{new}: {how.note}")
    found = _span(edge.kind, (old, new), commits, search, source, probers.commit, how)
    return found, search.runs


@dataclass(frozen=True)
class _How:
    """How an edge's commits were searched, and what it read to do so."""

    search: CommitSearch
    note: str
    paths: tuple[str, ...] = ()
    touching: int = 0


def _informed(
    span: TouchedSpan,
    tags: tuple[str, str],
    source: Source,
    modules: tuple[str, ...],
    probers: _Probers,
    job: BisectJob,
) -> tuple[EdgeSearch, _How]:
    """The edge among ``span``'s commits: those that touch the shim's ``modules`` (their files
    in the range's two trees, ``git log --first-parent -- <paths>``) first, the edge confirmed by
    the commit before it, else every first-parent commit (:func:`retire.bisect.informed.
    informed_edge`, which says which it did); the full search where the files cannot be read."""
    assert source.repo is not None and probers.commit is not None
    total = len(span.items) + 1
    try:
        read = touching(source.repo.git, *tags, modules, source.subdirectory)
    except GitError as exc:
        read = None
        why = f"the target's files could not be read ({exc})"
    if read is None or not read.paths:
        if read is not None:
            why = f"no file of {', '.join(modules)} is in the range's trees"
        probers.count.expect(len(span.items))
        search = locate_edge(
            span.items,
            probers.commit,
            kind=span.kind,
            before=span.before,
            after=span.after,
            limits=job.limits,
            progress=probers.progress,
        )
        note = f"{why}: searched every first-parent commit of the range ({total})"
        return search, _How(CommitSearch.UNINFORMED, note)
    span = replace(span, touching=read.commits)
    k = span.touching_count
    # about ⌈log2 k⌉ + 2 runs, never much more than the full search's
    full = math.ceil(math.log2(len(span.items) + 1))
    probers.count.expect(
        len(span.items), runs=min(math.ceil(math.log2(k)) + 2, full + 1) if k else None
    )
    found = informed_edge(span, probers.commit, limits=job.limits, progress=probers.progress)
    how = _How(found.how, found.note, read.paths, k)
    return EdgeSearch(found.edge, found.runs), how
