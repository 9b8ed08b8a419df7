"""What each lane that carries a shim does with it (pure, no I/O): docs/verdicts.md, "Per lane".

A shop's lanes are not one environment: a fix upstream leaves each lane by its own road. Once
the evidence says *retire* with proven floors F, each lane gets a :class:`LaneVerdict`:

- the lane installs no target → **drop**;
- a revision target ([lane.revisions]): a without-shim run on exactly the locked commit decides
  (bug → keep, clean → drop); else git ancestry in the mirror: the commit contains a release at
  or above F → drop; it is part of a release at or below F → below the floor; neither (it
  diverged from the release line) or no mirror answers → unknown, one run on the lane decides;
- a release target: locked (else exactly pinned) at or above F → drop, below → below the floor;
  neither a lock nor an exact pin → unknown;
- below the floor: a hold lane **holds** (``until`` says what releases it); a follow lane
  **raises** its pins (a revision lane moves to its branch's newest commit when that contains a
  release at or above F, else it is **blocked**); a raise stands once the trial re-lock
  resolved, and is **blocked** by the resolver's own explanation when it did not;
- cells of one matrix file share one shim list: they go together or not at all.

Whatever the evidence says, two facts of execution come first: a revision lane whose locked
commit contains the fix on the branch it follows (the window's ``branch_fix``, by ancestry:
``ShimEvidence.contains``) is **drop**, a fix in no release included; a lane whose target is
before the bug's window (``ShimEvidence.window``, placed by :mod:`retire.history.place`) is
**not-needed** unless the evidence already lets the shim leave it. Every lane verdict carries its
place against that window.

:func:`derive` turns the lanes back into the shim's decision: retire (every lane can let it go),
retire-in-some (some can, the why names the others), keep or unknown (none can).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.floor import Floor
from retire.evidence.validation import FIXED, RunOutcome
from retire.evidence.values import Ancestry, ExecutionEvidence, ExecutionHistory, ProbeFailure
from retire.history.edge import Place
from retire.history.place import Placement, Target, place
from retire.history.window import BranchFix
from retire.lanes.model import Lane, LanePolicy
from retire.lanes.revisions import Revision
from retire.verdicts.actions import LockLanes, NextAction, RunLane
from retire.verdicts.execution import built_from, runs_phrase
from retire.verdicts.model import Decision, LaneStep, LaneVerdict, ShimEvidence
from retire.verdicts.used import Used

__all__ = ["ShimRuling", "derive", "lane_steps", "trial_key"]

BUG = RunOutcome.BUG_REPRODUCED


@dataclass(frozen=True)
class ShimRuling:
    """What the evidence decided for the shim, before its lanes are asked."""

    shim: str
    # canonical name of the target distribution
    dist: str
    decision: Decision
    why: str
    action: str | None
    # the proven floors (retire only): canonical distribution → version
    floors: Mapping[str, Version]
    runs: ExecutionHistory
    # the fix on a followed branch, when the recorded commit runs pin one
    branch_fix: BranchFix | None = None


def trial_key(lane: str, floors: Sequence[Floor]) -> tuple[str, tuple[Floor, ...]]:
    """How a trial re-lock is keyed in :attr:`ShimEvidence.trials`."""
    return lane, tuple(floors)


# ---------------------------------------------------------------------------------------------
# Where one lane stands against one floor


class _At(enum.Enum):
    ABSENT = "absent"
    ABOVE = "above"
    BELOW = "below"
    BUG = "bug"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class _Position:
    dist: str
    floor: Version
    at: _At
    # "liger-kernel 0.6.0", "megatron-core @ d98e8a64dd"
    locked: str | None
    # one line: why it stands there (or what would decide it, when unknown)
    why: str
    action: str | None = None
    revision: Revision | None = None
    # the commands ``action`` names, as data
    next: tuple[NextAction, ...] = ()


def _requirement(lane: Lane, dist: str) -> Requirement | None:
    for text in lane.requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == dist:
            return requirement
    return None


def _exact_pin(requirement: Requirement | None) -> str | None:
    specs = list(requirement.specifier) if requirement is not None else []
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def _runs_on(
    runs: ExecutionHistory, matches: Callable[[ExecutionEvidence], bool]
) -> list[ExecutionEvidence]:
    return [r for r in runs.runs if (r.outcome in FIXED or r.outcome == BUG) and matches(r)]


def _lock_the_lane(lane: Lane, what: str) -> _Position:
    return _Position(
        what,
        Version("0"),
        _At.UNKNOWN,
        None,
        f"the lane has no lock and no exact pin of {what}",
        f"lock the lane: `{LockLanes((lane.name,))}`",
        next=(LockLanes((lane.name,)),),
    )


def _release_position(
    lane: Lane, dist: str, floor: Version, ruling: ShimRuling, ev: ShimEvidence
) -> _Position:
    packages = ev.locks.get(lane.name)
    requirement = _requirement(lane, dist)
    if packages is not None and dist not in packages:
        if requirement is None:
            return _Position(dist, floor, _At.ABSENT, None, f"the lane installs no {dist}")
        return _lock_the_lane(lane, dist)
    text = packages.get(dist) if packages is not None else _exact_pin(requirement)
    if text is None:
        return _lock_the_lane(lane, dist)
    how = "locked" if packages is not None else "pinned"
    try:
        version = Version(text)
    except InvalidVersion:
        return _lock_the_lane(lane, dist)
    locked = f"{dist} {text}"
    if version < floor:
        return _Position(dist, floor, _At.BELOW, locked, f"{how} {locked} is below {floor}")
    on_it = _runs_on(ruling.runs, lambda r: r.version(dist) == version)
    bugs = [r for r in on_it if r.outcome == BUG]
    if bugs:
        return _Position(
            dist,
            floor,
            _At.BUG,
            locked,
            f"BUG_REPRODUCED without the shim on the lane's own {runs_phrase(bugs, dist)}",
        )
    return _Position(dist, floor, _At.ABOVE, locked, f"{how} {locked} is at or above {floor}")


def _ancestry(
    ev: ShimEvidence, repository: str, rev: str, used: Used
) -> Ancestry | ProbeFailure | None:
    found = ev.ancestry.get((repository, rev))
    used.add(found)
    return found


def _run_the_lane(lane: Lane) -> str:
    return f"run the reproducer without the shim on the lane: `{RunLane(lane.name)}`"


def _revision_position(
    lane: Lane,
    revision: Revision,
    floor: Version,
    ruling: ShimRuling,
    ev: ShimEvidence,
    used: Used,
) -> _Position:
    dist = revision.distribution
    commit = ev.commits.get(lane.name, {}).get(dist)
    if not commit:
        return replace(_lock_the_lane(lane, dist), revision=revision)
    locked = f"{dist} @ {commit[:10]}"
    runs = _runs_on(ruling.runs, lambda r: bool((c := r.revision(dist)) and built_from(c, commit)))
    if runs:
        bugs = [r for r in runs if r.outcome == BUG]
        at, sentinel = (_At.BUG, "BUG_REPRODUCED") if bugs else (_At.ABOVE, "FIX_VALIDATED")
        phrase = runs_phrase(bugs or runs, dist)
        why = f"{sentinel} without the shim on the lane's own commit: {phrase}"
        return _Position(dist, floor, at, locked, why, revision=revision)
    found = _ancestry(ev, revision.repository, commit, used)
    if not isinstance(found, Ancestry):
        reason = found.reason if isinstance(found, ProbeFailure) else "not looked up"
        why = f"{locked} is not placed among releases ({reason}) and has no run"
        action = f"{_run_the_lane(lane)}, or sync the mirror of {revision.repository}"
        return _Position(
            dist, floor, _At.UNKNOWN, locked, why, action, revision, (RunLane(lane.name),)
        )
    reaches = found.reaches(floor)
    newest = f"newest release it contains: {found.contains[0]}" if found.contains else "none"
    if reaches is True:
        contains = found.contains[0] if found.contains else "?"
        why = f"{locked} contains release {contains} (≥ {floor})"
        return _Position(dist, floor, _At.ABOVE, locked, why, revision=revision)
    if reaches is False:
        within = found.within[0] if found.within else "?"
        why = f"{locked} is part of release {within}, below {floor}"
        return _Position(dist, floor, _At.BELOW, locked, why, revision=revision)
    why = (
        f"{locked} contains no release ≥ {floor} ({newest}) and no release ≤ {floor} contains "
        f"it (it left the release line); no run without the shim on it"
    )
    return _Position(
        dist, floor, _At.UNKNOWN, locked, why, _run_the_lane(lane), revision, (RunLane(lane.name),)
    )


def _positions(lane: Lane, ruling: ShimRuling, ev: ShimEvidence, used: Used) -> list[_Position]:
    revisions = {r.distribution: r for r in lane.revisions}
    return [
        _revision_position(lane, revisions[dist], floor, ruling, ev, used)
        if dist in revisions
        else _release_position(lane, dist, floor, ruling, ev)
        for dist, floor in sorted(ruling.floors.items())
    ]


def window_place(lane: Lane, dist: str, ev: ShimEvidence, used: Used) -> Placement:
    """Where ``lane``'s ``dist`` stands against the shim's window (:mod:`retire.history.place`):
    its locked commit by ancestry — against the commits the window pins, then among the
    mirror's release tags — else its locked (or exactly pinned) release."""
    revision = next((r for r in lane.revisions if r.distribution == dist), None)
    if revision is not None:
        commit = ev.commits.get(lane.name, {}).get(dist)
        if not commit or ev.window is None:
            return place(ev.window, Target(lane.name, dist, None, commit))
        found = _ancestry(ev, revision.repository, commit, used)
        target = Target(
            lane.name,
            dist,
            None,
            commit,
            found if isinstance(found, Ancestry) else None,
            ev.contains.get(commit, ()),
            "" if isinstance(found, Ancestry) else f"{commit[:10]} is not placed among releases",
        )
        return place(ev.window, target)
    packages = ev.locks.get(lane.name)
    text = packages.get(dist) if packages is not None else _exact_pin(_requirement(lane, dist))
    return place(ev.window, Target(lane.name, dist, text))


