"""The weekly retirement report as values: built from manifests, lanes, verdicts, validation
records, the previous report and the history of shim counts. Pure: no I/O, no clock.

:func:`build` makes a :class:`Report`; ``retire.report_render`` turns it into Markdown, JSON and
text, ``retire.report_html`` into the HTML page, and ``retire.report`` does the I/O around both.

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
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from retire.core import times
from retire.evidence.values import ExecutionHistory, IssueState, ProbeFailure, PullState, ReleaseList, TagContainment
from retire.runs.lanerun import judge
from retire.evidence.validation import FAILING, PROVING, Mode, ShimOutcome

__all__ = [
    "CELL_OUTCOMES",
    "SCHEMA",
    "BurnPoint",
    "Cell",
    "Changes",
    "Headline",
    "Matrix",
    "PreviousReport",
    "Report",
    "RunStamp",
    "ShimRow",
    "VerdictChange",
    "build",
    "iso_week",
    "merge_burndown",
    "parse_week",
    "week_bounds",
]

#: Version of the JSON layout; a previous report of another schema is still read where it can be.
SCHEMA = 1
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
    if not 1970 <= year <= 9998:  # a report looks back and ahead some weeks: stay far from date's limits
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
    started_at: str  # UTC ISO
    outcome: str  # a validation.RunOutcome
    mode: str
    detail: str = ""

    @property
    def date(self) -> str:
        return self.started_at[:10]

    @property
    def where(self) -> str:
        machine = f"{self.host} ({self.gpu})" if self.gpu else self.host
        return f"{machine} · lane {self.lane}"

    def to_json(self) -> dict:
        return {"host": self.host, "gpu": self.gpu, "lane": self.lane, "date": self.date,
                "started_at": self.started_at, "outcome": self.outcome, "mode": self.mode, "detail": self.detail}


@dataclass(frozen=True)
class Cell:
    shim: str
    lane: str
    outcome: str  # a validation.ShimOutcome
    why: str
    date: str = ""  # day of the without-shim run ("" for not-run)
    host: str = ""

    @property
    def broken(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True)
class Matrix:
    """Lanes across, shims down. A missing cell: the lane neither lists nor ran the shim."""

    lanes: tuple[str, ...]
    defined: frozenset[str]  # lanes from the lane files (the others only appear in records)
    shims: tuple[str, ...]
    cells: Mapping[tuple[str, str], Cell]  # (shim, lane) → cell

    def cell(self, shim: str, lane: str) -> Cell | None:
        return self.cells.get((shim, lane))

    def counts(self) -> dict[str, int]:
        counted = {outcome: 0 for outcome in CELL_OUTCOMES}
        for cell in self.cells.values():
            counted[cell.outcome] = counted.get(cell.outcome, 0) + 1
        return counted


@dataclass(frozen=True)
class ShimRow:
    shim: str
    title: str
    fix_class: str
    owner: str
    created: _dt.date
    age_days: int
    upstream_status: str
    links: tuple[tuple[str, str], ...]  # (role, url)
    verdict: str
    why: str
    retirement_mode: str
    retire_when: tuple[str, ...]  # each manifest condition, as words
    conditions: tuple[tuple[str, str, str], ...]  # (kind, holds|fails|unknown, why) from the verdict
    failures: tuple[str, ...]
    floors: tuple[str, ...]
    lanes: tuple[str, ...]  # lanes that list the shim
    last_proven: RunStamp | None
    last_run: RunStamp | None
    broken_lanes: tuple[str, ...] = ()
    newly_broken_lanes: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()  # one line per piece of evidence the verdict rested on
    action: str | None = None  # the one thing that would decide an unknown (or confirm a candidate)
    flags: tuple[tuple[str, str], ...] = ()  # (kind, text): what needs a person without changing the verdict

    def flagged(self, kind: str) -> bool:
        return any(k == kind for k, _ in self.flags)

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
        reasons = []
        if self.newly_broken_lanes:
            reasons.append(f"newly broken on {', '.join(self.newly_broken_lanes)}")
        elif self.broken_lanes:
            reasons.append(f"broken on {', '.join(self.broken_lanes)}")
        if self.verdict == "retire":
            reasons.append("retire candidate")
        elif self.verdict == "unknown":
            reasons.append("unknown evidence")
        for kind in ("candidate", "conflict", "drift", "stale", "not-filed", "no-link"):
            if self.flagged(kind):
                reasons.append({"candidate": "one run from retiring", "no-link": "no upstream link",
                                "not-filed": "not filed upstream"}.get(kind, kind))
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
    previous_week: str | None  # None: no previous report to compare with
    new: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    verdicts: tuple[VerdictChange, ...] = ()
    newly_broken: tuple[tuple[str, str, str], ...] = ()  # (shim, lane, outcome)
    repaired: tuple[tuple[str, str], ...] = ()  # (shim, lane) broken before, not now

    @property
    def empty(self) -> bool:
        return not (self.new or self.retired or self.verdicts or self.newly_broken or self.repaired)


@dataclass(frozen=True)
class BurnPoint:
    week: str
    carried: int
    candidates: int | None = None  # retire candidates that week (known from reports only)
    source: str = "git"  # git | report | now


@dataclass(frozen=True)
class Headline:
    carried: int
    retire: int
    newly_broken: int  # shims with a newly broken cell
    unknown: int
    broken: int = 0  # shims with any broken cell
    keep: int = 0
    stale: int = 0
    drift: int = 0
    never_run: int = 0

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PreviousReport:
    """What this report needs of an earlier one (read from its JSON)."""

    week: str
    verdicts: Mapping[str, str]  # shim → verdict
    broken: frozenset[tuple[str, str]] = frozenset()  # (shim, lane)
    carried: int = 0
    candidates: int | None = None

    @classmethod
    def from_json(cls, data: object) -> PreviousReport:
        """``ValueError`` with a short reason when ``data`` is not a report."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("kind") != "patchlane-report":
            raise ValueError("not a patchlane report (no \"kind\": \"patchlane-report\")")
        week = parse_week(str(data.get("week", "")))
        shims = data.get("shims")
        if not isinstance(shims, list) or not all(isinstance(s, dict) and isinstance(s.get("shim"), str) for s in shims):
            raise ValueError("\"shims\" must be a list of objects with a \"shim\" name")
        verdicts = {s["shim"]: str(s.get("verdict", "unknown")) for s in shims}
        broken: set[tuple[str, str]] = set()
        matrix = data.get("matrix", {})
        if not isinstance(matrix, dict):
            raise ValueError("\"matrix\" must be an object")
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
        return cls(week, verdicts, frozenset(broken),
                   carried if isinstance(carried, int) else len(verdicts),
                   candidates if isinstance(candidates, int) else None)


