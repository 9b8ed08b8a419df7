"""``patchlane bisect``: a bug's window on a shim's target — the releases, and the commits, that
introduced and fixed it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from retire.bisect.budget import Budget, Meter
from retire.bisect.search import NOT_APPLICABLE, UNKNOWN, CandidateRun, Limits, Status
from retire.bisect.window import DEFAULT_SAMPLE
from retire.commands import bisectjob
from retire.commands.base import (
    Command,
    ExitCode,
    Level,
    add_mirrors_option,
    emit_json,
    positive_float,
    positive_int,
    say,
    shown,
)
from retire.core import uv
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import Project
from retire.evidence.values import ProbeFailure
from retire.history.edge import EdgeState
from retire.verdicts.actions import Bisect

if TYPE_CHECKING:
    from retire.bisect.windowresult import WindowResult
    from retire.report.model import BisectionRan, Bisections
    from retire.verdicts.model import Verdict

DESCRIPTION = (
    "Find the bug's window on a shim's target: the release that introduced it (first broken after "
    "a clean one) and the release that fixed it (first clean after a broken one), each by a binary "
    "search over the index's releases (yanked ones skipped), one overlay env per candidate; then, "
    "where the target's repository is mirrored (a lane's revision of it, else the shim's links), "
    "the commits between the two adjacent releases' tags (first-parent; each candidate the package "
    "built by uv from the mirror at that commit), naming the commit, its subject, date and pull "
    "request. By default the range starts at the newest release the project has evidence is "
    "broken — a without-shim BUG_REPRODUCED record of the shim (any lane, any host), the lock of a "
    "lane that recorded the bug, or the upper bound of the manifest's [target] affected — and ends "
    "at the newest release; the output says which evidence set it. With none, every release is "
    "searched: the newest first, then a spread-out sample of older ones (--sample), and when none "
    "reproduces the output says what ran and what would decide it. A candidate the reproducer "
    "cannot run against (SKIPPED, an ImportError, no installable file for this interpreter) is not "
    "applicable: stepped over and reported apart; crashes and timeouts are unknown and never "
    "guessed through. A target with compiled sources or no build file stops at the release edge, "
    "saying so, unless its shim (or a lane's revision of it) names its build ([target] build: a "
    "command that turns a checkout "
    "at the commit into a wheel; a build that fails leaves that commit unknown). Every fresh run "
    "is recorded in the validation manifest (lane 'bisect', or "
    "'bisect:LANE' with --lane) so verdicts use it; answers are cached, and a cached answer is "
    "neither re-run nor re-recorded. With -j N, each round runs up to N candidates at once (the "
    "points splitting the open range into N + 1 parts), each in an overlay env of its own and, "
    "for a reproducer that declares gpus, on GPUs of its own. Exit 0 when the first fixed "
    "release is found, 1 otherwise."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shim", help="shim id")
    p.add_argument(
        "--index",
        metavar="URL",
        help="simple index (default: where a lane carrying the shim takes the target from)",
    )
    base = p.add_mutually_exclusive_group()
    base.add_argument(
        "--python",
        metavar="BASE",
        help="base interpreter the candidates are overlaid on (default: this one)",
    )
    base.add_argument(
        "--lane",
        metavar="NAME",
        help="overlay the candidates on this lane's environment (built from its lock)",
    )
    p.add_argument(
        "--include-prereleases",
        action="store_true",
        help="also test pre-releases and dev releases (nightlies)",
    )
    lower = p.add_mutually_exclusive_group()
    lower.add_argument(
        "--since", metavar="VERSION", help="oldest release to consider (instead of the evidence's)"
    )
    lower.add_argument(
        "--all",
        dest="every",
        action="store_true",
        help="search every release, ignoring the evidence of where the bug is known",
    )
    p.add_argument("--until", metavar="VERSION", help="newest release to consider")
    p.add_argument(
        "--timeout",
        type=positive_float,
        help="seconds per reproducer run (default: the manifest's)",
    )
    p.add_argument(
        "--isolation",
        choices=("process", "launcher"),
        help="launcher: fork each candidate's run from one base interpreter that imported the "
        "reproducer's "
        "preloads (not the target) once; process: one interpreter per run (default: launcher when "
        "the reproducer declares preloads)",
    )
    _add_search_arguments(p)
    add_mirrors_option(p, used_for="following an edge into the commits between two releases")
    p.add_argument(
        "--cache", type=Path, help="result cache folder (default: .patchlane/cache/bisect)"
    )
    bisectjob.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_search_arguments(p: argparse.ArgumentParser) -> None:
    """How far the search goes, and how many candidates it runs at once."""
    p.add_argument(
        "--max-unknown",
        type=positive_int,
        default=Limits.max_unknown,
        metavar="N",
        help="stop after N candidates crash or time out (default: %(default)s)",
    )
    p.add_argument(
        "--max-not-applicable",
        type=positive_int,
        default=Limits.max_not_applicable,
        metavar="N",
        help="stop after N candidates the reproducer cannot run against (default: %(default)s)",
    )
    p.add_argument(
        "--sample",
        type=positive_int,
        default=DEFAULT_SAMPLE,
        metavar="N",
        help="with no broken release on record and the newest clean, try at most N older "
        "releases (spread out, above crashes first) to find one (default: %(default)s)",
    )
    p.add_argument(
        "--max-runs",
        type=positive_int,
        metavar="N",
        help="end the search with what it found once N fresh reproducer runs are spent (cached "
        "answers are free; a round of -j candidates never starts more than are left); the "
        "output says it stopped (default: no limit)",
    )
    p.add_argument(
        "--max-minutes",
        type=positive_float,
        metavar="M",
        help="start no candidate after M minutes: end the search with what it found "
        "(default: no limit)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="run up to N candidates at once, each round splitting the range into N + 1 parts; "
        "a reproducer that declares gpus = n gives each running candidate n GPUs of its own "
        "(never one a lane holds), so N is capped by the host's GPUs (default: %(default)s)",
    )


def _check_versions(**bounds: str | None) -> None:
    for name, text in bounds.items():
        if text is None:
            continue
        try:
            Version(text)
        except InvalidVersion:
            raise InputError(
                None,
                f"--{name}",
                f"{text!r} is not a PEP 440 version",
                "give a release such as 0.19.2",
            ) from None


def _manifest(project: Project, shim_id: str):
    manifest = project.manifests().get(shim_id)
    if manifest is None:
        raise InputError(
            None, None, f"unknown shim {shim_id!r}", "use an id listed by `patchlane shim list`"
        )
    return manifest


def _default_index(project: Project, shim_id: str, distribution: str, lane=None) -> str | None:
    """Where ``distribution`` comes from for ``lane`` (or a lane carrying the shim): the index its
    sources pin it to, else the lane's default, else the host's — the same answer the verdicts'
    release probe gets (:func:`retire.verdicts.plan.lane_index_urls`)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.verdicts.plan import lane_index_urls

    lanes = (
        [lane]
        if lane is not None
        else [each for each in lanefile.project_lanes(project) if shim_id in each.shims]
    )
    named, default = uv.host_indexes().named, uv.default_index()
    if not lanes:
        return default
    urls = lane_index_urls(lanes[0], distribution, named=named, default=default)
    # e.g. pinned to an index with no URL here: never guess another index
    if isinstance(urls, ProbeFailure):
        raise InputError(None, "--index", urls.reason, "pass --index URL")
    return urls[0]


