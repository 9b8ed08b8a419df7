"""The culprit of a newly broken lane, pure: the smallest change between two locks that breaks it.

A lane's reproducer (a shim's without- or with-shim run, or a guard's) was clean on the old lock
and is broken on the new one. The search asks a ``probe`` for the state of the old lock with some
packages moved (:class:`Move`: name → version) and never does I/O itself
(:mod:`retire.bisect.culpritrun` builds and runs the candidates):

1. **packages**: each package of the lock diff moved alone; the first that breaks the lane is
   the culprit. When none alone does, the interacting set: starting from every package moved,
   each is put back in turn and stays back when the lane still breaks — what is left is a set
   none of whose members can be spared (1-minimal);
2. **release**: over the culprit package's releases between the old and the new lock (dated
   nightlies included), the first broken one after the last clean one — the release bisection's
   search (:func:`retire.bisect.search.find_boundary`) with clean and broken swapped, unknowns
   and all: releases that could not be told leave the release unpinned, between two that told;
3. **commit** (a seam): with a mirror of the package's source, ``commits(distribution,
   last_clean, first_broken)`` — the history search's commit bisection — names the first broken
   commit; :data:`CommitSearch` is the one call the search makes (only for a pinned release).

Unknown is an answer, never a guess: a run that crashed, timed out, skipped or whose candidate
could not be installed is neither clean nor broken. An old lock that cannot be told (or the new
lock's packages moved together) ends the search ``undecided`` with that run; a package whose run
alone could not be told is never called harmless, and an interacting set resting on such a run is
``undecided`` too, naming it. Each candidate is asked once per search: an unknown one is
reported, never run again to get another answer.

Budgets: ``stop`` is asked before every fresh run (a :class:`retire.bisect.budget.Meter`); a run
the probe answers from its cache costs nothing, so a stopped search resumes where it stopped and
never runs a decided candidate twice.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from retire.bisect.prober import prober_of, stopping
from retire.bisect.search import BROKEN, FIXED, UNKNOWN, CandidateRun, Status, find_boundary
from retire.core import mdsafe

__all__ = [
    "Culprit",
    "CulpritStatus",
    "FirstCommit",
    "Move",
    "Probe",
    "find_culprit",
    "releases_between",
]

#: A candidate: the old lock with these packages at these versions.
Move = Mapping[str, str]
#: The state of one candidate (BROKEN: the lane breaks; FIXED: it is clean).
Probe = Callable[[Move], CandidateRun]


@dataclass(frozen=True)
class FirstCommit:
    """What the commit step found: the first broken commit (and its pull request, if known), the
    last clean one, and the commit runs that placed them."""

    sha: str
    pr: str | None = None
    last_clean: str | None = None
    # every commit run consulted, in order (a run's ``version`` is its commit)
    runs: tuple[CandidateRun, ...] = field(default=(), compare=False)


#: ``commits(distribution, last_clean_release, first_broken_release)``: the commit step (the
#: history search's window + commit bisection over a mirror), or None without a mirror.
CommitSearch = Callable[[str, str, str], FirstCommit | None]


class CulpritStatus(enum.StrEnum):
    """How a culprit search ended."""

    #: one package (and, where releases lie between, its first broken release)
    FOUND = "found"
    #: no package alone breaks the lane; these together do
    INTERACTING = "interacting"
    #: the old lock is not clean here or the new one not broken: nothing to blame
    NOT_REPRODUCED = "not-reproduced"
    #: a run the answer rests on could not be told (it crashed, timed out, skipped, or its
    #: candidate could not be installed): ``reason`` names it, and nothing is blamed on a guess
    UNDECIDED = "undecided"
    #: the budget ran out (the next search resumes from the cached runs)
    STOPPED = "stopped"


@dataclass(frozen=True)
class Culprit:
    """The smallest change that breaks ``subject`` in ``lane``, and the runs that prove it."""

    lane: str
    # the shim or guard whose reproducer broke
    subject: str
    # without | with
    mode: str
    status: CulpritStatus
    reason: str = ""
    # the culprit packages: (name, old version or None, new version)
    packages: tuple[tuple[str, str | None, str], ...] = ()
    # the release step: the last clean and first broken release of the one culprit package
    last_clean: str | None = None
    first_broken: str | None = None
    # the releases between them that could not be told or were not tried: the first broken
    # release is not pinned (``reason`` says why)
    between: tuple[str, ...] = ()
    commit: FirstCommit | None = None
    # ``sha256:…`` of the old and the new lock's bytes (the record's key, with lane, subject and
    # mode: a cached re-run of the same search is recorded once); "" where not known
    old_lock: str = ""
    new_lock: str = ""
    # (what was moved, the run): every candidate consulted, in order (the commit runs last)
    proof: tuple[tuple[str, CandidateRun], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CulpritStatus(self.status))

    @property
    def found(self) -> bool:
        return self.status in (CulpritStatus.FOUND, CulpritStatus.INTERACTING)

    def line(self) -> str:
        """One line: ``torch 2.12.0.dev20261124 breaks X in lane nightly (dev20261123 clean)``."""
        where = f"{self.subject} in lane {self.lane}"
        if self.status == CulpritStatus.FOUND:
            [(name, old, new)] = self.packages
            broken = self.first_broken or new
            clean = self.last_clean or old
            if self.between:
                return (
                    f"{name} breaks {where}; its first broken release lies between {clean} "
                    f"(clean) and {broken}: {self.reason}"
                )
            text = f"{name} {broken} breaks {where}"
            if clean:
                text += f" ({_short(clean, broken)} clean)"
            if self.commit is not None:
                text += f"; first broken commit {self.commit.sha[:12]}"
                text += f" ({self.commit.pr})" if self.commit.pr else ""
            return text
        if self.status == CulpritStatus.INTERACTING:
            together = " + ".join(f"{name} {new}" for name, _, new in self.packages)
            return f"{together} together break {where} (each alone clean)"
        if self.status == CulpritStatus.UNDECIDED:
            return f"culprit of {where} undecided: {self.reason}"
        return f"no culprit for {where}: {self.reason}"

    def markdown(self) -> str:
        """The line and its proof: every candidate run (the commit runs too), what it moved and
        what it showed, and the last clean and first broken commit where the commit step named
        them."""
        # names and versions come from locks and indexes: inert text, never Markdown
        lines = [f"**{mdsafe.text(self.line())}**", ""]
        if self.commit is not None:
            edge = f"First broken commit {mdsafe.code(self.commit.sha)}"
            edge += f" {mdsafe.text(f'({self.commit.pr})')}" if self.commit.pr else ""
            if self.commit.last_clean:
                edge += f", last clean commit {mdsafe.code(self.commit.last_clean)}"
            lines += [edge + ".", ""]
        lines += ["| moved | lane | reproducer |", "|---|---|---|"]
        for moved, run in self.proof:
            cached = " (cached)" if run.cached else ""
            word = _WORDS.get(run.state, "could not be told")
            lines.append(f"| {mdsafe.text(moved)} | {word} | {mdsafe.text(run.outcome)}{cached} |")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "lane": self.lane,
            "subject": self.subject,
            "mode": self.mode,
            "status": str(self.status),
            "reason": self.reason,
            "line": self.line(),
            "packages": [{"name": n, "old": o, "new": v} for n, o, v in self.packages],
            "last_clean": self.last_clean,
            "first_broken": self.first_broken,
            "between": list(self.between),
            "commit": (
                {"sha": self.commit.sha, "pr": self.commit.pr, "last_clean": self.commit.last_clean}
                if self.commit is not None
                else None
            ),
            "old_lock": self.old_lock,
            "new_lock": self.new_lock,
            "proof": [
                {"moved": label, "state": str(run.state), "outcome": run.outcome}
                for label, run in self.proof
            ],
        }


#: What a candidate's state says of the lane (a fixed reproducer is a clean lane).
_WORDS = {FIXED: "clean", BROKEN: "broken"}


def _short(clean: str, broken: str) -> str:
    """``dev20261123`` for a nightly next to ``2.12.0.dev20261124``: the part that differs."""
    try:
        a, b = Version(clean), Version(broken)
    except InvalidVersion:
        return clean
    if a.release == b.release and a.dev is not None and b.dev is not None:
        return f"dev{a.dev}"
    return clean


def label(move: Move) -> str:
    """What a candidate moved, as the proof and the cache name it: ``beta 1.2`` or ``old lock``."""
    return ", ".join(f"{name} {version}" for name, version in sorted(move.items())) or "old lock"


def releases_between(versions: Sequence[str], old: str, new: str) -> list[str]:
    """The releases strictly between ``old`` and ``new``, ascending (pre-releases only when an end
    is one: a nightly lane moves between nightlies)."""
    try:
        low, high = Version(old), Version(new)
    except InvalidVersion:
        return []
    nightly = low.is_prerelease or high.is_prerelease
    found = []
    for text in set(versions):
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if low < version < high and (nightly or not version.is_prerelease):
            found.append(version)
    return [str(v) for v in sorted(found)]


#: A change of the lock diff: (name, old version or None, new version).
Change = tuple[str, str | None, str]


def _moved(changes: Sequence[Change]) -> dict[str, str]:
    return {name: new for name, _, new in changes}


def _told(runs: Sequence[tuple[str, CandidateRun]]) -> str:
    """``beta 1.3 (timeout), gamma 1.1 (env-failed)``: what could not be told, and why."""
    return ", ".join(f"{moved} ({run.outcome})" for moved, run in runs)


@dataclass
class _Search:
    probe: Probe
    stop: Callable[[], str | None]
    proof: list[tuple[str, CandidateRun]] = field(default_factory=list)
    halted: str | None = None
    # every candidate asked in this search, by label: none is run twice (an unknown one neither)
    asked: dict[str, CandidateRun] = field(default_factory=dict)

    def once(self, move: Move) -> CandidateRun:
        """The candidate's run, asked of the probe the first time only (the budget is the
        caller's to check)."""
        key = label(move)
        if (run := self.asked.get(key)) is None:
            run = self.asked[key] = self.probe(move)
            self.proof.append((key, run))
        return run

    def ask(self, move: Move) -> CandidateRun | None:
        """The candidate's run, or None when the budget refused a fresh one."""
        if label(move) not in self.asked and (reason := self.stop()) is not None:
            self.halted = reason
            return None
        return self.once(move)


