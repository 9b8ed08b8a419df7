"""Lockfile bump PRs: re-lock lanes with upgrades on a branch, with the diff and the suites' word.

``patchlane bump [LANE…]`` (``nox -s bump``), in a separate worktree (see
:mod:`retire.branches.proposals`):

1. rolls every selected lane's freeze date (``exclude-newer``) forward to *now − cooldown*, so
   nothing younger than the cooldown is taken, transitive dependencies included;
2. re-locks the selected lanes with ``--upgrade`` (or ``--upgrade-package`` for ``--package``),
   and re-locks without upgrades any other lane whose definition the roll touched (a matrix
   file is one unit);
3. a lane file whose lane cannot be re-resolved is put back as it was, with its locks — the PR
   body says why;
4. diffs each lock (package: old → new, classified major / minor / patch / pre-release /
   nightly, with upload dates);
5. runs the bumped lanes' shim suites where this host can (records go into the branch's
   validation manifest), and compares each outcome with the latest recorded one: shims that
   became retirement candidates and shims that newly break;
6. commits on ``patchlane/bump-<lanes>-<date>`` and writes the PR body; with a token and a
   repository it opens the PR. Nothing new to take → no branch.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retire.bisect.budget import Budget, Meter
from retire.bisect.culprit import Culprit
from retire.branches import breaks, proposals
from retire.branches.options import BumpOptions
from retire.branches.proposals import BranchStatus
from retire.branches.prstatus import NOT_REQUESTED, PrStatus
from retire.core import mdsafe, uv
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.git import Git, revision, toplevel
from retire.core.project import Project
from retire.evidence import validation
from retire.evidence.validation import FAILING, ShimOutcome
from retire.lanes import lanedit, lanefile
from retire.lanes.model import Lane
from retire.lanes.revisions import MirrorLookup
from retire.locks import lockdiff, locking
from retire.locks.locking import LockResult
from retire.probes.client import make_client
from retire.probes.http import Fetcher
from retire.probes.notes import release_notes
from retire.runs import lanerun as runs
from retire.runs.guards import GuardOutcome, guards_for, judge_guard
from shims import times

BRANCH_PREFIX = "patchlane/bump-"
_TRAILER = "Patchlane-Bump"


class BumpStatus(enum.StrEnum):
    """What the bump did to one lane."""

    BUMPED = "bumped"
    #: nothing newer to take
    UNCHANGED = "unchanged"
    #: the lane could not be re-resolved; its lock is untouched
    FAILED = "failed"
    #: another lane of its file failed, so the file and its locks were put back
    REVERTED = "reverted"


@dataclass(frozen=True)
class LaneBump:
    lane: str
    status: BumpStatus
    why: str = ""
    changes: tuple[lockdiff.PackageChange, ...] = ()
    # (shim, outcome now, outcome before)
    outcomes: tuple[tuple[str, str, str | None], ...] = ()
    # (package, release-notes URL) where the index names them
    notes: tuple[tuple[str, str], ...] = ()
    # what broke between the old lock and the new, and which change did it (retire.branches.breaks)
    culprits: tuple[Culprit, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", BumpStatus(self.status))


@dataclass(frozen=True)
class BumpResult:
    branch: str
    status: BranchStatus
    reason: str = ""
    lanes: tuple[LaneBump, ...] = ()
    body_path: str | None = None
    pr_status: PrStatus = NOT_REQUESTED
    pr_url: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", BranchStatus(self.status))

    @property
    def retirement_candidates(self) -> list[tuple[str, str]]:
        return retirement_candidates(self.lanes)

    @property
    def newly_broken(self) -> list[tuple[str, str]]:
        return newly_broken(self.lanes)


def retirement_candidates(lanes: Sequence[LaneBump]) -> list[tuple[str, str]]:
    """(lane, shim) that the bump made upstream-fixed."""
    return [
        (lane.lane, shim)
        for lane in lanes
        for shim, now, before in lane.outcomes
        if now == ShimOutcome.UPSTREAM_FIXED and before != ShimOutcome.UPSTREAM_FIXED
    ]


def newly_broken(lanes: Sequence[LaneBump]) -> list[tuple[str, str]]:
    """(lane, shim) that fail on the bumped locks and did not before."""
    return [
        (lane.lane, shim)
        for lane in lanes
        for shim, now, before in lane.outcomes
        if now in FAILING and before not in FAILING
    ]


def regressed_guards(lanes: Sequence[LaneBump]) -> list[tuple[str, str]]:
    """(lane, guard) whose retired bug reproduces on the bumped locks and did not before."""
    return [
        (lane.lane, shim)
        for lane in lanes
        for shim, now, before in lane.outcomes
        if now == GuardOutcome.REGRESSED and before != GuardOutcome.REGRESSED
    ]


def previous_guard_outcomes(
    records: Sequence[validation.ValidationRecord], guards: Iterable[str]
) -> dict[tuple[str, str], GuardOutcome]:
    """The latest judged outcome per (lane, guard) from recorded runs (without-shim only)."""
    wanted = set(guards)
    latest: dict[tuple[str, str], validation.ValidationRecord] = {}
    for record in sorted(records, key=lambda r: r.started_at):
        if record.shim in wanted and record.mode == validation.Mode.WITHOUT:
            latest[(record.lane, record.shim)] = record
    return {key: judge_guard(record)[0] for key, record in latest.items()}


def branch_name(lanes: Sequence[str], everything: bool, day: _dt.date) -> str:
    label = "all" if everything else ("+".join(lanes) if len(lanes) <= 3 else f"{len(lanes)}-lanes")
    return f"{BRANCH_PREFIX}{label}-{day.isoformat()}"


def cutoff_for(now: _dt.datetime, cooldown_days: int) -> _dt.datetime:
    """Midnight UTC, ``cooldown_days`` before ``now``: the new freeze date."""
    return times.to_utc((times.to_utc(now) - _dt.timedelta(days=cooldown_days)).date())


def previous_outcomes(
    records: Sequence[validation.ValidationRecord],
) -> dict[tuple[str, str], ShimOutcome]:
    """The latest judged outcome per (lane, shim) from recorded runs."""
    latest: dict[tuple[str, str, str], validation.ValidationRecord] = {}
    for record in sorted(records, key=lambda r: r.started_at):
        latest[(record.lane, record.shim, record.mode)] = record
    out = {}
    for lane, shim, mode in list(latest):
        if mode == validation.Mode.WITHOUT:
            out[(lane, shim)] = runs.judge(
                latest[(lane, shim, mode)], latest.get((lane, shim, validation.Mode.WITH))
            )[0]
    return out


def pr_body(
    result_lanes: Sequence[LaneBump],
    *,
    cutoff: _dt.datetime,
    packages: Sequence[str],
    suites_ran: bool,
) -> str:
    scope = f"`--upgrade-package {' '.join(packages)}`" if packages else "all packages"
    lines = [
        (
            f"Re-locked with upgrades ({scope}); nothing uploaded after **{cutoff.date()}** is "
            f"taken "
            "(cooldown, transitive dependencies included)."
        ),
        "",
    ]
    candidates, broken = retirement_candidates(result_lanes), newly_broken(result_lanes)
    lines += breaks.breaks_markdown({lane.lane: lane.culprits for lane in result_lanes})
    lines += breaks.regressed_markdown(regressed_guards(result_lanes))
    if candidates:
        lines += [
            "### Shims that became retirement candidates",
            *[f"- `{shim}` on lane `{lane}`" for lane, shim in candidates],
            "",
        ]
    if broken:
        lines += [
            "### Shims that newly break",
            *[f"- `{shim}` on lane `{lane}`" for lane, shim in broken],
            "",
        ]
    for lane in result_lanes:
        lines += [
            f"### Lane `{lane.lane}` — {lane.status}"
            + (f": {mdsafe.text(lane.why)}" if lane.why else ""),
            "",
        ]
        if lane.status == BumpStatus.BUMPED:
            lines += [lockdiff.markdown_table(lane.changes), ""]
            versions = {c.name: c.new for c in lane.changes}
            if lane.notes:
                lines += [
                    # the address is the index's metadata: linked only if it is a plain http(s) one
                    "Release notes: "
                    + ", ".join(
                        mdsafe.link(f"{name} {versions.get(name) or ''}".strip(), url)
                        for name, url in lane.notes
                    ),
                    "",
                ]
        if lane.outcomes:
            lines += ["| shim | outcome | before |", "|---|---|---|"]
            lines += [
                f"| {mdsafe.text(s)} | {mdsafe.text(now)} | {mdsafe.text(before or '—')} |"
                for s, now, before in lane.outcomes
            ]
            lines.append("")
    if not suites_ran:
        lines += [
            (
                "_The shim suites were not run for this bump (`--no-run`, or no lane could run on "
                "this "
                "host)._"
            ),
            "",
        ]
    lines += [
        "---",
        (
            "Proposed by `patchlane bump`. patchlane never merges: let the lane matrix run, then "
            "merge "
            "by hand."
        ),
    ]
    return "\n".join(lines) + "\n"


@dataclass
class _Work:
    """What the edit found, for the caller (the edit itself returns only the commit message)."""

    lanes: list[LaneBump] = field(default_factory=list)
    suites_ran: bool = False


@dataclass(frozen=True)
class _BumpRequest:
    """What one bump asks of its worktree."""

    selected: tuple[str, ...]
    packages: tuple[str, ...]
    cutoff: _dt.datetime
    run_suites: bool
    base_commit: str
    records: tuple[validation.ValidationRecord, ...]
    say: Callable[[str], None]
    fetcher: Fetcher | None = None
    # where every re-lock finds revisions and indexes (the command's --mirrors, --index-url)
    mirrors: MirrorLookup | None = None
    host: uv.HostIndexes | None = None
    # what the culprit searches of newly broken lanes may spend (None: breaks.DEFAULT_BUDGET)
    culprit_budget: Budget | None = None
    # where culprit searches keep their environments and cached runs: the checkout's state
    state: Path | None = None


def _files_of(lanes: Iterable[Lane]) -> dict[str, list[Lane]]:
    files: dict[str, list[Lane]] = {}
    for lane in lanes:
        files.setdefault(lane.file, []).append(lane)
    return files


def _roll(work: Path, request: _BumpRequest, before: Mapping[str, Lane]) -> list[str]:
    """Move the selected lanes' files' freeze dates forward to the cutoff; the files rolled."""
    rolled = [
        file
        for file in _files_of(before[name] for name in request.selected)
        if lanedit.roll_exclude_newer(work / file, request.cutoff, within=work)
    ]
    for file in rolled:
        request.say(f"{file}: exclude-newer → {request.cutoff.date()}")
    return rolled


def _relock(
    request: _BumpRequest, after: Mapping[str, Lane], rolled: Sequence[str], locks_dir: Path
) -> dict[str, LockResult]:
    """Re-lock the selected lanes with upgrades, and the other lanes of a rolled file whose lock
    the roll made stale (a file bumps as a unit) without."""
    stale = [
        lane
        for file in rolled
        for lane in _files_of(after.values()).get(file, [])
        if lane.name not in request.selected and not locking.lock_state(lane, locks_dir).current
    ]
    request.say(
        f"re-locking {len(request.selected)} lane(s) with upgrades"
        + (f", {len(stale)} touched by the roll" if stale else "")
    )
    results = {
        r.lane: r
        for r in locking.lock_lanes(
            [after[n] for n in request.selected],
            locks_dir,
            force=True,
            upgrade=not request.packages,
            upgrade_packages=request.packages,
            host=request.host,
            mirrors=request.mirrors,
        )
    }
    results.update(
        {
            r.lane: r
            for r in locking.lock_lanes(
                stale, locks_dir, host=request.host, mirrors=request.mirrors
            )
        }
    )
    return results


def _put_back_failed(
    work: Path, base_commit: str, after: Mapping[str, Lane], results: Mapping[str, LockResult]
) -> set[str]:
    """A file bumps as a unit: one whose lane failed goes back as it was, with its locks."""
    files = _files_of(after.values())
    failed = {
        file
        for file, members in files.items()
        if any(m.name in results and not results[m.name].ok for m in members)
    }
    for file in failed:
        Git(work).run("checkout", revision(base_commit), "--", file)
        for member in files[file]:
            Git(work).run(
                "checkout", revision(base_commit), "--", f"locks/{member.name}", check=False
            )
    return failed


def _lane_bump(
    project: Project,
    name: str,
    result: LockResult,
    old_lock: dict[str, Any] | None,
    fetcher: Fetcher | None,
) -> LaneBump:
    """One re-locked lane: the diff of its lock and the release notes of what it takes."""
    if not result.ok:
        why = f"{result.status}: {result.message}; its lock is untouched"
        return LaneBump(name, BumpStatus.FAILED, why)
    new_lock = locking.read_lock(locking.lock_path(project.locks_dir, name))
    changes = lockdiff.diff(old_lock, new_lock)
    if not changes:
        return LaneBump(name, BumpStatus.UNCHANGED, "nothing newer to take")
    taken = [(c.name, c.new) for c in changes if c.new and c.kind not in ("downgrade", "removed")]
    notes = release_notes(fetcher, new_lock, taken) if fetcher is not None and taken else {}
    return LaneBump(name, BumpStatus.BUMPED, "", changes, notes=tuple(sorted(notes.items())))


def _commit_message(bumps: Sequence[LaneBump], cutoff: _dt.datetime) -> str:
    changed = [b for b in bumps if b.status == BumpStatus.BUMPED]
    head = ", ".join(
        f"{b.lane} ({len(b.changes)} change{'s' if len(b.changes) != 1 else ''})" for b in changed
    )
    return (
        f"Bump locks: {head}\n\nRe-locked with uv, upgrades taken up to {cutoff.date()} "
        f"(cooldown).\n\n"
        + "\n".join(
            f"{b.lane}: {c.name} {c.old or '-'} -> {c.new or '-'} ({c.kind})"
            for b in changed
            for c in b.changes
        )
        + "\n"
    )


def _edit(work: Path, request: _BumpRequest, out: _Work) -> str | None:
    """Roll, re-lock, diff (and run the suites) inside the worktree; the commit message, or None
    when no lane has anything newer to take."""
    project = Project(work)
    before: dict[str, Lane] = {lane.name: lane for lane in lanefile.project_lanes(project)}
    old_locks = {
        name: locking.read_lock(locking.lock_path(project.locks_dir, name)) for name in before
    }
    old_bytes = {
        name: path.read_bytes()
        for name in before
        if (path := locking.lock_path(project.locks_dir, name)).is_file()
    }
    rolled = _roll(work, request, before)
    after: dict[str, Lane] = {lane.name: lane for lane in lanefile.project_lanes(project)}
    results = _relock(request, after, rolled, project.locks_dir)
    failed_files = _put_back_failed(work, request.base_commit, after, results)
    bumps = []
    for name in request.selected:
        file = after[name].file
        if results[name].ok and file in failed_files:
            why = f"another lane of {file} failed to re-resolve; lock untouched"
            bumps.append(LaneBump(name, BumpStatus.REVERTED, why))
            continue
        bumps.append(_lane_bump(project, name, results[name], old_locks.get(name), request.fetcher))
    if not any(b.status == BumpStatus.BUMPED for b in bumps):
        out.lanes = bumps
        return None
    if request.run_suites:
        records = ran_on(request.records, before)
        bumps = _run_suites(work, bumps, after, records, request.say, out)
        bumps = _find_breaks(work, request, bumps, after, old_bytes)
    out.lanes = bumps
    return _commit_message(bumps, request.cutoff)


def _run_suites(
    work: Path,
    bumps: list[LaneBump],
    lanes: Mapping[str, Lane],
    records: Sequence[validation.ValidationRecord],
    say: Callable[[str], None],
    out: _Work,
) -> list[LaneBump]:
    project = Project(work)
    manifests = project.manifests()
    guards = tuple(project.guards().values())
    chosen = [
        lanes[b.lane]
        for b in bumps
        if b.status == BumpStatus.BUMPED
        and (lanes[b.lane].shims or guards_for(lanes[b.lane], guards))
    ]
    if not chosen:
        return bumps
    say(f"running the shim suites of {len(chosen)} bumped lane(s)")
    options = runs.RunOptions(
        locks_dir=project.locks_dir, envs_dir=work.parent.parent / "envs-bump", guards=guards
    )
    done = {
        run.lane: run
        for run in runs.run_lanes(
            chosen, manifests, options, progress=lambda lane, msg: say(f"[{lane}] {msg}")
        )
    }
    new_records = [r for run in done.values() for s in run.shims for r in s.records]
    new_records += [g.record for run in done.values() for g in run.guards if g.record]
    if new_records:
        validation.append(project.validation, new_records)
    out.suites_ran = any(run.status == runs.LaneStatus.RAN for run in done.values())
    before: dict[tuple[str, str], str] = {**previous_outcomes(records)}
    before.update(previous_guard_outcomes(records, (g.id for g in guards)))
    updated = []
    for bump in bumps:
        run = done.get(bump.lane)
        if run is None:
            updated.append(bump)
            continue
        outcomes: tuple[tuple[str, str, str | None], ...] = (
            *((s.shim, s.outcome, before.get((bump.lane, s.shim))) for s in run.shims),
            *((g.guard, g.outcome, before.get((bump.lane, g.guard))) for g in run.guards),
        )
        why = bump.why if run.status == runs.LaneStatus.RAN else f"suites {run.status}: {run.why}"
        updated.append(dataclasses.replace(bump, why=why, outcomes=outcomes))
    return updated


def _find_breaks(
    work: Path,
    request: _BumpRequest,
    bumps: list[LaneBump],
    lanes: Mapping[str, Lane],
    old_bytes: Mapping[str, bytes],
) -> list[LaneBump]:
    """The culprit of every outcome the bump turned from clean to broken, within the budget."""
    project = Project(work)
    state = Project(request.state or work)
    subjects = {**project.manifests(), **project.guards()}
    meter = Meter(request.culprit_budget or breaks.DEFAULT_BUDGET)
    updated = []
    for bump in bumps:
        broken = [
            (subjects[s], m) for s, m in breaks.broken_subjects(bump.outcomes) if s in subjects
        ]
        if not broken or bump.lane not in old_bytes:
            updated.append(bump)
            continue
        old_lock = state.inside(".patchlane", "culprit", bump.lane, "old", "pylock.toml")
        atomic_write(old_lock, old_bytes[bump.lane], within=state.root)
        found = breaks.find_breaks(
            state,
            lanes[bump.lane],
            old_lock,
            locking.lock_path(project.locks_dir, bump.lane),
            broken,
            meter=meter,
            on_record=lambda record: validation.append(project.validation, [record]),
            say=request.say,
        )
        breaks.record(project, found)
        updated.append(dataclasses.replace(bump, culprits=found))
    return updated


DEFAULT_BUMP = BumpOptions()


def _body(work: _Work, cutoff: _dt.datetime, packages: Sequence[str]) -> str:
    """The bump's PR body, from what its edit did."""
    return pr_body(tuple(work.lanes), cutoff=cutoff, packages=packages, suites_ran=work.suites_ran)


