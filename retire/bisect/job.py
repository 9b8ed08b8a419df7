"""One bisection as asked, parsed once: :class:`BisectJob`.

`patchlane bisect`'s command line becomes a job at the edge (``retire.commands.bisect``: bad
flags are one line naming the flag), and so does the bisection a verdict's
:class:`~retire.verdicts.actions.Bisect` action asks for under a weekly budget
(:meth:`BisectJob.of_action`). The command fills in what it finds out (the index, the lane's
interpreter and lock, the yanked releases, the range from the evidence); the engine
(:func:`retire.bisect.bisect`, :func:`retire.bisect.transitions.bisect_window`) and the runners
(:class:`~retire.bisect.runner.OverlayRunner`) read the value, and a Slurm job is given it back as
`patchlane bisect` options (:meth:`BisectJob.arguments`). A value: no I/O.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retire.bisect.bounds import Bounds
from retire.bisect.budget import Budget
from retire.bisect.search import Candidates, Limits, select_candidates
from retire.bisect.window import DEFAULT_SAMPLE
from retire.probes.records import bisection_lane
from retire.runs.isolation import Isolation

if TYPE_CHECKING:
    from retire.core.project import Project
    from retire.verdicts.actions import Bisect

__all__ = ["BisectJob", "Executor"]

_LIMITS = Limits()


class Executor(enum.StrEnum):
    """Where a bisection's candidates run."""

    #: on this host
    LOCAL = "local"
    #: as one Slurm job (``retire.runs.slurmbisect``)
    SLURM = "slurm"


@dataclass(frozen=True)
class BisectJob:
    """One bisection of ``shim``'s target: the range and its candidates, how far the search goes
    and how wide, where candidates run and where their runs go."""

    shim: str
    # the range: --since / --until as asked; once resolved, the evidence's broken release too
    bounds: Bounds = field(default_factory=Bounds)
    # search every release, ignoring the evidence of where the bug is known (--all)
    every: bool = False
    include_prereleases: bool = False
    # listed but yanked: never a candidate (found on the index)
    yanked: frozenset[str] = frozenset()
    # how many older releases the search for a broken one may try (--sample)
    sample: int = DEFAULT_SAMPLE
    limits: Limits = _LIMITS
    # --max-runs, --max-minutes and -j (``jobs``: candidates run at once, each on GPUs of its own)
    budget: Budget = field(default_factory=Budget)
    # the simple index the releases come from (asked, else found: a lane's, the host's)
    index: str | None = None
    # the interpreter the candidates are overlaid on (None: this one; a lane's env with --lane)
    python: str | None = None
    # the lane whose env the candidates are overlaid on, and its lock's digest
    lane: str | None = None
    lock_digest: str | None = None
    # process | launcher (None: launcher when the reproducer declares preloads)
    isolation: Isolation | None = None
    # seconds per reproducer run (None: the manifest's)
    timeout: float | None = None
    env: Mapping[str, str] | None = None
    # the validation manifest each fresh run is appended to (None: not recorded)
    records: Path | None = None
    # the result cache folder (None: no cache)
    cache: Path | None = None
    # where the overlay envs are made (None: the system's temporary folder)
    work_dir: Path | None = None
    # where the wheels built from a mirror at a commit are kept (None: not kept)
    wheels: Path | None = None
    # the folder of git mirrors (None: patchlane.toml's)
    mirrors: Path | None = None
    executor: Executor = Executor.LOCAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "yanked", frozenset(self.yanked))

    @property
    def width(self) -> int:
        """How many candidates a round may run at once (``-j``)."""
        return self.budget.jobs

    @property
    def base_python(self) -> str | os.PathLike[str]:
        return self.python or sys.executable

    @property
    def record_lane(self) -> str:
        """The lane the runs are recorded under: ``bisect``, or ``bisect:LANE`` on a lane's env."""
        return bisection_lane(self.lane)

    def candidates(self, versions: Iterable[str]) -> Candidates:
        """The releases of ``versions`` this job searches: yanked ones and those outside the
        bounds set apart, pre-releases too unless asked for."""
        return select_candidates(
            versions,
            self.yanked,
            include_prereleases=self.include_prereleases,
            since=self.bounds.since,
            until=self.bounds.until,
        )

    @classmethod
    def of_action(cls, action: Bisect, project: Project, budget: Budget) -> BisectJob:
        """What a verdict's bisection asks for, within ``budget`` (its runs and minutes: a Slurm
        job's share; its ``jobs``: the width); every run of it is evidence."""
        since = action.since.public if action.since is not None else None
        until = action.until.public if action.until is not None else None
        return cls(
            action.shim,
            Bounds(since, until),
            budget=budget,
            records=project.validation,
            cache=project.bisect_cache,
            wheels=project.wheel_cache,
        )

    def arguments(self) -> list[str]:
        """This job as `patchlane bisect SHIM` options (paths absolute, defaults left out), for a
        Slurm job to run it: where it records is the job's own (``--manifest``)."""
        runs, minutes = self.budget.runs, self.budget.minutes
        passed: list[str] = []
        for flag, value in (
            ("--index", self.index),
            ("--python", self.python),
            ("--lane", self.lane),
            ("--since", self.bounds.since),
            ("--until", self.bounds.until),
            ("--timeout", f"{self.timeout:g}" if self.timeout else None),
            ("--isolation", str(self.isolation) if self.isolation else None),
            *_unless_default(self.limits, self.sample),
            ("--mirrors", str(self.mirrors.absolute()) if self.mirrors else None),
            ("--cache", str(self.cache.absolute()) if self.cache else None),
            ("--jobs", str(self.width) if self.width > 1 else None),
            ("--max-runs", str(runs) if runs else None),
            ("--max-minutes", f"{minutes:g}" if minutes else None),
        ):
            if value:
                passed += [flag, value]
        for flag, on in (
            ("--all", self.every),
            ("--include-prereleases", self.include_prereleases),
            ("--no-record", self.records is None),
        ):
            if on:
                passed.append(flag)
        return passed


def _unless_default(limits: Limits, sample: int) -> list[tuple[str, str | None]]:
    return [
        (flag, str(value) if value != default else None)
        for flag, value, default in (
            ("--max-unknown", limits.max_unknown, _LIMITS.max_unknown),
            ("--max-not-applicable", limits.max_not_applicable, _LIMITS.max_not_applicable),
            ("--sample", sample, DEFAULT_SAMPLE),
        )
    ]