#: What the package step found: how it ended, the packages, why.
_Step = tuple[CulpritStatus, tuple[Change, ...], str]
#: A run that could not be told: the change it is about, what it moved, the run.
_Untold = tuple[Change, str, CandidateRun]


def _package_step(search: _Search, changes: Sequence[Change]) -> _Step:
    """Each package alone, then the interacting set; a run that could not be told is named,
    never taken for clean."""
    untold: list[_Untold] = []
    for change in changes:
        alone = {change[0]: change[2]}
        run = search.ask(alone)
        if run is None:
            return CulpritStatus.STOPPED, (), f"stopped: {search.halted}"
        if run.state == BROKEN:
            return CulpritStatus.FOUND, (change,), ""
        if run.state != FIXED:
            untold.append((change, label(alone), run))
    together = search.ask(_moved(changes))
    if together is None:
        return CulpritStatus.STOPPED, (), f"stopped: {search.halted}"
    if together.state == FIXED:
        why = "the new lock's packages, moved together on the old lock, do not break it"
        return CulpritStatus.NOT_REPRODUCED, (), why
    if together.state != BROKEN:
        why = "the new lock's packages, moved together on the old lock, could not be told: "
        return CulpritStatus.UNDECIDED, (), why + _told([(label(_moved(changes)), together)])
    return _interacting(search, list(changes), untold)


