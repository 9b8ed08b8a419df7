"""``patchlane``: the command-line front end of the engine. nox sessions call this."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from retire.errors import ConfigError, PatchlaneError


class Project:
    """Where a patchlane project keeps its lanes, locks, shims and records."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.lanes_dir = self.root / "lanes"
        self.locks_dir = self.root / "locks"

    def lanes(self):
        from retire import lanefile

        return lanefile.load_lanes(self.lanes_dir, root=self.root, known_shims=self.shim_ids())

    def shim_ids(self) -> set[str] | None:
        """Ids of the shims in this project's ``shims/`` folder (None: the project has none)."""
        folder = self.root / "shims"
        if not folder.is_dir():
            return None
        return {p.parent.name for p in folder.glob("*/manifest.toml")}


def _print(line: str = "") -> None:
    print(line, flush=True)


def cmd_lanes(project: Project, args: argparse.Namespace) -> int:
    from retire import lanefile, locking

    lanes = lanefile.select(project.lanes(), args.lanes)
    rows = []
    for lane in lanes:
        lock = locking.read_lock(locking.lock_path(project.locks_dir, lane.name))
        if lock is None:
            state = "missing"
        else:
            state = "current" if locking.provenance(lock).get("digest") == lane.digest else "stale"
        rows.append({
            "name": lane.name,
            "python": lane.python,
            "platform": lane.platform,
            "requirements": list(lane.requirements),
            "indexes": [i.name for i in lane.indexes],
            "exclude_newer": lane.exclude_newer.isoformat() if lane.exclude_newer else None,
            "shims": list(lane.shims),
            "needs_cuda": lane.needs_cuda,
            "lock": state,
            "origin": lane.origin,
            "description": lane.description,
        })
    if args.json:
        _print(json.dumps(rows, indent=2))
        return 0
    widths = [max([len(r["name"]) for r in rows] + [4]), 6, 22, 7, 8]
    _print(f"{'lane':<{widths[0]}}  {'python':<6}  {'platform':<22}  {'lock':<7}  {'packages'}  shims  from")
    for r in rows:
        frozen = f" frozen {r['exclude_newer'][:10]}" if r["exclude_newer"] else ""
        _print(f"{r['name']:<{widths[0]}}  {r['python']:<6}  {r['platform']:<22}  {r['lock']:<7}  "
               f"{len(r['requirements']):>8}  {len(r['shims']):>5}  {r['origin']}{frozen}")
    _print(f"{len(rows)} lanes")
    return 0


def cmd_lock(project: Project, args: argparse.Namespace) -> int:
    from retire import lanefile, locking

    lanes = lanefile.select(project.lanes(), args.lanes)
    if args.check:
        stale = locking.stale_lanes(lanes, project.locks_dir)
        for lane, why in stale:
            _print(f"stale  {lane.name}: {why} ({lane.origin}) — run `nox -s lock -- {lane.name}`")
        if stale:
            _print(f"{len(stale)} of {len(lanes)} locks do not match their lanes: {', '.join(l.name for l, _ in stale)}")
            return 1
        _print(f"all {len(lanes)} locks match their lanes")
        return 0
    upgrade_packages = tuple(args.upgrade_package or ())
    if upgrade_packages:
        lanes = locking.lanes_with_package(lanes, project.locks_dir, upgrade_packages)
    started = time.monotonic()
    _print(f"locking {len(lanes)} lane(s) with uv {_uv_version()} …")

    def report(result: locking.LockResult) -> None:
        extra = f"{result.packages} packages, {result.seconds:.1f}s" if result.ok else result.message
        _print(f"  {result.status:<11} {result.lane}: {extra}")
        if result.status == "failed" and result.detail:
            for line in result.detail.splitlines():
                _print(f"      | {line}")

    results = locking.lock_lanes(
        lanes, project.locks_dir, jobs=args.jobs, on_done=report,
        upgrade=args.upgrade, upgrade_packages=upgrade_packages, force=args.force,
    )
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    _print(f"done in {time.monotonic() - started:.1f}s: {summary or 'nothing to lock'}")
    unreachable = [r.lane for r in results if r.status == "unreachable"]
    if unreachable:
        _print(f"note: {', '.join(unreachable)} could not reach an index from this host; their previous locks are kept")
    failed = counts.get("failed", 0) + (len(unreachable) if args.require_all else 0)
    return 1 if failed else 0


def cmd_shims(project: Project, args: argparse.Namespace) -> int:
    from shims.__main__ import main as shims_main

    return shims_main(args.rest)


def _uv_version() -> str:
    from retire import uv

    return uv.version()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patchlane",
        description="Pinned lanes, reproducible locks and the shims that patch them.",
    )
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="project folder holding lanes/ and locks/ (default: .)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("lanes", help="list the expanded lanes and the state of their locks")
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_lanes)

    p = sub.add_parser("lock", help="write locks/<lane>/pylock.toml for each lane through uv",
                       description="Lock lanes in parallel. Unchanged lanes are skipped; a lane that fails keeps its previous lock.")
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument("--check", action="store_true", help="lock nothing; exit 1 naming every lane whose lock is missing or stale")
    p.add_argument("--upgrade", action="store_true", help="re-resolve everything to the newest allowed versions")
    p.add_argument("--upgrade-package", action="append", metavar="NAME", help="re-resolve only NAME (repeatable); only lanes that hold it are touched")
    p.add_argument("--force", action="store_true", help="re-lock even lanes whose lock is current")
    p.add_argument("--jobs", type=int, default=None, help="lanes locked at once (default: all, up to 16)")
    p.add_argument("--require-all", action="store_true", help="exit 1 also when a lane's index is unreachable from this host")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("shims", help="list every shim, whether it is active here and why", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_shims)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(Project(args.root), args)
    except (ConfigError, PatchlaneError) as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("patchlane: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
