"""``patchlane shim``: the project's shims — ``shim list`` (whether each is active here and why),
``shim new ID`` (scaffold a shim: manifest, patch, reproducer, added to a lane), and a retired
shim's guard: ``shim restore ID`` (its patch back from git history) and ``shim drop ID --reason``
(stop guarding for good)."""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path

import shims
from retire.commands.base import Command, ExitCode, Level, emit_json, say, shown
from retire.core.project import Project
from shims import times


def _add_root(p: argparse.ArgumentParser) -> None:
    # --root may also follow the action (`patchlane shim new ID --root DIR`)
    p.add_argument(
        "--root",
        type=Path,
        default=argparse.SUPPRESS,
        help="project folder (default: the nearest from here up with patchlane.toml or lanes/)",
    )


def add_list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--probe",
        action="store_true",
        help="import each installed target module so its shape check and probe run",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="validate every manifest and its files; exit 2 on errors",
    )


def _add_new_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", metavar="ID", help="the shim id: a lowercase identifier, e.g. my_fix")
    p.add_argument(
        "--lane",
        action="append",
        default=[],
        metavar="LANE",
        help="add the shim to this lane (repeatable; default: the only lane, if there is one)",
    )
    p.add_argument(
        "--distribution",
        help="the distribution that ships the bug (default: the lane's first requirement)",
    )
    p.add_argument(
        "--module", help="the module the patch applies to (default: the distribution's import name)"
    )
    p.add_argument("--owner", help="who answers for the shim (default: git's user.email)")
    p.add_argument("--json", action="store_true", help="print one JSON document: the files written")


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="every shim of the project, whether it is active here and why",
        description="List every shim of the project's catalogue, whether it is active here and "
        "why; --check validates them.",
    )
    _add_root(listing)
    add_list_arguments(listing)
    new = actions.add_parser(
        "new",
        help="scaffold <catalogue>/ID/ with manifest.toml, patch.py and reproduce.py",
        description="Scaffold a shim that `patchlane shim list --check` accepts and add it to "
        "lanes.",
    )
    _add_root(new)
    _add_new_arguments(new)
    restore = actions.add_parser(
        "restore",
        help="a regressed guard's patch.py back from git history, the shim back in its lanes",
        description="Bring a guard's patch back in one step: patch.py from the commit that still "
        "held it ([guard] patch-commit, `git show`), [guard] out of the manifest, the shim back "
        "in the lanes that carried it. Nothing is committed: review and commit.",
    )
    _add_root(restore)
    restore.add_argument("id", metavar="ID", help="the guard (a retired shim) to restore")
    dropping = actions.add_parser(
        "drop",
        help="retire a guard for good, with the reason recorded in its manifest",
        description="Stop running a guard's reproducer: [guard] status becomes dropped, with "
        "today's date and the reason.",
    )
    _add_root(dropping)
    dropping.add_argument("id", metavar="ID", help="the guard to drop")
    dropping.add_argument("--reason", required=True, help="why the guard can go (recorded)")


