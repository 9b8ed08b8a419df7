"""``patchlane verdicts``: probe upstream and decide, for each shim, what to do with it."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_json, existing_file, positive_int, say
from retire.core.errors import InputError
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    from retire.verdicts.rules import DEFAULT_STALE_DAYS

    p.add_argument("shims", nargs="*", metavar="SHIM", help="only these shims (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output with the evidence")
    p.add_argument(
        "--index-url",
        help="default package index when a lane names none (default: uv's configuration)",
    )
    p.add_argument("--api-url", help="GitHub REST API base URL (default: the public API)")
    p.add_argument(
        "--mirrors",
        type=Path,
        metavar="DIR",
        help="folder of local clones as <owner>/<repo>[.git] (default: patchlane.toml's [mirrors] "
        "folder)",
    )
    p.add_argument(
        "--cache-dir", type=Path, help="HTTP cache folder (default: .patchlane/cache/http)"
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the HTTP cache")
    p.add_argument(
        "--validation",
        type=existing_file,
        help="validation manifest (default: validation/manifest.jsonl)",
    )
    p.add_argument(
        "--stale-after",
        type=positive_int,
        default=DEFAULT_STALE_DAYS,
        metavar="DAYS",
        help="days without upstream activity before a shim is stale "
        f"(default {DEFAULT_STALE_DAYS})",
    )
    p.add_argument(
        "--jobs", type=positive_int, default=100, help="probes in flight at once (default 100)"
    )


def selected_manifests(project: Project, wanted: list[str]) -> list:
    """The project's shims, or only ``wanted`` (each must exist)."""
    manifests = project.manifests()
    unknown = [s for s in wanted if s not in manifests]
    if unknown:
        raise InputError(
            None,
            None,
            f"unknown shim {unknown[0]!r}",
            f"known shims: {', '.join(sorted(manifests)) or 'none'}",
        )
    return [m for shim_id, m in sorted(manifests.items()) if not wanted or shim_id in wanted]


def run(project: Project, args: argparse.Namespace) -> int:
    from retire.lanes import lanefile
    from retire.mirrors.config import project_mirrors
    from retire.verdicts.gather import GatherOptions, gather
    from retire.verdicts.model import Decision

    manifests = selected_manifests(project, args.shims)
    lanes = lanefile.project_lanes(project)
    cache_dir = None if args.no_cache else (args.cache_dir or project.http_cache)
    verdicts = gather(
        manifests,
        lanes,
        project.locks_dir,
        args.validation or project.validation,
        GatherOptions(
            index_url=args.index_url,
            api_base=args.api_url,
            cache_dir=cache_dir,
            mirrors=project_mirrors(project, args.mirrors),
            stale_after_days=args.stale_after,
            workers=args.jobs,
        ),
    )
    if args.json:
        emit_json([v.to_json() for v in verdicts])
        return ExitCode.OK
    width = max([len(v.shim) for v in verdicts] + [4])
    say(f"{'shim':<{width}}  {'verdict':<7}  why")
    for v in verdicts:
        floors = f" → {', '.join(v.floors)}" if v.floors else ""
        say(f"{v.shim:<{width}}  {v.decision:<7}  {v.why}{floors}")
        if v.action:
            say(f"{'':<{width}}  {'next':<7}  {v.action}")
        for flag in v.flags:
            say(f"{'':<{width}}  {'⚑':<7}  {flag}")
    counts = {kind: sum(v.decision == kind for v in verdicts) for kind in Decision}
    flagged = sum(bool(v.flags) for v in verdicts)
    say(
        ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        + (f"; {flagged} flagged" if flagged else "")
        if verdicts
        else "no shims"
    )
    return ExitCode.OK


COMMAND = Command(
    "verdicts",
    "decide for each shim: keep, retire or unknown, with flags and the next action",
    add_arguments,
    run,
    "Gather evidence (recorded runs, indexes, mirrors, the code host) and decide for each shim: "
    "keep, "
    "retire or unknown. Flags need a person without changing the decision; `next` says what would "
    "decide an unknown. Rules: docs/verdicts.md.",
)
