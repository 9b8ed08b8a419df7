"""The result of a window bisection: the bug's window (:class:`retire.history.window.Window`, the
one value every reader takes, its edges continued into the commits where the mirror allowed) and
the runs that placed it. A value: no I/O.

It answers what a release bisection's result answers (``status``, ``first_fixed``,
``last_broken``, ``floor``, ``runs``, ``summary()``, ``markdown()``), so the weekly budget and the
report read either; and it says more: the release where the bug came in, the commits, and why a
search stopped at a release edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from retire.bisect.search import ENV_FAILED, NOT_APPLICABLE, CandidateRun, Candidates, Status
from retire.core import mdsafe
from retire.history.edge import CommitSearch, CommitSpan, EdgeState
from retire.history.place import Placement
from retire.history.window import Window

__all__ = ["BRANCH", "Searched", "WindowResult"]

#: The key of :attr:`WindowResult.commit_runs` for the search along a followed branch.
BRANCH = "branch"


@dataclass(frozen=True)
class Searched:
    """One edge searched in the commits: the span the window holds, and the runs that placed it;
    ``releases``: the two releases (or the newest release and a branch) the commits lie between,
    ``branch``: the branch, for a fix in no release."""

    span: CommitSpan
    releases: tuple[str, str]
    runs: tuple[CandidateRun, ...]
    branch: str | None = None


@dataclass(frozen=True)
class WindowResult:
    """``window``: the bug on the target's releases, its edges continued in the mirror's commits
    (``Edge.commits``, ``Window.branch_fix``). ``release_runs`` placed the release edges,
    ``commit_runs`` (keyed ``introduced``, ``fixed``, ``branch``) the commit ones. ``stops``: why
    an edge stopped at the release edge (no mirror, a compiled extension, no tag)."""

    shim: str
    distribution: str
    window: Window
    candidates: Candidates
    release_runs: tuple[CandidateRun, ...] = ()
    commit_runs: Mapping[str, tuple[CandidateRun, ...]] = field(default_factory=dict)
    stops: tuple[str, ...] = ()
    base: str = ""
    seconds: float = 0.0
    range_note: str = ""
    # what showed the evidence's release broken, when one was on record
    evidence: str = ""
    records_added: int = 0
    # each lane carrying the shim against the window (retire.history.place)
    lanes: tuple[Placement, ...] = ()

    # -- what a release bisection's result answers ---------------------------------------------
    @property
    def status(self) -> Status:
        """``found`` when the first fixed release is pinned, ``unpinned`` when only bounded,
        ``no-transition`` when no fixed release is known (never seen broken, or still broken)."""
        fixed = self.window.fixed
        if not self.window.seen or fixed.after is None:
            return Status.NO_TRANSITION
        return Status.FOUND if fixed.state == EdgeState.FOUND else Status.UNPINNED

    @property
    def first_fixed(self) -> str | None:
        return self.window.first_fixed

    @property
    def last_broken(self) -> str | None:
        return self.window.last_broken

    @property
    def floor(self) -> str | None:
        return f"{self.distribution}>={self.first_fixed}" if self.first_fixed else None

    @property
    def probes(self) -> tuple[CandidateRun, ...]:
        """Every run, releases first, then commits."""
        return self.release_runs + tuple(r for runs in self.commit_runs.values() for r in runs)

    @property
    def runs(self) -> int:
        """Reproducer runs made now (cached answers cost none)."""
        return sum(1 for r in self.probes if not r.cached and r.outcome != ENV_FAILED)

    def not_applicable_between(self) -> list[str]:
        """Releases between the last broken and the first fixed the reproducer cannot run
        against."""
        history, fixed = self.window.history, self.window.fixed
        if fixed.before not in history or fixed.after not in history:
            return []
        lo, hi = history.index(fixed.before), history.index(fixed.after)
        return [
            r.version
            for r in self.release_runs
            if r.state == NOT_APPLICABLE and r.version in history[lo + 1 : hi]
        ]

    def searched(self) -> tuple[Searched, ...]:
        """Each edge searched in the commits, in the order searched: the fixed edge's, the
        introduced one's (between two releases' tags), and along a branch."""
        found = []
        for edge in (self.window.fixed, self.window.introduced):
            if edge.commits is not None and edge.before is not None and edge.after is not None:
                runs = self.commit_runs.get(str(edge.kind), ())
                found.append(Searched(edge.commits, (edge.before, edge.after), runs))
        fix = self.window.branch_fix
        if fix is not None:
            releases = (self.window.fixed.before or "", fix.branch)
            found.append(Searched(fix.span, releases, self.commit_runs.get(BRANCH, ()), fix.branch))
        return tuple(found)

    @property
    def unbuilt(self) -> tuple[CommitSpan, ...]:
        """The commit edges left unpinned because their candidates could not be built here (the
        build backend missing from the index, a failed build): the bisection was asked to pin
        them and could not (``patchlane bisect`` exits 1)."""
        return tuple(s.span for s in self.searched() if s.span.unbuilt is not None)

    # -- for people ----------------------------------------------------------------------------
    def window_line(self) -> str:
        """The window in one line: releases, then commits where known."""
        return f"{self.distribution}: {self.window.line()}"

    def head(self) -> str:
        """The fixed edge in a sentence, as a release bisection says it."""
        fixed = self.window.fixed
        if self.status == Status.FOUND:
            text = (
                f"{self.distribution} {fixed.after} is the first fixed release (last broken: "
                f"{fixed.before}"
            )
            return text + (f", recorded {self.evidence})" if self._evidence_only else ")")
        if self.status == Status.UNPINNED:
            return (
                f"{self.distribution}: last broken {fixed.before}, first proven fixed "
                f"{fixed.after}; boundary not pinned, unknown in between: "
                f"{', '.join(fixed.between)}"
            )
        if not self.window.seen:
            return f"{self.distribution}: window not seen — {self.window.reason}"
        return f"{self.distribution}: no fixed release — {fixed.note or fixed.state}"

    @property
    def _evidence_only(self) -> bool:
        """Whether the last broken release is the evidence's, not run here."""
        before = self.window.fixed.before
        return bool(self.evidence) and not any(
            r.version == before and r.state == "broken" for r in self.release_runs
        )

    def summary(self) -> str:
        searched = self.searched()
        commits = sum(s.span.count for s in searched)
        counts = (
            f"{self.runs} reproducer run(s) over {len(self.candidates.versions)} release(s)"
            + (f" and {commits} commit(s)" if searched else "")
        )
        lines = [f"{self.head()}.", f"Window: {self.window_line()}."] if self.window.seen else []
        lines = lines or [f"{self.head()}."]
        lines += [f"{stop}." for stop in self.stops]
        builds = dict.fromkeys(s.span.build for s in searched if s.span.build)
        lines += [f"Commits built with {build}." for build in builds]
        # how each edge's commits were searched, where not every one by a binary search
        lines += [
            f"The {s.span.kind} edge's commits: {s.span.search_note}."
            for s in searched
            if s.span.search != CommitSearch.FULL and s.span.search_note
        ]
        return " ".join([*lines, f"{counts}."])

    def decide(self, shim: str) -> tuple[str, ...]:
        """What would decide a window not seen: bisects over the stretches never tried, a lane
        run on the release where the shop saw the bug."""
        if self.window.seen:
            return ()
        found = [
            f"patchlane bisect {shim} --since {low} --until {high}"
            for low, high in self.window.untried
        ]
        found.append(
            "record the bug where the shop saw it: `patchlane run LANE` on a lane that "
            "locks that release (then bisect again: its BUG_REPRODUCED record is the window's "
            "broken release)"
        )
        return tuple(found)

    def markdown(self) -> str:
        # a commit's subject is the upstream's text: each line inert (retire.core.mdsafe)
        summary = [f"{mdsafe.text(line)}  " for line in self.summary().splitlines() if line]
        title = f"{mdsafe.code(self.distribution)} for shim {mdsafe.code(self.shim)}"
        lines = [
            f"### Window bisection of {title}",
            "",
            *summary,
            "",
            f"Window from {mdsafe.text(self.window.source.describe())}.",
            "",
        ]
        if self.range_note:
            lines += [f"Range: {mdsafe.text(self.range_note)}.", ""]
        if self.floor:
            lines += [f"Proposed retirement floor: {mdsafe.code(str(self.floor))}", ""]
        lines += ["| candidate | result | reproducer outcome | seconds |", "|---|---|---|---|"]
        for run in self.probes:
            label = run.version[:12] if len(run.version) == 40 else run.version
            lines.append(f"| {label} | {run.state} | {run.outcome} | {run.duration_s:.2f} |")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The release bisection's document (same keys), and the window, the commits, the stops
        and what would decide a window not seen."""
        window, fixed = self.window, self.window.fixed
        n = len(self.candidates.versions)
        return {
            "shim": self.shim,
            "distribution": self.distribution,
            "status": str(self.status),
            "reason": window.reason or fixed.note,
            "first_fixed": self.first_fixed,
            "last_broken": self.last_broken,
            "unknown_between": list(fixed.between),
            "runs": self.runs,
            "probes": [asdict(r) for r in self.release_runs],
            "candidates": asdict(self.candidates),
            "base": self.base,
            "seconds": self.seconds,
            "range_note": self.range_note,
            "last_broken_evidence": self.evidence if self._evidence_only else "",
            "not_applicable_between": self.not_applicable_between(),
            "records_added": self.records_added,
            "floor": self.floor,
            "releases_available": n,
            "run_bound": (math.ceil(math.log2(n)) + 1) if n else 0,
            "conclusive_runs": sum(1 for r in self.probes if r.conclusive and not r.cached),
            "window": {
                "seen": window.seen,
                "introduced": window.introduced.to_json(),
                "fixed": fixed.to_json(),
                "untried": [list(pair) for pair in window.untried],
                "known_broken": window.source.known_broken,
                "line": self.window_line(),
                "source": window.source.describe(),
            },
            "commit_edges": [_searched(s) for s in self.searched()],
            "stops": list(self.stops),
            "decide": list(self.decide(self.shim)),
            "lanes": [
                {
                    "lane": p.lane,
                    "version": p.version,
                    "commit": p.commit,
                    "place": str(p.place),
                    "says": p.sentence(),
                }
                for p in self.lanes
            ],
        }


def _searched(searched: Searched) -> dict[str, Any]:
    span = searched.span
    return {
        "kind": str(span.kind),
        "releases": list(searched.releases),
        "tags": list(span.tags),
        "edge": span.to_json(),
        "commit": asdict(span.commit) if span.commit is not None else None,
        "commits": span.count,
        "runs": [asdict(r) for r in searched.runs],
        "branch": searched.branch,
        "build": span.build,
        "search": span.search_json(),
    }
