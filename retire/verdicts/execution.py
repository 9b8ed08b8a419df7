"""What the recorded runs without the shim say (pure): the strongest evidence there is.

Runs come as an :class:`~retire.evidence.values.ExecutionHistory`: the latest conclusive
``--mode without`` run per (lane, host). What they say:

- :func:`newest` — on the newest version any run covers (and at least the newest version a lane
  locks), does the bug reproduce? If it does, the shim is needed, whatever any probe says.
- :func:`at_branch_tip` — for runs on an upstream revision (a package built from a commit, not
  a release): does the bug reproduce on the newest commit of a branch the mirror follows? That
  is to the branch what the newest locked release is to the releases.
- :func:`first_clean` — restricted to versions inside proposed floors, is there a clean run and
  no run that reproduced the bug? A retirement needs exactly that.
- :func:`from_window` — what the bug's window (every recorded run, :mod:`retire.history`) proves:
  the first clean release after the last broken one is the ``reproducer-clean`` floor.

A run on a package built from a revision is placed among releases by git ancestry where a mirror
answers (:func:`ordering`, :func:`version_of`), by its version label (``0.19.0+027fa4a``) only
where none does: a label says which release the branch was heading for, not which releases the
commit contains. Ancestry places each outcome where it is safe: a bug just above the newest
release its commit contains (the bug outlived that release), a clean run at the oldest release
that contains its commit (that release carries the fix) — and a clean run on a commit no release
contains (a branch that left the release line) says nothing about releases at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from retire.evidence.validation import FIXED, RunOutcome
from retire.evidence.values import (
    Ancestry,
    BranchTip,
    ExecutionEvidence,
    ExecutionHistory,
    ProbeFailure,
)
from retire.history.window import Window
from retire.verdicts.model import ExecutionState

__all__ = [
    "Found",
    "Order",
    "at_branch_tip",
    "built_from",
    "first_clean",
    "from_window",
    "newest",
    "ordering",
    "runs_phrase",
    "version_of",
]

#: commit a run's target was built from → where a mirror placed it among releases
Order = Mapping[str, Ancestry]

BUG = RunOutcome.BUG_REPRODUCED
CLEAN, BUGGY, NONE = ExecutionState.CLEAN, ExecutionState.BUG, ExecutionState.NONE


@dataclass(frozen=True)
class Found:
    state: ExecutionState
    why: str
    # first_clean: the oldest clean version inside the floors; from_window: the first clean
    # release after the last broken one
    floor: Version | None = None
    # newest: the version the state is about
    version: Version | None = None
    runs: tuple[ExecutionEvidence, ...] = ()


def runs_phrase(runs: Sequence[ExecutionEvidence], dist: str) -> str:
    run = runs[-1]
    version = run.version(dist)
    more = f" and {len(runs) - 1} more" if len(runs) > 1 else ""
    return f"{dist} {version or '?'} ({run.where}{more})"


def built_from(commit: str, full: str) -> bool:
    """Whether ``commit`` (a run's, possibly abbreviated) names the full sha ``full``."""
    return len(commit) >= 7 and full.lower().startswith(commit.lower())


def ordering(
    history: ExecutionHistory,
    dist: str,
    ancestry: Mapping[tuple[str, str], Ancestry | ProbeFailure],
) -> dict[str, Ancestry]:
    """Each commit a run's ``dist`` was built from that a mirror placed among releases."""
    answers = [a for a in ancestry.values() if isinstance(a, Ancestry)]
    found: dict[str, Ancestry] = {}
    for run in history.runs:
        commit = run.revision(dist)
        placed = next((a for a in answers if commit and built_from(commit, a.commit)), None)
        if commit and placed is not None:
            found[commit] = placed
    return found


def version_of(run: ExecutionEvidence, dist: str, order: Order | None = None) -> Version | None:
    """The run's version of ``dist`` for ordering against releases. A commit a mirror placed is
    ordered by ancestry, as its outcome allows (module docstring): a bug just above the newest
    release the commit contains, a clean run at the oldest release that contains it, or None
    when no release does (the run then says nothing about releases)."""
    commit = run.revision(dist) if order else None
    if not (order and commit and commit in order):
        return run.version(dist)
    placed = order[commit]
    return placed.order if run.outcome == BUG else placed.within_version


def _placed(run: ExecutionEvidence, dist: str, order: Order | None) -> bool:
    commit = run.revision(dist)
    return bool(order and commit and commit in order)


def _conclusive(history: ExecutionHistory) -> list[ExecutionEvidence]:
    return [r for r in history.runs if r.outcome in FIXED or r.outcome == BUG]


def newest(
    history: ExecutionHistory, dist: str, locked: Version | None, order: Order | None = None
) -> Found:
    """The state on the newest version a conclusive run covers, if that is at least ``locked``
    (the newest version of ``dist`` a lane locks). ``none`` when no run reaches it.

    A run on a commit a mirror placed among releases (``order``) is not a release: it speaks
    for its commit (the lanes locked there) and, on a followed branch's newest commit, for that
    branch (:func:`at_branch_tip`), never for "the newest release"."""
    every = _conclusive(history)
    if not every:
        return Found(NONE, "no conclusive run without the shim is recorded")
    conclusive = [r for r in every if not _placed(r, dist, order)]
    if not conclusive:
        return Found(NONE, "the conclusive runs without the shim are all on upstream revisions")
    versioned = [(v, r) for r in conclusive if (v := r.version(dist)) is not None]
    # runs that did not say which version they saw: a bug is still a bug
    if not versioned:
        bugs = [r for r in conclusive if r.outcome == BUG]
        if bugs and len(bugs) == len(conclusive):
            return Found(
                BUGGY,
                f"BUG_REPRODUCED without the shim ({bugs[-1].where}; {dist} version not recorded)",
                runs=tuple(bugs),
            )
        return Found(NONE, f"the runs did not record which {dist} they saw")
    top = max(v for v, _ in versioned)
    if locked is not None and top < locked:
        return Found(
            NONE,
            f"no run without the shim on {dist} {locked}, the newest version a lane locks "
            f"(newest run: {top})",
            version=locked,
        )
    at_top = [r for v, r in versioned if v == top]
    bugs = [r for r in at_top if r.outcome == BUG]
    # conflicting hosts on one version: the bug wins
    if bugs:
        return Found(
            BUGGY,
            f"BUG_REPRODUCED without the shim on {runs_phrase(bugs, dist)}",
            version=top,
            runs=tuple(bugs),
        )
    return Found(
        CLEAN,
        f"FIX_VALIDATED without the shim on {runs_phrase(at_top, dist)}",
        version=top,
        runs=tuple(at_top),
    )


def at_branch_tip(
    history: ExecutionHistory,
    dist: str,
    tips: Mapping[tuple[str, str], BranchTip | ProbeFailure],
) -> Found:
    """The state on the newest commit of a followed branch of a mirror, from runs whose ``dist``
    was built from that commit (``tips``: (repository, commit) → :class:`BranchTip`)."""
    at_tip = [
        (recorded, tip)
        for (_, recorded), tip in tips.items()
        if isinstance(tip, BranchTip) and tip.is_tip
    ]
    found: list[tuple[ExecutionEvidence, BranchTip]] = []
    for run in _conclusive(history):
        commit = run.revision(dist)
        found += [(run, tip) for recorded, tip in at_tip if commit and recorded == commit]
    if not found:
        return Found(
            NONE, "no conclusive run without the shim on the newest commit of a followed branch"
        )
    bugs = [(run, tip) for run, tip in found if run.outcome == BUG]
    state, chosen = (BUGGY, bugs) if bugs else (CLEAN, found)
    run, tip = chosen[-1]
    sentinel = "BUG_REPRODUCED" if state == BUGGY else "FIX_VALIDATED"
    fresh = f", mirror as of {tip.newest_commit_at.date()}" if tip.newest_commit_at else ""
    return Found(
        state,
        f"{sentinel} without the shim on {runs_phrase([r for r, _ in chosen], dist)}, built from "
        f"{tip.commit[:10]}: the newest commit of {', '.join(tip.branches)} in the mirror of "
        f"{tip.repository}{fresh}",
        version=run.version(dist),
        runs=tuple(r for r, _ in chosen),
    )


def first_clean(
    history: ExecutionHistory,
    dist: str,
    floors: Mapping[str, Version],
    order: Order | None = None,
) -> Found:
    """Clean runs (and no bug) inside every proposed floor: only runs on releases inside every
    floor count (a retirement proposes all of them, so each must have been run), and a run there
    that reproduced the bug blocks it."""
    if not history.runs:
        return Found(NONE, "no run of the reproducer without the shim is recorded")
    runs = [
        r
        for r in history.runs
        if all(
            (v := version_of(r, d, order if d == dist else None)) is not None and v >= floor
            for d, floor in floors.items()
        )
    ]
    if not runs:
        wanted = ", ".join(f"{d}>={floor}" for d, floor in sorted(floors.items()))
        seen = sorted({str(v) for r in history.runs if (v := r.version(dist))}) or [
            "unrecorded versions"
        ]
        return Found(NONE, f"no without-shim run on {wanted} (runs were on {', '.join(seen)})")
    # a clean commit that no release contains says nothing about releases
    clean = [
        r
        for r in runs
        if r.outcome in FIXED
        and not (_placed(r, dist, order) and version_of(r, dist, order) is None)
    ]
    bug = [r for r in runs if r.outcome == BUG]
    if bug:
        return Found(
            BUGGY, f"BUG_REPRODUCED without the shim on {runs_phrase(bug, dist)}", runs=tuple(bug)
        )
    if clean:
        versions = [v for r in clean if (v := version_of(r, dist, order)) is not None]
        return Found(
            CLEAN,
            f"FIX_VALIDATED without the shim on {runs_phrase(clean, dist)}",
            floor=min(versions) if versions else None,
            runs=tuple(clean),
        )
    return _no_verdict(runs)


def _no_verdict(runs: Sequence[ExecutionEvidence]) -> Found:
    if not runs:
        return Found(NONE, "no run of the reproducer without the shim is recorded")
    other = runs[-1]
    detail = f": {other.detail}" if other.detail else ""
    return Found(
        NONE, f"the reproducer never ran to a verdict ({other.outcome} on {other.where}{detail})"
    )


def _told(window: Window, item: str | None) -> str:
    told = next((t for t in window.told if t.item == item), None)
    return f" ({told.where})" if told is not None and told.where else ""


def from_window(window: Window | None, history: ExecutionHistory, dist: str) -> Found:
    """What the bug's window (:mod:`retire.history`: every recorded run, the bug winning where
    runs disagree) proves: clean from the first clean release *after* the last broken one — that
    release is the floor, and clean runs before the window never lower it; still broken at the
    newest release run (or clean releases between broken ones: the runs disagree) is the bug; no
    run that reproduced the bug, the oldest clean release."""
    if window is None:
        return _no_verdict(history.runs)
    if not window.seen:
        if not window.told:
            return Found(NONE, window.reason)
        first = window.told[0]
        return Found(
            CLEAN,
            f"FIX_VALIDATED without the shim on {dist} {first.item}{_told(window, first.item)}",
            floor=Version(first.item),
        )
    if not window.monotone:
        texts = "; ".join(d.text for d in window.disagreements)
        return Found(BUGGY, f"the runs without the shim disagree: {texts}")
    last, fixed = window.last_broken, window.first_fixed
    if fixed is None:
        return Found(
            BUGGY,
            f"BUG_REPRODUCED without the shim on {dist} {last}{_told(window, last)}, the newest "
            "release run",
        )
    return Found(
        CLEAN,
        f"FIX_VALIDATED without the shim on {dist} {fixed}{_told(window, fixed)}, the first clean "
        f"release after {last} (BUG_REPRODUCED{_told(window, last)})",
        floor=Version(fixed),
    )
