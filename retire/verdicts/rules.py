"""The verdict for one shim: a decision from the evidence, plus flags for a person (pure, no I/O).

Evidence decides in this order: execution (reproducer runs) over release and tag evidence over
issue and pull-request states. ``docs/verdicts.md`` has the rules as a table; in short:

1. **keep** when, without the shim, the bug reproduces on the newest version any run covers
   (at least the newest version a lane locks); 1b. or, where no run reaches that release, on the
   newest commit of a branch a local mirror follows (a lane built from an upstream revision).
   Nothing a probe says can change that.
2. **retire** when the retirement conditions hold (``mode`` all / any, three-valued) **and** a
   run without the shim printed FIX_VALIDATED (or MEMORY_SAVE_VERIFIED) on a release inside every
   proposed floor, with no run there reproducing the bug.
3. conditions hold and 3a. a run inside the floors reproduces the bug → **keep**; 3b. no such
   run → **unknown**, the action names the run that would decide it.
4. conditions fail → **keep**.
5. conditions undecided → **unknown**: a failed probe counts only here, where a condition the
   decision rests on needed its answer; the action names the look-up that would decide it.

Everything else is a flag: drift, stale, not filed, no link, failures of look-ups the decision
did not need, a retirement candidate waiting for its run, execution and metadata that disagree.

Each numbered rule is one function (``_rule_1`` … ``_rule_5``); :func:`decide` reads the
evidence once into :class:`_Facts` and takes the first rule that gives a :class:`_Ruling`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.floor import Floor, floor_map
from retire.evidence.validation import RunOutcome
from retire.evidence.values import (
    ExecutionHistory,
    IssueState,
    ProbeFailure,
    PullState,
    ReleaseList,
)
from retire.lanes.model import Lane
from retire.verdicts import execution
from retire.verdicts.actions import Bisect, LinkUpstream, LockLanes, NextAction, RunLane
from retire.verdicts.conditions import FAILS, HOLDS, UNDECIDED, combine, evaluate
from retire.verdicts.execution import Found, Order, version_of
from retire.verdicts.floorgap import floor_gap
from retire.verdicts.lanes import ShimRuling, derive, lane_steps
from retire.verdicts.model import (
    ConditionResult,
    ConditionState,
    Decision,
    ExecutionState,
    Flag,
    FlagKind,
    LaneVerdict,
    ShimEvidence,
    Verdict,
)
from retire.verdicts.used import Used
from shims.model import ConditionKind, ShimManifest

__all__ = ["DEFAULT_STALE_DAYS", "decide"]

DEFAULT_STALE_DAYS = 180


def _newest_locked(dist: str, locks: Mapping[str, Mapping[str, str] | None]) -> Version | None:
    versions: list[Version] = []
    for packages in locks.values():
        text = (packages or {}).get(dist)
        if not text:
            continue
        try:
            versions.append(Version(text))
        except InvalidVersion:
            continue
    return max(versions, default=None)


def _highest_floors(results: Iterable[ConditionResult]) -> Mapping[str, Version]:
    return floor_map(r.floor for r in results if r.state == HOLDS and r.floor is not None)


@dataclass(frozen=True)
class _RunAction:
    """The run that would decide, as one line, and the commands it names as data."""

    text: str
    next: tuple[NextAction, ...]


def _run_action(
    manifest: ShimManifest, floors: Mapping[str, Version], lanes: Sequence[Lane] = ()
) -> _RunAction:
    """The run that would decide: where (the host it needs), on what (the floors), how (a lane)."""
    needs = manifest.reproducer.gpu_needs
    # "a host with 2 GPUs (compute capability ≥ 9.0)": what the reproducer declared, kind included
    where = f"a host with {needs}" if needs.count else "any host"
    wanted = ", ".join(str(Floor(d, v)) for d, v in sorted(floors.items()))
    carrying = [lane for lane in lanes if manifest.id in lane.shims]
    # the lane that gives the reproducer the GPUs it declared (gpu-pair, not cpu), else the first
    fitting = [lane for lane in carrying if _gives(lane, needs.count)] or carrying
    actions: list[NextAction] = [RunLane(fitting[0].name)] if fitting else []
    how = f"`{actions[0]}`" if actions else "a lane that lists it"
    if floors:
        actions.append(Bisect(manifest.id))
        how += f" with {wanted} in its lock, or `{actions[-1]}`"
    text = (
        f"run the reproducer without the shim on {wanted or 'the newest locked release'} on "
        f"{where} "
        f"({how}) and merge its records (`patchlane validation merge`)"
    )
    return _RunAction(text, tuple(actions))


def _gives(lane: Lane, count: int) -> bool:
    """Whether ``lane`` is given at least ``count`` GPUs: its own ``gpus``, or, for a needs-cuda
    lane without, as many as its most demanding reproducer declares (docs/commands.md, GPUs)."""
    if not count:
        return True
    if lane.gpus is None:
        return lane.needs_cuda
    return lane.gpus.count >= count


def _drift(dist: str, listing: Sequence[str], ev: ShimEvidence) -> list[Flag]:
    if not listing:
        return [
            Flag(
                FlagKind.DRIFT,
                "no lane lists this shim: it is dead code — add it to a lane or delete it",
            )
        ]
    locks = {name: ev.locks.get(name) for name in listing}
    unlocked = [name for name, packages in locks.items() if packages is None]
    holding = [
        name for name, packages in locks.items() if packages is not None and dist in packages
    ]
    if not holding and not unlocked:
        return [
            Flag(
                FlagKind.DRIFT,
                f"{dist} is in no lock of the lanes that list this shim ({', '.join(listing)})",
            )
        ]
    if unlocked:
        lock = LockLanes(tuple(unlocked))
        return [
            Flag(FlagKind.PROBE_FAILED, f"no lock for {', '.join(unlocked)}: run `{lock}`", lock)
        ]
    return []


def _upstream_flags(
    manifest: ShimManifest,
    link_states: Sequence[object],
    decision: Decision,
    now: _dt.datetime,
    stale_after_days: int,
) -> list[Flag]:
    status, links = manifest.upstream.status, manifest.upstream.links
    if status == "not-applicable":
        return []
    flags: list[Flag] = []
    if not links:
        link = LinkUpstream(manifest.id)
        flags.append(Flag(FlagKind.NO_LINK, f"no upstream link (status {status}): {link}", link))
    elif status == "pending" and not any(link.role in ("report", "fix") for link in links):
        flags.append(
            Flag(
                FlagKind.NOT_FILED,
                "status pending and only related links: nothing is filed upstream yet",
            )
        )
    if decision == Decision.KEEP:
        moments = [
            m
            for s in link_states
            if isinstance(s, (PullState, IssueState)) and (m := s.updated_at or s.closed_at)
        ]
        if moments:
            last = max(moments)
            idle = (now - last).days
            if idle > stale_after_days:
                flags.append(
                    Flag(FlagKind.STALE, f"no upstream movement since {last.date()} ({idle} days)")
                )
    return flags


# ---------------------------------------------------------------------------------------------
# What every rule reads, and what a rule gives


@dataclass(frozen=True)
class _Facts:
    """The evidence of one shim, read once: the conditions' results and what the runs say."""

    manifest: ShimManifest
    lanes: Sequence[Lane]
    # canonical name of the shim's target distribution
    dist: str
    results: tuple[ConditionResult, ...]
    combined: ConditionState
    history: ExecutionHistory | ProbeFailure | None
    # the history's runs (none when it is missing or unreadable)
    runs: ExecutionHistory
    # on the newest version any run or lock covers
    newest: Found
    evidence: ShimEvidence
    # the proposed floors, highest per distribution; empty unless the conditions hold
    floors: Mapping[str, Version]
    # commits runs were built from → their place among releases by ancestry
    order: Order

    def _whys(self, state: ConditionState) -> str:
        return "; ".join(f"{r.kind}: {r.why}" for r in self.results if r.state == state)

    @property
    def held(self) -> str:
        return self._whys(HOLDS)

    @property
    def failing(self) -> str:
        return self._whys(FAILS)

    @property
    def undecided(self) -> list[ConditionResult]:
        return [r for r in self.results if r.state == UNDECIDED]

    @cached_property
    def at_tip(self) -> Found:
        """On the newest commit of a branch a mirror follows (runs on upstream revisions)."""
        return execution.at_branch_tip(self.runs, self.dist, self.evidence.tips)

    @cached_property
    def checked(self) -> str:
        """The distribution whose runs a retirement checks: the target's, when it has a floor."""
        return self.dist if self.dist in self.floors else next(iter(self.floors), self.dist)

    @cached_property
    def inside_floors(self) -> Found:
        """The runs on releases inside every proposed floor; with no floor proposed, what the bug's
        window proves (the first clean release after the last broken one)."""
        if not self.floors:
            return execution.from_window(self.evidence.window, self.runs, self.dist)
        return execution.first_clean(
            self.runs, self.checked, self.floors, self.order if self.checked == self.dist else None
        )

    def run_action(self, floors: Mapping[str, Version]) -> _RunAction:
        return _run_action(self.manifest, floors, self.lanes)