def _lane_python(project: Project, name: str):
    """(lane, python of the lane's environment): built from its lock, or re-synced (cheap)."""
    # deferred: the runtime-only install (no engine) must still print `--help`
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.locks import locking

    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.config import project_mirrors
    from retire.runs import envs

    [lane] = lanefile.select(lanefile.project_lanes(project), [name])
    # A revision lane installs from this host's mirrors, as `patchlane run` does.
    env = envs.build(
        lane,
        locking.lock_path(project.locks_dir, lane.name),
        project.envs_dir,
        mirrors=project_mirrors(project) if lane.revisions else None,
    )
    return lane, env.python


@dataclass(frozen=True)
class BisectRequest:
    """One bisection as asked: on the command line, or by a verdict's :class:`Bisect` action."""

    shim: str
    since: str | None = None
    until: str | None = None
    # search every release, ignoring the evidence of where the bug is known
    every: bool = False
    index: str | None = None
    python: str | None = None
    lane: str | None = None
    include_prereleases: bool = False
    timeout: float | None = None
    isolation: str | None = None
    limits: Limits = field(default_factory=Limits)
    cache: Path | None = None
    record: bool = True
    # how many older releases the search for a broken one may try
    sample: int = DEFAULT_SAMPLE
    # the folder of git mirrors (default: patchlane.toml's)
    mirrors: Path | None = None
    # candidates run at once (-j), each on GPUs of its own
    jobs: int = 1
    # where fresh runs are recorded (default: the project's validation manifest)
    manifest: Path | None = None

    @classmethod
    def of_arguments(cls, args: argparse.Namespace) -> BisectRequest:
        """What ``patchlane bisect``'s arguments ask for."""
        _check_versions(since=args.since, until=args.until)
        return cls(
            args.shim,
            args.since,
            args.until,
            args.every,
            args.index,
            args.python,
            args.lane,
            args.include_prereleases,
            args.timeout,
            args.isolation,
            Limits(args.max_unknown, args.max_not_applicable),
            args.cache,
            args.record,
            args.sample,
            args.mirrors,
            args.jobs,
            args.manifest,
        )

    @classmethod
    def of_action(cls, action: Bisect, jobs: int = 1) -> BisectRequest:
        """What a verdict's bisection asks for; every run of a weekly bisection is evidence."""
        since = action.since.public if action.since is not None else None
        until = action.until.public if action.until is not None else None
        return cls(action.shim, since, until, jobs=jobs)


