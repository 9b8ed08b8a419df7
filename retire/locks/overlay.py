"""An overlay lock: a lane's lock cut down to what a base image does not already carry.

A GPU image already holds torch, Triton and the CUDA libraries; an overlay lane installs only
the rest. Both the lane environment (``retire.runs.envs``) and a wheelhouse gathered for an
overlay host (``retire.locks.wheelhouse``) cut the lock the same way, here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["overlay_lock", "same_release"]


def same_release(base_version: str | None, locked: str | None) -> bool:
    """A base build of the locked release: equal, or equal but for a local label (+cu130)."""
    if base_version is None or locked is None:
        return False
    try:
        return Version(base_version).public == Version(locked).public
    except InvalidVersion:
        return base_version == locked


def overlay_lock(
    lock: Mapping[str, Any], base: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """The lock cut down to the packages the base lacks or has at another release, and the names
    of the packages kept.

    A GPU image's ``torch 2.11.0+cu130`` counts as the lock's ``torch 2.11.0``: the image's own
    build of that release is the point of an overlay. The base's versions are recorded anyway.
    """
    keep = [
        p
        for p in lock.get("packages", [])
        if not same_release(base.get(str(canonicalize_name(p["name"]))), p.get("version"))
    ]
    cut = {k: v for k, v in lock.items() if k not in ("packages", "tool")}
    cut["packages"] = keep
    return cut, [p["name"] for p in keep]
