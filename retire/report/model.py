"""The weekly retirement report as values (immutable, no I/O): built by :mod:`retire.report.build`
from manifests, lanes, verdicts, validation records, the previous report and the history of
shim counts.

:func:`retire.report.build.build` makes a :class:`Report`; :mod:`retire.report.markdown` turns it
into Markdown, JSON and text, :mod:`retire.report.html` into the HTML page, and
:mod:`retire.report.weekly` does the I/O around them.

Words used here
---------------

cell          the outcome of one shim on one lane, rebuilt from the latest records of that lane
              with :func:`retire.runs.judge` (``needed``, ``upstream-fixed``, ``shim-broken``,
              ``skipped``, ``crashed``, ``timeout``), or ``not-run`` when the lane lists the shim
              and nothing was recorded there.
broken        a cell whose outcome fails a lane run (shim-broken, crashed, timeout).
newly broken  a broken cell that was not broken in the previous report (every broken cell when
              there is no previous report).
proven        a run that printed a verdict sentinel (bug reproduced, fix validated, memory save
              verified); a skipped or crashed run proves nothing.
unproven      a shim that no lane proves: no lane listing it has latest runs judged needed or
              upstream-fixed (:mod:`retire.runs.proof`, the rule of ``patchlane run --strict``).
lane step     what one lane does with one shim (``retire.verdicts.model.LaneStep``: drop, raise,
              hold, blocked, keep, unknown), from the verdict's ``lane_verdicts``.
blocked       a follow lane whose raise does not resolve; its blocker is the resolver's own
              explanation, the thing that would have to change (:attr:`Report.blocked`).
bisection     a ``patchlane bisect`` run the report made itself within a budget
              (``--bisect-budget``, ``--bisect-minutes``) for a verdict flagged ``candidate``
              (:class:`Bisections`); its runs are evidence, never a lane of the matrix.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from retire.evidence.validation import FAILING, ShimOutcome
from retire.probes.records import is_bisection
from retire.report.words import condition_words, evidence_line, short_link
from retire.verdicts.model import Decision, FlagKind, LaneStep, LaneVerdict, Verdict
from shims.model import ShimManifest

if TYPE_CHECKING:
    from retire.history.window import Window
    from retire.report.regressions import Regression

__all__ = [
    "CELL_OUTCOMES",
    "SCHEMA",
    "BisectionLeft",
    "BisectionRan",
    "Bisections",
    "BurnPoint",
    "BurnSource",
    "Cell",
    "Changes",
    "Chase",
    "Fact",
    "Headline",
    "Matrix",
    "PreviousReport",
    "Report",
    "RunStamp",
    "ShimEntry",
    "VerdictChange",
    "iso_week",
    "lane_next",
    "parse_week",
    "short_link",
    "week_bounds",
]

#: Version of the JSON layout; a previous report of another schema is still read where it can be.
#: 3: per-lane verdicts (``lane_verdicts`` per shim, ``blocked``), ``bisections``.
#: 4: each shim's ``window`` is the bug's window (retire.history ``Window.to_json``).
SCHEMA = 4
#: Matrix outcomes in legend order (what runs.judge says, plus "not-run").
CELL_OUTCOMES = tuple(ShimOutcome)
#: Longest burn-down kept (three years of weekly points).
BURNDOWN_WEEKS = 156

_WEEK = re.compile(r"(\d{4})-W(\d{2})")


# ---------------------------------------------------------------------------------------------
# ISO weeks


def iso_week(day: _dt.date) -> str:
    """``2026-W47`` for any day of that ISO week."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def parse_week(text: str) -> str:
    """The canonical label of ``text`` (``2026-W47``); ``ValueError`` naming the problem."""
    found = _WEEK.fullmatch(text.strip())
    if not found:
        raise ValueError(f"expected an ISO week like 2026-W47, got {text!r}")
    year, week = int(found.group(1)), int(found.group(2))
    # a report looks back and ahead some weeks: stay far from date's limits
    if not 1970 <= year <= 9998:
        raise ValueError(f"year {year} is out of range: write a week between 1970-W01 and 9998-W52")
    try:
        _dt.date.fromisocalendar(year, week, 1)
    except ValueError:
        raise ValueError(f"{year} has no ISO week {week}") from None
    return f"{year:04d}-W{week:02d}"


