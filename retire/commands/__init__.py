"""``patchlane``: one registry of commands, one parser, one place where errors are printed.

Each module here defines ``COMMAND`` (:class:`retire.commands.base.Command`); :data:`REGISTRY`
lists them in the order ``patchlane --help`` shows. ``aliases`` holds the deprecated spellings
(hidden, one release). nox sessions are thin calls to these.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from retire.commands.aliases import ALIASES
from retire.commands.base import Command, ExitCode, Parser, configure, json_kept, print_error, say
from retire.commands.docs import folder
from retire.core import heldsecrets, interrupts
from retire.core.childenv import RUN_TOKEN
from retire.core.errors import PatchlaneError
from retire.core.project import Project, find_root
from retire.runs.reaper import REAPER, kill_marked
from shims.errors import InputError

__all__ = ["REGISTRY", "build_parser", "main"]

#: Command modules, in the order of `patchlane --help`.
REGISTRY = (
    "init",
    "lanes",
    "lock",
    "lockdiff",
    "run",
    "summary",
    "validation",
    "shim",
    "catalogue",
    "wheelhouse",
    "mirrors",
    "verdicts",
    "bisect",
    "culprit",
    "report",
    "retire",
    "bump",
    "pack",
    "completion",
    "docs",
)


def commands() -> list[Command]:
    """The documented commands, in the order of `patchlane --help` (no deprecated alias)."""
    return [importlib.import_module(f"retire.commands.{name}").COMMAND for name in REGISTRY]


def _noting(command: Command) -> Callable[[Project, argparse.Namespace], int]:
    """A deprecated alias's run: one line on stderr naming its replacement, then the command."""

    def run(project: Project, args: argparse.Namespace) -> int:
        say(
            f"patchlane: note: `patchlane {command.name}` is deprecated and goes in the next "
            f"release: use `{command.replaced_by}`",
            err=True,
        )
        return command.run(project, args)

    return run


def _version() -> str:
    try:
        return metadata.version("patchlane")
    except metadata.PackageNotFoundError:
        return "unknown"


def _docs_folder() -> str:
    where = folder()
    return str(where) if where is not None else "not in this copy"


#: What the engine imports beyond the runtime (the `engine` extra of pyproject.toml).
ENGINE_MODULES = ("uv", "nox", "tomlkit", "httpx")


def missing_engine() -> list[str]:
    """The engine's dependencies this interpreter cannot import (none after ``pip install
    'patchlane[engine]'``)."""
    return [name for name in ENGINE_MODULES if find_spec(name) is None]


_EXIT_WORDS = {
    ExitCode.OK: "ok",
    ExitCode.FAILED: "something failed",
    ExitCode.BAD_INPUT: "bad input",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.TERMINATED: "interrupted by SIGTERM",
}


def _add_verbosity(parser: argparse.ArgumentParser, *, default) -> None:
    """-q/-v, before or after the command (`patchlane -q lock`, `patchlane lock -q`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=-1,
        default=default,
        help="print results and errors only, no progress",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=1,
        default=default,
        help="also print detail (each step, the tools' full output)",
    )


def build_parser(*, arguments: bool = True) -> argparse.ArgumentParser:
    """The one parser; ``arguments=False``: the commands without their own options, which the
    runtime-only install prints its help with (their options import the engine)."""
    parser = Parser(
        prog="patchlane",
        description="Pinned lanes, reproducible locks, and the shims that patch them — until "
        "upstream fixes land.",
        epilog=f"Exit codes: {', '.join(f'{int(c)} {_EXIT_WORDS[c]}' for c in ExitCode)}. "
        "Every command, what it prints, its --json shape and its exit codes: `patchlane docs "
        f"commands` (the docs ship with patchlane: {_docs_folder()}). "
        "`patchlane COMMAND --help` describes one command.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="project folder holding lanes/, locks/, shims/ (default: like git, the nearest "
        "folder from here up with a patchlane.toml, else with lanes/, else here)",
    )
    parser.add_argument("-V", "--version", action="version", version=f"patchlane {_version()}")
    _add_verbosity(parser, default=0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands():
        p = sub.add_parser(
            command.name, help=command.help, description=command.description or command.help
        )
        if arguments:
            _add_command_arguments(p, command)
    for alias in ALIASES:
        # a parser added without help= is left out of the list of commands
        p = sub.add_parser(alias.name, description=f"use `{alias.replaced_by}`")
        if arguments:
            _add_command_arguments(p, alias)
    return parser


def _add_command_arguments(p: argparse.ArgumentParser, command: Command) -> None:
    """The options every command takes, the command's own, and what runs it."""
    # --root may also follow the command (`patchlane verdicts --root DIR`): it wins when given.
    p.add_argument(
        "--root",
        type=Path,
        default=argparse.SUPPRESS,
        help="project folder (default: the nearest from here up with patchlane.toml or lanes/)",
    )
    _add_verbosity(p, default=argparse.SUPPRESS)
    command.add_arguments(p)
    _nested_common_options(p)
    p.set_defaults(run=_noting(command) if command.replaced_by else command.run)


