"""What the verdict rules take and give: immutable values, no I/O.

A :class:`Verdict` is a **decision** (keep, retire, unknown) plus **flags** — things a person
should look at that do not change the decision (stale, not filed upstream, no upstream link,
drift, a failed look-up of an informational link, a retirement candidate waiting for a run).
``docs/verdicts.md`` has the rules as a table; :mod:`retire.verdicts.rules` implements them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from retire.evidence.floor import Floor
from retire.evidence.values import (
    Ancestry,
    BranchTip,
    ExecutionHistory,
    IssueState,
    MirrorPull,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
    to_json,
)
from retire.history.edge import Place
from retire.history.window import BranchFix, Window
from retire.lanes.model import LanePolicy
from retire.locks.trial import RaiseTrial
from retire.verdicts.actions import NextAction
from shims.model import ConditionKind

__all__ = [
    "ConditionResult",
    "ConditionState",
    "Decision",
    "ExecutionState",
    "Flag",
    "FlagKind",
    "LaneStep",
    "LaneVerdict",
    "ShimEvidence",
    "Verdict",
]


class Decision(enum.StrEnum):
    #: the shim is needed (the bug is still there, or upstream has not fixed it)
    KEEP = "keep"
    #: upstream fixed it, a run without the shim proved it inside the new floors, and every lane
    #: that carries the shim can let it go (drop it, or raise its pins)
    RETIRE = "retire"
    #: upstream fixed it and some lanes can let it go; the others hold, are blocked or need a run
    RETIRE_IN_SOME = "retire-in-some"
    #: the evidence the decision rests on is missing; ``action`` says how to get it
    UNKNOWN = "unknown"


class ConditionState(enum.StrEnum):
    HOLDS = "holds"
    FAILS = "fails"
    # the JSON keeps the word readers already know
    UNDECIDED = "unknown"


class ExecutionState(enum.StrEnum):
    """What the recorded runs without the shim say about the versions a reading looks at."""

    #: FIX_VALIDATED (or MEMORY_SAVE_VERIFIED) and no run that reproduced the bug
    CLEAN = "clean"
    #: BUG_REPRODUCED
    BUG = "bug"
    #: no conclusive run
    NONE = "none"


class FlagKind(enum.StrEnum):
    #: no upstream movement on any linked thread for a long time
    STALE = "stale"
    #: status pending and nothing filed upstream
    NOT_FILED = "not-filed"
    #: no upstream link although the shim is not a policy (status not-applicable)
    NO_LINK = "no-link"
    #: no lane lists the shim, or its target is in no lock of those that do
    DRIFT = "drift"
    #: a look-up the decision did not need failed (with its reason)
    PROBE_FAILED = "probe-failed"
    #: upstream looks fixed; one run on the new release would decide
    CANDIDATE = "candidate"
    #: execution and upstream metadata disagree; a person should look
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Flag:
    kind: FlagKind
    # one line
    text: str
    # the command the text names, as data: what the weekly run acts on (a candidate's bisection)
    action: NextAction | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FlagKind(self.kind))
        object.__setattr__(self, "text", " ".join(self.text.split()))

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"

    def to_json(self) -> dict[str, object]:
        return {"kind": str(self.kind), "text": self.text}


@dataclass(frozen=True)
class ConditionResult:
    # the retirement condition's kind (version-floor, pr-released, …)
    kind: ConditionKind
    state: ConditionState
    why: str
    # the first release the condition holds at, when it holds at a known release
    floor: Floor | None = None
    # what would decide it, when undecided
    action: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ConditionKind(self.kind))
        object.__setattr__(self, "state", ConditionState(self.state))


class LaneStep(enum.StrEnum):
    """What one lane does with one shim (docs/verdicts.md, "Per lane")."""

    #: the lane's locked target is at or above the proven floor (or it installs no target): the
    #: id goes, no pin moves
    DROP = "drop"
    #: a follow lane below the floor: its pins rise to the floor (or its revision moves past the
    #: fix), and a trial re-lock resolved
    RAISE = "raise"
    #: a hold lane below the floor: the shim stays while the lane's pins do
    HOLD = "hold"
    #: a follow lane whose raise does not resolve: the resolver's reason is the blocker
    BLOCKED = "blocked"
    #: the shim is needed in this lane
    KEEP = "keep"
    #: the lane's target is before the bug's window (the recorded runs prove it clean there): the
    #: shim is not needed there now, but stays listed while the lane may move into the window —
    #: not a retirement, and not a reason to delete the shim
    NOT_NEEDED = "not-needed"
    #: nothing decides this lane yet; ``action`` says what would
    UNKNOWN = "unknown"


#: The steps that let a shim leave a lane.
LEAVING = frozenset({LaneStep.DROP, LaneStep.RAISE})


@dataclass(frozen=True)
class LaneVerdict:
    """The verdict for one (shim, lane): its step, why, and what it waits for."""

    lane: str
    step: LaneStep
    # one line
    why: str
    policy: LanePolicy = LanePolicy.FOLLOW
    # the lane file, relative to the project
    file: str = ""
    # what the lane installs of the target: "liger-kernel 0.6.0", "megatron-core @ d98e8a64dd"
    locked: str | None = None
    # raise: what the lane's requirements become (tilelang>=0.1.15)
    floors: tuple[Floor, ...] = ()
    # blocked: the resolver's explanation, one line
    blocker: str | None = None
    # hold: what would let the shim go
    until: str | None = None
    # unknown: the one thing that would decide it
    action: str | None = None
    # the commands ``action`` names, as data (not in the JSON: a plan read back has none)
    next: tuple[NextAction, ...] = field(default=(), compare=False)
    # where the lane's target stands against the shim's window as the recorded runs show it
    # (execution evidence: it outranks releases and tags; unknown places nothing)
    window: Place = Place.UNKNOWN

    def __post_init__(self) -> None:
        object.__setattr__(self, "step", LaneStep(self.step))
        object.__setattr__(self, "policy", LanePolicy(self.policy))
        object.__setattr__(self, "window", Place(self.window))
        object.__setattr__(self, "why", " ".join(self.why.split()))

    @property
    def leaves(self) -> bool:
        """The shim can leave this lane on a branch (drop or raise)."""
        return self.step in LEAVING

    def to_json(self) -> dict[str, object]:
        return {
            "lane": self.lane,
            "step": str(self.step),
            "why": self.why,
            "policy": str(self.policy),
            "file": self.file,
            "locked": self.locked,
            "floors": [str(floor) for floor in self.floors],
            "blocker": self.blocker,
            "until": self.until,
            "action": self.action,
            "window": str(self.window),
        }


@dataclass(frozen=True)
class Verdict:
    shim: str
    decision: Decision
    # one line
    why: str
    # the single thing a person can do to decide an unknown (or confirm a candidate)
    action: str | None = None
    flags: tuple[Flag, ...] = ()
    lanes: tuple[str, ...] = ()
    conditions: tuple[ConditionResult, ...] = ()
    evidence: tuple[object, ...] = ()
    # every probe failure met, decisive or not
    failures: tuple[ProbeFailure, ...] = ()
    # proposed requirement floors when retiring
    floors: tuple[Floor, ...] = ()
    # one per lane that carries the shim, in the order of ``lanes``
    lane_verdicts: tuple[LaneVerdict, ...] = ()
    # the commands ``action`` names, as data (a lane to run, a bisection)
    next: tuple[NextAction, ...] = ()
    # the shim's window on its target's releases (and commits, where a mirror ordered them), as
    # every recorded run shows it (retire.history): the one value the report and branches read
    window: Window | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", Decision(self.decision))
        object.__setattr__(self, "why", " ".join(self.why.split()))
        if self.action is not None:
            object.__setattr__(self, "action", " ".join(self.action.split()))

    def flagged(self, kind: FlagKind) -> bool:
        return any(f.kind == kind for f in self.flags)

    def lanes_at(self, *steps: LaneStep) -> tuple[LaneVerdict, ...]:
        """The lane verdicts whose step is one of ``steps``."""
        return tuple(lane for lane in self.lane_verdicts if lane.step in steps)

    @property
    def leaving(self) -> tuple[LaneVerdict, ...]:
        """The lanes a retirement branch edits: those that drop the shim or raise their pins."""
        return tuple(lane for lane in self.lane_verdicts if lane.leaves)

    @property
    def branch_fix(self) -> BranchFix | None:
        """The fix on a followed branch, as the recorded commit runs pin it (the window's)."""
        return self.window.branch_fix if self.window is not None else None

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(str(f) for f in self.failures)

    def to_json(self) -> dict[str, object]:
        return {
            "shim": self.shim,
            "verdict": str(self.decision),
            "why": self.why,
            "action": self.action,
            "flags": [f.to_json() for f in self.flags],
            "lanes": list(self.lanes),
            "floors": [str(floor) for floor in self.floors],
            "lane_verdicts": [lane.to_json() for lane in self.lane_verdicts],
            "window": None if self.window is None else self.window.to_json(),
            "branch_fix": None if self.branch_fix is None else self.branch_fix.to_json(),
            "conditions": to_json(self.conditions),
            "failures": to_json(self.failures),
            "evidence": to_json(self.evidence),
        }


@dataclass(frozen=True)
class ShimEvidence:
    """Everything probed for one shim. A missing key means "not probed"."""

    #: lane name → {canonical package name: version} of its lock (None: the lane has no lock).
    locks: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)
    #: canonical distribution → releases on the indexes of the lanes that list the shim.
    releases: Mapping[str, ReleaseList | ProbeFailure] = field(default_factory=dict)
    #: web URL → issue / pull request state from the code host.
    links: Mapping[str, PullState | IssueState | ProbeFailure] = field(default_factory=dict)
    #: pull request web URL → what a local mirror says of it (absent: no mirror of that repository).
    mirror_pulls: Mapping[str, MirrorPull | ProbeFailure] = field(default_factory=dict)
    #: (repository URL, commit) → containment in the mirror's release tags.
    tags: Mapping[tuple[str, str], TagContainment | ProbeFailure] = field(default_factory=dict)
    #: (repository URL, commit a run was built from) → the followed branches it is the newest commit
    #: of.
    tips: Mapping[tuple[str, str], BranchTip | ProbeFailure] = field(default_factory=dict)
    execution: ExecutionHistory | ProbeFailure | None = None
    #: lane → {canonical name: commit} of what its lock takes from a git revision
    #: ([lane.revisions]: the lock's ``vcs.commit-id``).
    commits: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: (repository URL, commit or followed branch) → where it stands among the mirror's release
    #: tags: a revision lane's locked commit, the newest commit of the branch it follows, a
    #: commit a run was built from.
    ancestry: Mapping[tuple[str, str], Ancestry | ProbeFailure] = field(default_factory=dict)
    #: (lane, floors) → the trial re-lock of that lane with those floors raised (absent: not
    #: re-locked, e.g. ``verdicts --no-resolve``).
    trials: Mapping[tuple[str, tuple[Floor, ...]], RaiseTrial] = field(default_factory=dict)
    #: the shim's window from every recorded run without it, the commit runs ordered by the
    #: target's mirror and a fix on a branch a revision lane follows pinned where it has them
    #: (retire.history; absent: not read — every lane's place is then unknown).
    window: Window | None = None
    #: a revision lane's locked commit → (a commit the window pins, whether the locked commit
    #: contains it), by ancestry in the mirror (absent: not asked — not placed by them).
    contains: Mapping[str, tuple[tuple[str, bool], ...]] = field(default_factory=dict)