def week_bounds(label: str) -> tuple[_dt.date, _dt.date]:
    """Monday and Sunday of the ISO week ``label``."""
    year, week = (int(part) for part in parse_week(label).split("-W"))
    monday = _dt.date.fromisocalendar(year, week, 1)
    return monday, monday + _dt.timedelta(days=6)


# ---------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class RunStamp:
    """Where and when one reproducer run happened, from its validation record."""

    host: str
    gpu: str | None
    lane: str
    # UTC ISO
    started_at: str
    # a validation.RunOutcome
    outcome: str
    mode: str
    detail: str = ""

    @property
    def date(self) -> str:
        return self.started_at[:10]

    @property
    def where(self) -> str:
        machine = f"{self.host} ({self.gpu})" if self.gpu else self.host
        # a bisection's runs are evidence about releases, not a lane (``bisect:LANE``: overlaid
        # on that lane's environment)
        if is_bisection(self.lane):
            over = self.lane.partition(":")[2]
            return f"{machine} · bisection" + (f" on lane {over}'s environment" if over else "")
        return f"{machine} · lane {self.lane}"

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "gpu": self.gpu,
            "lane": self.lane,
            "date": self.date,
            "started_at": self.started_at,
            "outcome": self.outcome,
            "mode": self.mode,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Cell:
    shim: str
    lane: str
    outcome: ShimOutcome
    why: str
    # day of the without-shim run ("" for not-run)
    date: str = ""
    host: str = ""

    @property
    def broken(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True)
class Matrix:
    """Lanes across, shims down. A missing cell: the lane neither lists nor ran the shim."""

    lanes: tuple[str, ...]
    # lanes from the lane files (the others only appear in records)
    defined: frozenset[str]
    shims: tuple[str, ...]
    # (shim, lane) → cell
    cells: Mapping[tuple[str, str], Cell]

    def cell(self, shim: str, lane: str) -> Cell | None:
        return self.cells.get((shim, lane))

    def counts(self) -> dict[ShimOutcome, int]:
        counted = dict.fromkeys(CELL_OUTCOMES, 0)
        for cell in self.cells.values():
            counted[cell.outcome] = counted.get(cell.outcome, 0) + 1
        return counted


#: The flags that make a shim need attention, most urgent first, and how the list says them.
_ATTENTION_FLAGS = (
    FlagKind.CANDIDATE,
    FlagKind.CONFLICT,
    FlagKind.DRIFT,
    FlagKind.STALE,
    FlagKind.NOT_FILED,
    FlagKind.NO_LINK,
)
_ATTENTION_WORDS: Mapping[FlagKind, str] = {
    FlagKind.CANDIDATE: "one run from retiring",
    FlagKind.NO_LINK: "no upstream link",
    FlagKind.NOT_FILED: "not filed upstream",
}


class Chase(enum.StrEnum):
    """Why a person must chase a shim upstream (:attr:`Report.stale_or_unlinked`)."""

    # linked, but no upstream movement for a long time
    STALE = "stale"
    # no link, and none is due: the shim is a local policy
    POLICY = "policy"
    # no link although one is due
    UNLINKED = "unlinked"


