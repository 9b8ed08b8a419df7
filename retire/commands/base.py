"""What a command is, the exit codes every command shares, and the one place output is printed.

A command module defines one ``COMMAND = Command(...)``: its name, one line of help, a function
that declares its arguments and a function that runs it with the :class:`Project`. The registry
(``retire.commands``) builds one parser from them and runs the chosen one; errors are raised by the
engine and printed once, there.

Output goes through :func:`say` with a :class:`Level`: ``-q`` drops progress, ``-v`` adds detail,
results and errors are always printed. With ``--json`` the one JSON document (:func:`emit_json`)
is all that reaches stdout; every line said goes to stderr. Nothing here writes ANSI escapes:
what a terminal gets beyond plain lines (uv's progress bars) is asked for with :func:`live`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import enum
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from retire.core.project import Project
from retire.core.secrets import scrub
from shims import times
from shims.tomlreader import close_match

__all__ = [
    "Command",
    "ExitCode",
    "Level",
    "Parser",
    "Scrubbed",
    "configure",
    "emit_json",
    "emit_text",
    "iso_date",
    "json_mode",
    "live",
    "positive_float",
    "positive_int",
    "print_error",
    "say",
    "shown",
    "utc_moment",
    "verbosity",
]


class ExitCode(enum.IntEnum):
    """Exit codes of every ``patchlane`` command (docs/commands.md has the table)."""

    #: done, and nothing failed
    OK = 0
    #: done, and something failed (a lane, a stale lock, a pack not ready) or a tool failed
    FAILED = 1
    #: bad input or usage: one line names the file, the key and the fix
    BAD_INPUT = 2
    #: Ctrl-C: what had finished is kept
    INTERRUPTED = 130
    #: SIGTERM (a CI cancel) or SIGHUP: stopped as Ctrl-C stops, what had finished is kept
    TERMINATED = 143


@dataclass(frozen=True)
class Command:
    name: str
    # one line for `patchlane --help`
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Project, argparse.Namespace], int]
    # longer text for `patchlane NAME --help` (default: help)
    description: str = ""
    # a deprecated spelling: hidden from `patchlane --help`, it names its replacement on stderr
    replaced_by: str = ""


class Level(enum.IntEnum):
    """How much a line matters: ``-q`` shows RESULT and up, ``-v`` shows DETAIL too."""

    #: what a person debugging wants (uv's full output, each step)
    DETAIL = 10
    #: what is happening now (a lane building, a reproducer running)
    PROGRESS = 20
    #: what the command found or did
    RESULT = 30
    #: what went wrong (always on stderr)
    ERROR = 40


@dataclass
class _Output:
    threshold: Level = Level.PROGRESS
    json: bool = False
    # a document reached stdout: an error after it prints no second one
    emitted: bool = False


_OUTPUT = _Output()


def configure(*, verbosity: int = 0, json: bool = False) -> None:
    """Set up output for one command: ``verbosity`` -1 (``-q``), 0, or 1 and more (``-v``)."""
    _OUTPUT.threshold = (
        Level.RESULT if verbosity < 0 else (Level.DETAIL if verbosity > 0 else Level.PROGRESS)
    )
    _OUTPUT.json = json
    _OUTPUT.emitted = False


def verbosity() -> int:
    """-1 with ``-q``, 1 with ``-v``, else 0."""
    return {Level.RESULT: -1, Level.DETAIL: 1}.get(_OUTPUT.threshold, 0)


def json_mode() -> bool:
    """True when stdout carries one JSON document (``--json``)."""
    return _OUTPUT.json


def json_kept(code: int) -> int:
    """``code`` when ``--json`` printed its document (or was not asked for); else the error
    document, exit 1: a command that returns under ``--json`` without one is a bug, and stdout
    must still hold one document."""
    if not _OUTPUT.json or _OUTPUT.emitted:
        return code
    return print_error(
        ExitCode.FAILED, "printed no JSON document", fix="report this as a patchlane bug"
    )


def say(line: str = "", *, err: bool = False, level: Level = Level.RESULT) -> None:
    """Print one line now (lane runs and bisections are long: output must not wait in a buffer).

    Progress lines vanish with ``-q`` and detail lines appear only with ``-v``; results and errors
    are always printed. Under ``--json`` every line goes to stderr, so stdout stays one document.
    """
    if level < _OUTPUT.threshold:
        return
    to_stderr = err or level >= Level.ERROR or _OUTPUT.json
    print(scrub(line), file=sys.stderr if to_stderr else sys.stdout, flush=True)


def emit_json(document: object) -> None:
    """The command's one JSON document, on stdout (``--json``), scrubbed of every known secret."""
    _OUTPUT.emitted = True
    sys.stdout.write(scrub(json.dumps(document, indent=2, default=str)) + "\n")
    sys.stdout.flush()


