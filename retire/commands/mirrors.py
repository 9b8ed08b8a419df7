"""``patchlane mirrors``: the local git mirrors verdicts read, and syncing them where the network
allows."""

from __future__ import annotations

import argparse

from packaging.version import Version

from retire.commands.base import Command, ExitCode, Level, add_mirrors_option, emit_json, say
from retire.core.errors import InputError
from retire.core.project import Project
from retire.evidence.values import ProbeFailure


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_mirrors_option(p, used_for="listing and syncing")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    a = actions.add_parser(
        "list",
        help="each declared mirror: where it is, how fresh, its newest release tag (default)",
    )
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a = actions.add_parser(
        "sync",
        help="clone or fetch each mirror; where the network does not allow, a note and no change",
    )
    a.add_argument("repositories", nargs="*", metavar="URL", help="only these repositories")
    a.add_argument(
        "--strict", action="store_true", help="exit 1 when a mirror could not be reached"
    )
    a.add_argument("--json", action="store_true", help="machine-readable output")


def _selected(project: Project, args: argparse.Namespace) -> list:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.config import project_mirrors, repository_key

    mirrors = project_mirrors(project, args.mirrors).mirrors
    wanted = getattr(args, "repositories", None) or []
    if not wanted:
        return list(mirrors)
    known = {repository_key(m.repository): m for m in mirrors}
    missing = [url for url in wanted if repository_key(url) not in known]
    if missing:
        raise InputError(
            None,
            None,
            f"{missing[0]} is not declared in patchlane.toml",
            'add it as [[mirrors.repository]] url = "…"',
        )
    return [known[repository_key(url)] for url in wanted]


def _describe(mirror) -> dict:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.repo import open_mirror

    row = {
        "repository": mirror.repository,
        "path": str(mirror.path),
        "tags": mirror.tags,
        "branches": list(mirror.branches),
        "present": False,
        "newest_commit": None,
        "newest_release_tag": None,
        "release_tags": 0,
        "problem": None,
    }
    repo = open_mirror(mirror)
    if isinstance(repo, ProbeFailure):
        row["problem"] = repo.reason
        return row

    try:
        tags = repo.tag_versions()
        newest = repo.newest_commit_at
    except Exception as exc:  # noqa: BLE001 - a broken mirror is a row, not a crash
        row["problem"] = f"{type(exc).__name__}: {exc}"
        return row
    top = max(tags, key=lambda tv: Version(tv[1]), default=None)
    row.update(
        present=True,
        newest_commit=newest.isoformat() if newest else None,
        newest_release_tag=f"{top[0]} ({top[1]})" if top else None,
        release_tags=len(tags),
    )
    return row


def run(project: Project, args: argparse.Namespace) -> int:
    if args.action == "sync":
        return _sync(project, args)
    rows = [_describe(m) for m in _selected(project, args)]
    if getattr(args, "json", False):
        emit_json(rows)
        return ExitCode.OK
    if not rows:
        say(
            "no mirrors declared: add [[mirrors.repository]] entries to patchlane.toml "
            "(docs/mirrors.md)"
        )
        return ExitCode.OK
    for row in rows:
        if row["problem"]:
            say(f"missing   {row['repository']}: {row['problem']}")
        else:
            newest = (row["newest_commit"] or "?")[:10]
            say(
                f"present   {row['repository']}: newest commit {newest}, {row['release_tags']} "
                f"release tag(s), "
                f"newest {row['newest_release_tag'] or 'none'} — {row['path']}"
            )
    return ExitCode.OK


def _sync(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.mirrors.sync import SyncStatus, sync

    mirrors = _selected(project, args)
    if not mirrors:
        say("no mirrors declared: nothing to sync (docs/mirrors.md)")
        if args.json:
            emit_json([])
        return ExitCode.OK
    results = []
    for mirror in mirrors:
        say(f"syncing {mirror.repository} → {mirror.path} …", level=Level.PROGRESS)
        result = sync(mirror)
        results.append(result)
        if not args.json:
            line = f"  {result.status:<11} {mirror.repository}"
            say(line + (f": {result.detail}" if result.detail else ""))
    unreachable = [r for r in results if r.status == SyncStatus.UNREACHABLE]
    if unreachable and not args.json:
        say(
            f"note: {len(unreachable)} mirror(s) could not be reached from this host and were left "
            f"as they are; "
            "verdicts read what they hold and say when a mirror is behind"
        )
    if args.json:
        emit_json(
            [
                {
                    "repository": r.repository,
                    "path": str(r.path),
                    "status": r.status,
                    "detail": r.detail,
                    "newest_commit": r.newest_commit_at.isoformat() if r.newest_commit_at else None,
                }
                for r in results
            ]
        )
    failed = [r for r in results if not r.ok] + (unreachable if args.strict else [])
    return ExitCode.FAILED if failed else ExitCode.OK


COMMAND = Command(
    "mirrors",
    "local git mirrors: list them, or sync them where the network allows",
    add_arguments,
    run,
    "The git mirrors that answer for the code host on air-gapped hosts (declared in "
    "patchlane.toml). "
    "`sync` clones or fetches each; where the network does not allow, it changes nothing and says "
    "so.",
)
