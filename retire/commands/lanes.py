"""``patchlane lanes``: the expanded lanes and the state of their locks."""

from __future__ import annotations

import argparse

from retire.commands.base import Command, ExitCode, emit_json, say
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("lanes", nargs="*", metavar="LANE", help="only these lanes")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _freeze_words(row: dict) -> str:
    """`frozen 2026-11-15`, `cooldown 7 days → 2026-11-16`, `cooldown 7 days (not locked yet)`."""
    if row["cooldown"]:
        cutoff = f"→ {row['cutoff'][:10]}" if row["cutoff"] else "(not locked yet)"
        words = f"cooldown {row['cooldown']} {cutoff}"
    elif row["exclude_newer"]:
        words = f"frozen {row['exclude_newer'][:10]}"
    else:
        return ""
    exempt = [name for name, value in row["exclude_newer_package"].items() if value is False]
    own = [name for name, value in row["exclude_newer_package"].items() if value is not False]
    words += f", not {', '.join(exempt)}" if exempt else ""
    words += f", own dates: {', '.join(own)}" if own else ""
    return " " + words


def _revision_words(row: dict) -> str:
    """`, megatron-core@dev → d48bd6be0a85`: each revision and the commit its current lock took."""
    return "".join(
        f", {name}@{r['rev']}" + (f" → {r['commit'][:12]}" if r["commit"] else "")
        for name, r in row.get("revisions", {}).items()
    )


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.lanes.model import freeze_text
    from retire.locks import locking

    rows = []
    for lane in lanefile.select(lanefile.project_lanes(project), args.lanes):
        state = locking.lock_state(lane, project.locks_dir)
        recorded = (
            locking.read_provenance(locking.lock_path(project.locks_dir, lane.name)) or {}
            if state.current
            else {}
        )
        rows.append(
            {
                "name": lane.name,
                "python": lane.python,
                "platform": lane.platform,
                "requirements": list(lane.requirements),
                "indexes": [i.name for i in lane.indexes],
                "exclude_newer": lane.exclude_newer.isoformat() if lane.exclude_newer else None,
                "cooldown": str(lane.cooldown) if lane.cooldown else None,
                # the absolute cutoff the current lock was made with (a cooldown resolved at lock
                # time)
                "cutoff": recorded.get("exclude-newer"),
                "exclude_newer_package": {
                    p.name: freeze_text(p.freeze) for p in lane.exclude_newer_package
                },
                "shims": list(lane.shims),
                "needs_cuda": lane.needs_cuda,
                "lock": str(state.freshness),
                "lock_why": state.why,
                "origin": lane.origin,
                "description": lane.description,
                # [lane.revisions]: the rev as written and the commit the current lock resolved it
                # to
                **(
                    {
                        "revisions": {
                            r.distribution: {
                                "repository": r.repository,
                                "rev": r.rev,
                                "commit": (recorded.get("revisions") or {})
                                .get(r.distribution, {})
                                .get("commit"),
                            }
                            for r in lane.revisions
                        }
                    }
                    if lane.revisions
                    else {}
                ),
            }
        )
    if args.json:
        emit_json(rows)
        return ExitCode.OK
    width = max([len(r["name"]) for r in rows] + [4])
    say(
        f"{'lane':<{width}}  {'python':<6}  {'platform':<22}  {'lock':<7}  {'packages'}  shims  "
        f"from"
    )
    for r in rows:
        say(
            f"{r['name']:<{width}}  {r['python']:<6}  {r['platform']:<22}  {r['lock']:<7}  "
            f"{len(r['requirements']):>8}  {len(r['shims']):>5}  "
            f"{r['origin']}{_freeze_words(r)}{_revision_words(r)}"
        )
    for r in rows:
        if r["lock"] == "foreign":
            say(
                f"note: {r['name']}: the lock is foreign ({r['lock_why']}); `patchlane lock "
                f"{r['name']}` replaces it"
            )
    say(f"{len(rows)} lanes")
    return ExitCode.OK


COMMAND = Command(
    "lanes", "list the expanded lanes and the state of their locks", add_arguments, run
)