# ---------------------------------------------------------------------------------------------
# One lane's step


def _verdict(lane: Lane, step: LaneStep, why: str, locked: str | None, **more: Any) -> LaneVerdict:
    return LaneVerdict(lane.name, step, why, lane.policy, lane.file, locked, **more)


def _until(lane: Lane, below: Sequence[_Position]) -> str:
    parts = []
    for position in below:
        requirement = _requirement(lane, position.dist)
        if position.revision is not None:
            parts.append(
                f"the lane's {position.dist} revision ({position.revision.rev}) contains a "
                f"release ≥ {position.floor}"
            )
        elif requirement is not None and str(requirement.specifier):
            parts.append(f"the lane's {requirement} reaches {position.floor}")
        else:
            parts.append(f"the lane's {position.locked} reaches {position.floor}")
    return "until " + " and ".join(parts)


def _raise_revision(lane: Lane, position: _Position, ev: ShimEvidence, used: Used) -> LaneVerdict:
    revision = position.revision
    assert revision is not None
    locked, floor = position.locked, position.floor
    head = _ancestry(ev, revision.repository, revision.rev, used)
    if isinstance(head, Ancestry) and head.branch is None:
        blocker = f"the lane pins {revision.distribution} to {revision.rev!r}, not a branch"
        why = f"{position.why}; {blocker}"
        return _verdict(lane, LaneStep.BLOCKED, why, locked, blocker=blocker)
    if not isinstance(head, Ancestry):
        reason = head.reason if isinstance(head, ProbeFailure) else "not looked up"
        why = f"{position.why}; the newest commit of {revision.rev} is not placed ({reason})"
        action = f"sync the mirror of {revision.repository} (`patchlane mirrors sync`)"
        return _verdict(lane, LaneStep.UNKNOWN, why, locked, action=action)
    if head.reaches(floor) is True:
        contains = head.contains[0] if head.contains else "?"
        why = (
            f"{position.why}; move it to {revision.rev}'s newest commit {head.commit[:10]}, which "
            f"contains {contains} (`patchlane lock --upgrade-package {revision.distribution} "
            f"{lane.name}`)"
        )
        return _verdict(lane, LaneStep.RAISE, why, locked)
    newest = f"newest release it contains: {head.contains[0]}" if head.contains else "no release"
    blocker = (
        f"{revision.rev}'s newest commit {head.commit[:10]} contains no release ≥ {floor} "
        f"({newest})"
    )
    return _verdict(lane, LaneStep.BLOCKED, f"{position.why}; {blocker}", locked, blocker=blocker)


