"""``patchlane run``: build lanes from their locks and run each shim's reproducer in both modes."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from retire.commands.base import (
    Command,
    ExitCode,
    Level,
    Scrubbed,
    add_mirrors_option,
    emit_json,
    json_mode,
    live,
    positive_float,
    positive_int,
    say,
    shown,
    verbosity,
)
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.project import Project
from retire.evidence import validation
from shims import times

if TYPE_CHECKING:
    from retire.evidence.validation import ValidationRecord
    from retire.lanes.model import Lane
    from retire.runs.lanerun import Host, LaneRun, RunOptions
    from retire.runs.proof import Proof
    from shims.model import ShimManifest


def _seconds_or_zero(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else positive_float(text)


def _add_placement(p: argparse.ArgumentParser) -> None:
    """Where the lanes run: how many at once here, or as Slurm jobs."""
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=1,
        help="lanes run at once (default: 1); on a GPU host each is given its own GPUs",
    )
    p.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local: run the lanes on this host; slurm: submit one Slurm job per GPU lane and "
        "one job array, a task per lane, for the others (GPUs, partition, time limit from the "
        "lanes' needs and patchlane.toml [slurm]), wait, and merge the jobs' records "
        "(docs/commands.md, Slurm)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument(
        "--tag",
        choices=("cpu", "gpu"),
        help="only the lanes with this tag: gpu for needs-cuda lanes, cpu for the others (nox's "
        "session tags)",
    )
    _add_placement(p)
    p.add_argument(
        "--overlay",
        metavar="PYTHON",
        default=os.environ.get("PATCHLANE_OVERLAY") or None,
        help="build overlay envs on this base interpreter, e.g. a GPU image's python (env: "
        "PATCHLANE_OVERLAY)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        help="seconds per reproducer (default: each manifest's own)",
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds_or_zero,
        default=20.0,
        metavar="SECONDS",
        help="say 'still running …' this often while a reproducer runs (default 20; 0: never)",
    )
    p.add_argument(
        "--isolation",
        choices=("process", "launcher"),
        help="launcher: fork every run from one interpreter per lane that imported the shims' "
        "preloads once; "
        "process: one interpreter per run (default: launcher where the lane's shims declare "
        "preloads)",
    )
    p.add_argument(
        "--manifest",
        type=Path,
        help="validation manifest to append to (default: validation/manifest.jsonl)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail (exit 1) on a shim that no lane proves: its reproducer still skips, its "
        "target is not in the lane, no lane lists it (evidence: each lane's latest recorded runs)",
    )
    p.add_argument("--no-record", action="store_true", help="do not record the results")
    p.add_argument(
        "--run-id", help="group this run's results under ID (nox passes one per invocation)"
    )
    p.add_argument(
        "--no-summary",
        action="store_true",
        help="leave the lane × shim table to `patchlane summary` (nox's lane sessions pass it "
        "when the summary session follows them)",
    )
    p.add_argument(
        "--envs-dir", type=Path, help="where lane environments live (default: .patchlane/envs)"
    )
    add_mirrors_option(p, used_for="the lanes pinned to revisions")
    p.add_argument(
        "--wheelhouse",
        type=Path,
        metavar="DIR",
        help="build the lane from DIR only (`patchlane wheelhouse gather`/`join`): no index, no "
        "network, "
        "every file checked against the lock's sha256 (default lane: the one DIR was gathered for)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (the lanes' outcomes); the pytest view goes to stderr",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import lanerun

    if args.run_id:
        # a bad id fails before anything runs
        project.run_dir(args.run_id)
    lanes = _selected_lanes(project, args)
    manifests = project.manifests()
    host = lanerun.Host.detect()
    options = dataclasses.replace(
        _run_options(project, args, lanes, host), guards=tuple(project.guards().values())
    )
    target = project.output_file(args.manifest) if args.manifest else project.validation
    recorder = _Recorder(target)
    if not args.no_record:
        options = dataclasses.replace(options, on_record=recorder)
    try:
        results, jobs = _execute(project, args, lanes, manifests, options, recorder)
    except KeyboardInterrupt:
        # the run's summary must never read as whole (`patchlane summary`, nox's summary session)
        _mark_interrupted(project, options.run_id)
        raise
    _write_summaries(project, options.run_id, results)
    failed = _show(project, manifests, results, table=not args.no_summary)
    # this run's records are in the manifest already, unless it recorded nothing
    unrecorded = (
        [r for run in results for s in run.shims for r in s.records] if args.no_record else []
    )
    proofs = unproven(project, [run.lane for run in results], target, unrecorded)
    stopped = _say_unproven(proofs, strict=args.strict)
    if args.json:
        emit_json(
            {
                "ok": not failed and not stopped,
                "run_id": options.run_id,
                "host": host.description if args.executor == "local" else "Slurm",
                "recorded": recorder.count,
                "manifest": None if args.no_record else shown(target),
                "lanes": [
                    {**lanerun.to_summary(run), **({"job": jobs[run.lane]} if jobs else {})}
                    for run in results
                ],
                "failed": failed,
                "unproven": [proof.to_json() for proof in proofs],
                "strict": args.strict,
            }
        )
    return ExitCode.FAILED if failed or stopped else ExitCode.OK


def _execute(
    project: Project,
    args: argparse.Namespace,
    lanes: list[Lane],
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    recorder: _Recorder,
) -> tuple[list[LaneRun], dict[str, dict]]:
    """The lanes' runs, here or as Slurm jobs, and each lane's job (empty when run here)."""
    if args.executor == "slurm":
        say(
            f"run {options.run_id}: {len(lanes)} lane(s) as Slurm jobs, one per GPU lane and "
            "one job array for the others",
            level=Level.PROGRESS,
        )
        return _on_slurm(project, args, lanes, manifests, options, recorder)
    host = options.host
    say(
        f"run {options.run_id}: {len(lanes)} lane(s) on this host "
        f"({host.description if host else 'unknown'}), {args.jobs} at a time",
        level=Level.PROGRESS,
    )
    return _run_lanes(lanes, manifests, options, jobs=args.jobs, recorder=recorder), {}


def _on_slurm(
    project: Project,
    args: argparse.Namespace,
    lanes: list[Lane],
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    recorder: _Recorder,
) -> tuple[list[LaneRun], dict[str, dict]]:
    """A Slurm job per GPU lane, an array task per other lane (retire/runs/slurm.py); their
    records merged into the manifest (`validation merge`: each record once), even those of a job
    that was cancelled or killed."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import reaper, slurm
    from retire.runs.slurmconfig import load_slurm

    settings = load_slurm(project.root)
    folder = project.inside(".patchlane", "slurm", options.run_id)
    with reaper.terminate_on_sigterm():
        done = slurm.run_lanes(
            lanes,
            manifests,
            settings,
            folder,
            root=project.root,
            run_args=_job_args(args, options),
            progress=lambda lane, msg: say(f"[{lane}] {msg}", level=Level.PROGRESS),
        )
    files = [lane.job.files.records for lane in done if lane.job.files.records.exists()]
    if files and not args.no_record:
        merged = validation.merge(files)
        added = validation.append(recorder.target, merged)
        recorder.count += added
        say(
            f"merged {len(merged)} record(s) from {len(files)} job(s) into "
            f"{shown(recorder.target)} ({added} new)"
        )
    return [lane.run for lane in done], {lane.run.lane: lane.to_json() for lane in done}