def emit_text(text: str) -> None:
    """A document printed as it is (a report's JSON, a pack's body), scrubbed of every known
    secret."""
    _OUTPUT.emitted = True
    sys.stdout.write(scrub(text))
    sys.stdout.flush()


class Scrubbed:
    """A text stream whose writes are scrubbed of secrets (for output a library prints itself,
    e.g. the pytest view of a lane run); everything else is the wrapped stream's."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def live() -> bool:
    """Whether stderr may get a terminal's live output (uv's progress bars, redrawn in place):
    only on a terminal, never in CI (``CI`` set), with ``NO_COLOR``, ``-q`` or ``--json``."""
    if os.environ.get("CI") or "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    if _OUTPUT.threshold > Level.PROGRESS or _OUTPUT.json:
        return False
    try:
        return sys.stderr.isatty()
    # replaced or closed stderr
    except (AttributeError, ValueError):
        return False


def shown(path) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


#: What kind of failure an error document reports, by exit code.
_ERROR_KINDS = {
    ExitCode.FAILED: "failed",
    ExitCode.BAD_INPUT: "bad-input",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.TERMINATED: "interrupted",
}


def print_error(
    code: ExitCode,
    message: str,
    *,
    file: str | None = None,
    key: str | None = None,
    fix: str | None = None,
    line: str | None = None,
    kind: str | None = None,
) -> ExitCode:
    """The one error printer: one line on stderr (``patchlane: error: file: key: message — fix``),
    with ``--json`` when no document was printed yet, the error document on stdout
    (``error.schema.json``) — ``--json`` keeps its contract on failure too. ``line`` is the
    whole stderr line. Returns ``code``."""
    if line is None:
        where = ": ".join(part for part in (file, key) if part)
        text = (f"{where}: {message}" if where else message) + (f" — {fix}" if fix else "")
        line = " ".join(f"patchlane: error: {text}".split())
    say(line, level=Level.ERROR)
    if _OUTPUT.json and not _OUTPUT.emitted:
        emit_json(
            {
                "ok": False,
                "exit_code": int(code),
                "error": {
                    "kind": kind or _ERROR_KINDS.get(code, "failed"),
                    "file": file,
                    "key": key,
                    # one line, as on stderr
                    "message": " ".join(message.split()),
                    "fix": " ".join(fix.split()) if fix else None,
                },
            }
        )
    return code


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (``patchlane: error: …``) and exit code 2, each
    pointing at its own command's ``--help`` (``patchlane run --help``), with "did you mean" for a
    command or an option one typo away; hidden commands (deprecated spellings) are never listed."""

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # the command the words were given to says so, with its own --help
            chosen = _chosen(self, parsed)
            chosen.error(
                f"unrecognized arguments: {' '.join(extras)}{_option_hint(chosen, extras)}"
            )
        return parsed

    def _check_value(self, action: argparse.Action, value) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            # the names --help lists: a parser added without help= (a deprecated alias) is not
            listed = [choice.dest for choice in action._choices_actions]
            hint = close_match(str(value), listed)
            raise argparse.ArgumentError(
                action,
                f"no {str(action.metavar or 'command').lower()} {str(value)[:40]!r}"
                + (f" — did you mean {hint!r}?" if hint else "")
                + f" (the choices: {', '.join(listed)})",
            )
        super()._check_value(action, value)

    def error(self, message: str):
        print_error(
            ExitCode.BAD_INPUT,
            message,
            fix=f"see `{self.prog} --help`",
            line=f"{self.prog}: error: {message} (see `{self.prog} --help`)",
            kind="usage",
        )
        raise SystemExit(ExitCode.BAD_INPUT)


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace):
    """The innermost command ``parsed`` names (``patchlane pack check``), from ``parser`` down."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(parsed, action.dest, None)
            if isinstance(name, str) and name in action.choices:
                return _chosen(action.choices[name], parsed)
    return parser


def _option_hint(parser: argparse.ArgumentParser, words: list[str]) -> str:
    """The hint ``(did you mean --strict?)`` for the first unknown option one typo away from one of
    ``parser``'s; "" when none is."""
    for word in words:
        if word.startswith("--"):
            hint = close_match(word.partition("=")[0], parser._option_string_actions)
            if hint:
                return f" (did you mean {hint}?)"
    return ""