def _raise_release(
    lane: Lane, below: Sequence[_Position], locked: str | None, ev: ShimEvidence
) -> LaneVerdict:
    floors = tuple(Floor(p.dist, p.floor) for p in below)
    named = ", ".join(map(str, floors))
    what = "; ".join(p.why for p in below)
    trial = ev.trials.get(trial_key(lane.name, floors))
    if trial is None:
        why = f"{what}: raise to {named} (not re-locked)"
        return _verdict(lane, LaneStep.RAISE, why, locked, floors=floors)
    if trial.resolved:
        got = ", ".join(f"{name} {version}" for name, version in sorted(trial.versions.items()))
        why = f"{what}: raise to {named}; the trial re-lock resolved" + (f" ({got})" if got else "")
        return _verdict(lane, LaneStep.RAISE, why, locked, floors=floors)
    if trial.blocker:
        why = f"{what}: raising to {named} does not resolve: {trial.blocker}"
        return _verdict(lane, LaneStep.BLOCKED, why, locked, floors=floors, blocker=trial.blocker)
    reason = trial.failure or "the resolver gave no answer"
    why = f"{what}: the trial re-lock with {named} could not run: {reason}"
    action = f"re-run `patchlane verdicts` where the lane's indexes answer ({reason})"
    return _verdict(lane, LaneStep.UNKNOWN, why, locked, floors=floors, action=action)


