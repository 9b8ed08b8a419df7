"""What ``uv pip compile`` is given to lock a lane (pure: text and argument lists, no I/O).

:func:`retire.locks.locking.lock_lane` writes these into a throwaway folder and runs uv there:
``pyproject.toml`` (the lane's requirements and sources), ``uv.toml`` (its indexes and static
metadata, passed with ``--config-file`` so the host's other uv settings do not leak in) and the
command line (Python, platform, freezes, upgrades).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import tomlkit

from retire.lanes.model import Lane
from retire.locks.cutoffs import Cutoffs, resolve_cutoffs
from shims import times

__all__ = [
    "LOCK_NAME",
    "IndexWithoutURL",
    "compile_args",
    "index_table",
    "project_toml",
    "pylock_compile_args",
    "resolve_index_urls",
    "uv_toml",
]

LOCK_NAME = "pylock.toml"


@dataclass(frozen=True)
class IndexWithoutURL:
    """Why a lane cannot be locked on this host: one of its named indexes has no URL here (the
    lane names it without one, and this host's uv configuration does not give one)."""

    index: str

    @property
    def message(self) -> str:
        return (
            f"index {self.index!r} has no URL on this host, so it cannot be reached: "
            f'set UV_INDEX={self.index}=<url> or add [[index]] name = "{self.index}" to uv.toml'
        )


def resolve_index_urls(
    lane: Lane, configured: Mapping[str, str]
) -> dict[str, str] | IndexWithoutURL:
    """URL per index name, or the first index that has none on this host."""
    urls = {}
    for index in lane.indexes:
        url = index.url or configured.get(index.name)
        if url is None:
            return IndexWithoutURL(index.name)
        urls[index.name] = url
    return urls


def index_table(lane: Lane, urls: dict[str, str], host_default: str | None) -> list[dict]:
    """uv ``[[index]]`` entries for a lane.

    The default index is the lane's, else the one this host's uv configuration names, else uv's.
    An index with packages pinned to it is explicit, so nothing else is taken from it (a nightly
    index also serves numpy, say); any other index is a plain extra index.
    """
    pinned = set(lane.sources_dict.values())
    indexes = [
        {
            "name": i.name,
            "url": urls[i.name],
            **({"default": True} if i.default else {}),
            **({"explicit": True} if i.name in pinned and not i.default else {}),
        }
        for i in lane.indexes
    ]
    if host_default and not any(i.default for i in lane.indexes):
        indexes.append({"name": "host-default", "url": host_default, "default": True})
    return indexes


def project_toml(lane: Lane, indexes: list[dict], pinned: tuple[str, ...] = ()) -> str:
    """The throwaway project uv resolves: the lane's requirements and where packages come from.

    uv checks ``tool.uv.sources`` against the project's own index declarations, so the indexes
    are declared here as well as in the --config-file that the resolver reads them from.
    ``pinned`` are the lane's revisions as direct git references to their mirrors at a commit.
    """
    doc = tomlkit.document()
    doc["project"] = {
        "name": "patchlane-lane",
        "version": "0",
        "requires-python": f"=={lane.python}.*",
        "dependencies": list(lane.requirements) + list(pinned),
    }
    if lane.sources:
        doc["tool"] = {
            "uv": {
                "index": indexes,
                "sources": {package: {"index": index} for package, index in lane.sources},
            }
        }
    return tomlkit.dumps(doc)


def uv_toml(lane: Lane, indexes: list[dict]) -> str:
    """uv settings passed with --config-file, so the host's other uv settings do not leak in."""
    doc = tomlkit.document()
    if indexes:
        doc["index"] = indexes
    if lane.static_metadata:
        doc["dependency-metadata"] = [
            {
                "name": m.name,
                "version": m.version,
                "requires-dist": list(m.requires_dist),
                **({"requires-python": m.requires_python} if m.requires_python else {}),
                **({"provides-extras": list(m.provides_extras)} if m.provides_extras else {}),
            }
            for m in lane.static_metadata
        ]
    return tomlkit.dumps(doc)


def pylock_compile_args(source: str, lane: Lane) -> list[str]:
    """``uv pip compile SOURCE`` into a hash-pinned PEP 751 ``pylock.toml`` for ``lane``'s Python
    and platform, with the folder's ``uv.toml``: what every lock patchlane makes starts from."""
    return [
        "pip",
        "compile",
        source,
        "--format",
        "pylock.toml",
        "--output-file",
        LOCK_NAME,
        "--python-version",
        lane.python,
        "--python-platform",
        lane.platform,
        "--generate-hashes",
        "--no-header",
        "--quiet",
        "--config-file",
        "uv.toml",
    ]


def compile_args(
    lane: Lane,
    *,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    cutoffs: Cutoffs | None = None,
) -> list[str]:
    """The ``uv`` arguments that lock ``lane``, run in the folder :func:`lock_lane` prepares."""
    cutoffs = cutoffs or resolve_cutoffs(lane, None, now=times.now(), roll=True)
    cmd = pylock_compile_args("pyproject.toml", lane)
    if lane.constraints:
        cmd += ["--constraints", "constraints.txt"]
    if lane.overrides:
        cmd += ["--overrides", "overrides.txt"]
    if cutoffs.exclude_newer:
        cmd += ["--exclude-newer", times.format_utc(cutoffs.exclude_newer)]
    for name, at in cutoffs.packages:
        cmd += ["--exclude-newer-package", f"{name}={times.format_utc(at) if at else 'false'}"]
    if lane.prerelease:
        cmd += ["--prerelease", lane.prerelease]
    if upgrade:
        cmd.append("--upgrade")
    for package in upgrade_packages:
        cmd += ["--upgrade-package", package]
    return cmd