def run_list(project: Project, args: argparse.Namespace) -> int:
    """``shim list``: the catalogue's rows (a table, or ``--json``), or ``--check``'s verdict."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from shims import __main__ as listing

    if args.check:
        if not project.shims_dir.is_dir():
            say(f"no shim catalogue at {project.shims_dir}: nothing to check")
            if not args.json:
                return ExitCode.OK
        else:
            # every problem on stderr, the last raised (with --json: the error document)
            errors, checked = listing.problems(str(project.shims_dir))
            for error in errors[:-1]:
                say(f"patchlane: error: {error}", level=Level.ERROR)
            if errors:
                raise errors[-1]
            say(f"{checked} shim manifest(s) OK")
            if not args.json:
                return ExitCode.OK
    # This process activates the project's catalogue, never whatever the installed package holds.
    os.environ[shims.PATH_ENV] = str(project.shims_dir)
    found = [*listing.rows(probe=args.probe), *_guard_rows(project)]
    if args.json:
        emit_json(found)
    else:
        say(listing.table(found))
    return ExitCode.OK


def _guard_rows(project: Project) -> list[dict[str, object]]:
    """A row per guard (a retired shim: the runtime never activates it), its standing from the
    records: ``guard`` in the state column, the word (holding, regressed, …) in ``guard``."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.evidence import validation
    from retire.runs.guardstate import guard_states
    from shims import __main__ as listing

    guards = project.guards()
    if not guards:
        return []
    states = guard_states(guards.values(), validation.load(project.validation))
    return [
        {
            "id": guard.id,
            "fix_class": guard.fix_class,
            "target": guard.target.module,
            "distribution": guard.target.distribution,
            "installed": None,
            "state": listing.GUARD,
            "reason": states[guard.id].why,
            "guard": states[guard.id].word,
        }
        for guard in sorted(guards.values(), key=lambda m: m.id)
    ]


def _owner(project: Project) -> str | None:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.core.git import Git, GitError

    try:
        return Git(project.root).config("user.email")
    except (GitError, OSError):
        return None


def run_new(project: Project, args: argparse.Namespace) -> int:
    """``shim new ID``: the scaffolded files, written at once or not at all."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.scaffold.ignored import still_ignored
    from retire.scaffold.shim import no_lane_installs, plan_shim, write_shim

    plan = plan_shim(
        project,
        args.id,
        lanes=args.lane,
        distribution=args.distribution,
        module=args.module,
        owner=args.owner or _owner(project),
    )
    written = write_shim(plan, args.id)
    manifest = next(text for path, text in plan.create.items() if path.endswith("manifest.toml"))
    distribution = tomllib.loads(manifest)["target"]["distribution"]
    if warning := no_lane_installs(project, distribution, sorted(plan.edit)):
        say(f"warning: {warning}")
    # a shop's `*.toml` rule would keep the manifest out of every commit (and every CI checkout)
    for note in still_ignored(project.root, sorted(plan.create)):
        say(f"warning: {note}")
    if args.json:
        emit_json(
            {
                "id": args.id,
                "created": sorted(plan.create),
                "edited": sorted(plan.edit),
                "chosen": list(plan.notes),
            }
        )
        return ExitCode.OK
    for note in plan.notes:
        say(f"chose {note}")
    for path in written:
        say(f"{'edited ' if path in plan.edit else 'created'} {shown(project.root / path)}")
    say("next: write the reproducer, then `patchlane shim list --check` and `nox -s lane`")
    return ExitCode.OK


def run_restore(project: Project, args: argparse.Namespace) -> int:
    """``shim restore ID``: the guard's patch back, in the checkout."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches import guards

    done = guards.restore(project, args.id)
    say(f"restored {done.shim}: patch.py from {done.commit[:12]}")
    for path in done.files:
        say(f"wrote {path}")
    if done.lanes:
        say(f"back in lane(s): {', '.join(done.lanes)}")
    say("next: `nox -s lane` (the shim should read needed), then commit")
    return ExitCode.OK


def run_drop(project: Project, args: argparse.Namespace) -> int:
    """``shim drop ID --reason …``: the guard stops guarding; the reason is recorded."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.branches import guards

    path = guards.drop(project, args.id, args.reason, today=times.now().date())
    say(f"dropped guard {args.id}: {shown(path)} records why; its lanes no longer run it")
    return ExitCode.OK


def run(project: Project, args: argparse.Namespace) -> int:
    actions = {"list": run_list, "new": run_new, "restore": run_restore, "drop": run_drop}
    return actions[args.action](project, args)


COMMAND = Command(
    "shim",
    "the project's shims: `shim list` (active here, and why), `shim new ID` (scaffold one), "
    "`shim restore ID` / `shim drop ID` (a retired shim's guard)",
    add_arguments,
    run,
)