def _lane_step(lane: Lane, ruling: ShimRuling, ev: ShimEvidence, used: Used) -> LaneVerdict:
    """The lane's step by the evidence, then by execution: a revision lane past a fix on its
    branch drops the shim; a lane before the window is not-needed (unless the evidence already
    lets the shim leave it: a raise past the fix keeps it out); a release lane hears of a fix on
    the branch."""
    verdict = _evidence_step(lane, ruling, ev, used)
    past = _past_branch_fix(lane, ruling, ev)
    if past is not None and not verdict.leaves:
        return past
    placed = window_place(lane, ruling.dist, ev, used)
    if placed.place != Place.BEFORE or verdict.leaves:
        fix = ruling.branch_fix
        if fix is not None and not verdict.leaves and not _revision_of(lane, ruling.dist, fix):
            # a release lane learns of the fix on the branch (and of its first release)
            verdict = replace(verdict, why=f"{verdict.why}; {fix.describe()}")
        return replace(verdict, window=placed.place)
    why = (
        f"not needed here now: {placed.says}; the shim stays listed while the lane may move into "
        "the window"
    )
    return _verdict(
        lane, LaneStep.NOT_NEEDED, why, verdict.locked or placed.locked, window=Place.BEFORE
    )


def _revision_of(lane: Lane, dist: str, fix: BranchFix) -> Revision | None:
    """The lane's revision of ``dist`` from the fix's repository, if it takes it from there."""
    return next(
        (r for r in lane.revisions if r.distribution == dist and r.repository == fix.repository),
        None,
    )


def _past_branch_fix(lane: Lane, ruling: ShimRuling, ev: ShimEvidence) -> LaneVerdict | None:
    """A revision lane whose locked commit contains the fix on its branch (by ancestry) drops the
    shim there — a fix in no release included — unless a run without the shim on that very
    commit reproduced the bug."""
    fix, dist = ruling.branch_fix, ruling.dist
    if fix is None or fix.commit is None or _revision_of(lane, dist, fix) is None:
        return None
    commit = ev.commits.get(lane.name, {}).get(dist)
    if not commit or dict(ev.contains.get(commit, ())).get(fix.commit.sha) is not True:
        return None
    runs = _runs_on(ruling.runs, lambda r: bool((c := r.revision(dist)) and built_from(c, commit)))
    if any(r.outcome == BUG for r in runs):
        return None
    locked = f"{dist} @ {commit[:10]}"
    why = (
        f"{locked} is at or past the fix: {fix.describe()} — proven clean there by a run "
        "without the shim; the lane can drop it"
    )
    return _verdict(lane, LaneStep.DROP, why, locked, window=Place.AFTER)


def _evidence_step(lane: Lane, ruling: ShimRuling, ev: ShimEvidence, used: Used) -> LaneVerdict:
    if ruling.decision == Decision.UNKNOWN:
        action = ruling.action or "decide the shim first (see its why)"
        why = f"the shim is unknown: {ruling.why}"
        return _verdict(lane, LaneStep.UNKNOWN, why, None, action=action)
    if ruling.decision != Decision.RETIRE:
        return _verdict(lane, LaneStep.KEEP, ruling.why, None)
    positions = _positions(lane, ruling, ev, used)
    locked = ", ".join(p.locked for p in positions if p.locked) or None
    by = {at: [p for p in positions if p.at == at] for at in _At}
    if any(p.at == _At.ABSENT and p.dist == ruling.dist for p in positions) or (
        positions and len(by[_At.ABSENT]) == len(positions)
    ):
        return _verdict(lane, LaneStep.DROP, f"the lane installs no {ruling.dist}", locked)
    if by[_At.BUG]:
        return _verdict(lane, LaneStep.KEEP, by[_At.BUG][0].why, locked)
    if by[_At.UNKNOWN]:
        first = by[_At.UNKNOWN][0]
        return _verdict(
            lane, LaneStep.UNKNOWN, first.why, locked, action=first.action, next=first.next
        )
    below = by[_At.BELOW]
    if not below:
        why = "; ".join(p.why for p in positions) or "no floor to reach"
        return _verdict(lane, LaneStep.DROP, why, locked)
    if lane.policy == LanePolicy.HOLD:
        why = f"{'; '.join(p.why for p in below)}, and the lane holds its pins"
        return _verdict(lane, LaneStep.HOLD, why, locked, until=_until(lane, below))
    revision = next((p for p in below if p.revision is not None), None)
    if revision is not None:
        return _raise_revision(lane, revision, ev, used)
    return _raise_release(lane, below, locked, ev)


