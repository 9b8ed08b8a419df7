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
from retire.bisect.runner import inspect_base
from retire.bisect.sources import project_source
from retire.bisect.window import locate_edge
from retire.core.git import GitError
from retire.core.project import Project
from retire.evidence.validation import Mode, ValidationRecord
from retire.history.edge import EdgeKind, EdgeState
from retire.mirrors.history import build_obstacle, commits_between, release_tag
from retire.probes.records import bisection_lane
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


def mirror_commits(
    project: Project,
    runner: CulpritRunner,
    *,
    stop: Callable[[], str | None] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> CommitSearch:
    """The commit step for ``runner``'s lane and reproducer."""

    def search(distribution: str, clean: str, broken: str) -> FirstCommit | None:
        if runner.mode != Mode.WITHOUT:
            # the commit runner runs the reproducer without the shim only
            return None
        manifest = _as_target(runner.manifest, distribution)
        source = project_source(project, manifest)
        repo = source.repo
        if repo is None:
            say(f"no commit step for {distribution}: {source.why}")
            return None
        old, new = release_tag(repo, clean), release_tag(repo, broken)
        named_build = source.build is not None
        if (
            old is None
            or new is None
            or build_obstacle(repo, new, source.subdirectory, named_build=named_build)
        ):
            say(f"no commit step for {distribution}: no tag or no cheap build in the mirror")
            return None
        try:
            commits = commits_between(repo, old, new)
            old_sha = repo.git.rev_parse(f"{old}^{{commit}}") or old
        except GitError as exc:
            say(f"no commit step for {distribution}: {exc}")
            return None
        if not commits:
            return None
        base = inspect_base(runner.base().python, distribution)
        probe = source.revision_runner(
            manifest,
            base,
            cache=runner.cache,
            work_dir=runner.work_dir,
            lane=bisection_lane(runner.lane.name),
            on_record=_recorder(runner),
        )
        try:
            found = locate_edge(
                [c.sha for c in commits[:-1]],
                probe,
                kind=EdgeKind.INTRODUCED,
                before=old_sha,
                after=commits[-1].sha,
                stop=stop,
            )
        finally:
            probe.close()
        if found.edge.state != EdgeState.FOUND:
            return None
        named = next((c for c in commits if c.sha == found.edge.after), None)
        if named is None:
            return None
        pr = f"#{named.pull}" if named.pull is not None else None
        return FirstCommit(named.sha, pr, found.edge.before)

    return search
