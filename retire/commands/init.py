"""``patchlane init [PATH]``: scaffold a working patchlane project (lanes, shims, locks, CI), or add
one to the repository a shop already has."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, Level, emit_json, say, shown
from retire.core.errors import InputError
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="the project folder (default: --root, the current folder)",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="SOURCE",
        help="where patchlane comes from, for the workflows, the hooks and the README: an index "
        'requirement ("patchlane[engine]==0.1.0"), a git URL and a ref '
        "(git+https://HOST/OWNER/patchlane@v0.1.0), or a wheel or checkout on this machine "
        "(default: where the running patchlane was installed from)",
    )
    p.add_argument(
        "--action",
        metavar="OWNER/REPO@REF",
        help="patchlane's GitHub Action for the workflows, e.g. pinned by commit (default: the one "
        "of --from on github.com; none: the workflows run the same commands). Alone, it is also "
        "--from git+https://github.com/OWNER/REPO@REF",
    )
    p.add_argument(
        "--python", metavar="X.Y", help="the CPU lane's Python (default: the one running patchlane)"
    )
    p.add_argument(
        "--no-lock", action="store_true", help="do not lock the new lane now (it needs its index)"
    )
    p.add_argument(
        "--repoint",
        action="store_true",
        help="re-point an adopted repository to --from (or --action): the workflows, the hooks, "
        "the README and the noxfile's hint name the new source; nothing else changes, nothing is "
        "locked",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON document: the files written, the notes"
    )


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.scaffold import write
    from retire.scaffold.ignored import still_ignored
    from retire.scaffold.project import committed, plan_init

    root = (args.path if args.path is not None else project.root).resolve()
    if args.repoint and args.source is None and args.action is None:
        raise InputError(None, "--repoint", "names no new source", "add --from SOURCE")
    source = _source(args, root)
    if args.repoint:
        # deferred: `patchlane --help` does not load it, and start-up time counts
        from retire.scaffold.repoint import plan_repoint

        plan = plan_repoint(root, source, action=args.action)
        written = write(plan, command="patchlane init --repoint")
    else:
        plan = plan_init(root, source, action=args.action, python=args.python)
        written = write(plan, command="patchlane init", append_only=True)
    for path in written:
        say(
            f"{'edited ' if path in plan.edit else 'created'} {shown(root / path)}",
            level=Level.PROGRESS,
        )
    notes = [*plan.notes]
    if not args.repoint:
        notes += [*still_ignored(root, committed(plan)), *_git_note(root)]
    for note in notes:
        say(f"note: {note}")
    locked = [] if args.no_lock or args.repoint else _lock(Project(root))
    if args.json:
        emit_json(
            {
                "root": str(root),
                "from": source.engine,
                "created": sorted(plan.create),
                "edited": sorted(plan.edit),
                "locked": locked,
                "notes": notes,
            }
        )
        return ExitCode.OK
    if args.repoint:
        say(f"re-pointed {shown(root)} to {source.engine}: {len(plan.edit)} file(s) edited")
        return ExitCode.OK
    say(
        f"initialised {shown(root)} (patchlane from {source.engine}): {len(plan.create)} file(s) "
        f"created, {len(plan.edit)} edited" + (f", {len(locked)} lane(s) locked" if locked else "")
    )
    # `cd .` is no step: named only when the project is another folder
    here = shown(root) == "."
    say(
        f"next: {'' if here else f'cd {shown(root)} && '}patchlane shim new my_fix && nox -s lock "
        "&& nox -s lane -- --strict"
    )
    return ExitCode.OK


def _source(args: argparse.Namespace, root: Path):
    """The Source of --from; --action alone names a github.com repository; else the running
    copy's."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.scaffold.source import installed_source, parse_action, parse_source

    if args.action:
        repository, ref = parse_action(args.action)
        if args.source is None:
            return parse_source(f"git+https://github.com/{repository}@{ref}", root)
    if args.source is not None:
        return parse_source(args.source, root)
    return installed_source(root)


def _git_note(root: Path) -> list[str]:
    """A note when ``root`` is not in a git repository: retire and bump make branches there."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.core.git import Git, GitError

    try:
        if Git(root).is_repository():
            return []
    except GitError:
        pass
    return [
        (
            f"{shown(root)} is not a git repository, and `patchlane retire --apply` and "
            f"`patchlane bump` make branches in one — make it one: cd {shown(root)} && git init && "
            "git add -A && git commit -m 'patchlane init'"
        )
    ]


def _lock(project: Project) -> list[str]:
    """Lock the new project's lanes now, so `nox -s lock -- --check` passes at once; an index that
    cannot be reached here is a note (the files are written either way)."""
    # deferred: the runtime-only install (no engine) must still print `--help`
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.locks import locking

    results = locking.lock_lanes(lanefile.project_lanes(project), project.locks_dir)
    for result in results:
        if not result.ok:
            say(
                f"note: {result.lane} is not locked yet ({result.status}: {result.message}) — run "
                f"`nox -s lock` "
                "where its index is reachable"
            )
    return [result.lane for result in results if result.ok]


COMMAND = Command(
    "init",
    "scaffold a patchlane project, or add one to an existing repository: a CPU lane, shims/, "
    "locks/, the nox sessions, CI workflows, pre-commit hooks",
    add_arguments,
    run,
    "Files that exist are never overwritten: README.md and .gitignore get lines appended, "
    "noxfile.py one import line, .pre-commit-config.yaml one repos: entry; where that cannot be "
    "done safely a note gives the exact lines to add and the exit code stays 0. Any other file "
    "that exists stops it before anything is written (exit 2).",
)