def _couple(verdicts: list[LaneVerdict]) -> list[LaneVerdict]:
    """Cells of one lane file (a matrix) share one shim list: the shim leaves all or none."""
    by_file: dict[str, list[LaneVerdict]] = {}
    for verdict in verdicts:
        if verdict.file:
            by_file.setdefault(verdict.file, []).append(verdict)
    coupled = []
    for verdict in verdicts:
        cells = by_file.get(verdict.file, [])
        staying = [c for c in cells if not c.leaves]
        if verdict.leaves and len(cells) > 1 and staying:
            why = f"{verdict.file}'s cells share one shim list; " + ", ".join(
                f"{c.lane} {c.step}" for c in staying
            )
            verdict = replace(verdict, step=LaneStep.KEEP, why=why, floors=())
        coupled.append(verdict)
    return coupled


def lane_steps(
    ruling: ShimRuling, lanes: Sequence[Lane], ev: ShimEvidence, used: Used
) -> tuple[LaneVerdict, ...]:
    """A :class:`LaneVerdict` for each lane of ``lanes`` that carries the shim, in their order;
    ``used`` collects the evidence the lanes rested on."""
    carrying = [lane for lane in lanes if ruling.shim in lane.shims]
    return tuple(_couple([_lane_step(lane, ruling, ev, used) for lane in carrying]))


# ---------------------------------------------------------------------------------------------
# The shim's decision, from its lanes


def _staying(verdict: LaneVerdict) -> str:
    if verdict.step == LaneStep.HOLD:
        return f"{verdict.lane} holds ({verdict.until})"
    if verdict.step == LaneStep.BLOCKED:
        return f"{verdict.lane} is blocked ({verdict.blocker})"
    if verdict.step == LaneStep.KEEP:
        return f"{verdict.lane} keeps it ({verdict.why})"
    if verdict.step == LaneStep.NOT_NEEDED:
        return f"{verdict.lane} is before the bug's window (not needed there now)"
    return f"{verdict.lane} is undecided ({verdict.why})"


def derive(ruling: ShimRuling, lanes: Sequence[LaneVerdict]) -> tuple[Decision, str, str | None]:
    """(decision, why, action) of the shim from its lanes: a retire by evidence becomes retire
    (every lane lets it go), retire-in-some (some do) or — when none can — keep, or unknown when
    a lane's step is unknown; every other decision stands as the evidence made it, unless a lane
    lets the shim go past a fix on its branch (then retire-in-some, or retire when all do)."""
    going = [v.lane for v in lanes if v.leaves]
    if not lanes or (ruling.decision != Decision.RETIRE and not going):
        return ruling.decision, ruling.why, ruling.action
    # lanes the evidence keeps can still go past a fix on their branch (proven there)
    fix = ruling.branch_fix
    head = (
        ruling.why
        if ruling.decision == Decision.RETIRE or fix is None
        else f"{ruling.why} — but {fix.describe()}"
    )
    staying = [v for v in lanes if not v.leaves]
    if not staying:
        return Decision.RETIRE, head, ruling.action
    unknown = next((v.action for v in staying if v.step == LaneStep.UNKNOWN), None)
    stays = "; ".join(_staying(v) for v in staying)
    if going:
        why = f"{head} — can go in {', '.join(going)}; stays where {stays}"
        return Decision.RETIRE_IN_SOME, why, unknown
    why = f"upstream fixed it ({ruling.why}) but no lane can let it go: {stays}"
    return (Decision.UNKNOWN, why, unknown) if unknown else (Decision.KEEP, why, None)
