"""``patchlane lock``: write or check ``locks/<lane>/pylock.toml`` through uv."""

from __future__ import annotations

import argparse
import time
from pathlib import PurePosixPath

from retire.commands.base import (
    Command,
    ExitCode,
    Level,
    add_mirrors_option,
    emit_json,
    positive_int,
    say,
    utc_moment,
)
from retire.core import uv
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument(
        "--check",
        action="store_true",
        help="lock nothing; exit 1 naming every lane whose lock is missing (always), stale or "
        "foreign",
    )
    p.add_argument(
        "--upgrade",
        action="store_true",
        help="re-resolve everything to the newest allowed versions (cooldowns measured from now)",
    )
    p.add_argument(
        "--upgrade-package",
        action="append",
        metavar="NAME",
        help="re-resolve only NAME (repeatable); only lanes that hold it are touched",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="re-lock even lanes whose lock is current (cutoffs kept)",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="lanes locked at once (default: all, up to 16)",
    )
    p.add_argument(
        "--require-all",
        action="store_true",
        help="exit 1 also when a lane's index is unreachable from this host",
    )
    p.add_argument(
        "--skip-unreachable",
        action="store_true",
        help="with --check: a lane never locked because its index has no URL on this host is "
        "noted, not failed",
    )
    add_mirrors_option(p, used_for="the lanes pinned to revisions")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (docs/commands.md); notes go to stderr",
    )
    # tests: measure cooldowns from this UTC time
    p.add_argument("--now", type=utc_moment, help=argparse.SUPPRESS)


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `--help` loads none of them (start-up time; the runtime-only install lacks them)
    from retire.lanes import lanefile
    from retire.locks import locking
    from retire.mirrors.config import project_mirrors

    lanes = lanefile.select(lanefile.project_lanes(project), args.lanes)
    if args.check:
        return _check(project, lanes, args)
    upgrade_packages = tuple(args.upgrade_package or ())
    if upgrade_packages:
        lanes = locking.lanes_with_package(lanes, project.locks_dir, upgrade_packages)
    started = time.monotonic()
    pending = (
        lanes
        if (args.force or args.upgrade or upgrade_packages)
        else [lane for lane in lanes if not locking.is_current(lane, project.locks_dir)]
    )
    # asking uv its version costs a process: only when uv will run anyway
    if pending:
        say(
            f"locking {len(pending)} of {len(lanes)} lane(s) with uv {uv.version()} …",
            level=Level.PROGRESS,
        )

    def report(result: locking.LockResult) -> None:
        if result.ok:
            extra = f"{result.packages} packages, {result.seconds:.1f}s"
            extra += f", nothing uploaded after {result.cutoff}" if result.cutoff else ""
            extra += _exceptions(result.exclude_newer_package)
        else:
            extra = result.message
        # one write: lanes finish on several threads at once
        note = f"\n      {result.message}" if result.ok and result.message else ""
        say(
            f"  {result.status:<11} {result.lane}: {extra}{note}",
            level=Level.RESULT
            if result.status != locking.LockStatus.UP_TO_DATE or note
            else Level.PROGRESS,
        )
        if result.replaced:
            say(f"      replaced a foreign lock ({result.replaced})")
        if result.status == locking.LockStatus.FAILED and result.detail:
            for line in result.detail.splitlines():
                say(f"      | {line}")

    # revisions resolve in them
    mirrors = (
        project_mirrors(project, args.mirrors) if any(lane.revisions for lane in pending) else None
    )
    results = locking.lock_lanes(
        lanes,
        project.locks_dir,
        jobs=args.jobs,
        on_done=report,
        upgrade=args.upgrade,
        upgrade_packages=upgrade_packages,
        force=args.force,
        mirrors=mirrors,
        **({"now": args.now} if args.now else {}),
    )
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    say(f"done in {time.monotonic() - started:.1f}s: {summary or 'nothing to lock'}")
    unreachable = [r.lane for r in results if r.status == locking.LockStatus.UNREACHABLE]
    if unreachable:
        say(
            f"note: {', '.join(unreachable)} could not reach an index from this host; their "
            f"previous locks are kept"
        )
    failed = counts.get("failed", 0) + (len(unreachable) if args.require_all else 0)
    code = ExitCode.FAILED if failed else ExitCode.OK
    if args.json:
        emit_json(
            {"ok": code == ExitCode.OK, "counts": counts, "lanes": [r.to_json() for r in results]}
        )
    return code


