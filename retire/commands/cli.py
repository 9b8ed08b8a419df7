"""``patchlane``: the command-line front end of the engine. nox sessions call this."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from retire.core.errors import ConfigError, PatchlaneError
from shims.manifest import ManifestError


class Project:
    """Where a patchlane project keeps its lanes, locks, shims and records."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.lanes_dir = self.root / "lanes"
        self.locks_dir = self.root / "locks"
        self.manifest = self.root / "validation" / "manifest.jsonl"
        self.state_dir = self.root / ".patchlane"  # envs, caches, run summaries: never committed

    def manifests(self) -> dict:
        """The shims of this project by id (its own shims/ folder, else the installed catalogue)."""
        from shims.manifest import discover

        folder = self.root / "shims"
        return {m.id: m for m in discover(folder if folder.is_dir() else None)}

    def lanes(self):
        from retire.lanes import lanefile

        return lanefile.load_lanes(self.lanes_dir, root=self.root, known_shims=self.shim_ids())

    def shim_ids(self) -> set[str] | None:
        """Ids of the shims in this project's ``shims/`` folder (None: the project has none)."""
        folder = self.root / "shims"
        if not folder.is_dir():
            return None
        return {p.parent.name for p in folder.glob("*/manifest.toml")}


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def _print(line: str = "") -> None:
    print(line, flush=True)


