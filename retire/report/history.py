"""Where the report's history comes from: earlier reports (``reports/<week>.json``) and the git
history of ``shims/*/manifest.toml``. Never raises for bad history: a corrupted report or a
folder that is not a git repository becomes a one-line note and is left out.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

from retire.core.errors import InputError
from retire.core.git import Git, GitError
from retire.core.project import contained
from retire.report.model import (
    BurnPoint,
    BurnSource,
    PreviousReport,
    iso_week,
    parse_week,
    week_bounds,
)
from shims.tomlreader import read_text

__all__ = ["History", "git_burndown", "read_previous_reports"]


@dataclass(frozen=True)
class History:
    # the newest valid report before this week
    previous: PreviousReport | None
    # every valid earlier report, oldest first
    reports: tuple[PreviousReport, ...]
    # one line per report that could not be read
    notes: tuple[str, ...]


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


#: The largest previous report read (a year of weekly reports is far smaller).
_MAX_REPORT = 64 << 20


def read_previous_reports(folder: str | os.PathLike[str], before_week: str) -> History:
    """Every ``<week>.json`` in ``folder`` older than ``before_week``; bad ones noted and
    skipped."""
    folder = Path(folder)
    reports, notes = [], []
    try:
        candidates = sorted(folder.glob("*.json"))
    except OSError as exc:
        return History(
            None, (), (f"{_display(folder)}: cannot list previous reports ({exc}) — ignored",)
        )
    for path in candidates:
        try:
            week = parse_week(path.stem)
        except ValueError:
            # not a weekly report (e.g. a bench file someone dropped there)
            continue
        if week >= before_week:
            continue
        try:
            data = json.loads(
                read_text(contained(folder, path.name), _display(path), max_bytes=_MAX_REPORT) or ""
            )
            report = PreviousReport.from_json(data)
        # a committed link (never followed), a FIFO or folder (never read)
        except InputError as exc:
            notes.append(f"{_display(path)}: {exc.problem} — ignored")
            continue
        except RecursionError:
            notes.append(f"{_display(path)}: previous report is nested too deeply — ignored")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            notes.append(f"{_display(path)}: cannot read previous report ({exc}) — ignored")
            continue
        except json.JSONDecodeError as exc:
            notes.append(
                f"{_display(path)}: previous report is not valid JSON ({exc.msg} at line "
                f"{exc.lineno} "
                f"column {exc.colno}) — ignored"
            )
            continue
        except ValueError as exc:
            notes.append(f"{_display(path)}: not a usable previous report ({exc}) — ignored")
            continue
        if report.week != week:
            notes.append(
                f"{_display(path)}: says it is the report of {report.week}, not {week} — ignored"
            )
            continue
        reports.append(report)
    reports.sort(key=lambda r: r.week)
    return History(reports[-1] if reports else None, tuple(reports), tuple(notes))


def report_points(reports: tuple[PreviousReport, ...]) -> list[BurnPoint]:
    return [BurnPoint(r.week, r.carried, r.candidates, BurnSource.REPORT) for r in reports]


def git_burndown(
    root: str | os.PathLike[str], *, until: _dt.date, shims_dir: str = "shims"
) -> tuple[list[BurnPoint], str | None]:
    """Shims carried at the end of every ISO week, from the first commit that touched
    ``<root>/<shims_dir>`` to the week of ``until``, counted as ``<id>/manifest.toml`` folders in
    the tree of the newest commit (on HEAD's history) that touched them by then.

    Returns the points and a note when git history is unavailable (no repository, no commits,
    a shallow clone that lacks the history is noted too).
    """
    root = Path(root).resolve()
    try:
        work = Git(root).toplevel().resolve()
    except GitError:
        return [], f"git history not read: {_display(root)} is not in a git repository"
    repo = Git(work)
    try:
        relative = (root / shims_dir).relative_to(work).as_posix()
        if repo.rev_parse("HEAD") is None:
            return [], "git history not read: the repository has no commits yet"
        touching = sorted(repo.commits_touching(relative), key=lambda found: found[1])
        if not touching:
            return [], f"git history: no commit touches {relative}/ yet"
        times = [when for _, when in touching]
        counts: dict[str, int] = {}

        def count(sha: str) -> int:
            # <shims_dir>/<id>/manifest.toml, one level down
            if sha not in counts:
                counts[sha] = sum(
                    1
                    for path in repo.files(sha, relative)
                    if len(path.parts) == 2 and path.name == "manifest.toml"
                )
            return counts[sha]

        first_day = _dt.datetime.fromtimestamp(times[0], _dt.UTC).date()
        week, last_week = iso_week(first_day), iso_week(until)
        points = []
        while week <= last_week:
            sunday = week_bounds(week)[1]
            end = _dt.datetime.combine(
                sunday + _dt.timedelta(days=1), _dt.time(), _dt.UTC
            ).timestamp()
            index = bisect.bisect_left(times, end) - 1
            if index >= 0:
                points.append(BurnPoint(week, count(touching[index][0]), None, BurnSource.GIT))
            week = iso_week(sunday + _dt.timedelta(days=1))
        note = None
        if repo.is_shallow():
            note = (
                "git history is shallow (a CI checkout?): the burn-down starts where the clone "
                "does — fetch with depth 0"
            )
        return points, note
    except (GitError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [], f"git history not read: {first}"