def _job_args(args: argparse.Namespace, options: RunOptions) -> list[str]:
    """This run's options, for each job's own `patchlane run` (paths made absolute)."""
    passed = ["--run-id", options.run_id, "--heartbeat", f"{args.heartbeat:g}"]
    for flag, value in (
        ("--timeout", args.timeout and f"{args.timeout:g}"),
        ("--isolation", args.isolation),
        ("--overlay", args.overlay),
        ("--envs-dir", args.envs_dir and str(args.envs_dir.absolute())),
        ("--wheelhouse", args.wheelhouse and str(args.wheelhouse.absolute())),
        ("--mirrors", args.mirrors and str(Path(args.mirrors).absolute())),
    ):
        if value:
            passed += [flag, value]
    return passed


def unproven(
    project: Project,
    lanes: list[str],
    manifest: Path,
    extra: list[ValidationRecord] | None = None,
) -> list[Proof]:
    """The shims of ``lanes`` (and those no lane lists) that no lane of the project proves, from
    the latest runs in ``manifest`` and ``extra`` (retire.runs.proof)."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.runs import proof

    every = lanefile.project_lanes(project)
    listed = {shim for lane in every for shim in lane.shims}
    ran = [lane for lane in every if lane.name in set(lanes)]
    planned = dict.fromkeys(shim for lane in ran for shim in lane.shims)
    # a guard is listed by no lane on purpose (it retired): not an unproven shim
    retired = set(project.guards())
    planned.update(dict.fromkeys(sorted(project.shim_ids() - listed - retired)))
    records = [*validation.load(manifest), *(extra or [])]
    return [p for p in proof.assess(list(planned), every, records) if not p.proven]


def _say_unproven(proofs: list[Proof], *, strict: bool) -> bool:
    """One line per shim that no lane proves; True when --strict makes that a failure."""
    for found in proofs:
        say(f"unproven: {found.shim} — {found.why}")
    if proofs and strict:
        say(
            f"FAILED (--strict): {len(proofs)} shim(s) that no lane proves: "
            f"{', '.join(p.shim for p in proofs)} — write each reproducer so that it reproduces "
            "the bug without the shim and not with it (`patchlane docs shims`), on a lane that "
            "installs its target"
        )
    return bool(proofs) and strict


def _selected_lanes(project: Project, args: argparse.Namespace) -> list[Lane]:
    """The lanes named (or all), narrowed by ``--tag``; a wheelhouse builds only its own lane."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile

    # [] without --wheelhouse
    carried = _wheelhouse_lane(args.wheelhouse)
    lanes = lanefile.select(lanefile.project_lanes(project), args.lanes or carried)
    if args.tag:
        lanes = [lane for lane in lanes if lane.tag == args.tag]
    if carried and [lane.name for lane in lanes] != carried:
        raise InputError(
            None,
            "--wheelhouse",
            f"{shown(args.wheelhouse)} holds lane {carried[0]!r} and builds it alone",
            f"run `patchlane run {carried[0]} --wheelhouse DIR`, or gather a wheelhouse for each "
            f"lane",
        )
    return lanes


