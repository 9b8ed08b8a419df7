"""A revision lane's named builds: the wheel of a ``[lane.revisions]`` package whose entry names
its build (``build = [...]``, :mod:`shims.wheelbuild`), made by that command from a checkout of
the mirror at the locked commit, in place of uv's build of the git source.

The lock is uv's as ever (its ``vcs`` entry names the commit); what this host installs has that
entry's source replaced by the built wheel (a ``wheels`` entry with its path and sha256), so
``uv pip sync`` installs it as part of the lock and an exact sync keeps it. Each wheel is built
once per commit and command, into the lane env's folder (``named-builds/``); a failure is a
:class:`~retire.runs.envs.BuildError`-worthy :class:`~retire.runs.wheelbuild.WheelBuildError`
naming the log and its tail. After the sync :func:`stamp_lane_builds` makes each install's
``direct_url.json`` name its commit, so the reproducers' host stamps say which commit ran.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.lanes.revisions import MirrorLookup, Revision, mirror_path
from retire.runs.wheelbuild import build_wheel, checkout, stamp_commit

__all__ = ["LaneBuild", "lane_builds", "stamp_lane_builds", "with_built_wheels"]

#: The folder of a lane env that keeps its named builds' wheels and logs.
FOLDER = "named-builds"


@dataclass(frozen=True)
class LaneBuild:
    """A revision with a named build, and this host's mirror of its repository."""

    revision: Revision
    mirror: Path


def lane_builds(
    revisions: tuple[Revision, ...], mirrors: MirrorLookup | None, origin: str | Path
) -> tuple[LaneBuild, ...]:
    """The revisions that name a build, each with its mirror (a one-line InputError naming
    ``origin`` when one is missing)."""
    return tuple(
        LaneBuild(r, mirror_path(r, mirrors, origin)) for r in revisions if r.build is not None
    )


def with_built_wheels(
    lock: Mapping, builds: tuple[LaneBuild, ...], env: Path, python: Path
) -> tuple[dict, dict[str, str]]:
    """The lock with each named build's package installed from the wheel its command built at
    the locked commit (built for ``python`` into ``env``'s :data:`FOLDER` unless already there),
    and ``{distribution: commit}`` of those packages."""
    by_name = {b.revision.distribution: b for b in builds}
    packages: list = []
    built: dict[str, str] = {}
    for package in lock.get("packages", []):
        name = canonicalize_name(str(package.get("name", "")))
        vcs = package.get("vcs")
        build = by_name.get(name)
        commit = vcs.get("commit-id") if isinstance(vcs, Mapping) else None
        if build is None or not isinstance(commit, str):
            packages.append(package)
            continue
        wheel = _wheel(build, commit, env.resolve() / FOLDER, python)
        entry = {
            "name": wheel.name,
            "path": str(wheel),
            "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
        }
        local = {k: v for k, v in package.items() if k not in ("vcs", "wheels", "sdist")}
        packages.append({**local, "wheels": [entry]})
        built[str(name)] = commit
    return {**lock, "packages": packages}, built


def _wheel(build: LaneBuild, commit: str, folder: Path, python: Path) -> Path:
    """The wheel ``build`` made at ``commit``: kept from an earlier build of the same commit and
    command, else built now (the checkout removed after, the log kept)."""
    named = build.revision.build
    assert named is not None
    command = json.dumps(list(named.command)).encode()
    place = folder / (
        f"{build.revision.distribution}-{commit[:12]}-{hashlib.sha256(command).hexdigest()[:12]}"
    )
    done = place / "wheel"
    if done.is_dir() and (wheels := sorted(done.glob("*.whl"))):
        return wheels[0]
    for stale in (place / "checkout", place / "out", done):
        shutil.rmtree(stale, ignore_errors=True)
    place.mkdir(parents=True, exist_ok=True)
    source = checkout(build.mirror, commit, place / "checkout", build.revision.subdirectory)
    try:
        made = build_wheel(
            named,
            source.package,
            place / "out",
            place / "build.log",
            python=python,
            commit=commit,
            distribution=build.revision.distribution,
        )
    finally:
        shutil.rmtree(place / "checkout", ignore_errors=True)
    # only a build that gave its one wheel is kept as done
    (place / "out").rename(done)
    return done / made.wheel.name


def stamp_lane_builds(purelib: Path, builds: tuple[LaneBuild, ...], built: dict[str, str]) -> None:
    """Each installed named build's ``direct_url.json`` names the mirror and commit it was built
    from."""
    for build in builds:
        name = build.revision.distribution
        if name in built:
            stamp_commit(purelib, name, build.mirror, built[name], build.revision.subdirectory)