@dataclass(frozen=True)
class ShimEntry:
    """One shim in the report: its manifest and its verdict as they are, and what the report
    adds of its own (age, runs, broken lanes, proof). Readers ask the verdict directly
    (``entry.verdict.flagged(…)``, ``entry.verdict.lanes_at(…)``): nothing is copied."""

    manifest: ShimManifest
    verdict: Verdict
    age_days: int
    # lanes that list the shim
    lanes: tuple[str, ...]
    last_proven: RunStamp | None
    last_run: RunStamp | None
    broken_lanes: tuple[str, ...] = ()
    newly_broken_lanes: tuple[str, ...] = ()
    # why no lane proves the shim (retire.runs.proof), None when one does
    unproven: str | None = None
    # the bug's window (retire.history): the verdict's, else the one reading of the records (a
    # verdict made elsewhere); None when no run without the shim counts
    window: Window | None = None

    @property
    def shim(self) -> str:
        return self.manifest.id

    @property
    def retire_when(self) -> tuple[str, ...]:
        """Each manifest condition, as words."""
        return tuple(condition_words(c) for c in self.manifest.retirement.conditions)

    @property
    def evidence(self) -> tuple[str, ...]:
        """One line per piece of evidence the verdict rested on, failures last."""
        v = self.verdict
        return tuple(evidence_line(e) for e in (*v.evidence, *v.failures))

    @property
    def never_run(self) -> bool:
        return self.last_run is None

    @property
    def proven_text(self) -> str:
        """Where the shim was last proven, or plainly that it never was."""
        if self.last_proven is not None:
            p = self.last_proven
            return f"{p.where} · {p.date} ({p.outcome}, {p.mode} shim)"
        if self.last_run is None:
            return "never run"
        r = self.last_run
        detail = f": {r.detail}" if r.detail else ""
        return f"never proven — last run {r.outcome} on {r.where} · {r.date}{detail}"

    @property
    def attention(self) -> tuple[str, ...]:
        """Why a person should look at this shim this week, most urgent first."""
        v = self.verdict
        reasons = []
        if self.newly_broken_lanes:
            reasons.append(f"newly broken on {', '.join(self.newly_broken_lanes)}")
        elif self.broken_lanes:
            reasons.append(f"broken on {', '.join(self.broken_lanes)}")
        if v.decision == Decision.RETIRE:
            reasons.append("retire candidate")
        elif v.decision == Decision.RETIRE_IN_SOME:
            going = ", ".join(lane.lane for lane in v.leaving)
            reasons.append(f"retire in {going}" if going else "retire in some lanes")
        elif v.decision == Decision.UNKNOWN:
            reasons.append("unknown evidence")
        blocked = v.lanes_at(LaneStep.BLOCKED)
        if blocked:
            reasons.append(f"blocked on {', '.join(lane.lane for lane in blocked)}")
        reasons += [_ATTENTION_WORDS.get(k, str(k)) for k in _ATTENTION_FLAGS if v.flagged(k)]
        if self.never_run:
            reasons.append("reproducer never run")
        return tuple(reasons)


@dataclass(frozen=True)
class VerdictChange:
    shim: str
    before: str
    after: str
    why: str


@dataclass(frozen=True)
class Changes:
    # None: no previous report to compare with
    previous_week: str | None
    new: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    verdicts: tuple[VerdictChange, ...] = ()
    # (shim, lane, outcome)
    newly_broken: tuple[tuple[str, str, ShimOutcome], ...] = ()
    # (shim, lane) broken before, not now
    repaired: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.new or self.retired or self.verdicts or self.newly_broken or self.repaired)


class BurnSource(enum.StrEnum):
    """Where a burn-down point's count comes from, weakest first."""

    # counted in the git history of shims/*/manifest.toml
    GIT = "git"
    # an earlier report's own count
    REPORT = "report"
    # this report
    NOW = "now"


@dataclass(frozen=True)
class BurnPoint:
    week: str
    carried: int
    # retire candidates that week (known from reports only)
    candidates: int | None = None
    source: BurnSource = BurnSource.GIT


@dataclass(frozen=True)
class Headline:
    carried: int
    retire: int
    # shims with a newly broken cell
    newly_broken: int
    unknown: int
    # shims with any broken cell
    broken: int = 0
    keep: int = 0
    stale: int = 0
    drift: int = 0
    never_run: int = 0
    retire_in_some: int = 0
    # (shim, lane) pairs whose raise is blocked
    blocked: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BisectionRan:
    """One candidate bisection the report ran: the command a person would have typed, how it
    ended and how many reproducer runs it took (answers from the cache cost none)."""

    shim: str
    command: str
    # a retire.bisect Status (found, unpinned, no-transition), or "failed" (it could not start)
    status: str
    # BisectResult.summary(), or why it could not run
    summary: str
    runs: int = 0
    floor: str | None = None
    # why it stopped before its end: the budget ran out mid-way
    stopped: str | None = None

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BisectionLeft:
    """A candidate bisection the budget did not reach."""

    shim: str
    command: str
    why: str

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Bisections:
    """The candidate bisections of one report: within ``runs`` reproducer runs and ``minutes``
    (None: no such limit), which ran and which were left."""

    runs_budget: int | None
    minutes_budget: float | None
    ran: tuple[BisectionRan, ...] = ()
    left: tuple[BisectionLeft, ...] = ()

    @property
    def runs(self) -> int:
        return sum(b.runs for b in self.ran)

    @property
    def budget(self) -> str:
        """``12 reproducer runs, 30 minutes``."""
        parts = []
        if self.runs_budget is not None:
            parts.append(f"{self.runs_budget} reproducer run{'s' if self.runs_budget != 1 else ''}")
        if self.minutes_budget is not None:
            parts.append(f"{self.minutes_budget:g} minute{'s' if self.minutes_budget != 1 else ''}")
        return ", ".join(parts) or "no limit"

    def to_json(self) -> dict[str, object]:
        return {
            "budget": {"runs": self.runs_budget, "minutes": self.minutes_budget},
            "runs": self.runs,
            "ran": [b.to_json() for b in self.ran],
            "left": [b.to_json() for b in self.left],
        }


