"""``patchlane verdicts``: probe upstream and decide, for each shim, what to do with it."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import (
    Command,
    ExitCode,
    add_mirrors_option,
    emit_json,
    existing_file,
    positive_int,
    say,
)
from retire.core.errors import InputError
from retire.core.project import Project


def add_arguments(p: argparse.ArgumentParser) -> None:
    # deferred: the runtime-only install (no engine) must still print `--help`
    from retire.verdicts.rules import DEFAULT_STALE_DAYS

    p.add_argument("shims", nargs="*", metavar="SHIM", help="only these shims (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output with the evidence")
    p.add_argument(
        "--index-url",
        help="default package index when a lane names none (default: uv's configuration)",
    )
    p.add_argument("--api-url", help="GitHub REST API base URL (default: the public API)")
    add_mirrors_option(p, used_for="landed pull requests, release tags and revisions")
    p.add_argument(
        "--cache-dir", type=Path, help="HTTP cache folder (default: .patchlane/cache/http)"
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the HTTP cache nor the trial re-locks' answers",
    )
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
    p.add_argument(
        "--no-resolve",
        dest="resolve",
        action="store_false",
        help="skip the trial re-lock of each lane a raise is proposed for (fast: a raise is shown "
        "as not re-locked; the pre-commit hook's call)",
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
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile
    from retire.mirrors.config import project_mirrors
    from retire.verdicts.gather import GatherOptions, gather

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
            resolve=args.resolve,
            scratch_dir=project.trial_dir,
            trial_cache=None if args.no_cache else project.trial_cache,
        ),
    )
    if args.json:
        emit_json([v.to_json() for v in verdicts])
        return ExitCode.OK
    _print_table(verdicts)
    return ExitCode.OK


def _lane_detail(lane) -> str:
    """What a lane line ends with: the blocker, the until, the action, else the why."""
    return lane.blocker or lane.until or lane.action or lane.why


#: A text said under more than one shim and longer than this is said once, under a mark.
_SHARED_FROM = 40


class _Shared:
    """The texts said alike under several shims (a host without a lock, a mirror that is
    missing, a code host that did not answer): each is printed once at the end, with the shims it
    touches, and its place under each shim shows a mark (``[1]``)."""

    def __init__(self, verdicts: list) -> None:
        seen: dict[str, list[str]] = {}
        for v in verdicts:
            texts = [v.why, v.action or "", *map(str, v.flags)]
            texts += [_lane_detail(lane) for lane in v.lane_verdicts]
            for text in dict.fromkeys(t for t in texts if len(t) > _SHARED_FROM):
                seen.setdefault(text, []).append(v.shim)
        self.shims = {text: shims for text, shims in seen.items() if len(shims) > 1}
        self.marks: dict[str, int] = {}

    def say(self, text: str) -> str:
        if text not in self.shims:
            return text
        return f"[{self.marks.setdefault(text, len(self.marks) + 1)}]"

    def legend(self) -> list[str]:
        return [
            f"[{mark}] {text} ({', '.join(self.shims[text])})" for text, mark in self.marks.items()
        ]


def _print_table(verdicts: list) -> None:
    # deferred: the runtime-only install (no engine) must still print `--help`
    from retire.verdicts.model import Decision

    width = max([len(v.shim) for v in verdicts] + [4])
    decided = max([len(str(v.decision)) for v in verdicts] + [7])
    lanes = [lane for v in verdicts for lane in v.lane_verdicts]
    named = max([len(lane.lane) for lane in lanes] + [4])
    locked = max([len(lane.locked or "?") for lane in lanes] + [6])
    shared = _Shared(verdicts)
    say(f"{'shim':<{width}}  {'verdict':<{decided}}  why")
    for v in verdicts:
        floors = f" → {', '.join(map(str, v.floors))}" if v.floors else ""
        say(f"{v.shim:<{width}}  {v.decision:<{decided}}  {shared.say(v.why)}{floors}")
        pad = f"{'':<{width}}  "
        steps = {lane.step for lane in v.lane_verdicts}
        alike = all(
            lane.why == v.why or (lane.action is not None and lane.action == v.action)
            for lane in v.lane_verdicts
        )
        if len(steps) == 1 and alike:
            # the evidence decided every lane alike: one line, not the why (or the shim's next
            # action) again per lane
            names = ", ".join(lane.lane for lane in v.lane_verdicts)
            say(f"{pad}{'lanes':<{decided}}  {steps.pop()} in {names}")
        else:
            for lane in v.lane_verdicts:
                say(
                    f"{pad}{'lane':<{decided}}  {lane.lane:<{named}}  {lane.step:<7}  "
                    f"{lane.locked or '?':<{locked}}  {shared.say(_lane_detail(lane))}"
                )
        if v.action:
            say(f"{pad}{'next':<{decided}}  {shared.say(v.action)}")
        for flag in v.flags:
            say(f"{pad}{'⚑':<{decided}}  {shared.say(str(flag))}")
    for line in shared.legend():
        say(line)
    counts = {kind: sum(v.decision == kind for v in verdicts) for kind in Decision}
    flagged = sum(bool(v.flags) for v in verdicts)
    say(
        ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        + (f"; {flagged} flagged" if flagged else "")
        if verdicts
        else "no shims"
    )


COMMAND = Command(
    "verdicts",
    "decide for each shim and each lane carrying it: keep, retire (in all or some lanes) or "
    "unknown, with flags and the next action",
    add_arguments,
    run,
    "Gather evidence (recorded runs, indexes, mirrors, the code host) and decide for each shim: "
    "keep, retire, retire-in-some or unknown. Each lane carrying the shim gets a line: drop (at "
    "or above the proven floor), raise (a follow lane whose re-lock with the floor resolves), "
    "hold (a hold lane below the floor: until when), blocked (the resolver's reason), keep or "
    "unknown (what would decide it). Flags need a person without changing the decision; `next` "
    "says what would decide an unknown. Rules: docs/verdicts.md.",
)