def _check(project: Project, lanes: list, args: argparse.Namespace) -> int:
    # deferred: the runtime-only install (no engine) must still print `--help`
    # deferred: the runtime-only install (no engine) must still print `--help`
    from retire.locks import locking
    from retire.locks.uvinputs import IndexWithoutURL, resolve_index_urls

    named = uv.host_indexes().named
    rows, bad, unchecked = [], [], 0
    ignored = _ignored_locks(project, lanes)
    for lane in lanes:
        state = locking.lock_state(lane, project.locks_dir)
        shown_state, fix = str(state.freshness), None
        if lane.name in ignored:
            # in a fresh clone the lock is missing because git never took it, not because
            # nobody locked the lane: say which rule, and how to let git commit it
            state = locking.LockState(lane.name, state.freshness, ignored[lane.name])
            shown_state, fix = "ignored", f"nox -s lock -- {lane.name}"
            bad.append(lane.name)
            say(f"ignored {lane.name}: {state.why} — then run `{fix}` and commit the lock")
        # A missing lock fails, also where this host cannot lock the lane (its index has no URL
        # here): a lane without a lock runs nowhere. Only --skip-unreachable lets such a host pass.
        elif state.freshness is locking.Freshness.MISSING and isinstance(
            resolve_index_urls(lane, named), IndexWithoutURL
        ):
            shown_state, unchecked, fix = "unchecked", unchecked + 1, f"nox -s lock -- {lane.name}"
            if args.skip_unreachable:
                say(
                    f"note    {lane.name}: never locked; its index has no URL on this host, so it "
                    f"cannot be checked here"
                )
            else:
                bad.append(lane.name)
                say(
                    f"missing {lane.name}: no lock, and its index has no URL on this host "
                    f"({lane.origin}) — run "
                    f"`{fix}` on a host that reaches it (or --skip-unreachable on hosts that never "
                    f"will)"
                )
        elif not state.current:
            fix = f"nox -s lock -- {lane.name}"
            bad.append(lane.name)
            say(
                f"{shown_state:<7} {lane.name}: {state.why} ({lane.origin}) — run `{fix}`"
                + (
                    " to replace it with a patchlane lock"
                    if state.freshness is locking.Freshness.FOREIGN
                    else ""
                )
            )
        rows.append(
            {
                "lane": lane.name,
                "state": shown_state,
                "why": state.why,
                "origin": lane.origin,
                "fix": fix,
            }
        )
    if bad:
        say(f"{len(bad)} of {len(lanes)} locks do not match their lanes: {', '.join(bad)}")
    else:
        say(
            f"{len(lanes) - unchecked} of {len(lanes)} locks match their lanes"
            + (f"; {unchecked} cannot be checked on this host" if unchecked else "")
        )
    if args.json:
        emit_json({"ok": not bad, "lanes": rows})
    return ExitCode.FAILED if bad else ExitCode.OK


def _ignored_locks(project: Project, lanes: list) -> dict[str, str]:
    """lane -> why git leaves its lock out of every commit (an ignore rule, and the negation
    that lets git take it), for the locks that are not committed."""
    # deferred: the runtime-only install (no engine) must still print `--help`
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.core.git import Git, GitError
    from retire.locks.locking import lock_path

    paths = {
        lane.name: lock_path(project.locks_dir, lane.name).relative_to(project.root).as_posix()
        for lane in lanes
        if project.locks_dir.is_relative_to(project.root)
    }
    try:
        rules = Git(project.root).ignored(list(paths.values()))
    except GitError:
        return {}
    return {
        lane: f"{path} is ignored by git ({rules[path]}), so it is in no commit and no clone — "
        f"add `!/{PurePosixPath(path).parent.parent}/*/pylock.toml` at the end of .gitignore"
        for lane, path in paths.items()
        if path in rules
    }


COMMAND = Command(
    "lock",
    "write locks/<lane>/pylock.toml for each lane through uv",
    add_arguments,
    run,
    "Lock lanes in parallel. Unchanged lanes are skipped; a lane that fails keeps its previous "
    "lock. "
    'A cooldown (exclude-newer = "7 days") is resolved to a UTC cutoff when a lane is first locked '
    "and "
    "recorded in the lock; re-locks keep it until --upgrade or --upgrade-package.",
)


def _exceptions(packages: dict[str, str | bool]) -> str:
    """`, not torchlike, own dates: helper`: the freeze's exceptions, as `lanes` words them."""
    exempt = [name for name, value in packages.items() if value is False]
    own = [name for name, value in packages.items() if value is not False]
    return (f", not {', '.join(exempt)}" if exempt else "") + (
        f", own dates: {', '.join(own)}" if own else ""
    )
