"""The search, pure: which releases are candidates, and the binary search over their states.

A candidate is *broken* (its reproducer prints BUG_REPRODUCED without the shim), *fixed*
(FIX_VALIDATED or MEMORY_SAVE_VERIFIED), *not applicable* (the reproducer cannot run against
it: it skipped, the API it tests cannot be imported, no installable file for this interpreter)
or *unknown* (it crashed or timed out). The search asks a prober
(:class:`retire.bisect.prober.Prober`) for states and never does I/O itself
(:mod:`retire.bisect.runner` runs them).

The bug is assumed monotonic: broken up to some release, fixed from then on. What a floor
rests on is checked, never assumed: the newest applicable candidate must be fixed (else *no
transition*), and the search ends on a broken candidate next to a fixed one. The oldest end is
checked lazily, only when the answer comes to rest on it; when evidence recorded elsewhere says
the oldest candidate (or a release below it) is broken, that is the lower bound the search
starts from. So for ``n`` candidates the search asks at most ``ceil(log2 n) + 1`` conclusive
runs: the newest end, then a binary search over ``n`` possible boundaries.

With a prober of ``width`` above 1 (candidates that may run at once, ``patchlane bisect -j``)
each round of the search runs up to ``width`` untested candidates together, the points
that split the open interval into ``width + 1`` equal parts (above not-applicable walls first, as
one at a time), then narrows to the highest broken and the lowest fixed above it — a round that
is not monotone resolves toward the newest transition, as one run at a time would. That takes
about ``log(n) / log(width + 1)`` rounds instead of ``log2 n``. A round never starts more runs
than the budget has left (:meth:`retire.bisect.prober.Progress.room`) or the tolerances for
unknowns allow. Width 1 is the binary search above, run for run.

Not applicable candidates are stepped over: they count neither as broken nor as fixed, nor
against the tolerance for unknowns (they have their own, larger one). Old releases that lack
the tested API form a prefix, so after one, the search looks above it first.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from retire.bisect.prober import Prober, Progress

__all__ = [
    "BROKEN",
    "ENV_FAILED",
    "FIXED",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "CandidateRun",
    "Candidates",
    "Limits",
    "SearchOutcome",
    "State",
    "Status",
    "find_boundary",
    "normal",
    "public",
    "select_candidates",
    "split_points",
]


class State(enum.StrEnum):
    """What one candidate showed."""

    BROKEN = "broken"
    FIXED = "fixed"
    NOT_APPLICABLE = "not-applicable"
    UNKNOWN = "unknown"


BROKEN, FIXED, NOT_APPLICABLE, UNKNOWN = (
    State.BROKEN,
    State.FIXED,
    State.NOT_APPLICABLE,
    State.UNKNOWN,
)


#: A candidate's outcome when its overlay env could not be built: no reproducer ran.
ENV_FAILED = "env-failed"


class Status(enum.StrEnum):
    """How a search ended: ``found`` (last broken and first fixed are neighbours among the
    candidates the reproducer applies to), ``unpinned`` (unknown or untested candidates lie
    between them), ``no-transition`` (an end did not behave, or nothing could be told)."""

    FOUND = "found"
    UNPINNED = "unpinned"
    NO_TRANSITION = "no-transition"


@dataclass(frozen=True)
class Limits:
    """How many fresh runs of each inconclusive kind the search tolerates before it stops."""

    max_unknown: int = 4
    max_not_applicable: int = 12


@dataclass(frozen=True)
class Candidates:
    """The ordered releases a bisection searches, and what was left out and why."""

    # ascending, PEP 440 order
    versions: tuple[str, ...]
    yanked: tuple[str, ...] = ()
    # skipped pre-releases / dev releases (nightlies)
    prereleases: tuple[str, ...] = ()
    # outside the range (evidence, --since / --until)
    out_of_range: tuple[str, ...] = ()
    # not PEP 440 versions
    invalid: tuple[str, ...] = ()
    listed: int = 0


@dataclass(frozen=True)
class CandidateRun:
    """What one candidate release showed."""

    version: str
    state: State
    # the reproducer's outcome (a RunOutcome), or ENV_FAILED
    outcome: str
    detail: str = ""
    duration_s: float = 0.0
    cached: bool = False
    output_tail: str = ""

    def __post_init__(self) -> None:
        # ValueError for a state that is none
        object.__setattr__(self, "state", State(self.state))

    @property
    def conclusive(self) -> bool:
        return self.state in (BROKEN, FIXED)


def select_candidates(
    versions: Iterable[str],
    yanked: Iterable[str] = (),
    *,
    include_prereleases: bool = False,
    since: str | None = None,
    until: str | None = None,
) -> Candidates:
    """Order releases by PEP 440 and drop the yanked (and pre-releases unless asked); keep
    ``since <= release <= until`` (local version labels ignored)."""
    listed = list(dict.fromkeys(versions))
    yanked_set = {normal(v) for v in yanked}
    low = Version(public(since)) if since else None
    high = Version(public(until)) if until else None
    parsed, invalid = [], []
    for text in listed:
        try:
            parsed.append((Version(text), text))
        except InvalidVersion:
            invalid.append(text)
    parsed.sort()
    keep, dropped_yanked, dropped_pre, outside = [], [], [], []
    seen: set[Version] = set()
    for version, text in parsed:
        # "1.0" and "1.0.0" are one release
        if version in seen:
            continue
        seen.add(version)
        if str(version) in yanked_set:
            dropped_yanked.append(text)
        elif (version.is_prerelease or version.is_devrelease) and not include_prereleases:
            dropped_pre.append(text)
        elif (low and version < low) or (high and version > high):
            outside.append(text)
        else:
            keep.append(text)
    return Candidates(
        tuple(keep),
        tuple(dropped_yanked),
        tuple(dropped_pre),
        tuple(outside),
        tuple(invalid),
        len(listed),
    )


def normal(version: str) -> str:
    """PEP 440 normal form of ``version`` (as given when it is not a PEP 440 version)."""
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def public(version: str) -> str:
    """``version`` without its local label (``2.13.0+cpu`` → ``2.13.0``): the release it builds
    on."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version