@dataclass(frozen=True)
class PreviousReport:
    """What this report needs of an earlier one (read from its JSON)."""

    week: str
    # shim → verdict
    verdicts: Mapping[str, str]
    # (shim, lane)
    broken: frozenset[tuple[str, str]] = frozenset()
    carried: int = 0
    candidates: int | None = None

    @classmethod
    def from_json(cls, data: object) -> PreviousReport:
        """``ValueError`` with a short reason when ``data`` is not a report."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("kind") != "patchlane-report":
            raise ValueError('not a patchlane report (no "kind": "patchlane-report")')
        week = parse_week(str(data.get("week", "")))
        shims = data.get("shims")
        if not isinstance(shims, list) or not all(
            isinstance(s, dict) and isinstance(s.get("shim"), str) for s in shims
        ):
            raise ValueError('"shims" must be a list of objects with a "shim" name')
        verdicts = {s["shim"]: str(s.get("verdict", "unknown")) for s in shims}
        broken: set[tuple[str, str]] = set()
        matrix = data.get("matrix", {})
        if not isinstance(matrix, dict):
            raise ValueError('"matrix" must be an object')
        for shim, lanes in matrix.items():
            if not isinstance(lanes, dict):
                raise ValueError(f"matrix.{shim} must be an object")
            for lane, cell in lanes.items():
                outcome = cell.get("outcome") if isinstance(cell, dict) else cell
                if outcome in FAILING:
                    broken.add((shim, lane))
        headline = data.get("headline", {})
        candidates = headline.get("retire") if isinstance(headline, dict) else None
        carried = headline.get("carried") if isinstance(headline, dict) else None
        return cls(
            week,
            verdicts,
            frozenset(broken),
            carried if isinstance(carried, int) else len(verdicts),
            candidates if isinstance(candidates, int) else None,
        )


@dataclass(frozen=True)
class Fact:
    """One thing said once with every (shim, lane) it touches: a flag under several shims (a
    host without a lock, a code host that did not answer), or the same reason and next step on
    several lanes. ``lanes`` is empty for a fact about shims."""

    text: str
    shims: tuple[str, ...]
    lanes: tuple[tuple[str, str], ...] = ()
    # the next step (a lane fact's until or action), "" when none
    next: str = ""
    kind: str = ""


@dataclass(frozen=True)
class Report:
    week: str
    # UTC ISO
    generated_at: str
    as_of: _dt.date
    headline: Headline
    rows: tuple[ShimEntry, ...]
    matrix: Matrix
    changes: Changes
    burndown: tuple[BurnPoint, ...]
    # faults met while gathering (bad previous report, unreadable records …)
    notes: tuple[str, ...] = ()
    # what the report cannot show yet and why, nothing wrong (no commit touches shims/ yet,
    # evidence from the cache only): advice, after what needs a person
    advice: tuple[str, ...] = ()
    # Markdown of retire.packs, when that module exists
    filing_queue: str | None = None
    # the candidate bisections run for this report (None: none were asked for)
    bisections: Bisections | None = None
    # what broke again (retire.report.regressions): the section that leads the report
    regressions: tuple[Regression, ...] = ()

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(row.verdict for row in self.rows)

    @property
    def attention(self) -> tuple[ShimEntry, ...]:
        return tuple(row for row in self.rows if row.attention)

    @property
    def ready(self) -> tuple[ShimEntry, ...]:
        """Shims a person can retire now, in every lane or in some."""
        going = (Decision.RETIRE, Decision.RETIRE_IN_SOME)
        return tuple(row for row in self.rows if row.verdict.decision in going)

    def lanes_at(self, *steps: LaneStep) -> tuple[tuple[ShimEntry, LaneVerdict], ...]:
        """(row, lane verdict) for every lane of every shim whose step is one of ``steps``."""
        return tuple((row, lane) for row in self.rows for lane in row.verdict.lanes_at(*steps))

    def lane_facts(self, step: LaneStep, only: frozenset[str] | None = None) -> tuple[Fact, ...]:
        """The lanes at ``step`` grouped by what they say: one reason and next step, once, with
        every (shim, lane) it holds for, in the order first met."""
        grouped: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for row, lane in self.lanes_at(step):
            if only is None or row.shim in only:
                key = (lane.why, lane_next(lane).removeprefix("until "))
                grouped.setdefault(key, []).append((row.shim, lane.lane))
        return tuple(
            Fact(why, tuple(dict.fromkeys(s for s, _ in pairs)), tuple(pairs), after)
            for (why, after), pairs in grouped.items()
        )

    @cached_property
    def grouped(self) -> frozenset[tuple[str, str]]:
        """The (shim, lane) pairs whose reason is said once for several pairs (a hold or a lane
        without a decision, :meth:`lane_facts`): their rows elsewhere point there."""
        return frozenset(
            pair
            for step in (LaneStep.HOLD, LaneStep.UNKNOWN)
            for fact in self.lane_facts(step)
            if len(fact.lanes) > 1
            for pair in fact.lanes
        )

    @cached_property
    def shared_flags(self) -> tuple[Fact, ...]:
        """Flags said alike under more than one shim: one fact about a host or a lane (no lock
        for a lane, a code host that did not answer), said once with the shims it touches."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for row in self.rows:
            for flag in row.verdict.flags:
                grouped.setdefault((flag.kind, flag.text), []).append(row.shim)
        return tuple(
            Fact(text, tuple(shims), kind=kind)
            for (kind, text), shims in grouped.items()
            if len(shims) > 1
        )

    @property
    def blocked(self) -> tuple[tuple[ShimEntry, LaneVerdict], ...]:
        """Every blocked (shim, lane), with its blocker: what would have to change upstream or
        in another pin for the shim to leave that lane."""
        return self.lanes_at(LaneStep.BLOCKED)

    @property
    def lane_columns(self) -> tuple[str, ...]:
        """The lanes any shim has a lane verdict for: the matrix's order, then the others."""
        named = {lane.lane for row in self.rows for lane in row.verdict.lane_verdicts}
        ordered = [lane for lane in self.matrix.lanes if lane in named]
        return (*ordered, *sorted(named - set(ordered)))

    @property
    def conflicts(self) -> tuple[tuple[ShimEntry, str], ...]:
        """(row, text) of every conflict flag: two evidence sources that disagree, both named."""
        return tuple(
            (row, flag.text)
            for row in self.rows
            for flag in row.verdict.flags
            if flag.kind == FlagKind.CONFLICT
        )

    @property
    def stale_or_unlinked(self) -> tuple[tuple[ShimEntry, Chase, str], ...]:
        """(row, why, text) for each shim a person must chase: ``stale`` (text: the flag's),
        ``policy`` (no link, and none is due) or ``unlinked`` (text: the upstream status)."""
        found = []
        for row in self.rows:
            flags = row.verdict.flags
            stale = next((f.text for f in flags if f.kind == FlagKind.STALE), None)
            upstream = row.manifest.upstream
            if stale:
                found.append((row, Chase.STALE, stale))
            elif not upstream.links:
                # a shims.model upstream status: "not-applicable" is a local policy
                policy = upstream.status == "not-applicable"
                found.append((row, Chase.POLICY if policy else Chase.UNLINKED, upstream.status))
        return tuple(found)


def lane_next(lane: LaneVerdict) -> str:
    """What one lane waits for or does next, one line: its blocker, what it holds until, the
    action that would decide it, or the floors it rises to ("" when there is nothing to say)."""
    if lane.blocker:
        return f"blocked by {lane.blocker}"
    if lane.until:
        return lane.until if lane.until.startswith("until ") else f"until {lane.until}"
    if lane.action:
        return lane.action
    if lane.floors:
        return "raise to " + ", ".join(map(str, lane.floors))
    return ""