def _run_options(
    project: Project, args: argparse.Namespace, lanes: list[Lane], host: Host
) -> RunOptions:
    """What every lane of this run shares: where locks and environments live, the host, limits."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.config import project_mirrors
    from retire.runs import lanerun

    return lanerun.RunOptions(
        locks_dir=project.locks_dir,
        envs_dir=args.envs_dir or project.envs_dir,
        overlay=args.overlay,
        timeout=args.timeout,
        host=host,
        heartbeat_s=args.heartbeat,
        isolation=args.isolation,
        # uv's bars from several lanes at once would tear each other apart
        live=live() and args.jobs == 1,
        wheelhouse=args.wheelhouse,
        mirrors=(
            project_mirrors(project, args.mirrors)
            if any(lane.revisions for lane in lanes)
            else None
        ),
        **({"run_id": args.run_id} if args.run_id else {}),
    )


class _Recorder:
    """Appends each record to the validation file as it completes (an interrupted run keeps what
    finished) and counts them; lanes run on several threads at once."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.count = 0
        self._counting = threading.Lock()

    def __call__(self, record: ValidationRecord) -> None:
        added = validation.append(self.target, [record])
        with self._counting:
            self.count += added


def _run_lanes(
    lanes: list[Lane],
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    *,
    jobs: int,
    recorder: _Recorder,
) -> list[LaneRun]:
    """Every lane's run, stopped as a whole by SIGTERM; says what was recorded, interrupted or
    not."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import lanerun, reaper

    try:
        with reaper.terminate_on_sigterm():
            results = lanerun.run_lanes(
                lanes,
                manifests,
                options,
                jobs=jobs,
                progress=lambda lane, msg: say(f"[{lane}] {msg}", level=Level.PROGRESS),
            )
    except KeyboardInterrupt:
        if recorder.count:
            # the command line says "interrupted" itself, once
            say(
                f"kept the {recorder.count} reproducer run(s) that finished in "
                f"{shown(recorder.target)}",
                err=True,
            )
        raise
    if recorder.count:
        say(f"recorded {recorder.count} reproducer run(s) in {shown(recorder.target)}")
    return results


def _write_summaries(project: Project, run_id: str, results: list[LaneRun]) -> None:
    """One summary per lane under the run's folder, for `patchlane summary --run-id`."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import lanerun

    summaries = project.run_dir(run_id)
    for run in results:
        atomic_write(
            summaries / f"{run.lane}.json",
            json.dumps(lanerun.to_summary(run), indent=2),
            within=project.root,
        )