# ---------------------------------------------------------------------------------------------
# The search


@dataclass(frozen=True)
class SearchOutcome:
    """Where the search ended. ``last_broken`` may be the evidence's release (``broken_here`` is
    then False: no run here showed it broken); ``runs`` are in the order they were consulted."""

    status: Status
    reason: str
    last_broken: str | None
    first_fixed: str | None
    # what lies between them: runs that could not tell, untested versions
    between: tuple[CandidateRun | str, ...]
    runs: tuple[CandidateRun, ...]
    broken_here: bool = True


@dataclass
class _Search:
    versions: Sequence[str]
    prober: Prober
    limits: Limits
    # hears every run consulted; its meter is the budget the caller keeps
    progress: Progress
    # answers at hand (the prober's cache), consulted for free
    known: Mapping[str, CandidateRun] = field(default_factory=dict)
    states: dict[int, CandidateRun] = field(default_factory=dict)
    order: list[CandidateRun] = field(default_factory=list)
    # why the budget refused a run the search wanted
    halted: str | None = None

    @classmethod
    def over(
        cls, versions: Sequence[str], prober: Prober, limits: Limits, progress: Progress | None
    ) -> _Search:
        """A search of ``versions`` through ``prober``, with what its cache knows of them."""
        known = {v: hit for v in versions if (hit := prober.cached(v)) is not None}
        return cls(versions, prober, limits, progress or Progress(), known)

    @property
    def width(self) -> int:
        """How many candidates one round may run at once."""
        return self.prober.width

    def ask(self, i: int) -> CandidateRun:
        run = self.known.get(self.versions[i]) or self.prober.run(self.versions[i])
        self._took(i, run)
        return run

    def _took(self, i: int, run: CandidateRun) -> None:
        self.states[i] = run
        self.order.append(run)
        self.progress.consulted(run)

    def ask_round(self, indices: Sequence[int]) -> list[CandidateRun]:
        """One round: the candidates at ``indices`` run at once (one alone is :meth:`ask`);
        their results taken in ascending order."""
        indices = sorted(indices)
        if len(indices) == 1:
            return [self.ask(indices[0])]
        got = {i: run for i in indices if (run := self.known.get(self.versions[i])) is not None}
        fresh = [i for i in indices if i not in got]
        items = [self.versions[i] for i in fresh]
        runs = self.prober.run_round(items) if items else []
        got.update(zip(fresh, runs, strict=True))
        for i in indices:
            self._took(i, got[i])
        return [got[i] for i in indices]

    def stop(self) -> str | None:
        """Why the next run may not start (remembered in ``halted``), or None: nothing can run
        on the prober any more, or the budget is spent."""
        if (spent := self.prober.blocked or self.progress.stop()) is not None:
            self.halted = spent
        return spent

    def round_size(self, unknown_left: int) -> int:
        """How many fresh runs the next round may start: ``width``, less than neither what the
        budget has left nor what the tolerances for unknowns (``unknown_left``) and not
        applicable candidates could still absorb; at least one (:meth:`exhausted` and ``stop``
        say when none may start)."""
        left = self.progress.room()
        na_left = self.limits.max_not_applicable - self.fresh(NOT_APPLICABLE)
        caps = [self.width, unknown_left, na_left, *([left] if left is not None else [])]
        return max(1, min(caps))

    def fresh(self, state: State) -> int:
        return sum(1 for r in self.order if r.state == state and not r.cached)

    def exhausted(self) -> str | None:
        """Why no further run may be asked, or None."""
        if (spent := self.stop()) is not None:
            return spent
        if self.fresh(UNKNOWN) >= self.limits.max_unknown:
            return f"{self.fresh(UNKNOWN)} candidate(s) could not be told ({self._listed(UNKNOWN)})"
        if self.fresh(NOT_APPLICABLE) >= self.limits.max_not_applicable:
            return (
                f"{self.fresh(NOT_APPLICABLE)} candidate(s) are not applicable here "
                f"({self._listed(NOT_APPLICABLE)})"
            )
        return None

    def _listed(self, state: State) -> str:
        return ", ".join(f"{r.version}: {r.outcome}" for r in self.order if r.state == state)

    def newest_end(self) -> int | None:
        """The newest candidate that tells broken from fixed, stepping down over the rest."""
        for i in range(len(self.versions) - 1, -1, -1):
            # an answer at hand costs no run
            if self.versions[i] not in self.known and self.exhausted():
                return None
            if self.ask(i).conclusive:
                return i
        return None

    def consult_known(self, lo: int, hi: int) -> tuple[int, int]:
        """Take what is already known between ``lo`` and ``hi`` (free: no run): the highest
        broken, then the lowest fixed above it."""
        free = [
            i for i in range(lo + 1, hi) if i not in self.states and self.versions[i] in self.known
        ]
        for i in free:
            self.ask(i)
        broken = [i for i in free if self.states[i].state == BROKEN]
        lo = max(broken, default=lo)
        fixed = [i for i in free if i > lo and self.states[i].state == FIXED]
        return lo, min(fixed, default=hi)

    def next_probes(self, lo: int, hi: int, count: int = 1) -> list[int]:
        """Up to ``count`` untested candidates splitting ``(lo, hi)`` evenly (one: nearest the
        middle), looking above the highest not-applicable candidate first (releases without the
        tested API are older than those with it)."""
        walls = [
            lo,
            *(
                i
                for i in range(lo + 1, hi)
                if i in self.states and self.states[i].state == NOT_APPLICABLE
            ),
            hi,
        ]
        return _above_walls(walls, self.states, count)


