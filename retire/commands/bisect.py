"""``patchlane bisect``: a bug's window on a shim's target — the releases, and the commits, that
introduced and fixed it."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from retire.bisect.bounds import Bounds
from retire.bisect.budget import Budget, Meter
from retire.bisect.job import BisectJob, Executor
from retire.bisect.prober import Progress
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
from retire.runs.isolation import Isolation
from retire.verdicts.actions import Bisect

if TYPE_CHECKING:
    from retire.bisect.windowresult import WindowResult
    from retire.report.model import BisectionRan, Bisections
    from retire.verdicts.model import Verdict

DESCRIPTION = (
    "Find the bug's window on a shim's target: the release that introduced it (first broken after "
    "a clean one) and the release that fixed it (first clean after a broken one), each by a binary "
    "search over the index's releases (yanked ones skipped), one overlay env per candidate; then, "
    "where the target's repository is mirrored (a lane's revision of it, else the shim's links, "
    "else the declared mirror its metadata URLs or its name and release tags match), "
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
    "at the commit into a wheel). A commit that cannot be built is unknown, saying why and the "
    "fix; a build that cannot find its backend on the index stops the commit search there. Every "
    "fresh run "
    "is recorded in the validation manifest (lane 'bisect', or "
    "'bisect:LANE' with --lane) so verdicts use it; answers are cached, and a cached answer is "
    "neither re-run nor re-recorded. With -j N, up to N candidates run at once, each in an overlay "
    "env of its own (forked from one pool of warm launchers) and, for a reproducer that declares "
    "gpus, on GPUs of its own: the next starts as soon as one ends, and one the results leave "
    "outside the edge is cancelled (never recorded) — the answer -j 1 gives. Exit 0 when the "
    "first fixed release is found and no edge followed into the commits stays unpinned for want "
    "of a build, 1 otherwise."
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
        help="run up to N candidates at once, the next as soon as one ends (one the results "
        "leave outside the edge is cancelled); a reproducer that declares gpus = n gives each "
        "running candidate n GPUs of its own (never one a lane holds), so N is capped by the "
        "host's GPUs (default: %(default)s)",
    )


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


class _Said(Progress):
    """``patchlane bisect``'s progress: one line per candidate consulted (a commit by its short
    sha), the runners' notes indented; ``meter``: the budget it spends."""

    def __init__(self, distribution: str, meter: Meter | None) -> None:
        super().__init__(meter)
        self.distribution = distribution

    def ran(self, step: int, run: CandidateRun) -> None:
        note = " (cached)" if run.cached else f" {run.duration_s:.2f}s"
        extra = f" — {run.detail}" if run.detail and not run.conclusive else ""
        label = run.version[:12] if len(run.version) == 40 else run.version
        say(
            f"  [{step}] {self.distribution} {label}: {run.state} ({run.outcome}){note}{extra}",
            level=Level.PROGRESS,
        )

    def note(self, text: str) -> None:
        say(f"  {text}", level=Level.PROGRESS)