def bump(
    root: Path,
    options: BumpOptions = DEFAULT_BUMP,
    *,
    say: Callable[[str], None] = lambda line: None,
) -> BumpResult:
    """Propose the bump branch (the module docstring says how). ``options.mirrors`` and
    ``options.host`` reach every re-lock: this host's git mirrors for lanes pinned to revisions,
    the index URLs."""
    o, start = options, _start(root, options)
    repo, cutoff, base_commit, branch = start.repo, start.cutoff, start.base_commit, start.branch
    upgrades = o.packages
    identity = hashlib.sha256(
        json.dumps([base_commit, start.selected, upgrades, cutoff.isoformat()]).encode()
    ).hexdigest()[:16]
    records = tuple(validation.load(Project(repo).validation))
    work_state = _Work()
    with proposals.session(repo), make_client() as client:
        # the index: bump re-locks from it anyway
        fetcher = Fetcher(client) if o.release_notes_links else None
        request = _BumpRequest(
            start.selected, upgrades, cutoff, o.run_suites, base_commit, records, say, fetcher,
            o.mirrors, o.host, o.culprit_budget, repo,
        )  # fmt: skip
        made = proposals.propose_branch(
            repo,
            base_commit=base_commit,
            branch=branch,
            marker=f"{_TRAILER}: {identity}",
            folder="bump",
            edit=lambda work: _edit(work, request, work_state),
            # saved before the branch exists: never a branch without its body
            body=lambda: _body(work_state, cutoff, upgrades),
        )
    lane_results = tuple(work_state.lanes)
    if made.status == BranchStatus.UNCHANGED:
        why = "no lane has anything newer to take"
        return BumpResult(branch, BranchStatus.UNCHANGED, why, lane_results)
    if made.status != BranchStatus.PROPOSED:
        return BumpResult(branch, made.status, made.reason, lane_results)
    body = _body(work_state, cutoff, upgrades)
    result = BumpResult(branch, BranchStatus.PROPOSED, "", lane_results, str(made.body_path))
    if o.open_pr:
        bumped = ", ".join(b.lane for b in lane_results if b.status == BumpStatus.BUMPED)
        title = f"Bump locks: {bumped} ({start.now.date()})"
        status, url = proposals.open_pull_request(
            repo,
            branch=branch,
            base_branch=start.base_branch,
            title=title,
            body=body,
            repository=o.repository,
            api_base=o.api_base,
        )
        result = dataclasses.replace(result, pr_status=status, pr_url=url)
    return result