def _above_walls(walls: Sequence[int], tested: Mapping[int, object], count: int) -> list[int]:
    """Up to ``count`` untested indices between consecutive ``walls``, the highest stretch first,
    each stretch split evenly (:func:`split_points`)."""
    picks: list[int] = []
    for low, high in reversed(list(itertools.pairwise(walls))):
        if len(picks) >= count:
            break
        untested = [i for i in range(low + 1, high) if i not in tested]
        picks += split_points(low, high, untested, count - len(picks))
    return picks


def split_points(low: int, high: int, untested: Sequence[int], count: int) -> list[int]:
    """Up to ``count`` of ``untested`` (indices inside ``(low, high)``), each the one nearest a
    point splitting it into ``count + 1`` equal parts (ties: the older); one is the one nearest
    the middle. Ascending."""
    if len(untested) <= count:
        return sorted(untested)
    left, chosen = list(untested), []
    for j in range(1, count + 1):
        point = low + (high - low) * j / (count + 1)
        best = min(left, key=lambda i: (abs(i - point), i))
        chosen.append(best)
        left.remove(best)
    return sorted(chosen)


def narrow(
    states: Mapping[int, CandidateRun], lo: int, hi: int, low: State, high: State
) -> tuple[int, int]:
    """``(lo, hi)`` narrowed by the states inside it: the highest ``low`` one, then the lowest
    ``high`` one above that (a round that is not monotone resolves toward the newest step)."""
    lows = [i for i in range(lo + 1, hi) if i in states and states[i].state == low]
    lo = max(lows, default=lo)
    highs = [i for i in range(lo + 1, hi) if i in states and states[i].state == high]
    return lo, min(highs, default=hi)