@dataclass(frozen=True)
class _Ruling:
    """What the first rule that matched decided."""

    decision: Decision
    why: str
    action: str | None = None
    flags: tuple[Flag, ...] = ()
    # proposed requirement floors, when retiring
    floors: tuple[Floor, ...] = ()
    # the commands ``action`` names, as data
    next: tuple[NextAction, ...] = ()


_SCOPE_RELEASE = "the newest release any run or lock covers"
_SCOPE_BRANCH = "the newest revision the mirror knows"


def _keep_for_bug(facts: _Facts, found: Found, scope: str) -> _Ruling:
    """Rules 1 and 1b: the bug reproduces where it matters; the conditions only add flags."""
    why = f"{found.why} — {scope}"
    if facts.combined != HOLDS:
        return _Ruling(Decision.KEEP, why)
    ahead = {
        d: v
        for d, v in facts.floors.items()
        if found.version is None or d != facts.dist or v > found.version
    }
    if ahead:
        candidate = Flag(FlagKind.CANDIDATE, f"upstream looks fixed ({facts.held})")
        run = facts.run_action(ahead)
        return _Ruling(Decision.KEEP, why, run.text, (candidate,), next=run.next)
    conflict = Flag(
        FlagKind.CONFLICT,
        f"the conditions say fixed ({facts.held}) but the bug reproduces there: "
        "the fix did not work, or a condition is wrong",
    )
    return _Ruling(Decision.KEEP, why, flags=(conflict,))