def _mark_interrupted(project: Project, run_id: str) -> None:
    stamp = times.format_utc(times.now())
    atomic_write(project.interrupted_mark(run_id), f"interrupted at {stamp}\n", within=project.root)


def _show(
    project: Project,
    manifests: dict[str, ShimManifest],
    results: list[LaneRun],
    *,
    table: bool = True,
) -> list[str]:
    """The pytest view, the lane × shim table (unless ``table`` is off) and the failed lanes,
    which it returns."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import suite
    from retire.runs.summarytable import summary_table

    locations = {"lanes": Path(shown(project.lanes_dir))}
    locations.update({shim_id: Path(shown(m.reproducer_path)) for shim_id, m in manifests.items()})
    locations.update(
        {guard_id: Path(shown(m.reproducer_path)) for guard_id, m in project.guards().items()}
    )
    # The pytest view is for people: under --json it goes to stderr, so stdout stays one document.
    with contextlib.redirect_stdout(Scrubbed(sys.stderr if json_mode() else sys.stdout)):
        # the per-item view (one line per lane, shim and mode) is detail: -v
        suite.report(results, locations, verbose=verbosity() > 0, colour=None if live() else False)
    if table:
        say("")
        say(summary_table(results))
    failed = [run.lane for run in results if run.failed]
    # a retired bug that is back is the loudest news of a run: never hidden by --strict's lines
    for run in results:
        for guard in run.regressed:
            say(
                f"REGRESSED: guard {guard.guard} reproduces again in lane {run.lane} — "
                f"`patchlane shim restore {guard.guard}` brings its patch back",
                level=Level.ERROR,
            )
    if failed:
        say(f"FAILED lanes: {', '.join(failed)}")
    return failed


def _wheelhouse_lane(folder: Path | None) -> list[str]:
    """The lane a wheelhouse was gathered for (one-line InputError when DIR holds none)."""
    if folder is None:
        return []
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.locks.wheelhouse import Wheelhouse

    return [Wheelhouse.load(folder).lane]


COMMAND = Command(
    "run",
    "build lanes from their locks and run their shims' reproducers",
    add_arguments,
    run,
    "Build each lane from its lock (uv, hash-checked) and run every shim's reproducer without and "
    "with the shim. "
    "With --wheelhouse DIR the lane is built from DIR alone, offline (docs/offline.md). "
    "A shim that no lane proves (its reproducer still skips, its target is not in the lane, no "
    "lane lists it) is listed as unproven. "
    "Exit 1 for broken shims, crashes and lanes that fail to build, and with --strict for an "
    "unproven shim.",
)
