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

from retire.report.model import BurnPoint, PreviousReport, iso_week, parse_week, week_bounds

__all__ = ["History", "git_burndown", "read_previous_reports"]


@dataclass(frozen=True)
class History:
    previous: PreviousReport | None  # the newest valid report before this week
    reports: tuple[PreviousReport, ...]  # every valid earlier report, oldest first
    notes: tuple[str, ...]  # one line per report that could not be read


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def read_previous_reports(folder: str | os.PathLike[str], before_week: str) -> History:
    """Every ``<week>.json`` in ``folder`` older than ``before_week``; bad ones noted and skipped."""
    folder = Path(folder)
    reports, notes = [], []
    try:
        candidates = sorted(folder.glob("*.json"))
    except OSError as exc:
        return History(None, (), (f"{_display(folder)}: cannot list previous reports ({exc}) — ignored",))
    for path in candidates:
        try:
            week = parse_week(path.stem)
        except ValueError:
            continue  # not a weekly report (e.g. a bench file someone dropped there)
        if week >= before_week:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            report = PreviousReport.from_json(data)
        except (OSError, UnicodeDecodeError) as exc:
            notes.append(f"{_display(path)}: cannot read previous report ({exc}) — ignored")
            continue
        except json.JSONDecodeError as exc:
            notes.append(f"{_display(path)}: previous report is not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}) — ignored")
            continue
        except ValueError as exc:
            notes.append(f"{_display(path)}: not a usable previous report ({exc}) — ignored")
            continue
        if report.week != week:
            notes.append(f"{_display(path)}: says it is the report of {report.week}, not {week} — ignored")
            continue
        reports.append(report)
    reports.sort(key=lambda r: r.week)
    return History(reports[-1] if reports else None, tuple(reports), tuple(notes))


def report_points(reports: tuple[PreviousReport, ...]) -> list[BurnPoint]:
    return [BurnPoint(r.week, r.carried, r.candidates, "report") for r in reports]


def git_burndown(root: str | os.PathLike[str], *, until: _dt.date, shims_dir: str = "shims") -> tuple[list[BurnPoint], str | None]:
    """Shims carried at the end of every ISO week, from the first commit that touched
    ``<root>/<shims_dir>`` to the week of ``until``, counted as ``<id>/manifest.toml`` folders in
    the tree of the newest commit (on HEAD's history) that touched them by then.

    Returns the points and a note when git history is unavailable (no repository, no commits,
    a shallow clone that lacks the history is noted too).
    """
    try:
        import git
    except ImportError:
        return [], "git history not read: gitpython is not installed"
    root = Path(root).resolve()
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return [], f"git history not read: {_display(root)} is not in a git repository"
    try:
        work = Path(repo.working_tree_dir or root).resolve()
        relative = (root / shims_dir).relative_to(work).as_posix()
        try:
            repo.head.commit
        except ValueError:
            return [], "git history not read: the repository has no commits yet"
        touching = list(repo.iter_commits("HEAD", paths=relative))
        if not touching:
            return [], f"git history: no commit touches {relative}/ yet"
        touching.sort(key=lambda c: c.committed_date)
        times = [c.committed_date for c in touching]
        counts: dict[str, int] = {}

        def count(commit) -> int:
            if commit.hexsha not in counts:
                try:
                    tree = commit.tree / relative
                except KeyError:
                    counts[commit.hexsha] = 0
                else:
                    counts[commit.hexsha] = sum(
                        1 for sub in tree.trees if any(b.name == "manifest.toml" for b in sub.blobs))
            return counts[commit.hexsha]

        first_day = _dt.datetime.fromtimestamp(times[0], _dt.timezone.utc).date()
        week, last_week = iso_week(first_day), iso_week(until)
        points = []
        while week <= last_week:
            sunday = week_bounds(week)[1]
            end = _dt.datetime.combine(sunday + _dt.timedelta(days=1), _dt.time(), _dt.timezone.utc).timestamp()
            index = bisect.bisect_left(times, end) - 1
            if index >= 0:
                points.append(BurnPoint(week, count(touching[index]), None, "git"))
            week = iso_week(sunday + _dt.timedelta(days=1))
        note = None
        if repo.git.rev_parse("--is-shallow-repository").strip() == "true":
            note = "git history is shallow (a CI checkout?): the burn-down starts where the clone does — fetch with depth 0"
        return points, note
    except (git.GitCommandError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [], f"git history not read: {first}"
    finally:
        repo.close()