# ---------------------------------------------------------------------------------------------
# The rules of docs/verdicts.md, one function each, tried in order


def _rule_1(facts: _Facts) -> _Ruling | None:
    """Keep: the bug reproduces on the newest version any run covers (≥ the newest locked)."""
    if facts.newest.state != ExecutionState.BUG:
        return None
    return _keep_for_bug(facts, facts.newest, _SCOPE_RELEASE)


def _rule_1b(facts: _Facts) -> _Ruling | None:
    """Keep: no run reaches that release, but the bug reproduces on a followed branch's tip."""
    if facts.newest.state != ExecutionState.NONE or facts.at_tip.state != ExecutionState.BUG:
        return None
    return _keep_for_bug(facts, facts.at_tip, _SCOPE_BRANCH)


def _conditions_hold_with_runs(facts: _Facts) -> bool:
    return facts.combined == HOLDS and not isinstance(facts.history, ProbeFailure)


def _rule_2(facts: _Facts) -> _Ruling | None:
    """Retire: the conditions hold and a run inside every floor is clean."""
    if not _conditions_hold_with_runs(facts):
        return None
    found = facts.inside_floors
    if found.state != ExecutionState.CLEAN:
        return None
    floors = dict(facts.floors)
    if not floors and found.floor is not None:
        floors[facts.checked] = found.floor
    proposal = tuple(Floor(d, v) for d, v in sorted(floors.items()))
    # a held reproducer-clean condition already names the clean run: say it once
    why = facts.held if found.why in facts.held else f"{facts.held}; confirmed: {found.why}"
    return _Ruling(Decision.RETIRE, why, floors=proposal)