# ---------------------------------------------------------------------------------------------
# Before the bump: its base holds the adoption; what a lane's outcome was "before"; the dry run


def ran_on(
    records: Iterable[validation.ValidationRecord], lanes: Mapping[str, Lane]
) -> list[validation.ValidationRecord]:
    """The records of runs on each lane's lock as it is (its lock inputs' digest): an outcome of
    another release's lock is no "before" of this one. A record that names no lock (written
    before records named one) cannot be told apart, and is kept."""
    kept = []
    for record in records:
        lane = lanes.get(record.lane)
        ran = record.environment.get("lock")
        if lane is not None and (not ran or ran == lane.digest):
            kept.append(record)
    return kept


_COMMIT_FIRST = (
    "commit the adoption first (`git add -A && git commit -m 'Adopt patchlane'`), or pass "
    "--base naming a commit that holds it"
)


@dataclass(frozen=True)
class _Start:
    """Where a bump and its dry run begin: the repository's top, the time, the lanes asked for
    (by name), the new freeze date, the committed base (and the branch a PR targets) and the
    bump branch's name."""

    repo: Path
    now: _dt.datetime
    selected: tuple[str, ...]
    cutoff: _dt.datetime
    base_commit: str
    base_branch: str
    branch: str


def _start(root: Path, o: BumpOptions) -> _Start:
    if o.cooldown_days < 0:
        raise InputError(None, "--cooldown", "must be zero or more days", "e.g. --cooldown 7")
    repo = toplevel(root)
    now = o.now or times.now()
    lanes = lanefile.project_lanes(Project(repo))
    selected = tuple(lane.name for lane in lanefile.select(lanes, list(o.lanes)))
    base_commit, base_branch = _committed_base(repo, o, lanes)
    branch = branch_name(selected, not o.lanes, now.date())
    cutoff = cutoff_for(now, o.cooldown_days)
    return _Start(repo, now, selected, cutoff, base_commit, base_branch, branch)


