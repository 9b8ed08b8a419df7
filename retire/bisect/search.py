"""The search, pure: which releases are candidates, and the binary search over their states.

A candidate is *broken* (its reproducer prints BUG_REPRODUCED without the shim), *fixed*
(FIX_VALIDATED or MEMORY_SAVE_VERIFIED) or *unknown* (it could not be told). The search asks a
``probe`` callable for states and never does I/O itself (:mod:`retire.bisect.runner` runs them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

__all__ = ["BROKEN", "DEFAULT_MAX_UNKNOWN", "FIXED", "UNKNOWN", "CandidateRun", "Candidates", "normal", "search", "select_candidates"]

BROKEN, FIXED, UNKNOWN = "broken", "fixed", "unknown"
#: Unknown candidates tolerated before the search stops and reports what it has.
DEFAULT_MAX_UNKNOWN = 4


@dataclass(frozen=True)
class Candidates:
    """The ordered releases a bisection searches, and what was left out and why."""

    versions: tuple[str, ...]  # ascending, PEP 440 order
    yanked: tuple[str, ...] = ()
    prereleases: tuple[str, ...] = ()  # skipped pre-releases / dev releases (nightlies)
    out_of_range: tuple[str, ...] = ()  # outside --since / --until
    invalid: tuple[str, ...] = ()  # not PEP 440 versions
    listed: int = 0


@dataclass(frozen=True)
class CandidateRun:
    """What one candidate release showed. ``state`` is broken, fixed or unknown."""

    version: str
    state: str
    outcome: str  # the reproducer's outcome, or "env-failed"
    detail: str = ""
    duration_s: float = 0.0
    cached: bool = False
    output_tail: str = ""


def select_candidates(
    versions: Iterable[str],
    yanked: Iterable[str] = (),
    *,
    include_prereleases: bool = False,
    since: str | None = None,
    until: str | None = None,
) -> Candidates:
    """Order releases by PEP 440 and drop the yanked (and pre-releases unless asked)."""
    listed = list(dict.fromkeys(versions))
    yanked_set = {normal(v) for v in yanked}
    low = Version(since) if since else None
    high = Version(until) if until else None
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
        if version in seen:  # "1.0" and "1.0.0" are one release
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
    return Candidates(tuple(keep), tuple(dropped_yanked), tuple(dropped_pre), tuple(outside), tuple(invalid), len(listed))


def normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


@dataclass
class _Search:
    versions: Sequence[str]
    probe: Callable[[str], CandidateRun]
    max_unknown: int
    runs: dict[int, CandidateRun] = field(default_factory=dict)
    order: list[CandidateRun] = field(default_factory=list)

    def ask(self, i: int) -> str:
        run = self.probe(self.versions[i])
        self.runs[i] = run
        self.order.append(run)
        return run.state

    @property
    def unknowns(self) -> int:
        return sum(1 for r in self.order if r.state == UNKNOWN)

    def first_known(self, indexes: Iterable[int]) -> int | None:
        for i in indexes:
            if self.unknowns >= self.max_unknown:
                return None
            if self.ask(i) != UNKNOWN:
                return i
        return None


def search(
    versions: Sequence[str], probe: Callable[[str], CandidateRun], *, max_unknown: int = DEFAULT_MAX_UNKNOWN
) -> tuple[str, str, int | None, int | None, list[CandidateRun]]:
    """Binary search for the broken → fixed boundary in ascending ``versions``.

    Returns ``(status, reason, last_broken_index, first_fixed_index, runs_in_order)``.
    """
    s = _Search(versions, probe, max_unknown)
    n = len(versions)
    if n == 0:
        return "no-transition", "no candidate releases", None, None, s.order
    lo = s.first_known(range(n))
    if lo is None:
        return "no-transition", _gave_up(s, "oldest"), None, None, s.order
    if s.runs[lo].state == FIXED:
        return "no-transition", f"the oldest testable candidate {versions[lo]} is already fixed (the bug does not reproduce there)", None, lo, s.order
    if lo == n - 1:
        return "no-transition", f"only {versions[lo]} could be tested and it still reproduces", lo, None, s.order
    hi = s.first_known(range(n - 1, lo, -1))
    if hi is None:
        return "no-transition", _gave_up(s, "newest"), lo, None, s.order
    if s.runs[hi].state == BROKEN:
        return "no-transition", f"the newest candidate {versions[hi]} still reproduces the bug", hi, None, s.order
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in s.runs]
        if not untested:
            break
        if s.unknowns >= max_unknown:
            break
        middle = (lo + hi) / 2
        i = min(untested, key=lambda j: (abs(j - middle), j))
        state = s.ask(i)
        if state == BROKEN:
            lo = i
        elif state == FIXED:
            hi = i
    if hi - lo == 1:
        return "found", "", lo, hi, s.order
    untested = [versions[i] for i in range(lo + 1, hi) if i not in s.runs]
    why = f"{s.unknowns} candidate(s) could not be tested"
    if untested:
        why += f"; stopped before testing {', '.join(untested)}"
    return "unpinned", why, lo, hi, s.order


def _gave_up(s: _Search, end: str) -> str:
    if not s.order:
        return f"nothing left to test at the {end} end"
    tried = ", ".join(f"{r.version} ({r.outcome})" for r in s.order if r.state == UNKNOWN)
    return f"the {end} end could not be verified: unknown results for {tried} — narrow the range with --since/--until or fix the reproducer"
