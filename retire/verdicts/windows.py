"""Each shim's window for one gather, completed by the local mirrors (I/O: local mirrors only).

The plan read every shim's window from the records (:func:`retire.history.reading.read`). Where
commit runs of the shim are on record and its target's repository is mirrored here
(``ShimPlan.mirror``, found by the one resolver every command uses, :mod:`retire.mirrors.resolve`:
a revision lane's, a link's, or the declared mirror named as the package), the mirror orders them
(:func:`retire.history.mirrored.read_mirrored`): the commit that opened or closed a release edge,
and a fix on a branch a revision lane carrying the shim follows (or the mirror's entry names:
``branches = ["main"]``), in no release yet, with the first release tag that contains it. Then
each such revision lane's locked commit is asked, by ancestry, whether it contains the commits
the window pins (what the placer reads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

from retire.history.mirrored import TargetMirror, contains, read_mirrored
from retire.history.window import Window
from retire.mirrors.config import repository_key
from retire.mirrors.repo import MirrorRepo
from retire.verdicts.mirrored import OpenMirrors
from retire.verdicts.plan import GatherPlan, ShimPlan

__all__ = ["MirroredWindow", "mirrored_windows"]

#: A rev that is a commit sha, not a branch.
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


@dataclass(frozen=True)
class MirroredWindow:
    """A shim's window with its commit runs ordered, and the ancestry answers of its revision
    lanes' locked commits (locked commit → (pinned commit, contains?))."""

    window: Window | None
    contains: Mapping[str, tuple[tuple[str, bool], ...]] = field(default_factory=dict)


def mirrored_windows(plan: GatherPlan, mirrors: OpenMirrors) -> dict[str, MirroredWindow]:
    """shim → its window read with its target's mirror (shims without commit runs on record, or
    without a mirror of their target here, are absent: the plan's window stands)."""
    found: dict[str, MirroredWindow] = {}
    for shim in plan.shims:
        window = plan.windows.get(shim.manifest.id)
        if window is None or window.source.commit_runs == 0 or shim.mirror is None:
            continue
        repo = mirrors.repo(shim.mirror.mirror.repository)
        if isinstance(repo, MirrorRepo):
            found[shim.manifest.id] = _read(shim, plan, TargetMirror(repo, shim.mirror))
    return found


def _read(shim: ShimPlan, plan: GatherPlan, mirror: TargetMirror) -> MirroredWindow:
    dist = canonicalize_name(shim.manifest.target.distribution)
    key = repository_key(mirror.found.mirror.repository)
    revisions = [
        (lane, revision)
        for lane in shim.lanes
        for revision in lane.revisions
        if revision.distribution == dist and repository_key(revision.repository) == key
    ]
    # the branches the revision lanes follow, then those the mirror's entry names
    followed = [r.rev for _, r in revisions if not _SHA.fullmatch(r.rev)]
    branches = list(dict.fromkeys([*followed, *mirror.found.mirror.named_branches]))
    repo = mirror.repo
    window = read_mirrored(plan.records, shim.manifest.id, dist, mirror, branches)
    locked = sorted(
        {c for lane, _ in revisions if (c := plan.locked_commits.get(lane.name, {}).get(dist))}
    )
    pinned = window.pinned_commits() if window is not None else ()
    return MirroredWindow(window, contains(repo, pinned, locked) if pinned else {})
