"""``patchlane summary``: the lane × shim table of one run (after several ``patchlane run``
calls)."""

from __future__ import annotations

import argparse
import json

from retire.commands.base import Command, ExitCode, emit_json, say
from retire.commands.run import unproven
from retire.core.errors import InputError
from retire.core.project import Project
from shims import tomlreader


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run-id",
        help="the id the lane runs recorded under (default: the latest run, the one whose lanes "
        "finished last)",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON document: every lane's outcomes"
    )


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.runs import lanerun
    from retire.runs.summarytable import summary_table

    run_id = args.run_id or project.latest_run()
    # the last run was cut short: say that this table is the one before it
    cut = None if args.run_id else project.interrupted_after(run_id)
    if run_id is None:
        raise InputError(
            None,
            "--run-id",
            f"run {cut} was interrupted and no complete run is recorded here"
            if cut
            else "no lane run is recorded here",
            "run the lanes again (`nox -s lane`)" if cut else "run `nox -s lane` first",
        )
    if cut is not None and cut != run_id:
        say(
            f"run {cut} was interrupted: this is the previous complete run, {run_id}",
            err=True,
        )
    if project.interrupted_mark(run_id).exists():
        # what finished is kept, but a table of it would read as the whole run
        raise InputError(
            None,
            "--run-id",
            f"run {run_id} was interrupted: its summary would leave out what did not finish",
            "run the lanes again (`nox -s lane`)",
        )
    folder = project.run_dir(run_id)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise InputError(folder, None, "no lane results for this run", "run `nox -s lane` first")
    results = []
    for path in files:
        try:
            # a FIFO or a folder is an error, never a block
            # (None only for a missing file, which missing_ok=False raises for instead)
            text = tomlreader.read_text(path, str(path)) or ""
            results.append(_checked(lanerun.from_summary(json.loads(text))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise InputError(
                path,
                None,
                f"unreadable lane summary ({type(exc).__name__})",
                "re-run that lane, or delete the file",
            ) from None
    failed = [run.lane for run in results if run.failed]
    # the run's lanes recorded into the project's manifest (retire.runs.proof: latest runs)
    proofs = unproven(project, [run.lane for run in results], project.validation)
    if args.json:
        emit_json(
            {
                "ok": not failed,
                "run_id": run_id,
                "lanes": [lanerun.to_summary(r) for r in results],
                "failed": failed,
                "unproven": [proof.to_json() for proof in proofs],
            }
        )
        return ExitCode.FAILED if failed else ExitCode.OK
    say(summary_table(results))
    for found in proofs:
        say(f"unproven: {found.shim} — {found.why}")
    if failed:
        say(f"FAILED lanes: {', '.join(failed)}")
    return ExitCode.FAILED if failed else ExitCode.OK


COMMAND = Command(
    "summary",
    "the lane × shim table of one run (after several `patchlane run` calls)",
    add_arguments,
    run,
)


def _checked(result):
    """A summary written by hand or cut short: every field of the type the table prints, else
    TypeError."""
    fields = [
        result.lane,
        result.status,
        result.why,
        *result.planned,
        *(x for s in result.shims for x in (s.shim, s.why)),
        *(x for g in result.guards for x in (g.guard, g.why)),
    ]
    if (
        not all(isinstance(value, str) for value in fields)
        or isinstance(result.seconds, bool)
        or not isinstance(result.seconds, (int, float))
    ):
        raise TypeError("a field of the wrong type")
    return result