def find_boundary(
    versions: Sequence[str],
    prober: Prober,
    *,
    known_broken: str | None = None,
    limits: Limits = Limits(),
    progress: Progress | None = None,
) -> SearchOutcome:
    """Binary-search ascending ``versions`` for the broken → fixed boundary.

    ``prober`` runs the candidates (what its cache knows is consulted for free), up to its
    ``width`` at once a round. ``known_broken``: a release that evidence recorded elsewhere shows
    broken, ``versions[0]`` or older than all of them: the lower bound the search starts from.
    ``progress`` hears every result as it is consulted, and its budget is asked before each run or
    round (a reason ends the search there, with what it found so far) and how many runs a round
    may start.
    """
    s = _Search.over(versions, prober, limits, progress)
    if not versions:
        return _end(s, Status.NO_TRANSITION, "no candidate releases")
    hi = s.newest_end()
    if hi is None and s.halted:
        return _end(
            s, Status.NO_TRANSITION, f"stopped before the newest end was verified: {s.halted}"
        )
    if hi is None:
        why = s.exhausted() or "no candidate could be told broken or fixed"
        return _end(
            s,
            Status.NO_TRANSITION,
            f"the newest end could not be verified: {why} — "
            "narrow the range with --since/--until, or fix the reproducer",
        )
    if s.states[hi].state == BROKEN:
        return _end(
            s,
            Status.NO_TRANSITION,
            f"the newest applicable candidate {versions[hi]} still reproduces the bug"
            + _skipped_above(s, hi),
            last_broken=versions[hi],
        )
    lo = -1
    stopped = None
    while True:
        lo, hi = s.consult_known(lo, hi)
        unknown_left = s.limits.max_unknown - s.fresh(UNKNOWN)
        picks = s.next_probes(lo, hi, s.round_size(unknown_left) if s.width > 1 else 1)
        if not picks:
            break
        if (stopped := s.exhausted()) is not None:
            break
        s.ask_round(picks)
        lo, hi = narrow(s.states, lo, hi, BROKEN, FIXED)
    return _conclude(s, lo, hi, known_broken, stopped)


def _conclude(
    s: _Search, lo: int, hi: int, known_broken: str | None, stopped: str | None
) -> SearchOutcome:
    versions, first_fixed = s.versions, s.versions[hi]
    broken_here = lo >= 0
    if not broken_here:
        if known_broken is None:
            return _nothing_broken(s, hi, stopped)
        at_first = normal(known_broken) == normal(versions[0])
        # the evidence's release was run here and is fixed
        if at_first and hi == 0:
            return _end(
                s,
                Status.NO_TRANSITION,
                f"{versions[0]} is recorded broken but does not reproduce here: the bug depends on "
                f"the "
                "environment — bisect where it was recorded (--lane, or a host like that one)",
            )
        lo = 0 if at_first else -1
    between = tuple(s.states.get(i) or versions[i] for i in range(lo + 1, hi))
    last_broken = versions[lo] if lo >= 0 else known_broken
    if all(isinstance(b, CandidateRun) and b.state == NOT_APPLICABLE for b in between):
        return _end(
            s,
            Status.FOUND,
            "",
            last_broken=last_broken,
            first_fixed=first_fixed,
            between=between,
            broken_here=broken_here,
        )
    unknown = [b.version for b in between if isinstance(b, CandidateRun) and b.state == UNKNOWN]
    untested = [b for b in between if isinstance(b, str)]
    why = []
    if unknown:
        why.append(f"could not be told: {', '.join(unknown)}")
    if untested:
        why.append(
            f"stopped before testing {', '.join(untested)}" + (f" ({stopped})" if stopped else "")
        )
    return _end(
        s,
        Status.UNPINNED,
        "; ".join(why),
        last_broken=last_broken,
        first_fixed=first_fixed,
        between=between,
        broken_here=broken_here,
    )


def _nothing_broken(s: _Search, hi: int, stopped: str | None) -> SearchOutcome:
    """No candidate reproduced and no evidence says one below does: the oldest end is fixed."""
    below = [s.states.get(i) for i in range(hi)]
    tested = [r for r in below if r is not None]
    oldest = s.versions[hi]
    if below and len(tested) == len(below) and all(r.state == NOT_APPLICABLE for r in tested):
        return _end(
            s,
            Status.NO_TRANSITION,
            f"the oldest applicable candidate {oldest} is already fixed (the bug does not "
            f"reproduce there; not applicable below it: {', '.join(r.version for r in tested)})",
        )
    if not below:
        return _end(
            s,
            Status.NO_TRANSITION,
            f"the oldest candidate {oldest} is already fixed (the bug does not reproduce there)",
        )
    unknown = ", ".join(r.version for r in below if r is not None and r.state == UNKNOWN)
    why = f"no candidate up to {oldest} reproduced the bug"
    if stopped:
        why += f"; stopped: {stopped}"
    elif unknown:
        why += f"; could not be told: {unknown}"
    return _end(s, Status.NO_TRANSITION, why)


def _skipped_above(s: _Search, hi: int) -> str:
    above = [s.states[i].version for i in range(hi + 1, len(s.versions)) if i in s.states]
    return f" (newer ones could not be told: {', '.join(above)})" if above else ""


def _end(
    s: _Search,
    status: Status,
    reason: str,
    *,
    last_broken: str | None = None,
    first_fixed: str | None = None,
    between: tuple[CandidateRun | str, ...] = (),
    broken_here: bool = True,
) -> SearchOutcome:
    return SearchOutcome(
        status, reason, last_broken, first_fixed, between, tuple(s.order), broken_here
    )
