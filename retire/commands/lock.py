"""``patchlane lock``: write or check ``locks/<lane>/pylock.toml`` through uv."""

from __future__ import annotations

import argparse
import time

from retire.commands.base import Command, ExitCode, positive_int, say
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument("--check", action="store_true", help="lock nothing; exit 1 naming every lane whose lock is missing or stale")
    p.add_argument("--upgrade", action="store_true", help="re-resolve everything to the newest allowed versions")
    p.add_argument("--upgrade-package", action="append", metavar="NAME",
                   help="re-resolve only NAME (repeatable); only lanes that hold it are touched")
    p.add_argument("--force", action="store_true", help="re-lock even lanes whose lock is current")
    p.add_argument("--jobs", type=positive_int, default=None, help="lanes locked at once (default: all, up to 16)")
    p.add_argument("--require-all", action="store_true", help="exit 1 also when a lane's index is unreachable from this host")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.locks import locking

    lanes = lanefile.select(project.lanes(), args.lanes)
    if args.check:
        return _check(project, lanes)
    upgrade_packages = tuple(args.upgrade_package or ())
    if upgrade_packages:
        lanes = locking.lanes_with_package(lanes, project.locks_dir, upgrade_packages)
    started = time.monotonic()
    pending = lanes if (args.force or args.upgrade or upgrade_packages) else \
        [lane for lane in lanes if not locking.is_current(lane, project.locks_dir)]
    if pending:  # asking uv its version costs a process: only when uv will run anyway
        from retire.core import uv

        say(f"locking {len(pending)} of {len(lanes)} lane(s) with uv {uv.version()} …")

    def report(result: locking.LockResult) -> None:
        extra = f"{result.packages} packages, {result.seconds:.1f}s" if result.ok else result.message
        say(f"  {result.status:<11} {result.lane}: {extra}")
        if result.status == "failed" and result.detail:
            for line in result.detail.splitlines():
                say(f"      | {line}")

    results = locking.lock_lanes(
        lanes, project.locks_dir, jobs=args.jobs, on_done=report,
        upgrade=args.upgrade, upgrade_packages=upgrade_packages, force=args.force,
    )
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    say(f"done in {time.monotonic() - started:.1f}s: {summary or 'nothing to lock'}")
    unreachable = [r.lane for r in results if r.status == "unreachable"]
    if unreachable:
        say(f"note: {', '.join(unreachable)} could not reach an index from this host; their previous locks are kept")
    failed = counts.get("failed", 0) + (len(unreachable) if args.require_all else 0)
    return ExitCode.FAILED if failed else ExitCode.OK


def _check(project: Project, lanes: list) -> int:
    from retire.core import uv
    from retire.locks import locking

    named = uv.host_indexes().named
    stale, unlockable = [], []
    for lane, why in locking.stale_lanes(lanes, project.locks_dir):
        # A lane never locked because its index has no URL on this host cannot be judged
        # here; a lock that exists but no longer matches its lane is always an error.
        if why == "no lock" and isinstance(locking.resolve_index_urls(lane, named), str):
            unlockable.append(lane)
        else:
            stale.append((lane, why))
    for lane in unlockable:
        say(f"note   {lane.name}: never locked; its index has no URL on this host, so it cannot be checked here")
    for lane, why in stale:
        say(f"stale  {lane.name}: {why} ({lane.origin}) — run `nox -s lock -- {lane.name}`")
    if stale:
        say(f"{len(stale)} of {len(lanes)} locks do not match their lanes: {', '.join(l.name for l, _ in stale)}")
        return ExitCode.FAILED
    say(f"{len(lanes) - len(unlockable)} of {len(lanes)} locks match their lanes"
        + (f"; {len(unlockable)} cannot be checked on this host" if unlockable else ""))
    return ExitCode.OK


COMMAND = Command(
    "lock", "write locks/<lane>/pylock.toml for each lane through uv", add_arguments, run,
    "Lock lanes in parallel. Unchanged lanes are skipped; a lane that fails keeps its previous lock.",
)
