"""Lockfile bump PRs: re-lock lanes with upgrades on a branch, with the diff and the suites' word.

``patchlane bump [LANE…]`` (``nox -s bump``), in a separate worktree (see
:mod:`retire.proposals`):

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
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retire.branches import proposals
from retire.core.errors import InputError
from retire.core.git import Git, toplevel
from retire.core.project import Project
from retire.evidence import validation
from retire.evidence.validation import FAILING, ShimOutcome
from retire.lanes import lanedit, lanefile
from retire.locks import lockdiff, locking
from retire.probes.client import make_client
from retire.probes.http import Fetcher
from retire.probes.notes import release_notes
from retire.runs import lanerun as runs
from shims import times

BRANCH_PREFIX = "patchlane/bump-"
_TRAILER = "Patchlane-Bump"


@dataclass(frozen=True)
class LaneBump:
    lane: str
    # bumped | unchanged | failed | reverted (another lane of its file failed)
    status: str
    why: str = ""
    changes: tuple[lockdiff.PackageChange, ...] = ()
    # (shim, outcome now, outcome before)
    outcomes: tuple[tuple[str, str, str | None], ...] = ()
    # (package, release-notes URL) where the index names them
    notes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BumpResult:
    branch: str
    # proposed | already-proposed | exists-differs | unchanged
    status: str
    reason: str = ""
    lanes: tuple[LaneBump, ...] = ()
    body_path: str | None = None
    pr_status: str = "not-requested"
    pr_url: str | None = None

    @property
    def retirement_candidates(self) -> list[tuple[str, str]]:
        return retirement_candidates(self.lanes)

    @property
    def newly_broken(self) -> list[tuple[str, str]]:
        return newly_broken(self.lanes)


def retirement_candidates(lanes: Sequence[LaneBump]) -> list[tuple[str, str]]:
    """(lane, shim) that the bump made upstream-fixed."""
    return [
        (l.lane, shim)
        for l in lanes
        for shim, now, before in l.outcomes
        if now == ShimOutcome.UPSTREAM_FIXED and before != ShimOutcome.UPSTREAM_FIXED
    ]


def newly_broken(lanes: Sequence[LaneBump]) -> list[tuple[str, str]]:
    """(lane, shim) that fail on the bumped locks and did not before."""
    return [
        (l.lane, shim)
        for l in lanes
        for shim, now, before in l.outcomes
        if now in FAILING and before not in FAILING
    ]


def branch_name(lanes: Sequence[str], everything: bool, day: _dt.date) -> str:
    label = "all" if everything else ("+".join(lanes) if len(lanes) <= 3 else f"{len(lanes)}-lanes")
    return f"{BRANCH_PREFIX}{label}-{day.isoformat()}"


def cutoff_for(now: _dt.datetime, cooldown_days: int) -> _dt.datetime:
    """Midnight UTC, ``cooldown_days`` before ``now``: the new freeze date."""
    return times.to_utc((times.to_utc(now) - _dt.timedelta(days=cooldown_days)).date())


def previous_outcomes(records: Sequence[validation.ValidationRecord]) -> dict[tuple[str, str], str]:
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
    if candidates:
        lines += [
            "### Shims that became retirement candidates",
            *[f"- `{s}` on lane `{l}`" for l, s in candidates],
            "",
        ]
    if broken:
        lines += ["### Shims that newly break", *[f"- `{s}` on lane `{l}`" for l, s in broken], ""]
    for lane in result_lanes:
        lines += [
            f"### Lane `{lane.lane}` — {lane.status}" + (f": {lane.why}" if lane.why else ""),
            "",
        ]
        if lane.status == "bumped":
            lines += [lockdiff.markdown_table(lane.changes), ""]
            versions = {c.name: c.new for c in lane.changes}
            if lane.notes:
                lines += [
                    "Release notes: "
                    + ", ".join(
                        f"[{name} {versions.get(name) or ''}]({url})".replace(" ]", "]")
                        for name, url in lane.notes
                    ),
                    "",
                ]
        if lane.outcomes:
            lines += ["| shim | outcome | before |", "|---|---|---|"]
            lines += [f"| {s} | {now} | {before or '—'} |" for s, now, before in lane.outcomes]
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
    lanes: list[LaneBump] = field(default_factory=list)
    suites_ran: bool = False


def _files_of(lanes) -> dict[str, list]:
    files: dict[str, list] = {}
    for lane in lanes:
        files.setdefault(lane.file, []).append(lane)
    return files


def _edit(
    work: Path,
    *,
    selected: list[str],
    packages: tuple[str, ...],
    cutoff: _dt.datetime,
    run_suites: bool,
    base_commit: str,
    records: list,
    say: Callable[[str], None],
    out: _Work,
    fetcher=None,
) -> str | None:
    project = Project(work)
    locks_dir = project.locks_dir
    before = {lane.name: lane for lane in lanefile.project_lanes(project)}
    old_locks = {name: locking.read_lock(locking.lock_path(locks_dir, name)) for name in before}
    rolled = [
        file
        for file in _files_of(before[name] for name in selected)
        if lanedit.roll_exclude_newer(work / file, cutoff)
    ]
    for file in rolled:
        say(f"{file}: exclude-newer → {cutoff.date()}")
    after = {lane.name: lane for lane in lanefile.project_lanes(project)}
    # A file bumps as a unit: its other lanes are re-locked (without upgrades) when their lock is
    # not current.
    stale = [
        lane
        for file in rolled
        for lane in _files_of(after.values()).get(file, [])
        if lane.name not in selected and not locking.lock_state(lane, locks_dir).current
    ]
    say(
        f"re-locking {len(selected)} lane(s) with upgrades"
        + (f", {len(stale)} touched by the roll" if stale else "")
    )
    results = {
        r.lane: r
        for r in locking.lock_lanes(
            [after[n] for n in selected],
            locks_dir,
            force=True,
            upgrade=not packages,
            upgrade_packages=packages,
        )
    }
    results.update({r.lane: r for r in locking.lock_lanes(stale, locks_dir)})
    failed_files = {
        file
        for file, members in _files_of(after.values()).items()
        if any(m.name in results and not results[m.name].ok for m in members)
    }
    # a file bumps as a unit: put it and its locks back as they were
    for file in failed_files:
        Git(work).run("checkout", base_commit, "--", file)
        for member in _files_of(after.values())[file]:
            Git(work).run("checkout", base_commit, "--", f"locks/{member.name}", check=False)
    bumps = []
    for name in selected:
        file = after[name].file
        result = results[name]
        if not result.ok:
            bumps.append(
                LaneBump(
                    name, "failed", f"{result.status}: {result.message}; its lock is untouched"
                )
            )
            continue
        if file in failed_files:
            bumps.append(
                LaneBump(
                    name, "reverted", f"another lane of {file} failed to re-resolve; lock untouched"
                )
            )
            continue
        new_lock = locking.read_lock(locking.lock_path(locks_dir, name))
        changes = lockdiff.diff(old_locks.get(name), new_lock)
        taken = [
            (c.name, c.new) for c in changes if c.new and c.kind not in ("downgrade", "removed")
        ]
        notes = release_notes(fetcher, new_lock, taken) if fetcher is not None and taken else {}
        bumps.append(
            LaneBump(
                name,
                "bumped" if changes else "unchanged",
                "" if changes else "nothing newer to take",
                changes,
                notes=tuple(sorted(notes.items())),
            )
        )
    if not any(b.status == "bumped" for b in bumps):
        out.lanes = bumps
        return None
    if run_suites:
        bumps = _run_suites(work, bumps, after, records, say, out)
    out.lanes = bumps
    changed = [b for b in bumps if b.status == "bumped"]
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


def _run_suites(
    work: Path, bumps: list[LaneBump], lanes: dict, records: list, say, out: _Work
) -> list[LaneBump]:
    project = Project(work)
    manifests = project.manifests()
    chosen = [lanes[b.lane] for b in bumps if b.status == "bumped" and lanes[b.lane].shims]
    if not chosen:
        return bumps
    say(f"running the shim suites of {len(chosen)} bumped lane(s)")
    options = runs.RunOptions(
        locks_dir=project.locks_dir, envs_dir=work.parent.parent / "envs-bump"
    )
    done = {
        run.lane: run
        for run in runs.run_lanes(
            chosen, manifests, options, progress=lambda lane, msg: say(f"[{lane}] {msg}")
        )
    }
    new_records = [r for run in done.values() for s in run.shims for r in s.records]
    if new_records:
        validation.append(project.validation, new_records)
    out.suites_ran = any(run.status == "ran" for run in done.values())
    before = previous_outcomes(records)
    updated = []
    for bump in bumps:
        run = done.get(bump.lane)
        if run is None:
            updated.append(bump)
            continue
        outcomes = tuple((s.shim, s.outcome, before.get((bump.lane, s.shim))) for s in run.shims)
        why = bump.why if run.status == "ran" else f"suites {run.status}: {run.why}"
        updated.append(dataclasses.replace(bump, why=why, outcomes=outcomes))
    return updated


def bump(
    root: Path,
    *,
    lanes: Sequence[str] = (),
    packages: Sequence[str] = (),
    cooldown_days: int = 7,
    now: _dt.datetime | None = None,
    base: str = "HEAD",
    run_suites: bool = True,
    open_pr: bool = False,
    repository: str | None = None,
    api_base: str | None = None,
    pr_base: str | None = None,
    release_notes_links: bool = True,
    say: Callable[[str], None] = lambda line: None,
) -> BumpResult:
    if cooldown_days < 0:
        raise InputError(None, "--cooldown", "must be zero or more days", "e.g. --cooldown 7")
    repo = toplevel(root)
    now = now or times.now()
    all_lanes = lanefile.project_lanes(Project(repo))
    selected = [lane.name for lane in lanefile.select(all_lanes, list(lanes))]
    packages = tuple(packages)
    cutoff = cutoff_for(now, cooldown_days)
    base_commit, base_branch = proposals.base_of(repo, base, pr_base)
    branch = branch_name(selected, not lanes, now.date())
    identity = hashlib.sha256(
        json.dumps([base_commit, selected, packages, cutoff.isoformat()]).encode()
    ).hexdigest()[:16]
    records = validation.load(Project(repo).validation)
    work_state = _Work()
    with proposals.session(repo), make_client() as client:
        # the index: bump re-locks from it anyway
        fetcher = Fetcher(client) if release_notes_links else None
        made = proposals.propose_branch(
            repo,
            base_commit=base_commit,
            branch=branch,
            marker=f"{_TRAILER}: {identity}",
            folder="bump",
            edit=lambda work: _edit(
                work,
                selected=selected,
                packages=packages,
                cutoff=cutoff,
                run_suites=run_suites,
                base_commit=base_commit,
                records=records,
                say=say,
                out=work_state,
                fetcher=fetcher,
            ),
        )
    lane_results = tuple(work_state.lanes)
    if made.status == "unchanged":
        return BumpResult(branch, "unchanged", "no lane has anything newer to take", lane_results)
    if made.status != "proposed":
        return BumpResult(branch, made.status, made.reason, lane_results)
    body = pr_body(lane_results, cutoff=cutoff, packages=packages, suites_ran=work_state.suites_ran)
    body_path = proposals.save_body(repo, branch, body)
    result = BumpResult(branch, "proposed", "", lane_results, str(body_path))
    if open_pr:
        title = (
            f"Bump locks: {', '.join(l.lane for l in lane_results if l.status == 'bumped')} "
            f"({now.date()})"
        )
        status, url = proposals.open_pull_request(
            repo,
            branch=branch,
            base_branch=base_branch,
            title=title,
            body=body,
            repository=repository,
            api_base=api_base,
        )
        result = BumpResult(branch, "proposed", "", lane_results, str(body_path), status, url)
    return result