def _progress(
    distribution: str, count: Callable[[CandidateRun], None] | None
) -> Callable[[int, CandidateRun], None]:
    """One line per candidate consulted (a commit by its short sha); ``count`` sees each run."""

    def progress(step: int, run: CandidateRun) -> None:
        if count is not None:
            count(run)
        note = " (cached)" if run.cached else f" {run.duration_s:.2f}s"
        extra = f" — {run.detail}" if run.detail and not run.conclusive else ""
        label = run.version[:12] if len(run.version) == 40 else run.version
        say(
            f"  [{step}] {distribution} {label}: {run.state} ({run.outcome}){note}{extra}",
            level=Level.PROGRESS,
        )

    return progress


def bisection(
    project: Project,
    args: BisectRequest,
    *,
    stop: Callable[[], str | None] | None = None,
    count: Callable[[CandidateRun], None] | None = None,
    room: Callable[[], int | None] | None = None,
) -> WindowResult:
    """The bisection ``args`` asks for, as ``patchlane bisect`` runs it: the bug's window on the
    target's releases in the range the project's evidence sets (every release when none: the
    search looks for a broken one), continued into the commits of the target's mirror; every
    fresh run recorded unless ``--no-record``. ``stop``, ``count`` and ``room`` are a budget's
    (:class:`retire.bisect.Meter`)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.bisect import BisectOptions, list_releases, project_bounds
    from retire.bisect.sources import project_source
    from retire.bisect.transitions import bisect_window
    from retire.history.mirrored import lane_targets
    from retire.history.place import place
    from retire.probes.records import bisection_lane
    from retire.runs.packing import on_gpus

    manifest = _manifest(project, args.shim)
    distribution = manifest.target.distribution
    lane, base_python = None, args.python or sys.executable
    if args.lane:
        lane, base_python = _lane_python(project, args.lane)
    index_url = args.index or _default_index(project, args.shim, distribution, lane)
    if not index_url:
        raise InputError(
            None,
            "--index",
            "no index to list releases from",
            "pass --index URL, or give a lane carrying the shim a default index",
        )
    versions, yanked = list_releases(index_url, distribution)
    bounds = project_bounds(
        project, manifest, versions, since=args.since, until=args.until, every=args.every
    )
    say(
        f"bisecting {distribution} for shim {manifest.id}: {len(versions)} listed release(s); "
        f"range {bounds.note}",
        level=Level.PROGRESS,
    )

    progress = _progress(distribution, count)
    source = project_source(project, manifest, folder=args.mirrors)
    options = BisectOptions(
        yanked=frozenset(yanked),
        include_prereleases=args.include_prereleases,
        bounds=bounds,
        base_python=base_python,
        index_url=index_url,
        cache_dir=args.cache or project.bisect_cache,
        timeout=args.timeout,
        record_to=_records_file(project, args) if args.record else None,
        lane=bisection_lane(lane.name if lane else None),
        lock_digest=lane.digest if lane else None,
        limits=args.limits,
        isolation=args.isolation,
        jobs=args.jobs,
    )
    # its candidates run on GPUs of their own, as lanes do (docs/commands.md, GPUs): one set for
    # the whole bisection, or with -j one set per candidate running (retire.bisect.sidebyside)
    search = bisect_window
    if args.jobs == 1:
        search = on_gpus(manifest.reproducer.gpu_needs, search, say=lambda line: say(f"  {line}"))
    result = search(
        manifest,
        versions,
        options,
        source=source,
        sample=args.sample,
        on_step=progress,
        on_note=lambda line: say(f"  {line}", level=Level.PROGRESS),
        stop=stop,
        room=room,
    )
    targets = lane_targets(project, manifest, result.window, source.repo)
    return replace(result, lanes=tuple(place(result.window, target) for target in targets))


def _records_file(project: Project, args: BisectRequest) -> Path:
    return project.output_file(args.manifest) if args.manifest else project.validation


def _capped(
    project: Project, request: BisectRequest, args: argparse.Namespace
) -> tuple[WindowResult, str | None]:
    """The bisection, within ``--max-runs`` and ``--max-minutes`` where given (a
    :class:`Meter`, as a weekly budget caps one), and why it stopped short (None: it did not)."""
    cap = Budget(args.max_runs, args.max_minutes, args.jobs)
    if not cap.asked:
        return bisection(project, request), None
    meter = Meter(cap)
    result = bisection(project, request, stop=meter.stop, count=meter.count, room=meter.left)
    return result, meter.refused


def run(project: Project, args: argparse.Namespace) -> int:
    request = BisectRequest.of_arguments(args)
    if args.executor == "slurm":
        return bisectjob.run(project, args)
    result, stopped = _capped(project, request, args)
    if args.json:
        emit_json({**result.to_dict(), "summary": result.summary(), "stopped": stopped})
        return ExitCode.OK if result.status == Status.FOUND else ExitCode.FAILED
    say(result.summary())
    say(f"window from {result.window.source.describe()}")
    if stopped:
        say(f"stopped before its end: {stopped}")
    if result.floor:
        say(f"proposed retirement floor: {result.floor}")
    if (fixed := result.window.fixed.commit) is not None and result.first_fixed:
        say(f"fixed by {fixed.describe()}, first released in {result.first_fixed}")
    elif (branch := result.window.branch_fix) is not None and branch.commit is not None:
        say(f"fixed on {branch.branch} at {branch.commit.describe()}, in no release yet")
    window = result.window
    # the range was cut below (evidence, --since): where it came in lies further down
    if window.introduced.state == EdgeState.OPEN and result.candidates.out_of_range:
        say(
            f"introduced: the range starts at {window.introduced.after}, broken there — "
            "`--all` searches the older releases for the one that brought the bug in"
        )
    for lane in result.lanes:
        say(lane.sentence())
    for step in result.decide(args.shim):
        say(f"to decide it: {step}")
    for run in result.release_runs:
        if run.state in (NOT_APPLICABLE, UNKNOWN):
            say(f"{run.state}: {run.version} ({run.outcome}) {run.detail}")
    if args.record:
        say(f"recorded {result.records_added} run(s) in {shown(_records_file(project, request))}")
    return ExitCode.OK if result.status == Status.FOUND else ExitCode.FAILED


# ---------------------------------------------------------------------------------------------
# Candidate bisections within a budget (`patchlane report` / `retire` --bisect-budget)


def add_budget_arguments(p: argparse.ArgumentParser) -> None:
    """``--bisect-budget`` and ``--bisect-minutes``: nothing is bisected unless one is given."""
    group = p.add_argument_group(
        "candidate bisections (run the `patchlane bisect` a candidate verdict names, within a "
        "budget, then decide again)"
    )
    group.add_argument(
        "--bisect-budget",
        type=positive_int,
        metavar="RUNS",
        help="at most RUNS fresh reproducer runs over all candidate bisections (cached answers "
        "are free; default: none — nothing is bisected unless asked)",
    )
    group.add_argument(
        "--bisect-minutes",
        type=positive_float,
        metavar="M",
        help="at most M minutes of candidate bisections (no bisection starts after that, a "
        "running one stops before its next run)",
    )
    group.add_argument(
        "--bisect-jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="run up to N of a bisection's candidates at once, as `patchlane bisect -j N` "
        "(never more than the runs left in the budget; default: %(default)s)",
    )
    group.add_argument(
        "--bisect-executor",
        choices=("local", "slurm"),
        default="local",
        help="local: run the bisections here, one after another; slurm: submit every bisection "
        "the budget reaches at once, one Slurm job each asking for its reproducer's GPUs "
        "(patchlane.toml [slurm]), each with its share of --bisect-budget and the "
        "--bisect-minutes as its time; wait, merge their records (docs/commands.md, Slurm; "
        "default: %(default)s)",
    )


def budget_of(args: argparse.Namespace) -> Budget:
    return Budget(
        getattr(args, "bisect_budget", None),
        getattr(args, "bisect_minutes", None),
        getattr(args, "bisect_jobs", 1),
    )


def candidate_bisection(verdict: Verdict) -> Bisect | None:
    """The bisection a verdict flagged ``candidate`` asks for: the one its flag (or its action)
    names for this shim, else the shim's plain bisection; None without the flag."""
    # deferred: the runtime-only install (no engine) must still print `--help`
    from retire.verdicts.model import FlagKind

    if not verdict.flagged(FlagKind.CANDIDATE):
        return None
    named = [f.action for f in verdict.flags if f.kind == FlagKind.CANDIDATE]
    for action in (*named, *verdict.next):
        if isinstance(action, Bisect) and action.shim == verdict.shim:
            return action
    return Bisect(verdict.shim)