@dataclass(frozen=True)
class Report:
    week: str
    generated_at: str  # UTC ISO
    as_of: _dt.date
    headline: Headline
    rows: tuple[ShimRow, ...]
    matrix: Matrix
    changes: Changes
    burndown: tuple[BurnPoint, ...]
    notes: tuple[str, ...] = ()  # faults met while gathering (bad previous report, unreadable records …)
    filing_queue: str | None = None  # Markdown of retire.packs, when that module exists
    verdicts: tuple[dict, ...] = field(default=(), compare=False)  # Verdict.to_json() for machines

    @property
    def attention(self) -> tuple[ShimRow, ...]:
        return tuple(row for row in self.rows if row.attention)

    @property
    def stale_or_unlinked(self) -> tuple[ShimRow, ...]:
        return tuple(row for row in self.rows if row.flagged("stale") or not row.links)


# ---------------------------------------------------------------------------------------------
# Building


def _stamp(record) -> RunStamp:
    host = record.host or {}
    gpu = host.get("gpu")
    return RunStamp(str(host.get("hostname") or "?"), str(gpu) if gpu else None, record.lane,
                    record.started_at, record.outcome, record.mode, record.detail)


def _condition_words(condition) -> str:
    if condition.kind == "version-floor":
        return f"{condition.distribution} {condition.version} released"
    if condition.kind == "pr-released":
        return f"{short_link(condition.url)} merged and released"
    if condition.kind == "commit-in-tag":
        return f"commit {condition.commit[:10]} of {short_link(condition.repository)} in a release tag"
    return "reproducer clean without the shim"


def short_link(url: str | None) -> str:
    """``Liger-Kernel#968`` for a GitHub-style issue / pull URL, else the URL without scheme."""
    if not url:
        return "?"
    found = re.match(r"https?://[^/]+/([^/]+)/([^/]+)/(?:issues|pull|pulls)/(\d+)", url)
    if found:
        return f"{found.group(2)}#{found.group(3)}"
    return re.sub(r"^https?://", "", url).rstrip("/")


