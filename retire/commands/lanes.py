"""``patchlane lanes``: the expanded lanes and the state of their locks."""

from __future__ import annotations

import argparse
import json

from retire.commands.base import Command, say
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.locks import locking

    rows = []
    for lane in lanefile.select(project.lanes(), args.lanes):
        rows.append({
            "name": lane.name,
            "python": lane.python,
            "platform": lane.platform,
            "requirements": list(lane.requirements),
            "indexes": [i.name for i in lane.indexes],
            "exclude_newer": lane.exclude_newer.isoformat() if lane.exclude_newer else None,
            "shims": list(lane.shims),
            "needs_cuda": lane.needs_cuda,
            "lock": str(locking.lock_state(lane, project.locks_dir).freshness),
            "origin": lane.origin,
            "description": lane.description,
        })
    if args.json:
        say(json.dumps(rows, indent=2))
        return 0
    width = max([len(r["name"]) for r in rows] + [4])
    say(f"{'lane':<{width}}  {'python':<6}  {'platform':<22}  {'lock':<7}  {'packages'}  shims  from")
    for r in rows:
        frozen = f" frozen {r['exclude_newer'][:10]}" if r["exclude_newer"] else ""
        say(f"{r['name']:<{width}}  {r['python']:<6}  {r['platform']:<22}  {r['lock']:<7}  "
            f"{len(r['requirements']):>8}  {len(r['shims']):>5}  {r['origin']}{frozen}")
    say(f"{len(rows)} lanes")
    return 0


COMMAND = Command("lanes", "list the expanded lanes and the state of their locks", add_arguments, run)
