"""What a command is, and the exit codes every command shares.

A command module defines one ``COMMAND = Command(...)``: its name, one line of help, a function
that declares its arguments and a function that runs it with the :class:`Project`. The registry
(``retire.commands``) builds one parser from them and runs the chosen one; errors are raised by the
engine and printed once, there.
"""

from __future__ import annotations

import argparse
import enum
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

from retire.core.project import Project

__all__ = ["Command", "ExitCode", "Parser", "positive_float", "positive_int", "say", "shown", "utc_time"]


class ExitCode(enum.IntEnum):
    """Exit codes of every ``patchlane`` command (docs/commands.md has the table)."""

    OK = 0  #: done, and nothing failed
    FAILED = 1  #: done, and something failed (a lane, a stale lock, a pack not ready) or a tool failed
    BAD_INPUT = 2  #: bad input or usage: one line names the file, the key and the fix
    INTERRUPTED = 130  #: Ctrl-C or SIGTERM: what had finished is kept


@dataclass(frozen=True)
class Command:
    name: str
    help: str  # one line for `patchlane --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Project, argparse.Namespace], int]
    description: str = ""  # longer text for `patchlane NAME --help` (default: help)


def say(line: str = "", *, err: bool = False) -> None:
    """Print one line now (lane runs and bisections are long: output must not wait in a buffer)."""
    print(line, file=sys.stderr if err else sys.stdout, flush=True)


def shown(path) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    from pathlib import Path

    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (``patchlane: error: …``) and exit code 2."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        say(f"{self.prog}: error: {message} (see `{self.prog} --help`)", err=True)
        raise SystemExit(ExitCode.BAD_INPUT)


def utc_time(text: str):
    """argparse type: an ISO 8601 date or time, UTC when it names no offset (``--now``)."""
    from retire.core import times

    try:
        return times.parse(text, assume_utc=True)
    except times.TimeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; write it like 2026-11-22T09:00Z") from None


def iso_date(text: str):
    """argparse type: an ISO 8601 date (``--day``)."""
    import datetime as _dt

    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r}; write it like 2026-11-22") from None


def _number(kind: type, text: str, *, allow_zero: bool):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise argparse.ArgumentTypeError(f"must be {'zero or more' if allow_zero else 'more than zero'}, not {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (job counts)."""
    return _number(int, text, allow_zero=False)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (timeouts, windows)."""
    return _number(float, text, allow_zero=False)
