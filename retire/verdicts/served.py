"""What a lane's indexes serve for some distributions, as one digest: the footing of a cached
trial re-lock (:data:`retire.locks.trial.Served`).

A frozen lane's trial answer is cached by everything the lane says, but the index can change
under it: an upload backfilled with a date before the freeze (a mirror catching up, a wheel
added to an old release) lifts a blocker while the lane and its lock stay as they were. The
digest covers every file the index lists for each name (its name, upload time and yank), read
through the gather's fetcher (its HTTP cache revalidates with ETags), so a cached answer counts
only while the index serves the same files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from retire.evidence.values import ProbeFailure
from retire.lanes.model import Lane
from retire.probes.http import Fetcher
from retire.probes.index import probe_releases
from retire.verdicts.plan import Sources, lane_index_urls

__all__ = ["served_digest"]


def served_digest(
    fetcher: Fetcher, sources: Sources, lane: Lane, names: Sequence[str]
) -> str | None:
    """The digest of what ``lane``'s indexes list for ``names``; None when an index did not
    answer (the answer is then neither trusted from the cache nor kept)."""
    seen: list[object] = []
    for name in sorted(names):
        urls = lane_index_urls(lane, name, named=sources.named, default=sources.default)
        if isinstance(urls, ProbeFailure):
            return None
        found = probe_releases(fetcher, name, urls)
        if isinstance(found, ProbeFailure):
            # no index has the project (a lane's own constraint on something absent): that too
            # is what it serves
            if found.reason.startswith("no project"):
                seen.append([name, None])
                continue
            return None
        files = sorted(
            [f.filename, f.upload_time.isoformat() if f.upload_time else None, f.yanked]
            for release in found.releases
            for f in release.files
        )
        seen.append([name, files])
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()