def _committed_base(repo: Path, o: BumpOptions, lanes: Sequence[Lane]) -> tuple[str, str]:
    """(commit, branch a PR targets) of ``--base``, refused in one line when that commit lacks
    the lane files the bump re-locks (an adoption not committed yet: the bump's worktree is made
    from the commit, where they are not)."""
    git = Git(repo)
    if o.base == "HEAD" and git.rev_parse("HEAD^{commit}") is None:
        raise InputError(
            str(repo), None, "has no commit yet: the bump starts from one", _COMMIT_FIRST
        )
    base_commit, base_branch = proposals.base_of(repo, o.base, o.pr_base)
    # lane files as the project (the repository's top) names them
    inside = sorted({lane.file for lane in lanes if lane.file})
    held = set(
        git.run("ls-tree", "-r", "--name-only", revs=[base_commit], paths=inside).split("\n")
    )
    missing = [path for path in inside if path not in held]
    if missing:
        raise InputError(
            missing[0],
            None,
            f"is not in {base_commit[:12]} ({o.base}), the commit the bump branch starts from"
            + (f" (nor are {len(missing) - 1} more lane files)" if len(missing) > 1 else ""),
            _COMMIT_FIRST,
        )
    return base_commit, base_branch


@dataclass(frozen=True)
class BumpPlan:
    """What ``bump --dry-run`` found: the lanes that would move and how, what the bumped lanes'
    suites would run, where the branch and its pull request would go — nothing written."""

    branch: str
    base: str
    cutoff: str
    lanes: tuple[LaneBump, ...]
    # (lane, the shims and guards its suites would run, why they would not run here: "" when
    # they would)
    runs: tuple[tuple[str, tuple[str, ...], str], ...]
    # where the pull request would be opened; "" when it would not be
    pull_request: str

    def to_json(self) -> dict[str, object]:
        return {
            "dry_run": True,
            "branch": self.branch,
            "base": self.base,
            "cutoff": self.cutoff,
            "lanes": [
                {
                    "lane": lane.lane,
                    "status": lane.status.value,
                    "why": lane.why,
                    "changes": [change.to_json() for change in lane.changes],
                }
                for lane in self.lanes
            ],
            "runs": [
                {"lane": lane, "subjects": list(subjects), "skipped": why or None}
                for lane, subjects, why in self.runs
            ],
            "pull_request": self.pull_request or None,
        }


