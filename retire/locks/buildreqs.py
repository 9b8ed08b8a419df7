"""The build requirements of a lane's revisions, locked for the lane's target so a wheelhouse
carries them.

A package a lane takes from a git revision is built on the host from the mirror's checkout, and uv
builds it in an isolated environment of its ``[build-system] requires`` (setuptools and pybind11 for
Megatron-LM). With no index, uv finds those only as wheels in the wheelhouse (``--find-links``), so
``wheelhouse gather`` locks them here — the lane's Python, platform, indexes and freeze, hashes
generated — and carries their files beside the lane's (kind ``build``).
"""

from __future__ import annotations

import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from retire.core import uv
from retire.core.errors import InputError, PatchlaneError
from retire.lanes import revisions
from retire.lanes.model import Lane
from retire.locks import locking, wheelhouse
from retire.locks.uvinputs import (
    LOCK_NAME,
    IndexWithoutURL,
    index_table,
    pylock_compile_args,
    resolve_index_urls,
    uv_toml,
)

__all__ = ["build_requires", "lock_build_requirements", "with_build_requirements"]

#: What a build frontend installs for a project that declares no build system (PEP 517's fallback).
LEGACY_BUILD = ("setuptools>=40.8.0",)


def build_requires(mirror: Path, commit: str, subdirectory: str | None) -> tuple[str, ...]:
    """``[build-system] requires`` of the project at ``commit`` in a mirror (no checkout needed)."""
    from retire.core.git import Git

    where = f"{subdirectory}/pyproject.toml" if subdirectory else "pyproject.toml"
    text = Git(mirror, search_parents=False).run("show", revs=[f"{commit}:{where}"], check=False)
    if not text:
        return LEGACY_BUILD
    try:
        system = tomllib.loads(text).get("build-system") or {}
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            f"{mirror}@{commit[:12]}:{where}",
            None,
            f"not valid TOML ({exc})",
            "pin the lane's revision to a commit whose pyproject.toml parses",
        ) from None
    requires = (
        system.get("requires", list(LEGACY_BUILD))
        if isinstance(system, Mapping)
        else list(LEGACY_BUILD)
    )
    return tuple(str(r) for r in requires)


def lock_build_requirements(lane: Lane, requires: tuple[str, ...], provenance: Mapping) -> dict:
    """A PEP 751 lock (as a dict) of ``requires`` for the lane's target, resolved from its indexes
    under the freeze its lock was made with. Raises PatchlaneError when uv cannot resolve them."""
    host = uv.host_indexes()
    urls = resolve_index_urls(lane, host.named)
    if isinstance(urls, IndexWithoutURL):
        raise PatchlaneError(urls.message)
    with tempfile.TemporaryDirectory(prefix=f"patchlane-build-{lane.name}-") as scratch:
        work = Path(scratch)
        (work / "build.in").write_text("".join(f"{r}\n" for r in requires), encoding="utf-8")
        (work / "uv.toml").write_text(
            uv_toml(lane, index_table(lane, urls, host.default)), encoding="utf-8"
        )
        args = pylock_compile_args("build.in", lane)
        # the cutoff the lane's lock was made with
        if provenance.get("exclude-newer"):
            args += ["--exclude-newer", str(provenance["exclude-newer"])]
        proc = uv.run(args, cwd=work, without_indexes=True)
        if proc.returncode != 0:
            raise PatchlaneError(
                f"lane {lane.name}: cannot resolve the build requirements {', '.join(requires)}: "
                + (" / ".join(uv.failure_lines(proc.stderr)[:3]) or "uv failed")
            )
        return tomllib.loads((work / LOCK_NAME).read_text(encoding="utf-8"))


def with_build_requirements(
    house: wheelhouse.Wheelhouse, lane: Lane, lock: Mapping, mirrors: revisions.MirrorLookup | None
) -> wheelhouse.Wheelhouse:
    """``house`` (a :class:`~retire.locks.wheelhouse.Wheelhouse` planned from ``lock``) plus the
    wheels that build the lane's revisions, as artifacts of kind ``build``; unchanged when it has
    none."""
    locked = revisions.vcs_entries(lock)
    requires: list[str] = []
    for revision in lane.revisions:
        entry = locked.get(revision.distribution)
        if entry is None or not entry.get("commit-id"):
            continue
        mirror = revisions.mirror_path(revision, mirrors, lane.origin)
        requires += build_requires(mirror, str(entry["commit-id"]), revision.subdirectory)
    if not requires:
        return house
    built = wheelhouse.plan(
        lane.name,
        lock_build_requirements(
            lane, tuple(dict.fromkeys(requires)), locking.provenance(dict(lock))
        ),
        house.lock_sha256,
    )
    have = {a.filename for a in house.artifacts}
    extra = tuple(replace(a, kind="build") for a in built.artifacts if a.filename not in have)
    return replace(house, artifacts=house.artifacts + extra)