def add_mirrors_option(parser: argparse.ArgumentParser, *, used_for: str) -> None:
    """``--mirrors DIR``: the one spelling of the mirrors folder every command takes."""
    parser.add_argument(
        "--mirrors",
        type=Path,
        metavar="DIR",
        help=f"folder of git mirrors as <owner>/<repo>[.git], for {used_for} (default: "
        "patchlane.toml's [mirrors] folder)",
    )


def iso_date(text: str) -> _dt.date:
    """argparse type: an ISO 8601 date (``--day``)."""
    try:
        day = _dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a date: {text!r}: write it like 2026-11-22"
        ) from None
    if not 1900 <= day.year <= 9000:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range: write a date between 1900 and 9000, like 2026-11-22"
        )
    return day


#: The largest count (jobs, lines) and number of seconds a flag takes: more is a typo, and would
#: overflow a time computed from it. Days are capped at a century (``now - days`` stays a date).
MAX_COUNT = 1_000_000
MAX_SECONDS = 1e7
MAX_DAYS = 36_500


def _number(kind: type, text: str, *, allow_zero: bool, maximum: float):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError(
            f"must be {'zero or more' if allow_zero else 'more than zero'}, not {text!r}"
        )
    if value > maximum:
        raise argparse.ArgumentTypeError(f"must be at most {maximum:g}, not {text[:40]!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (job counts, line counts), at most :data:`MAX_COUNT`."""
    return _number(int, text, allow_zero=False, maximum=MAX_COUNT)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (timeouts in seconds), at most :data:`MAX_SECONDS`."""
    return _number(float, text, allow_zero=False, maximum=MAX_SECONDS)


def existing_file(text: str):
    """argparse type: a file that exists (``--validation``): an input named on purpose never reads
    as empty."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text!r}: no such file: check the path")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: not a regular file: give the file itself")
    return path


def whole_days(text: str) -> int:
    """argparse type: a whole number of days, zero or more (a cooldown), at most
    :data:`MAX_DAYS`."""
    return _number(int, text, allow_zero=True, maximum=MAX_DAYS)


def positive_days(text: str) -> float:
    """argparse type: a finite number of days > 0 (windows, staleness), at most :data:`MAX_DAYS`."""
    return _number(float, text, allow_zero=False, maximum=MAX_DAYS)


def utc_moment(text: str) -> _dt.datetime:
    """argparse type: an ISO 8601 time, UTC when it names no offset (``--now``)."""
    try:
        moment = times.parse(text, assume_utc=True)
    except times.TimeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: write it like 2026-11-22T09:00Z") from None
    # windows and cooldowns are counted back and forth from it
    if not 1900 <= moment.year <= 9000:
        raise argparse.ArgumentTypeError(
            f"{text!r} is out of range: write a time between 1900 and 9000, like 2026-11-22T09:00Z"
        )
    return moment
