"""Where a shim's target is built from source: the mirror of its repository, found as the
verdicts find it — a lane's ``[lane.revisions]`` entry for the target (with its subdirectory),
else a repository the shim's links name — and opened if this host has it; with the command that
builds the target's wheel when the shim names one (``[target] build``) or, failing that, a lane's
revision of the target does (``[lane.revisions]`` ``build``)."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from retire.bisect.transitions import Source
from retire.core.project import Project
from retire.evidence.values import ProbeFailure
from retire.mirrors.config import project_mirrors
from retire.mirrors.repo import MirrorRepo, open_mirror
from retire.probes.links import parse_link
from shims.model import PrReleased, ShimManifest
from shims.wheelbuild import WheelBuild

__all__ = ["project_source"]


def _branch(repo: MirrorRepo, names: list[str]) -> str | None:
    """The first of ``names`` (lane revisions, the mirror's followed branches) that is a branch of
    the mirror: where a fix in no release is looked for."""
    for name in names:
        if not any(c in name for c in "*?[") and repo.git.rev_parse(f"refs/heads/{name}"):
            return name
    return None


def project_source(
    project: Project, manifest: ShimManifest, *, folder: Path | None = None
) -> Source:
    """The mirror ``manifest``'s target is built from on this host, or why there is none."""
    from retire.lanes import lanefile

    target = canonicalize_name(manifest.target.distribution)
    named: dict[str, str | None] = {}
    revs: list[str] = []
    builds: dict[str, WheelBuild] = {}
    lanes = lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ()
    for lane in lanes:
        for revision in lane.revisions:
            if revision.distribution == target:
                named.setdefault(revision.repository, revision.subdirectory)
                revs.append(revision.rev)
                if revision.build is not None:
                    builds.setdefault(revision.repository, revision.build)
    urls = [link.url for link in manifest.upstream.links]
    urls += [c.url for c in manifest.retirement.conditions if isinstance(c, PrReleased) and c.url]
    for url in urls:
        if (ref := parse_link(url)) is not None:
            named.setdefault(ref.repository, None)
    if not named:
        return Source(None, why=f"no repository of {target} is named (a lane revision or a link)")
    mirrors = project_mirrors(project, folder)
    for repository, subdirectory in named.items():
        mirror = mirrors.for_repository(repository)
        if mirror is None:
            continue
        opened = open_mirror(mirror)
        if isinstance(opened, ProbeFailure):
            return Source(None, why=opened.reason)
        return Source(
            opened,
            subdirectory,
            branch=_branch(opened, [*revs, *mirror.branches]),
            # the shim's own build, else the one a lane's revision of the target names
            build=manifest.target.build or builds.get(repository),
        )
    return Source(
        None,
        why=f"{', '.join(named)} is not mirrored on this host (patchlane.toml "
        "[[mirrors.repository]], then `patchlane mirrors sync`)",
    )
