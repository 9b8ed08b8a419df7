"""How one bisection runs (a value): the range and its candidates, where each candidate's overlay
environment comes from, and where its runs are recorded and cached."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from retire.bisect.bounds import Bounds
from retire.bisect.search import Candidates, Limits, select_candidates
from retire.probes.records import BISECT_LANE

__all__ = ["BisectOptions"]


@dataclass(frozen=True)
class BisectOptions:
    """What :func:`retire.bisect.bisect` takes besides the shim and the listed versions."""

    # listed but yanked: never a candidate
    yanked: frozenset[str] = frozenset()
    include_prereleases: bool = False
    # the range (default: every release)
    bounds: Bounds = field(default_factory=Bounds)
    # the interpreter the candidates are overlaid on
    base_python: str | os.PathLike[str] = sys.executable
    index_url: str | None = None
    cache_dir: str | os.PathLike[str] | None = None
    work_dir: str | os.PathLike[str] | None = None
    # seconds per reproducer run (None: the manifest's)
    timeout: float | None = None
    env: Mapping[str, str] | None = None
    # the validation manifest each fresh run is appended to, under ``lane``
    record_to: str | os.PathLike[str] | None = None
    lane: str = BISECT_LANE
    lock_digest: str | None = None
    limits: Limits = field(default_factory=Limits)
    # process | launcher (default: launcher when the reproducer declares preloads)
    isolation: str | None = None
    # candidates run at once, each on GPUs of its own (``-j``; retire.bisect.sidebyside)
    jobs: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "yanked", frozenset(self.yanked))

    def candidates(self, versions: Iterable[str]) -> Candidates:
        """The releases of ``versions`` these options search: yanked ones and those outside the
        bounds set apart, pre-releases too unless asked for."""
        return select_candidates(
            versions,
            self.yanked,
            include_prereleases=self.include_prereleases,
            since=self.bounds.since,
            until=self.bounds.until,
        )