def _rule_3a(facts: _Facts) -> _Ruling | None:
    """Keep: the conditions hold but a run inside the floors reproduces the bug."""
    if not _conditions_hold_with_runs(facts):
        return None
    found = facts.inside_floors
    if found.state != ExecutionState.BUG:
        return None
    conflict = Flag(
        FlagKind.CONFLICT,
        "the conditions say fixed but a run inside the new floor reproduces the bug",
    )
    return _Ruling(
        Decision.KEEP, f"upstream looks fixed ({facts.held}) but {found.why}", flags=(conflict,)
    )


def _rule_3b(facts: _Facts) -> _Ruling | None:
    """Unknown: the conditions hold and no conclusive run inside the floors (or no readable
    records); the action names the run that would decide."""
    if facts.combined != HOLDS:
        return None
    if isinstance(facts.history, ProbeFailure):
        reason = facts.history.reason
        return _Ruling(
            Decision.UNKNOWN,
            f"conditions hold ({facts.held}) but {reason}",
            f"repair the validation manifest: {reason}",
        )
    candidate = Flag(FlagKind.CANDIDATE, "upstream looks fixed; one run without the shim decides")
    run = facts.run_action(facts.floors)
    return _Ruling(
        Decision.UNKNOWN,
        f"conditions hold ({facts.held}) but nothing confirms it: {facts.inside_floors.why}",
        run.text,
        (candidate,),
        next=run.next,
    )


def _rule_4(facts: _Facts) -> _Ruling | None:
    """Keep: the conditions fail (a conflict when the newest run is clean)."""
    if facts.combined != FAILS:
        return None
    if facts.newest.state != ExecutionState.CLEAN:
        return _Ruling(Decision.KEEP, facts.failing)
    conflict = Flag(
        FlagKind.CONFLICT,
        f"{facts.newest.why} but {facts.failing}: check the retirement conditions",
    )
    return _Ruling(Decision.KEEP, facts.failing, flags=(conflict,))


def _rule_5(facts: _Facts) -> _Ruling:
    """Unknown: the conditions are undecided; the action is the look-up that would decide."""
    undecided = facts.undecided
    why = "; ".join(f"{r.kind}: {r.why}" for r in undecided)
    # The strongest evidence first: a missing run is decided by running it.
    if any(r.kind is ConditionKind.REPRODUCER_CLEAN for r in undecided) and not isinstance(
        facts.history, ProbeFailure
    ):
        run = facts.run_action({})
        return _Ruling(Decision.UNKNOWN, why, run.text, next=run.next)
    return _Ruling(Decision.UNKNOWN, why, next((r.action for r in undecided if r.action), None))


_RULES: tuple[Callable[[_Facts], _Ruling | None], ...] = (
    _rule_1,
    _rule_1b,
    _rule_2,
    _rule_3a,
    _rule_3b,
    _rule_4,
)


# ---------------------------------------------------------------------------------------------
# The verdict