def _interacting(search: _Search, kept: list[Change], untold: list[_Untold]) -> _Step:
    """The 1-minimal set of ``kept`` (which breaks the lane together): each member put back in
    turn, staying back while the lane still breaks. A set resting on a run that could not be told
    (a member's run alone, or the run without a member) is undecided, and says which."""
    for change in list(kept):
        if len(kept) == 1:
            break
        trial = [c for c in kept if c != change]
        run = search.ask(_moved(trial))
        if run is None:
            return CulpritStatus.STOPPED, tuple(kept), f"stopped: {search.halted}"
        if run.state == BROKEN:
            kept = trial
        elif run.state != FIXED:
            untold.append((change, label(_moved(trial)), run))
    # one run named once (the set less a member may be another member alone)
    resting = list(
        {moved: (moved, run) for change, moved, run in untold if change in kept}.values()
    )
    if resting:
        together = " + ".join(f"{name} {new}" for name, _, new in kept)
        why = f"{together} break it together, but could not be told: {_told(resting)}"
        return CulpritStatus.UNDECIDED, tuple(kept), why
    return CulpritStatus.INTERACTING, tuple(kept), ""


def _swapped(run: CandidateRun) -> CandidateRun:
    """Clean ↔ broken: the release search looks for broken → fixed, a culprit for the reverse."""
    flip = {BROKEN: FIXED, FIXED: BROKEN}
    return replace(run, state=flip.get(run.state, run.state))


