"""``patchlane catalogue``: the shim catalogue as Markdown, with where each shim was proven."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from retire.commands.base import Command, ExitCode, say, shown
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--validation", type=Path, help="validation manifest (default: validation/manifest.jsonl)")
    p.add_argument("-o", "--output", type=Path, help="write here (atomically) instead of to stdout, e.g. docs/catalogue.md")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.core.atomic import atomic_write
    from retire.evidence import validation
    from retire.report.catalogue import build, render_markdown

    text = render_markdown(build(project.manifests().values(), validation.load(args.validation or project.validation)))
    if args.output:
        atomic_write(args.output, text)
        say(f"wrote {shown(args.output)}")
    else:
        sys.stdout.write(text)
    return ExitCode.OK


COMMAND = Command("catalogue", "the shim catalogue as Markdown, with where each shim was proven", add_arguments, run)