def _one_candidate(
    project: Project, verdict: Verdict, action: Bisect, meter: Meter
) -> BisectionRan:
    """Run one candidate's bisection on ``meter``'s budget; a failure is its row, never raised."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.report.model import BisectionRan

    command = str(action)
    meter.refused = None
    try:
        request = BisectRequest.of_action(action, meter.budget.jobs)
        result = bisection(project, request, stop=meter.stop, count=meter.count, room=meter.left)
    except (PatchlaneError, InputError, OSError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return BisectionRan(verdict.shim, command, "failed", f"could not run: {reason}")
    return BisectionRan(
        verdict.shim,
        command,
        str(result.status),
        result.summary(),
        result.runs,
        None if result.floor is None else str(result.floor),
        meter.refused,
    )


def candidate_bisections(
    project: Project, verdicts: Sequence[Verdict], budget: Budget, *, executor: str = "local"
) -> Bisections:
    """For every verdict flagged ``candidate``, in order, the bisection its flag names, until
    ``budget`` is spent: each run recorded in the validation manifest (the verdicts read it
    next), each bisection's end in the report; those the budget does not reach are listed.
    ``executor`` ``slurm``: all at once as Slurm jobs, the runs shared among them."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.report.model import BisectionLeft, Bisections
    from retire.runs.lanerun import Host

    picked = [(v, action) for v in verdicts if (action := candidate_bisection(v)) is not None]
    if executor == "slurm":
        return _on_slurm(project, picked, budget)
    meter = Meter(budget)
    manifests = project.manifests()
    host: Host | None = None
    ran: list[BisectionRan] = []
    left: list[BisectionLeft] = []
    for verdict, action in picked:
        command = str(action)
        manifest = manifests.get(verdict.shim)
        if (spent := meter.spent()) is not None:
            left.append(BisectionLeft(verdict.shim, command, spent))
            continue
        if manifest is not None and manifest.reproducer.needs_cuda:
            host = host or Host.detect()
            if not host.cuda:
                why = f"its reproducer needs a CUDA GPU and this host has none ({host.description})"
                left.append(BisectionLeft(verdict.shim, command, why))
                continue
        say(f"candidate {verdict.shim}: {command}", level=Level.PROGRESS)
        ran.append(_one_candidate(project, verdict, action, meter))
    return Bisections(budget.runs, budget.minutes, tuple(ran), tuple(left))


def _on_slurm(
    project: Project, picked: Sequence[tuple[Verdict, Bisect]], budget: Budget
) -> Bisections:
    """The candidate bisections as Slurm jobs (retire/commands/candidatejobs.py): a GPU
    reproducer's job goes where Slurm finds the GPUs, whatever this host has."""
    # deferred: `patchlane --help` does not load them, and start-up time counts
    from retire.commands.candidatejobs import on_slurm
    from retire.report.model import BisectionRan, Bisections

    manifests = project.manifests()
    unknown = tuple(
        BisectionRan(v.shim, str(a), "failed", f"could not run: unknown shim {v.shim!r}")
        for v, a in picked
        if v.shim not in manifests
    )
    jobs = on_slurm(
        project, [(manifests[v.shim], a) for v, a in picked if v.shim in manifests], budget
    )
    return Bisections(budget.runs, budget.minutes, (*jobs.ran, *unknown), jobs.left)


COMMAND = Command(
    "bisect",
    "find a bug's window: the releases and commits that introduced and fixed it",
    add_arguments,
    run,
    DESCRIPTION,
)
