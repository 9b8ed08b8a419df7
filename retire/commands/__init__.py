"""``patchlane``: one registry of commands, one parser, one place where errors are printed.

Each module here defines ``COMMAND`` (:class:`retire.commands.base.Command`); :data:`REGISTRY`
lists them in the order ``patchlane --help`` shows. nox sessions are thin calls to these.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from retire.commands.base import Command, ExitCode, Parser, say
from retire.core.errors import PatchlaneError
from retire.core.project import Project
from shims.errors import InputError

__all__ = ["REGISTRY", "build_parser", "main"]

#: Command modules, in the order of `patchlane --help`.
REGISTRY = (
    "lanes", "lock", "run", "summary", "manifest", "shims", "catalogue",
    "wheelhouse", "mirrors", "verdicts", "bisect", "report", "retire", "bump", "pack",
)


def commands() -> list[Command]:
    return [importlib.import_module(f"retire.commands.{name}").COMMAND for name in REGISTRY]


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("patchlane")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="patchlane",
        description="Pinned lanes, reproducible locks, and the shims that patch them — until upstream fixes land.",
        epilog="Exit codes: 0 ok, 1 something failed, 2 bad input, 130 interrupted. "
               "`patchlane COMMAND --help` describes one command.",
    )
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="project folder holding lanes/, locks/, shims/ (default: the current folder)")
    parser.add_argument("--version", action="version", version=f"patchlane {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands():
        p = sub.add_parser(command.name, help=command.help, description=command.description or command.help)
        # --root may also follow the command (`patchlane verdicts --root DIR`): it wins when given.
        p.add_argument("--root", type=Path, default=argparse.SUPPRESS, help="project folder (default: the current folder)")
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.run(Project(args.root), args))
    except InputError as exc:
        say(f"patchlane: error: {exc}", err=True)
        return ExitCode.BAD_INPUT
    except PatchlaneError as exc:
        say(f"patchlane: error: {exc}", err=True)
        return ExitCode.FAILED
    except KeyboardInterrupt:
        say("patchlane: interrupted", err=True)
        return ExitCode.INTERRUPTED