def _facts(
    manifest: ShimManifest,
    lanes: Sequence[Lane],
    evidence: ShimEvidence,
    listing: Sequence[str],
    used: Used,
) -> _Facts:
    """Read the evidence once; ``used`` collects what it rests on, in the order read."""
    dist = canonicalize_name(manifest.target.distribution)
    results = tuple(
        evaluate(condition, dist, evidence, used) for condition in manifest.retirement.conditions
    )
    combined = combine(manifest.retirement.mode, [r.state for r in results])
    history = evidence.execution
    used.add(history)
    runs = history if isinstance(history, ExecutionHistory) else ExecutionHistory(manifest.id, ())
    locked = _newest_locked(dist, {name: evidence.locks.get(name) for name in listing})
    # the tips of this shim's own recorded commits: the gather asks about every shim's at once,
    # and a commit one shim's records name says nothing of another's
    built = {commit for run in runs.runs if (commit := run.revision(dist))}
    for (_, commit), tip in evidence.tips.items():
        if commit in built:
            used.add(tip)
    order = execution.ordering(runs, dist, evidence.ancestry)
    for key, placed in evidence.ancestry.items():
        if key[1] in order:
            used.add(placed)
    return _Facts(
        manifest,
        lanes,
        dist,
        results,
        combined,
        history,
        runs,
        execution.newest(runs, dist, locked, order),
        evidence,
        _highest_floors(results) if combined == HOLDS else {},
        order,
    )


def _rule(facts: _Facts) -> _Ruling:
    """The first rule that matches decides."""
    for rule in _RULES:
        ruling = rule(facts)
        if ruling is not None:
            return ruling
    return _rule_5(facts)


def _conflicts(facts: _Facts, ruling: _Ruling) -> list[Flag]:
    """A holding condition puts the fix in release R while a run without the shim reproduced the
    bug on a release at or above R: both sides named; the floor comes from execution."""
    if any(f.kind == FlagKind.CONFLICT for f in ruling.flags):
        return []
    bugs = [r for r in facts.runs.runs if r.outcome == RunOutcome.BUG_REPRODUCED]
    ending = (
        f"the floor comes from execution: {', '.join(map(str, ruling.floors))}"
        if ruling.floors
        else "the floor comes from execution, and no run without the shim is clean above it yet"
    )
    flags = []
    for result in facts.results:
        if (
            result.state != HOLDS
            or result.floor is None
            or result.kind is ConditionKind.REPRODUCER_CLEAN
        ):
            continue
        dist, floor = result.floor.distribution, result.floor.version
        order = facts.order if dist == facts.dist else None
        above = [
            (v, r) for r in bugs if (v := version_of(r, dist, order)) is not None and v >= floor
        ]
        if not above:
            continue
        _, run = max(above, key=lambda pair: pair[0])
        flags.append(
            Flag(
                FlagKind.CONFLICT,
                f"{result.kind}: {result.why} — but BUG_REPRODUCED without the shim on {dist} "
                f"{run.version(dist)} ({run.where}); {ending}",
            )
        )
    return flags


def _disagreements(evidence: ShimEvidence, flags: Sequence[Flag]) -> list[Flag]:
    """The runs without the shim disagree (one release both broken and clean, a clean release
    between broken ones): a conflict for a person, whatever the decision (the bug won)."""
    window = evidence.window
    if window is None:
        return []
    said = " ".join(f.text for f in flags if f.kind == FlagKind.CONFLICT)
    return [
        Flag(FlagKind.CONFLICT, f"the runs without the shim disagree: {d.text}")
        for d in window.disagreements
        if d.text not in said
    ]


def _newer_releases(facts: _Facts, ruling: _Ruling, used: Used) -> list[Flag]:
    """Keep on the newest run, while the index lists releases newer than any run or lock covers:
    one bisection decides."""
    covered = facts.newest.version
    releases = facts.evidence.releases.get(facts.dist)
    if (
        ruling.decision != Decision.KEEP
        or facts.newest.state != ExecutionState.BUG
        or covered is None
        or any(f.kind == FlagKind.CANDIDATE for f in ruling.flags)
        or not isinstance(releases, ReleaseList)
    ):
        return []
    newer = [r.version for r in releases.available() if not r.prerelease and r.version > covered]
    if not newer:
        return []
    used.add(releases)
    shown = ", ".join(str(v) for v in newer[:3]) + (", …" if len(newer) > 3 else "")
    bisect = Bisect(facts.manifest.id, since=covered)
    return [
        Flag(
            FlagKind.CANDIDATE,
            f"the index lists {len(newer)} release(s) of {facts.dist} newer than any run or lock "
            f"covers ({covered.public}): {shown} — one bisection decides: `{bisect}`",
            bisect,
        )
    ]


