"""``patchlane run``: build lanes from their locks and run each shim's reproducer in both modes."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from retire.commands.base import Command, ExitCode, positive_float, positive_int, say, shown
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument("--jobs", type=positive_int, default=1, help="lanes run at once (default: 1)")
    p.add_argument("--overlay", metavar="PYTHON", default=os.environ.get("PATCHLANE_OVERLAY") or None,
                   help="build overlay envs on this base interpreter, e.g. a GPU image's python (env: PATCHLANE_OVERLAY)")
    p.add_argument("--timeout", type=positive_float, help="seconds per reproducer (default: each manifest's own)")
    p.add_argument("--manifest", type=Path, help="validation manifest to append to (default: validation/manifest.jsonl)")
    p.add_argument("--no-record", action="store_true", help="do not record the results")
    p.add_argument("--run-id", help="group this run's results under ID (nox passes one per invocation)")
    p.add_argument("--envs-dir", type=Path, help="where lane environments live (default: .patchlane/envs)")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.core.atomic import atomic_write
    from retire.evidence import validation
    from retire.lanes import lanefile
    from retire.runs import lanerun, suite

    if args.run_id:
        project.run_dir(args.run_id)  # a bad id fails before anything runs
    lanes = lanefile.select(project.lanes(), args.lanes)
    manifests = project.manifests()
    host = lanerun.Host.detect()
    options = lanerun.RunOptions(
        locks_dir=project.locks_dir, envs_dir=args.envs_dir or project.envs_dir,
        overlay=args.overlay, timeout=args.timeout, host=host,
        **({"run_id": args.run_id} if args.run_id else {}),
    )
    say(f"run {options.run_id}: {len(lanes)} lane(s) on this host ({host.description}), {args.jobs} at a time")
    results = lanerun.run_lanes(lanes, manifests, options, jobs=args.jobs,
                                progress=lambda lane, msg: say(f"[{lane}] {msg}"))
    records = [record for run in results for shim in run.shims for record in shim.records]
    target = args.manifest or project.validation
    if records and not args.no_record:
        added = validation.append(target, records)
        say(f"recorded {added} reproducer run(s) in {shown(target)}")
    summaries = project.run_dir(options.run_id)
    for run in results:
        atomic_write(summaries / f"{run.lane}.json", json.dumps(lanerun.to_summary(run), indent=2))
    locations = {"lanes": Path(shown(project.lanes_dir))}
    locations.update({shim_id: Path(shown(m.reproducer_path)) for shim_id, m in manifests.items()})
    suite.report(results, locations)
    say("")
    say(lanerun.summary_table(results))
    failed = [run.lane for run in results if run.failed]
    if failed:
        say(f"FAILED lanes: {', '.join(failed)}")
    return ExitCode.FAILED if failed else ExitCode.OK


COMMAND = Command(
    "run", "build lanes from their locks and run their shims' reproducers", add_arguments, run,
    "Build each lane from its lock (uv, hash-checked) and run every shim's reproducer without and with the shim. "
    "Exit 1 only for broken shims, crashes and lanes that fail to build.",
)