@dataclass(frozen=True)
class _Releases:
    """What the release step found: the last clean and first broken release, what lies between
    them untold or untried (empty: pinned), and why it is not pinned."""

    last_clean: str | None
    first_broken: str | None
    between: tuple[str, ...] = ()
    reason: str = ""


def _release_step(search: _Search, change: Change, releases: Sequence[str]) -> _Releases:
    """The first broken release of the culprit package over the releases between the locks —
    the bisection's boundary search, its unknowns included."""
    name, old, new = change
    if old is None:
        return _Releases(None, new)
    between = releases_between(releases, old, new)
    if not between:
        return _Releases(old, new)

    def probe(version: str) -> CandidateRun:
        # the old release is the old lock itself: the same candidate, asked once
        run = search.once({} if version == old else {name: version})
        return replace(_swapped(run), version=version)

    outcome = find_boundary(
        [old, *between, new],
        prober_of(probe, known={new: _swapped(CandidateRun(new, BROKEN, "known"))}),
        progress=stopping(search.stop),
    )
    if outcome.status == Status.FOUND:
        return _Releases(outcome.last_broken, outcome.first_fixed)
    if outcome.status == Status.UNPINNED and outcome.last_broken and outcome.first_fixed:
        runs = [b for b in outcome.between if isinstance(b, CandidateRun)]
        untried = [b for b in outcome.between if isinstance(b, str)]
        why = []
        if unknown := [(f"{name} {r.version}", r) for r in runs if r.state == UNKNOWN]:
            why.append(f"could not be told: {_told(unknown)}")
        if untried:
            spent = search.stop() or ("too many runs could not be told" if unknown else None)
            why.append(f"not tried: {', '.join(untried)}" + (f" ({spent})" if spent else ""))
        return _Releases(
            outcome.last_broken,
            outcome.first_fixed,
            tuple(b.version if isinstance(b, CandidateRun) else b for b in outcome.between),
            "; ".join(why) or outcome.reason,
        )
    return _Releases(old, new, tuple(between), f"release step: {outcome.reason}")


def find_culprit(
    lane: str,
    subject: str,
    mode: str,
    changes: Sequence[Change],
    probe: Probe,
    *,
    releases: Callable[[str], Sequence[str]] = lambda name: (),
    commits: CommitSearch | None = None,
    stop: Callable[[], str | None] = lambda: None,
    say: Callable[[str], None] = lambda line: None,
) -> Culprit:
    """The smallest change of ``changes`` (name, old version, new version) that breaks the lane.

    ``releases(name)`` lists a package's releases on the lane's indexes (for the release step);
    ``commits`` is the commit step, called once for a single culprit package whose first broken
    release is pinned; ``say`` hears each step as it starts.
    """
    search = _Search(probe, stop)
    say("the old lock first (it must be clean)")
    base = search.ask({})
    if base is None or base.state != FIXED:
        if base is None:
            status, why = CulpritStatus.STOPPED, f"stopped: {search.halted}"
        elif base.state == BROKEN:
            status, why = CulpritStatus.NOT_REPRODUCED, "the old lock is broken here too"
        else:
            status = CulpritStatus.UNDECIDED
            why = f"the old lock could not be told ({base.outcome}): nothing is blamed"
        return Culprit(lane, subject, mode, status, why, proof=tuple(search.proof))
    say(f"package step: {len(changes)} moved package(s), each alone on the old lock")
    status, found, why = _package_step(search, changes)
    culprit = Culprit(lane, subject, mode, status, why, found, proof=tuple(search.proof))
    if status != CulpritStatus.FOUND:
        return culprit
    [change] = found
    known = releases(change[0])
    if change[1] is not None and (count := len(releases_between(known, change[1], change[2]))):
        say(f"release step: {count} release(s) of {change[0]} between {change[1]} and {change[2]}")
    step = _release_step(search, change, known)
    first = None
    if commits and step.last_clean and step.first_broken and not step.between:
        first = commits(change[0], step.last_clean, step.first_broken)
    commit_runs = [(f"{change[0]} at {r.version[:12]}", r) for r in (first.runs if first else ())]
    return replace(
        culprit,
        reason=step.reason,
        last_clean=step.last_clean,
        first_broken=step.first_broken,
        between=step.between,
        commit=first,
        proof=(*search.proof, *commit_runs),
    )