def _floor_gaps(facts: _Facts, ruling: _Ruling, used: Used) -> list[Flag]:
    """A floor the runs prove may not be minimal: the index lists releases nobody ran between the
    newest broken run below it and it. One bisection between the two closes the gap (a hold
    lane's "until" then names the first fixed release, proven)."""
    releases = facts.evidence.releases.get(facts.dist)
    if not isinstance(releases, ReleaseList) or not facts.runs.runs:
        return []
    available = [r.version for r in releases.available()]
    gap = floor_gap(facts.evidence.window, facts.dist, available)
    if gap is None:
        return []
    used.add(releases)
    bisect = Bisect(facts.manifest.id, since=gap.last_broken, until=gap.first_clean)
    return [
        Flag(FlagKind.CANDIDATE, f"{gap.describe()} — one bisection closes it: `{bisect}`", bisect)
    ]


def _failure_flags(decision: Decision, why: str, failures: Iterable[ProbeFailure]) -> list[Flag]:
    """Every failure met is shown: in ``why`` when the decision rests on it, else as a flag."""
    return [
        Flag(FlagKind.PROBE_FAILED, str(failure))
        for failure in failures
        if decision != Decision.UNKNOWN or failure.reason not in why
    ]


def decide(
    manifest: ShimManifest,
    lanes: Sequence[Lane],
    evidence: ShimEvidence,
    *,
    now: _dt.datetime,
    stale_after_days: int = DEFAULT_STALE_DAYS,
) -> Verdict:
    """The verdict for one shim; see the module docstring and ``docs/verdicts.md``: the evidence
    decides, then each lane that carries the shim gets its step and the decision derives from
    them (:mod:`retire.verdicts.lanes`)."""
    dist = canonicalize_name(manifest.target.distribution)
    listing = tuple(lane.name for lane in lanes if manifest.id in lane.shims)
    used = Used()
    flags = _drift(dist, listing, evidence)
    facts = _facts(manifest, lanes, evidence, listing, used)
    ruling = _rule(facts)
    shim = ShimRuling(
        manifest.id,
        dist,
        ruling.decision,
        ruling.why,
        ruling.action,
        floor_map(ruling.floors),
        facts.runs,
        evidence.window.branch_fix if evidence.window is not None else None,
    )
    lane_verdicts = lane_steps(shim, lanes, evidence, used)
    decision, why, action = derive(shim, lane_verdicts)
    link_states = [evidence.links[url] for url in manifest.upstream_urls if url in evidence.links]
    for state in link_states:
        used.add(state)
    flags += ruling.flags
    flags += _conflicts(facts, ruling)
    flags += _disagreements(evidence, flags)
    flags += _newer_releases(facts, ruling, used)
    flags += _floor_gaps(facts, ruling, used)
    flags += _failure_flags(decision, why, used.failures)
    flags += _upstream_flags(manifest, link_states, ruling.decision, now, stale_after_days)
    return Verdict(
        manifest.id,
        decision,
        why,
        action,
        tuple(flags),
        listing,
        facts.results,
        tuple(used.evidence),
        tuple(used.failures),
        ruling.floors,
        lane_verdicts,
        _next_actions(ruling, action, lane_verdicts),
        evidence.window,
    )


def _next_actions(
    ruling: _Ruling, action: str | None, lanes: Sequence[LaneVerdict]
) -> tuple[NextAction, ...]:
    """The commands the verdict's action names: the evidence's, or the unknown lane's whose
    action it took."""
    if action == ruling.action:
        return ruling.next
    return next((lane.next for lane in lanes if lane.action == action), ())