def cmd_lanes(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.locks import locking

    lanes = lanefile.select(project.lanes(), args.lanes)
    rows = []
    for lane in lanes:
        found = locking.read_provenance(locking.lock_path(project.locks_dir, lane.name))
        if found is None:
            state = "missing"
        else:
            state = "current" if found.get("digest") == lane.digest else "stale"
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
    from retire.lanes import lanefile
    from retire.locks import locking

    lanes = lanefile.select(project.lanes(), args.lanes)
    if args.check:
        from retire.core import uv

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
            _print(f"note   {lane.name}: never locked; its index has no URL on this host, so it cannot be checked here")
        for lane, why in stale:
            _print(f"stale  {lane.name}: {why} ({lane.origin}) — run `nox -s lock -- {lane.name}`")
        if stale:
            _print(f"{len(stale)} of {len(lanes)} locks do not match their lanes: {', '.join(l.name for l, _ in stale)}")
            return 1
        _print(f"{len(lanes) - len(unlockable)} of {len(lanes)} locks match their lanes"
               + (f"; {len(unlockable)} cannot be checked on this host" if unlockable else ""))
        return 0
    upgrade_packages = tuple(args.upgrade_package or ())
    if upgrade_packages:
        lanes = locking.lanes_with_package(lanes, project.locks_dir, upgrade_packages)
    started = time.monotonic()
    pending = lanes if (args.force or args.upgrade or upgrade_packages) else \
        [lane for lane in lanes if not locking.is_current(lane, project.locks_dir)]
    if pending:  # asking uv its version costs a process: only when uv will run anyway
        _print(f"locking {len(pending)} of {len(lanes)} lane(s) with uv {_uv_version()} …")

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


def cmd_run(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.runs import lanerun as runs
    from retire.runs import suite
    from retire.evidence import validation
    from retire.core.atomic import atomic_write

    lanes = lanefile.select(project.lanes(), args.lanes)
    manifests = project.manifests()
    host = runs.Host.detect()
    options = runs.RunOptions(
        locks_dir=project.locks_dir, envs_dir=args.envs_dir or project.state_dir / "envs",
        overlay=args.overlay, timeout=args.timeout, host=host,
        **({"run_id": args.run_id} if args.run_id else {}),
    )
    _print(f"run {options.run_id}: {len(lanes)} lane(s) on this host ({host.description}), {args.jobs} at a time")
    results = runs.run_lanes(lanes, manifests, options, jobs=args.jobs,
                             progress=lambda lane, msg: _print(f"[{lane}] {msg}"))
    records = [record for run in results for shim in run.shims for record in shim.records]
    if records and not args.no_record:
        added = validation.append(args.manifest or project.manifest, records)
        _print(f"recorded {added} reproducer run(s) in {(args.manifest or project.manifest)}")
    summaries = project.state_dir / "runs" / options.run_id
    for run in results:
        atomic_write(summaries / f"{run.lane}.json", json.dumps(runs.to_summary(run), indent=2))
    locations = {"lanes": _relative(project.lanes_dir)}
    locations.update({shim_id: _relative(m.reproducer_path) for shim_id, m in manifests.items()})
    suite.report(results, locations)
    _print("")
    _print(runs.summary_table(results))
    failed = [run.lane for run in results if run.failed]
    if failed:
        _print(f"FAILED lanes: {', '.join(failed)}")
    return 1 if failed else 0


def cmd_summary(project: Project, args: argparse.Namespace) -> int:
    from retire.runs import lanerun as runs

    folder = project.state_dir / "runs" / args.run_id
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise ConfigError(folder, None, "no lane results for this run", "run `nox -s lane` first")
    results = [runs.from_summary(json.loads(f.read_text(encoding="utf-8"))) for f in files]
    _print(runs.summary_table(results))
    failed = [run.lane for run in results if run.failed]
    if failed:
        _print(f"FAILED lanes: {', '.join(failed)}")
    return 1 if failed else 0


def cmd_merge(project: Project, args: argparse.Namespace) -> int:
    from retire.evidence import validation

    inputs = list(args.inputs)
    if args.output.exists() and args.output not in inputs:
        inputs.insert(0, args.output)  # merging into a manifest keeps what it already holds
    before = len(validation.load(args.output))
    merged = validation.merge(inputs)
    validation.write(args.output, merged)
    _print(f"{args.output}: {len(merged)} records ({len(merged) - before:+d}) from {len(inputs)} file(s)")
    return 0


def _engine(module: str, *, root_flag: bool = True):
    """A command whose parser lives in ``retire.<module>.main``; it gets --root first."""

    def run(project: Project, args: argparse.Namespace) -> int:
        import importlib

        main_of = importlib.import_module(f"retire.{module}").main
        return main_of((["--root", str(project.root)] if root_flag else []) + list(args.rest))

    return run


def cmd_shims(project: Project, args: argparse.Namespace) -> int:
    from shims.__main__ import main as shims_main

    return shims_main(args.rest)


def _uv_version() -> str:
    from retire.core import uv

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

    p = sub.add_parser("run", help="build lanes from their locks and run their shims' reproducers",
                       description="Build each lane from its lock (uv, hash-checked) and run every shim's reproducer "
                                   "without and with the shim. Exit 1 only for broken shims, crashes and lanes that "
                                   "fail to build.")
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes (default: all)")
    p.add_argument("--jobs", type=int, default=1, help="lanes run at once (default: 1)")
    p.add_argument("--overlay", metavar="PYTHON", default=os.environ.get("PATCHLANE_OVERLAY") or None,
                   help="build overlay envs on this base interpreter, e.g. a GPU image's python (env: PATCHLANE_OVERLAY)")
    p.add_argument("--timeout", type=float, help="seconds per reproducer (default: each manifest's own)")
    p.add_argument("--manifest", type=Path, help="validation manifest to append to (default: validation/manifest.jsonl)")
    p.add_argument("--no-record", action="store_true", help="do not record the results")
    p.add_argument("--run-id", help="group this run's results under ID (nox passes one per invocation)")
    p.add_argument("--envs-dir", type=Path, help="where lane environments live (default: .patchlane/envs)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("summary", help="the lane × shim table of one run (after several `patchlane run` calls)")
    p.add_argument("--run-id", required=True)
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("manifest", help="validation manifest tools")
    msub = p.add_subparsers(dest="manifest_command", required=True, metavar="ACTION")
    m = msub.add_parser("merge", help="merge manifests from several hosts without losing or duplicating records")
    m.add_argument("inputs", nargs="+", type=Path, metavar="MANIFEST")
    m.add_argument("-o", "--output", type=Path, required=True, help="the merged manifest (existing records are kept)")
    m.set_defaults(func=cmd_merge)

    p = sub.add_parser("pack", help="upstream packs: check, plan, queue, show, approve, export, filed", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_engine("packs.store"))

    p = sub.add_parser("catalogue", help="the shim catalogue as Markdown, with where each shim was proven",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_engine("report.catalogue", root_flag=False))

    for name, module, text in (
        ("verdicts", "verdicts.engine", "probe upstream: keep / retire / unknown / stale / drift for each shim"),
        ("bisect", "bisect.engine", "find the first release in which a shim's reproducer stops reproducing"),
        ("report", "report.weekly", "write the weekly retirement report (reports/<year>-W<week>.md/.json/.html)"),
        ("retire", "branches.retirement", "the weekly report; with --apply, one auto-drop branch per retire verdict"),
        ("bump", "branches.bump", "re-lock lanes with upgrades on a branch, with the diff and the suites' outcome"),
    ):
        p = sub.add_parser(name, help=text, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_engine(module))

    p = sub.add_parser("shims", help="list every shim, whether it is active here and why", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_shims)
    return parser


# Commands with a parser of their own: everything after the command name is theirs.
PASSTHROUGH = ("shims", "pack", "catalogue", "verdicts", "bisect", "report", "retire", "bump")


def _split_passthrough(argv: list[str]) -> tuple[list[str], str, list[str]] | None:
    """(global args, command, its args) when argv names a pass-through command."""
    i = 0
    while i < len(argv):
        if argv[i] == "--root":
            i += 2
        elif argv[i].startswith("--root="):
            i += 1
        elif argv[i] in PASSTHROUGH:
            return argv[:i], argv[i], argv[i + 1:]
        else:
            return None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    split = _split_passthrough(argv)
    if split is not None:  # argparse's REMAINDER would swallow `--help` and leading options
        head, command, rest = split
        args = parser.parse_args([*head, command])
        args.rest = rest
    else:
        args = parser.parse_args(argv)
    try:
        return args.func(Project(args.root), args)
    except (ConfigError, ManifestError, PatchlaneError) as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("patchlane: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