def evidence_line(value: object) -> str:
    """One line for one piece of evidence (a ``retire.evidence`` value)."""
    if isinstance(value, ReleaseList):
        latest = value.latest
        when = f", {latest.upload_time.date()}" if latest and latest.upload_time else ""
        newest = f"newest {latest.version}{when}" if latest else "no installable release"
        return f"index: {value.distribution} has {len(value.releases)} release(s) on {value.index_url}; {newest}"
    if isinstance(value, PullState):
        state = f"merged {value.merged_at.date()}" if value.merged and value.merged_at else value.state
        return f"code host: {value.label} {state}" + (f" — {value.title}" if value.title else "")
    if isinstance(value, IssueState):
        reason = f" ({value.state_reason})" if value.state_reason else ""
        return f"code host: {value.label} {value.state}{reason}" + (f" — {value.title}" if value.title else "")
    if isinstance(value, TagContainment):
        tags = ", ".join(value.release_tags[:3]) or "no release tag"
        return f"git: {value.commit[:12]} of {value.repository} in {tags}"
    if isinstance(value, ExecutionHistory):
        runs = ", ".join(f"{r.outcome} on {r.where} {r.started_at[:10]}" for r in value.runs[-3:])
        return f"runs without the shim: {runs or 'none recorded'}"
    if isinstance(value, ProbeFailure):
        return f"probe failed: {value}"
    return f"{type(value).__name__}"


def _latest(records: Iterable, mode: str):
    best = None
    for record in records:
        if record.mode == mode and (best is None or record.started_at >= best.started_at):
            best = record
    return best


def _pair(records: Sequence):
    """The latest without-shim run and the with-shim run that belongs to it."""
    without = _latest(records, Mode.WITHOUT)
    if without is None:
        return None, _latest(records, Mode.WITH)
    withs = [r for r in records if r.mode == Mode.WITH and r.started_at >= without.started_at]
    if without.run:
        same = [r for r in withs if r.run == without.run]
        withs = same or withs
    return without, _latest(withs, Mode.WITH)


def build_matrix(lanes: Sequence, shim_ids: Sequence[str], records_by_cell: Mapping[tuple[str, str], list]) -> Matrix:
    """The lane × shim matrix from the latest records of each (shim, lane). Pure."""
    defined = [lane.name for lane in lanes]
    extra = sorted({lane for (_, lane) in records_by_cell} - set(defined))
    order = tuple(defined + extra)
    known = set(shim_ids)
    cells: dict[tuple[str, str], Cell] = {}
    for (shim, lane), group in records_by_cell.items():
        if shim not in known:
            continue
        without, with_shim = _pair(group)
        outcome, why = judge(without, with_shim)
        anchor = without or with_shim
        cells[(shim, lane)] = Cell(shim, lane, outcome, why, anchor.started_at[:10], str((anchor.host or {}).get("hostname") or "?"))
    for lane in lanes:
        for shim in lane.shims:
            if shim in known and (shim, lane.name) not in cells:
                cells[(shim, lane.name)] = Cell(shim, lane.name, ShimOutcome.NOT_RUN, f"lane {lane.name} lists it; no run recorded")
    return Matrix(order, frozenset(defined), tuple(shim_ids), cells)


def _changes(previous: PreviousReport | None, rows: Sequence[ShimRow], matrix: Matrix) -> Changes:
    broken_now = {(c.shim, c.lane): c.outcome for c in matrix.cells.values() if c.broken}
    if previous is None:
        return Changes(None, newly_broken=tuple((s, l, o) for (s, l), o in sorted(broken_now.items())))
    now = {row.shim: row for row in rows}
    new = tuple(s for s in now if s not in previous.verdicts)
    retired = tuple(sorted(s for s in previous.verdicts if s not in now))
    changed = tuple(VerdictChange(s, previous.verdicts[s], row.verdict, row.why)
                    for s, row in now.items() if s in previous.verdicts and previous.verdicts[s] != row.verdict)
    newly = tuple((s, l, o) for (s, l), o in sorted(broken_now.items()) if (s, l) not in previous.broken)
    repaired = tuple(sorted(cell for cell in previous.broken if cell not in broken_now and cell[0] in now))
    return Changes(previous.week, new, retired, changed, newly, repaired)


def merge_burndown(history: Iterable[BurnPoint], current: BurnPoint) -> tuple[BurnPoint, ...]:
    """One point per week: a report's own count beats git's for its week; ``current`` is last."""
    by_week: dict[str, BurnPoint] = {}
    rank = {"git": 0, "report": 1, "now": 2}
    for point in (*history, current):
        if point.week > current.week:
            continue
        held = by_week.get(point.week)
        if held is None or rank.get(point.source, 0) >= rank.get(held.source, 0):
            by_week[point.week] = point
    ordered = [by_week[w] for w in sorted(by_week)]
    return tuple(ordered[-BURNDOWN_WEEKS:])


def _missing_verdict(shim: str):
    from retire.verdicts.model import Verdict

    return Verdict(shim, "unknown", "no verdict: the probes returned nothing for this shim")


