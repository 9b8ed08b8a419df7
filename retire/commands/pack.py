"""``patchlane pack``: upstream packs — readiness, filing waves, the human gate, export."""

from __future__ import annotations

import argparse
import datetime as _dt
from pathlib import Path

from retire.commands.base import (
    Command,
    ExitCode,
    emit_json,
    emit_text,
    existing_file,
    iso_date,
    positive_days,
    positive_int,
    say,
    shown,
    utc_moment,
)
from retire.core.errors import InputError
from retire.core.project import Project
from retire.packs.checks import DEFAULT_MAX_CODE_LINES, DEFAULT_WINDOW


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--now", type=utc_moment, help="evaluate as of this UTC time (default: now)")
    p.add_argument(
        "--window-days",
        type=positive_days,
        default=DEFAULT_WINDOW.days,
        help="how recent a BUG_REPRODUCED run must be (default: 1 day)",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("check", help="readiness of packs; exit 1 if any is not ready")
    a.add_argument("ids", nargs="*", metavar="ID", help="only these packs (default: every pack)")
    a.add_argument(
        "--max-code-lines",
        type=positive_int,
        default=DEFAULT_MAX_CODE_LINES,
        help="the most lines of code a pack's reproducer may hold (default: %(default)s)",
    )
    a.add_argument(
        "--validation",
        type=existing_file,
        help="validation manifest (default: validation/manifest.jsonl)",
    )
    a.add_argument(
        "--json", action="store_true", help='print one JSON document: {"ok", "packs": [...]}'
    )
    a = actions.add_parser("plan", help="propose the next filing wave")
    a.add_argument("--day", type=iso_date, help="the day to plan for (default: today, UTC)")
    a.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    a = actions.add_parser("queue", help="the filing queue (what the weekly report shows)")
    a.add_argument("--json", action="store_true", help="print the queue as one JSON document")
    a = actions.add_parser("show", help="print a pack's rendered body")
    a.add_argument("id", metavar="ID", help="the pack (its folder under packs/)")
    a = actions.add_parser("approve", help="record that a named person approved a ready pack")
    a.add_argument("id", metavar="ID", help="the pack (its folder under packs/)")
    a.add_argument("--by", required=True, metavar="NAME", help="who approved it")
    a = actions.add_parser(
        "export", help="write an approved pack's body, reproducer and README to a folder"
    )
    a.add_argument("id", metavar="ID", help="the pack (its folder under packs/)")
    a.add_argument("--to", required=True, type=Path, metavar="DIR", help="the folder to write")
    a = actions.add_parser("filed", help="record where a human filed an approved pack")
    a.add_argument("id", metavar="ID", help="the pack (its folder under packs/)")
    a.add_argument("--url", required=True, help="the issue or pull request it was filed as")
    a = actions.add_parser(
        "new",
        help="start a new-report pack.toml prefilled from a recorded culprit (still behind the "
        "human gate)",
    )
    a.add_argument("id", metavar="ID", help="the shim (or guard) the culprit broke")
    a.add_argument(
        "--from-culprit",
        required=True,
        metavar="LANE",
        help="the lane whose recorded culprit (validation/culprits.jsonl) fills the pack",
    )
    a.add_argument("--category", required=True, help="the pack's category (docs/packs.md)")
    a.add_argument(
        "--repository", help="owner/name of the target (default: the shim's github.com links)"
    )


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.packs import store

    root, window = project.root, _dt.timedelta(days=args.window_days)
    if args.action == "check":
        return _check(project, args, window)
    if args.action == "new":
        return _new(project, args)
    if args.action == "plan":
        wave, _ = store.plan(root, day=args.day, now=args.now, window=window)
        if args.json:
            emit_json(wave.to_json())
            return ExitCode.OK
        if not wave.packs:
            say(f"no wave for {wave.day.isoformat()}: {wave.reason}")
        else:
            say(f"wave for {wave.day.isoformat()}: {len(wave.packs)} pack(s)")
            for repo, packs in wave.by_repository():
                say(f"  {repo}")
                for c in packs:
                    gate = (
                        "approved"
                        if c.approved
                        else f"needs `patchlane pack approve {c.id} --by NAME`"
                    )
                    say(f"    {c.priority:<14} {c.id}  ({gate})")
        for repo, why in wave.held:
            say(f"held  {repo}: {why}")
        return ExitCode.OK
    if args.action == "queue":
        entries = store.filing_queue(root, now=args.now, window=window)
        if args.json:
            emit_json([e.to_json() for e in entries])
        else:
            emit_text(store.markdown_section(entries))
        return ExitCode.OK
    if args.action == "show":
        emit_text(store.load_pack(root, args.id).pack.body)
        return ExitCode.OK
    if args.action == "approve":
        approval = store.approve(root, args.id, by=args.by, now=args.now, window=window)
        say(
            f"approved {args.id} by {approval.by} at {approval.at}; recorded in packs/state.json — "
            f"commit it"
        )
        return ExitCode.OK
    if args.action == "export":
        # deferred: `patchlane --help` does not load it, and start-up time counts
        from retire.packs.export import export

        for path in export(root, args.id, args.to, now=args.now, window=window):
            say(f"wrote {path}")
        return ExitCode.OK
    filing = store.record_filing(root, args.id, args.url, now=args.now)
    say(f"recorded {args.id} filed at {filing.url} ({filing.at}) in packs/state.json — commit it")
    return ExitCode.OK


def _new(project: Project, args: argparse.Namespace) -> int:
    """``pack new ID --from-culprit LANE``: pack.toml prefilled from the lane's culprit."""
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.packs.prefill import latest_culprit, prefill

    shims = {**project.manifests(), **project.guards()}
    if args.id not in shims:
        raise InputError(None, "ID", f"no shim or guard {args.id!r}", "see `patchlane shim list`")
    culprit = latest_culprit(
        project.validation.parent / "culprits.jsonl", args.id, args.from_culprit
    )
    path = prefill(shims[args.id], culprit, category=args.category, repository=args.repository)
    say(f"wrote {shown(path)} from: {culprit['line']}")
    say(
        f"next: search upstream, set [upstream-state] searched, then "
        f"`patchlane pack check {args.id}`"
    )
    return ExitCode.OK


def _check(project: Project, args: argparse.Namespace, window: _dt.timedelta) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.packs import store

    entries = store.filing_queue(
        project.root,
        args.ids or None,
        now=args.now,
        window=window,
        max_code_lines=args.max_code_lines,
        validation_path=args.validation,
    )
    deny = store.deny_file(project.root)
    if not deny.is_file():
        say(f"note: no {shown(deny)}: nothing checked for non-public language")
    not_ready = 0
    for e in entries:
        if e.status == "already-fixed":
            fixed = ", ".join(x for x in (e.thread, e.fixed_in) if x)
            say(
                f"regression  {e.id}: already fixed upstream ({fixed}) — kept as regression "
                f"coverage, not filed"
            )
        elif e.status == "filed":
            say(f"filed       {e.id}: {', '.join(e.filed)}")
        elif e.reasons:
            not_ready += 1
            say(f"NOT READY   {e.id} → {e.repository or '?'}")
            for reason in e.reasons:
                say(f"  {e.id}: {reason}")
        else:
            extra = f" (approved by {e.approved_by})" if e.status == "approved" else ""
            say(f"ready       {e.id} → {e.repository} [{e.priority}]{extra}")
    say(
        f"{len(entries) - not_ready} of {len(entries)} pack(s) ready or settled; {not_ready} not "
        f"ready"
    )
    if args.json:
        emit_json({"ok": not not_ready, "packs": [e.to_json() for e in entries]})
    return ExitCode.FAILED if not_ready else ExitCode.OK


COMMAND = Command(
    "pack",
    "upstream packs: check, plan, queue, show, approve, export, filed, new",
    add_arguments,
    run,
    "Upstream packs: the filing queue and its human gate.",
)
