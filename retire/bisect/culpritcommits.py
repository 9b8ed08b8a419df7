"""The culprit's commit step: the first broken commit of the culprit package between its last
clean and first broken release, searched in its mirror — the history search's pieces
(:func:`retire.mirrors.history.commits_between`, :func:`retire.bisect.window.locate_edge`, the
commit runner :class:`retire.bisect.revision.RevisionRunner`) on the lane's old-lock env.

:func:`mirror_commits` is the :data:`retire.bisect.culprit.CommitSearch` a culprit search calls
once, for a single culprit package; no mirror of the package on this host, no tag for a release,
or a package that cannot be built from source cheaply (and whose shim names no build: ``[target]
build``) means no commit (None), never a guess.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from packaging.utils import canonicalize_name

from retire.bisect.culprit import CommitSearch, FirstCommit
from retire.bisect.culpritrun import CulpritRunner
from retire.bisect.job import BisectJob
from retire.bisect.prober import OneAtATime, Prober, stopping
from retire.bisect.revision import BuildCount
from retire.bisect.runner import inspect_base
from retire.bisect.search import CandidateRun
from retire.bisect.sources import project_source
from retire.bisect.window import locate_edge
from retire.core.project import Project
from retire.evidence.coremetadata import installed_metadata
from retire.evidence.validation import Mode, ValidationRecord
from retire.history.edge import EdgeKind, EdgeState
from shims.model import ShimManifest

__all__ = ["mirror_commits"]


def _as_target(manifest: ShimManifest, distribution: str) -> ShimManifest:
    """The reproducer as it would be were ``distribution`` its target (its mirror, its builds).
    Another package than the shim's own is found only through a lane's revisions: the shim's
    links name its own target's repository, never the culprit's."""
    if canonicalize_name(distribution) == canonicalize_name(manifest.target.distribution):
        return manifest
    return dataclasses.replace(
        manifest,
        # the shim's named build makes its own target's wheel, not another package's
        target=dataclasses.replace(manifest.target, distribution=distribution, build=None),
        upstream=dataclasses.replace(manifest.upstream, links=()),
        retirement=dataclasses.replace(manifest.retirement, conditions=()),
    )


def _recorder(runner: CulpritRunner) -> Callable[[ValidationRecord], None] | None:
    """The culprit runner's ``on_record``, as the commit runner takes it."""
    record = runner.on_record
    if record is None:
        return None

    def recorded(value: ValidationRecord) -> None:
        record(value)

    return recorded


class _Announced(OneAtATime):
    """``probe``, saying what each commit's run showed (the runner says each build as it starts:
    a commit build takes seconds to minutes, and the step must not look hung)."""

    def __init__(self, probe: Prober, distribution: str, say: Callable[[str], None]) -> None:
        self.probe, self.distribution, self.say = probe, distribution, say

    @property
    def blocked(self) -> str | None:  # type: ignore[override]
        return self.probe.blocked

    def cached(self, item: str, /) -> CandidateRun | None:
        return self.probe.cached(item)

    def run(self, item: str, /) -> CandidateRun:
        fresh = self.probe.cached(item) is None
        found = self.probe.run(item)
        said = "" if fresh else " (cached)"
        self.say(f"{self.distribution} at {item[:7]}: {found.outcome}{said}")
        return found

    def close(self) -> None:
        self.probe.close()


def _job(manifest: ShimManifest, runner: CulpritRunner, project: Project) -> BisectJob:
    """The commit runner's job: the culprit runner's cache, folder and lane, the project's kept
    wheels."""
    cache = runner.cache.directory if runner.cache is not None else None
    return BisectJob(
        manifest.id,
        cache=cache,
        work_dir=runner.work_dir,
        lane=runner.lane.name,
        wheels=project.wheel_cache,
    )


def mirror_commits(
    project: Project,
    runner: CulpritRunner,
    *,
    stop: Callable[[], str | None] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> CommitSearch:
    """The commit step for ``runner``'s lane and reproducer; ``say`` hears each step and each
    commit build as it starts."""

    def search(distribution: str, clean: str, broken: str) -> FirstCommit | None:
        if runner.mode != Mode.WITHOUT:
            # the commit runner runs the reproducer without the shim only
            return None
        say(f"commit step: {distribution}'s commits between {clean} and {broken}, in its mirror")
        manifest = _as_target(runner.manifest, distribution)
        # the package as the old lock installed it names its repository in its metadata
        source = project_source(
            project,
            manifest,
            metadata=lambda: installed_metadata(
                inspect_base(runner.base().python, distribution).site_dirs, distribution
            ),
        )
        if source.repo is None:
            say(f"no commit step for {distribution}: {source.why}")
            return None
        say(source.says)
        between = source.between(clean, broken)
        if isinstance(between, str):
            say(f"no commit step for {distribution}: {between}")
            return None
        (old, new), commits, items = between.tags, between.commits, between.items
        say(f"commit step: {len(commits)} commit(s) of {distribution} between {old} and {new}")
        base = inspect_base(runner.base().python, distribution)
        job = _job(manifest, runner, project)
        # each build says its place, of about as many as locate_edge's bound
        count = BuildCount()
        count.expect(len(items))
        probe = source.revision_runner(
            manifest, base, job, count=count, on_record=_recorder(runner), say=say
        )
        try:
            found = locate_edge(
                items,
                _Announced(probe, distribution, say),
                kind=EdgeKind.INTRODUCED,
                before=between.base,
                after=commits[-1].sha,
                progress=stopping(stop) if stop is not None else None,
            )
        finally:
            probe.close()
        named = next((c for c in commits if c.sha == found.edge.after), None)
        if found.edge.state != EdgeState.FOUND or named is None:
            say(f"no first broken commit of {distribution}: {found.edge.describe()}")
            return None
        pr = f"#{named.pull}" if named.pull is not None else None
        return FirstCommit(named.sha, pr, found.edge.before, runs=found.runs)

    return search