def build(
    manifests: Sequence,
    lanes: Sequence,
    verdicts: Sequence,
    records: Sequence,
    *,
    week: str,
    now: _dt.datetime,
    previous: PreviousReport | None = None,
    history: Iterable[BurnPoint] = (),
    notes: Sequence[str] = (),
    records_failure: str | None = None,
    filing_queue: str | None = None,
) -> Report:
    """The report for ``week`` (pure). ``records_failure`` says why no records could be read:
    then no row is called "never run" (that would be a claim the report cannot make)."""
    week = parse_week(week)
    as_of = min(now.date(), week_bounds(week)[1])
    manifests = sorted(manifests, key=lambda m: m.id)
    by_verdict = {v.shim: v for v in verdicts}
    shim_ids = [m.id for m in manifests]

    by_shim: dict[str, list] = {}
    by_cell: dict[tuple[str, str], list] = {}
    for record in records:
        by_shim.setdefault(record.shim, []).append(record)
        by_cell.setdefault((record.shim, record.lane), []).append(record)
    matrix = build_matrix(lanes, shim_ids, by_cell)
    broken_by_shim: dict[str, list[str]] = {}
    for cell in matrix.cells.values():
        if cell.broken:
            broken_by_shim.setdefault(cell.shim, []).append(cell.lane)
    lane_order = {lane: i for i, lane in enumerate(matrix.lanes)}
    previous_broken = previous.broken if previous is not None else None

    rows = []
    for manifest in manifests:
        verdict = by_verdict.get(manifest.id) or _missing_verdict(manifest.id)
        mine = by_shim.get(manifest.id, [])
        proven = [r for r in mine if r.outcome in PROVING]
        last_proven = _stamp(max(proven, key=lambda r: r.started_at)) if proven else None
        last_run = _stamp(max(mine, key=lambda r: r.started_at)) if mine else None
        if records_failure and last_run is None:
            last_run = RunStamp("?", None, "?", "", "unknown", "-", f"records unreadable: {records_failure}")
        broken = tuple(sorted(broken_by_shim.get(manifest.id, []), key=lane_order.__getitem__))
        newly = tuple(l for l in broken if previous_broken is None or (manifest.id, l) not in previous_broken)
        rows.append(ShimRow(
            shim=manifest.id, title=manifest.title, fix_class=manifest.fix_class, owner=manifest.owner,
            created=manifest.created, age_days=(as_of - manifest.created).days,
            upstream_status=manifest.upstream.status,
            links=tuple((link.role, link.url) for link in manifest.upstream.links),
            verdict=str(verdict.decision), why=verdict.why, retirement_mode=manifest.retirement.mode,
            retire_when=tuple(_condition_words(c) for c in manifest.retirement.conditions),
            conditions=tuple((c.kind, str(c.state), c.why) for c in verdict.conditions),
            failures=tuple(str(f) for f in verdict.failures), floors=tuple(verdict.floors),
            lanes=tuple(verdict.lanes) or tuple(l.name for l in lanes if manifest.id in l.shims),
            last_proven=last_proven, last_run=last_run, broken_lanes=broken, newly_broken_lanes=newly,
            evidence=tuple(evidence_line(e) for e in (*verdict.evidence, *verdict.failures)),
            action=verdict.action, flags=tuple((str(f.kind), f.text) for f in verdict.flags),
        ))
    rows_t = tuple(rows)
    count = {kind: sum(r.verdict == kind for r in rows_t) for kind in ("keep", "retire", "unknown")}
    count.update({kind: sum(r.flagged(kind) for r in rows_t) for kind in ("stale", "drift")})
    headline = Headline(
        carried=len(rows_t), retire=count["retire"], newly_broken=sum(bool(r.newly_broken_lanes) for r in rows_t),
        unknown=count["unknown"], broken=sum(bool(r.broken_lanes) for r in rows_t), keep=count["keep"],
        stale=count["stale"], drift=count["drift"], never_run=sum(r.never_run for r in rows_t),
    )
    burndown = merge_burndown(history, BurnPoint(week, headline.carried, headline.retire, "now"))
    return Report(
        week=week, generated_at=times.to_utc(now).isoformat(timespec="seconds"), as_of=as_of,
        headline=headline, rows=rows_t, matrix=matrix, changes=_changes(previous, rows_t, matrix),
        burndown=burndown, notes=tuple(notes), filing_queue=filing_queue,
        verdicts=tuple(_verdict_json(by_verdict.get(m.id) or _missing_verdict(m.id)) for m in manifests),
    )


def _verdict_json(verdict) -> dict:
    try:
        return verdict.to_json()
    except Exception as exc:  # noqa: BLE001 - evidence that will not serialise must not cost the report
        return {"shim": verdict.shim, "verdict": str(verdict.decision), "why": verdict.why,
                "error": f"evidence not serialisable: {type(exc).__name__}: {exc}"}