def bisection(project: Project, job: BisectJob, meter: Meter | None = None) -> WindowResult:
    """The bisection ``job`` asks for, as ``patchlane bisect`` runs it: the bug's window on the
    target's releases in the range the project's evidence sets (every release when none: the
    search looks for a broken one), continued into the commits of the target's mirror; every
    fresh run recorded where ``job.records`` says. ``meter``: the budget it spends (a weekly
    one, shared by its bisections; :class:`retire.bisect.Meter`)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.bisect import list_releases, project_bounds
    from retire.bisect.sources import index_source
    from retire.bisect.transitions import bisect_window
    from retire.history.mirrored import lane_targets
    from retire.history.place import place
    from retire.runs.packing import on_gpus

    manifest = _manifest(project, job.shim)
    distribution = manifest.target.distribution
    lane, python = None, job.python
    if job.lane:
        lane, python = _lane_python(project, job.lane)
    index_url = job.index or _default_index(project, job.shim, distribution, lane)
    if not index_url:
        raise InputError(
            None,
            "--index",
            "no index to list releases from",
            "pass --index URL, or give a lane carrying the shim a default index",
        )
    versions, yanked = list_releases(index_url, distribution)
    bounds = job.bounds
    bounds = project_bounds(
        project, manifest, versions, since=bounds.since, until=bounds.until, every=job.every
    )
    say(
        f"bisecting {distribution} for shim {manifest.id}: {len(versions)} listed release(s); "
        f"range {bounds.note}",
        level=Level.PROGRESS,
    )
    job = replace(
        job,
        bounds=bounds,
        yanked=frozenset(yanked),
        index=index_url,
        python=str(python) if python else None,
        lock_digest=lane.digest if lane else None,
    )
    source = index_source(project, manifest, index_url, versions, folder=job.mirrors)
    if source.says:
        say(source.says)
    # its candidates run on GPUs of their own, as lanes do (docs/commands.md, GPUs): one set for
    # the whole bisection, or with -j one set per candidate running (retire.bisect.sidebyside)
    search = bisect_window
    if job.width == 1:
        search = on_gpus(manifest.reproducer.gpu_needs, search, say=lambda line: say(f"  {line}"))
    progress = _Said(distribution, meter)
    result = search(manifest, versions, job, source=source, progress=progress)
    targets = lane_targets(project, manifest, result.window, source.repo)
    return replace(result, lanes=tuple(place(result.window, target) for target in targets))


def _capped(project: Project, job: BisectJob) -> tuple[WindowResult, str | None]:
    """The bisection, within ``--max-runs`` and ``--max-minutes`` where given (a
    :class:`Meter`, as a weekly budget caps one), and why it stopped short (None: it did not)."""
    meter = Meter(job.budget)
    return bisection(project, job, meter), meter.refused


def job_of(args: argparse.Namespace, project: Project) -> BisectJob:
    """What ``patchlane bisect``'s arguments ask for, parsed once here at the edge; a bad version
    is one line naming its flag."""
    for flag, text in (("--since", args.since), ("--until", args.until)):
        if text is None:
            continue
        try:
            Version(text)
        except InvalidVersion:
            raise InputError(
                None, flag, f"{text!r} is not a PEP 440 version", "give a release such as 0.19.2"
            ) from None
    records = None
    if args.record:
        records = project.output_file(args.manifest) if args.manifest else project.validation
    return BisectJob(
        args.shim,
        Bounds(args.since, args.until),
        every=args.every,
        include_prereleases=args.include_prereleases,
        sample=args.sample,
        limits=Limits(args.max_unknown, args.max_not_applicable),
        budget=Budget(args.max_runs, args.max_minutes, args.jobs),
        index=args.index,
        python=args.python,
        lane=args.lane,
        isolation=Isolation(args.isolation) if args.isolation else None,
        timeout=args.timeout,
        records=records,
        cache=args.cache or project.bisect_cache,
        wheels=project.wheel_cache,
        mirrors=args.mirrors,
        executor=Executor(args.executor),
    )


def run(project: Project, args: argparse.Namespace) -> int:
    job = job_of(args, project)
    if job.executor == Executor.SLURM:
        return bisectjob.run(project, job, as_json=args.json)
    result, stopped = _capped(project, job)
    if args.json:
        emit_json({**result.to_dict(), "summary": result.summary(), "stopped": stopped})
        return _exit(result)
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
    for reason in dict.fromkeys(edge.unbuilt for edge in result.unbuilt):
        kinds = " and ".join(edge.kind for edge in result.unbuilt if edge.unbuilt == reason)
        say(f"not pinned: the {kinds} edge's commits could not be built — {reason}")
    if job.records is not None:
        say(f"recorded {result.records_added} run(s) in {shown(job.records)}")
    return _exit(result)


def _exit(result: WindowResult) -> int:
    """1 when the first fixed release is not pinned, or a commit edge the search went into stays
    unpinned because its candidates could not be built (docs/commands.md, exit codes)."""
    return ExitCode.OK if result.status == Status.FOUND and not result.unbuilt else ExitCode.FAILED


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
        job = BisectJob.of_action(action, project, Budget(jobs=meter.budget.jobs))
        result = bisection(project, job, meter)
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
