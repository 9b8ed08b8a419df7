"""The result of a window bisection: the bug's window on the target's releases, and where an edge
lies between two adjacent releases and the mirror allows, the commit that made it. A value: no
I/O.

It answers what a release bisection's result answers (``status``, ``first_fixed``,
``last_broken``, ``floor``, ``runs``, ``summary()``, ``markdown()``), so the weekly budget and the
report read either; and it says more: the release where the bug came in, the commits, and why a
search stopped at a release edge.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from retire.bisect.search import ENV_FAILED, NOT_APPLICABLE, CandidateRun, Candidates, Status
from retire.bisect.window import Edge, EdgeState, LanePlace, Window
from retire.core import mdsafe
from retire.mirrors.history import Commit

__all__ = ["CommitEdge", "WindowResult"]

#: How many of an unpinned edge's commits its line names.
_SHOWN = 8


@dataclass(frozen=True)
class CommitEdge:
    """One release edge continued in the commits between its two releases' tags.

    ``edge``'s sides are commits (the older tag's commit when the first commit of the range made
    the change); ``commit`` is the commit a pinned edge names: the first broken (introduced) or
    the first clean (fixed) one, with its subject, date and pull request. An edge not pinned names
    no commit (None): its range (``tags``) and the commits left in it (``edge.between`` and
    ``edge.after``) say where it lies."""

    kind: str
    # the adjacent releases the commits lie between
    releases: tuple[str, str]
    tags: tuple[str, str]
    edge: Edge
    commit: Commit | None
    # commits in the range (the newer tag's included)
    commits: int
    runs: tuple[CandidateRun, ...] = ()
    # a fix in no release: the branch whose newest commit was clean (``releases`` is then the
    # newest release and the branch, ``tags`` its tag and the branch's ref)
    branch: str | None = None
    # the named build that made each commit's wheel (``WheelBuild.describe()``), when not uv's
    build: str | None = None
    # why the edge stayed unpinned where its candidates could not be built here (the build
    # backend missing from the index, a failed build), else None
    unbuilt: str | None = None

    def describe(self) -> str:
        verb = "introduced" if self.kind == "introduced" else "fixed"
        if self.branch is not None and self.commit is not None:
            return f"fixed on {self.branch} by {self.commit.describe()}, in no release yet"
        if self.edge.state == EdgeState.FOUND and self.commit is not None:
            return f"{verb} by {self.commit.describe()}"
        left = [c[:12] for c in (*self.edge.between, self.edge.after) if c]
        shown = ", ".join(left[:_SHOWN]) + (
            f", … ({len(left)} in all)" if len(left) > _SHOWN else ""
        )
        old, new = (tag.removeprefix("refs/heads/") for tag in self.tags)
        note = f" — {self.edge.note}" if self.edge.note else ""
        return f"{verb} in {old}..{new}, not pinned (one of {shown}){note}"


@dataclass(frozen=True)
class WindowResult:
    """``window``: the bug on the target's releases. ``commit_edges``: the edges continued in the
    mirror. ``stops``: why an edge stopped at the release edge (no mirror, a compiled extension,
    no tag)."""

    shim: str
    distribution: str
    window: Window
    candidates: Candidates
    commit_edges: tuple[CommitEdge, ...] = ()
    stops: tuple[str, ...] = ()
    base: str = ""
    seconds: float = 0.0
    range_note: str = ""
    # what showed the evidence's release broken, when one was on record
    evidence: str = ""
    records_added: int = 0
    # each lane carrying the shim against the window (retire.bisect.placing)
    lanes: tuple[LanePlace, ...] = ()

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
        return self.window.fixed.after if self.status != Status.NO_TRANSITION else None

    @property
    def last_broken(self) -> str | None:
        return self.window.fixed.before if self.window.seen else None

    @property
    def floor(self) -> str | None:
        return f"{self.distribution}>={self.first_fixed}" if self.first_fixed else None

    @property
    def probes(self) -> tuple[CandidateRun, ...]:
        """Every run, releases first, then commits."""
        return self.window.runs + tuple(r for e in self.commit_edges for r in e.runs)

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
            for r in self.window.runs
            if r.state == NOT_APPLICABLE and r.version in history[lo + 1 : hi]
        ]

    def commit_edge(self, kind: str) -> CommitEdge | None:
        """The edge between two releases (a fix in no release is :attr:`unreleased`)."""
        return next((e for e in self.commit_edges if e.kind == kind and e.branch is None), None)

    @property
    def unreleased(self) -> CommitEdge | None:
        """The fix found on a followed branch after the newest release, still broken there."""
        return next((e for e in self.commit_edges if e.branch is not None), None)

    @property
    def unbuilt(self) -> tuple[CommitEdge, ...]:
        """The commit edges left unpinned because their candidates could not be built here (the
        build backend missing from the index, a failed build): the bisection was asked to pin
        them and could not (``patchlane bisect`` exits 1)."""
        return tuple(e for e in self.commit_edges if e.unbuilt is not None)

    @property
    def fix_commit(self) -> Commit | None:
        """The first clean commit, when the fixed edge was followed into the commits."""
        edge = self.commit_edge("fixed") or self.unreleased
        return edge.commit if edge is not None and edge.edge.state == EdgeState.FOUND else None

    # -- for people ----------------------------------------------------------------------------
    def window_line(self) -> str:
        """The window in one line: releases, then commits where known."""
        if not self.window.seen:
            return f"{self.distribution}: window not seen — {self.window.reason}"
        parts = []
        for edge in (self.window.introduced, self.window.fixed):
            text = edge.describe()
            commits = self.commit_edge(edge.kind)
            if commits is None and edge.kind == "fixed":
                commits = self.unreleased
            if commits is not None:
                text += f", {commits.describe()}"
            parts.append(text)
        return f"{self.distribution}: {'; '.join(parts)}"

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
            r.version == before and r.state == "broken" for r in self.window.runs
        )

    def summary(self) -> str:
        commits = sum(e.commits for e in self.commit_edges)
        counts = (
            f"{self.runs} reproducer run(s) over {len(self.candidates.versions)} release(s)"
            + (f" and {commits} commit(s)" if self.commit_edges else "")
        )
        lines = [f"{self.head()}.", f"Window: {self.window_line()}."] if self.window.seen else []
        lines = lines or [f"{self.head()}."]
        lines += [f"{stop}." for stop in self.stops]
        builds = dict.fromkeys(e.build for e in self.commit_edges if e.build)
        lines += [f"Commits built with {build}." for build in builds]
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
            "probes": [asdict(r) for r in window.runs],
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
                "introduced": asdict(window.introduced),
                "fixed": asdict(fixed),
                "untried": [list(pair) for pair in window.untried],
                "known_broken": window.known_broken,
                "line": self.window_line(),
            },
            "commit_edges": [_commit_edge(e) for e in self.commit_edges],
            "stops": list(self.stops),
            "decide": list(self.decide(self.shim)),
            "lanes": [
                {
                    "lane": p.lane,
                    "version": p.version,
                    "commit": p.commit,
                    "place": str(p.place),
                    "says": p.says,
                }
                for p in self.lanes
            ],
        }


def _commit_edge(edge: CommitEdge) -> dict[str, Any]:
    return {
        "kind": edge.kind,
        "releases": list(edge.releases),
        "tags": list(edge.tags),
        "edge": asdict(edge.edge),
        "commit": asdict(edge.commit) if edge.commit is not None else None,
        "commits": edge.commits,
        "runs": [asdict(r) for r in edge.runs],
        "branch": edge.branch,
        "build": edge.build,
    }