def _nested_common_options(p: argparse.ArgumentParser) -> None:
    """--root and -q/-v also after a command's own sub-command (`patchlane pack check --root
    DIR`), as after the command."""
    for action in p._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for nested in set(action.choices.values()):
            if "--root" not in nested._option_string_actions:
                nested.add_argument(
                    "--root",
                    type=Path,
                    default=argparse.SUPPRESS,
                    help="project folder (default: the nearest from here up with patchlane.toml "
                    "or lanes/)",
                )
            if "-q" not in nested._option_string_actions:
                _add_verbosity(nested, default=argparse.SUPPRESS)
            _nested_common_options(nested)


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM stops a command as Ctrl-C does, from its first line to its last
    with interrupts.handled():
        try:
            # as the signal arrives, every process of this run is ended: no worker thread's wait
            # (a lock's uv, a reproducer) holds the interruption up
            interrupts.on_interrupt(REAPER.halt)
            return _main(argv)
        # during start-up or parsing (the command's own run handles its interruptions itself)
        except KeyboardInterrupt as exc:
            return _interrupted(exc)
        finally:
            # the next command in this process (tests, nox) starts from the defaults
            configure()
            interrupts.reset()
            REAPER.resume()


def _interrupted(interrupt: KeyboardInterrupt) -> int:
    """One "interrupted" line (and the error document with ``--json``); 130 for Ctrl-C, 143 for
    SIGTERM. A second signal meanwhile is ignored: it would cut the line short. Every process
    this run started (uv and its builds, reproducers, and what they started) is ended."""
    with interrupts.quiet():
        # what started after the signal's own sweep
        kill_marked(RUN_TOKEN, prefix=True)
        return print_error(
            ExitCode(interrupts.exit_code(interrupt)), "interrupted", line="patchlane: interrupted"
        )


def _main(argv: Sequence[str] | None) -> int:
    if argv is None:
        # the command line itself: keep secrets out of the environment lane code can read
        heldsecrets.shed()
    arguments = list(sys.argv[1:] if argv is None else argv)
    # --json before parsing: a usage error or a missing engine still prints the error document
    configure(json="--json" in arguments[: _end_of_options(arguments)])
    missing = missing_engine()
    # the runtime-only install (`pip install patchlane`): one line, not an ImportError — but
    # the help still prints (the parser needs only the standard library)
    if not arguments:
        # bare `patchlane`: the help, as uv and git print theirs (exit 2: no command ran)
        build_parser(arguments=not missing).print_help()
        return ExitCode.BAD_INPUT
    if missing and _asks_for_help(arguments):
        # exits 0
        build_parser(arguments=False).parse_args(arguments)
    if missing:
        return print_error(
            ExitCode.FAILED,
            f"the engine is not installed here ({', '.join(missing)} missing)",
            fix=f"install it with: {sys.executable} -m pip install 'patchlane[engine]'",
        )
    args = build_parser().parse_args(arguments)
    configure(verbosity=args.verbosity, json=bool(getattr(args, "json", False)))
    return _run(args)


#: Commands that make a project where they are asked to, never in a project above.
_HERE = frozenset({"init"})


def _root(args: argparse.Namespace) -> Path:
    """``--root``, else the project found from the current folder up (``init``: the current
    folder)."""
    if args.root is not None:
        return Path(args.root)
    here = Path.cwd()
    return here if args.command in _HERE else find_root(here)


def _asks_for_help(arguments: list[str]) -> bool:
    """``-h``/``--help``/``--version`` before any ``--``."""
    return bool({"-h", "--help", "-V", "--version"} & set(arguments[: _end_of_options(arguments)]))


def _end_of_options(arguments: list[str]) -> int:
    return arguments.index("--") if "--" in arguments else len(arguments)


def _run(args: argparse.Namespace) -> int:
    """Run the chosen command; every error is printed once, by :func:`print_error`."""
    try:
        # --json: one document on stdout, whatever path the command took
        return json_kept(int(args.run(Project(_root(args)), args)))
    except InputError as exc:
        return print_error(
            ExitCode.BAD_INPUT,
            exc.problem,
            file=exc.path,
            key=exc.key,
            fix=exc.fix,
            line=f"patchlane: error: {exc}",
        )
    except PatchlaneError as exc:
        return print_error(ExitCode.FAILED, str(exc))
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    # a reader missed deep nesting: still one line, never a traceback
    except RecursionError:
        return print_error(ExitCode.BAD_INPUT, "input nested too deeply to read")
    # `patchlane … | head`: the reader left; no traceback, and no more writes
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.FAILED
    # the file system refused (a stray file, a full disk): one line naming the file
    except OSError as exc:
        filename = os.fsdecode(exc.filename) if exc.filename else None
        return print_error(ExitCode.FAILED, str(exc.strerror or exc), file=filename)
