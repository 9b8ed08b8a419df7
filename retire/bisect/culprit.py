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
   search (:func:`retire.bisect.search.find_boundary`) with clean and broken swapped;
3. **commit** (a seam): with a mirror of the package's source, ``commits(distribution,
   last_clean, first_broken)`` — the history search's commit bisection — names the first broken
   commit; :data:`CommitSearch` is the one call the search makes.

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
from retire.bisect.search import BROKEN, FIXED, CandidateRun, State, Status, find_boundary
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
    """What the commit step found: the first broken commit (and its pull request, if known)."""

    sha: str
    pr: str | None = None
    last_clean: str | None = None


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
    commit: FirstCommit | None = None
    # (what was moved, the run): every candidate consulted, in order
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
        return f"no culprit for {where}: {self.reason}"

    def markdown(self) -> str:
        """The line and its proof: every candidate run, what it moved and what it showed."""
        # names and versions come from locks and indexes: inert text, never Markdown
        lines = [f"**{mdsafe.text(self.line())}**", "", "| moved | lane | reproducer |"]
        lines.append("|---|---|---|")
        for moved, run in self.proof:
            cached = " (cached)" if run.cached else ""
            word = _WORDS.get(run.state, str(run.state))
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
            "commit": (
                {"sha": self.commit.sha, "pr": self.commit.pr} if self.commit is not None else None
            ),
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


@dataclass
class _Search:
    probe: Probe
    stop: Callable[[], str | None]
    proof: list[tuple[str, CandidateRun]] = field(default_factory=list)
    halted: str | None = None

    def ask(self, move: Move) -> State | None:
        """The candidate's state, or None when the budget refused the run."""
        reason = self.stop()
        if reason is not None:
            self.halted = reason
            return None
        run = self.probe(move)
        self.proof.append((label(move), run))
        return run.state


def _package_step(
    search: _Search, changes: Sequence[tuple[str, str | None, str]]
) -> tuple[CulpritStatus, tuple[tuple[str, str | None, str], ...], str]:
    """Each package alone, then the interacting set."""
    for change in changes:
        state = search.ask({change[0]: change[2]})
        if state is None:
            return CulpritStatus.STOPPED, (), f"stopped: {search.halted}"
        if state == BROKEN:
            return CulpritStatus.FOUND, (change,), ""
    kept = list(changes)
    state = search.ask({name: new for name, _, new in kept})
    if state is None:
        return CulpritStatus.STOPPED, (), f"stopped: {search.halted}"
    if state != BROKEN:
        why = "the new lock's packages, moved together on the old lock, do not break it"
        return CulpritStatus.NOT_REPRODUCED, (), why
    for change in list(kept):
        if len(kept) == 1:
            break
        trial = [c for c in kept if c != change]
        state = search.ask({name: new for name, _, new in trial})
        if state is None:
            return CulpritStatus.STOPPED, tuple(kept), f"stopped: {search.halted}"
        if state == BROKEN:
            kept = trial
    return CulpritStatus.INTERACTING, tuple(kept), ""


def _swapped(run: CandidateRun) -> CandidateRun:
    """Clean ↔ broken: the release search looks for broken → fixed, a culprit for the reverse."""
    flip = {BROKEN: FIXED, FIXED: BROKEN}
    return replace(run, state=flip.get(run.state, run.state))


def _release_step(
    search: _Search, change: tuple[str, str | None, str], releases: Sequence[str]
) -> tuple[str | None, str | None, str]:
    """(last clean, first broken, why not found) over the releases between the locks."""
    name, old, new = change
    if old is None:
        return None, new, ""
    between = releases_between(releases, old, new)
    if not between:
        return old, new, ""

    def probe(version: str) -> CandidateRun:
        # the old release is the old lock itself: the same candidate, answered by the cache
        run = search.probe({} if version == old else {name: version})
        search.proof.append((f"{name} {version}", run))
        return _swapped(run)

    outcome = find_boundary(
        [old, *between, new],
        prober_of(probe, known={new: _swapped(CandidateRun(new, BROKEN, "known"))}),
        progress=stopping(search.stop),
    )
    if outcome.status == Status.FOUND:
        return outcome.last_broken, outcome.first_fixed, ""
    return old, new, f"release step: {outcome.reason}"


def find_culprit(
    lane: str,
    subject: str,
    mode: str,
    changes: Sequence[tuple[str, str | None, str]],
    probe: Probe,
    *,
    releases: Callable[[str], Sequence[str]] = lambda name: (),
    commits: CommitSearch | None = None,
    stop: Callable[[], str | None] = lambda: None,
) -> Culprit:
    """The smallest change of ``changes`` (name, old version, new version) that breaks the lane.

    ``releases(name)`` lists a package's releases on the lane's indexes (for the release step);
    ``commits`` is the commit step, called once for a single culprit package.
    """
    search = _Search(probe, stop)
    base = search.ask({})
    if base is None or base == BROKEN:
        status = CulpritStatus.STOPPED if base is None else CulpritStatus.NOT_REPRODUCED
        why = f"stopped: {search.halted}" if base is None else "the old lock is broken here too"
        return Culprit(lane, subject, mode, status, why, proof=tuple(search.proof))
    status, found, why = _package_step(search, changes)
    culprit = Culprit(lane, subject, mode, status, why, found, proof=tuple(search.proof))
    if status != CulpritStatus.FOUND:
        return culprit
    [change] = found
    clean, broken, why = _release_step(search, change, releases(change[0]))
    first = commits(change[0], clean, broken) if commits and clean and broken else None
    return replace(
        culprit,
        reason=why,
        last_clean=clean,
        first_broken=broken,
        commit=first,
        proof=tuple(search.proof),
    )