def dry_run(
    root: Path,
    options: BumpOptions = DEFAULT_BUMP,
    *,
    say: Callable[[str], None] = lambda line: None,
) -> BumpPlan:
    """What :func:`bump` would do, without a branch or a pull request: the same roll and re-lock
    in a scratch worktree of the base commit (removed after), the suites not run but named."""
    o = options
    start = _start(root, o)
    repo, cutoff, base_commit = start.repo, start.cutoff, start.base_commit
    work_state = _Work()
    with proposals.session(repo), proposals.scratch_worktree(repo, base_commit, "bump") as work:
        request = _BumpRequest(
            start.selected, o.packages, cutoff, False, base_commit, (), say, None, o.mirrors,
            o.host, o.culprit_budget, repo,
        )  # fmt: skip
        _edit(work, request, work_state)
        lanes = {lane.name: lane for lane in lanefile.project_lanes(Project(work))}
        guards = tuple(Project(work).guards().values())
    bumped = [b.lane for b in work_state.lanes if b.status == BumpStatus.BUMPED]
    host = runs.Host.detect() if bumped and o.run_suites else None
    would_run = tuple(
        (
            name,
            (*lanes[name].shims, *(g.id for g in guards_for(lanes[name], guards))),
            "--no-run"
            if host is None
            else (
                f"needs a CUDA host ({host.description})"
                if lanes[name].needs_cuda and not host.cuda
                else ""
            ),
        )
        for name in bumped
    )
    return BumpPlan(
        start.branch,
        base_commit,
        cutoff.date().isoformat(),
        tuple(work_state.lanes),
        would_run,
        # a pull request is opened only in a repository named (--repo)
        o.repository if o.open_pr and bumped and o.repository else "",
    )
