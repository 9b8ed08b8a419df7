"""``patchlane validation merge``: validation records from several hosts, merged without loss."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, say
from retire.core.project import Project
from retire.evidence import validation


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    m = actions.add_parser(
        "merge",
        help="merge validation records from several hosts without losing or duplicating one",
    )
    m.add_argument(
        "inputs", nargs="+", type=Path, metavar="RECORDS", help="the hosts' manifests (JSONL)"
    )
    m.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="the merged records, e.g. validation/manifest.jsonl (existing records are kept)",
    )


def run(project: Project, args: argparse.Namespace) -> int:
    inputs = list(args.inputs)
    # written below: never through a link inside the project
    project.output_file(args.output)
    if args.output.exists() and args.output not in inputs:
        # merging into a file of records keeps what it already holds
        inputs.insert(0, args.output)
    before = len(validation.load(args.output))
    merged = validation.merge(inputs)
    validation.write(args.output, merged)
    say(
        f"{args.output}: {len(merged)} records ({len(merged) - before:+d}) from {len(inputs)} "
        f"file(s)"
    )
    return ExitCode.OK


COMMAND = Command(
    "validation",
    "validation records: merge the records of several hosts (`validation merge`)",
    add_arguments,
    run,
)
