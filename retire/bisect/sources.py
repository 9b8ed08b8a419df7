"""Where a shim's target is built from source: the mirror of its repository, found by the one
resolver of a distribution's repository (:mod:`retire.mirrors.resolve`: a lane's
``[lane.revisions]`` entry for the target, with its subdirectory, else a repository the shim's
links name, else the mirror the package's own metadata URLs or its name and release tags match)
and opened if this host has it; with the command that builds the target's wheel when the shim
names one (``[target] build``) or, failing that, a lane's revision of the target does
(``[lane.revisions]`` ``build``). The source says how its mirror was found
(:attr:`Source.says`), for every command to print."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.bisect.transitions import Source
from retire.core.project import Project
from retire.evidence.coremetadata import MetadataUrl
from retire.evidence.values import ProbeFailure
from retire.mirrors.config import repository_key
from retire.mirrors.repo import MirrorRepo, open_mirror
from retire.mirrors.resolve import Unresolved, project_repository
from shims.model import ShimManifest
from shims.wheelbuild import WheelBuild

__all__ = ["index_source", "metadata_on_index", "project_source"]


def metadata_on_index(index_url: str, distribution: str) -> tuple[MetadataUrl, ...]:
    """The URLs the metadata of ``distribution``'s newest wheel on ``index_url`` names (its PEP
    691 page and the PEP 658 file beside the wheel; none where the index serves neither)."""
    from retire.probes.coremeta import index_metadata
    from retire.probes.http import Fetcher, make_client

    client = make_client()
    try:
        return index_metadata(Fetcher(client), index_url, distribution)
    finally:
        client.close()


def _branch(repo: MirrorRepo, names: list[str]) -> str | None:
    """The first of ``names`` (lane revisions, the mirror's followed branches) that is a branch of
    the mirror: where a fix in no release is looked for."""
    for name in names:
        if not any(c in name for c in "*?[") and repo.git.rev_parse(f"refs/heads/{name}"):
            return name
    return None


def project_source(
    project: Project,
    manifest: ShimManifest,
    *,
    folder: Path | None = None,
    metadata: Callable[[], Sequence[MetadataUrl]] = tuple,
    versions: Sequence[str] = (),
) -> Source:
    """The mirror ``manifest``'s target is built from on this host, or why there is none;
    ``metadata`` (the target's metadata URLs, asked only when no lane revision or link names a
    mirror) and ``versions`` (its releases) let the resolver match a declared mirror by them."""
    from retire.lanes import lanefile

    found = project_repository(
        project, manifest, folder=folder, metadata=metadata, versions=versions
    )
    if isinstance(found, Unresolved):
        return Source(None, why=found.why)
    opened = open_mirror(found.mirror, project.mirror_cache)
    if isinstance(opened, ProbeFailure):
        return Source(None, why=opened.reason, says=found.says)
    target = canonicalize_name(manifest.target.distribution)
    lanes = lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ()
    revs: list[str] = []
    builds: dict[tuple[str, str] | None, WheelBuild] = {}
    for lane in lanes:
        for revision in lane.revisions:
            if revision.distribution == target:
                revs.append(revision.rev)
                if revision.build is not None:
                    builds.setdefault(repository_key(revision.repository), revision.build)
    return Source(
        opened,
        found.subdirectory,
        branch=_branch(opened, [*revs, *found.mirror.branches]),
        # the shim's own build, else the one a lane's revision of the target names
        build=manifest.target.build or builds.get(repository_key(found.mirror.repository)),
        says=found.says,
    )


def index_source(
    project: Project,
    manifest: ShimManifest,
    index_url: str,
    versions: Sequence[str],
    *,
    folder: Path | None = None,
) -> Source:
    """:func:`project_source` for a bisection over ``versions`` on ``index_url``: the target's
    metadata read beside its newest wheel there, when no lane revision or link names a mirror."""
    distribution = manifest.target.distribution
    return project_source(
        project,
        manifest,
        folder=folder,
        metadata=lambda: metadata_on_index(index_url, distribution),
        versions=versions,
    )
