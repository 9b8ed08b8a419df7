"""``patchlane retire``: the weekly report by default; ``--apply`` turns retire verdicts into
auto-drop branches (one per shim, in a separate worktree, never merged).

This module is glue: verdicts come from :mod:`retire.verdicts`, branches from
:mod:`retire.autodrop`, the report from :mod:`retire.report`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from retire.core.errors import ConfigError, PatchlaneError
from retire.evidence.validation import FIXED, ValidationRecord



def _fence(text: str) -> str:
    body = "\n".join(text.rstrip().splitlines()[-25:])
    return f"```text\n{body}\n```"


def _describe(record: ValidationRecord) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(record.versions.items()) if v) or "versions not reported"
    host = record.host.get("gpu") or "no CUDA"
    return f"lane `{record.lane}` on {record.host.get('hostname', '?')} ({host}), {record.started_at[:19]}Z — {versions}"


def evidence_markdown(verdict, records: Sequence[ValidationRecord]) -> str:
    """The evidence a reviewer needs: why, the conditions, and the reproducer before and after."""
    lines = [f"**Verdict:** retire — {verdict.why}", ""]
    if verdict.conditions:
        lines += ["**Retirement conditions:**", *[f"- `{c.kind}`: {c.state} — {c.why}" for c in verdict.conditions], ""]
    without = sorted((r for r in records if r.shim == verdict.shim and r.mode == "without"), key=lambda r: r.started_at)
    before = next((r for r in reversed(without) if r.outcome == "bug-reproduced"), None)
    after = next((r for r in reversed(without) if r.outcome in FIXED), None)
    for label, record in (("Before (bug reproduces without the shim)", before), ("After (upstream fixed)", after)):
        if record is None:
            lines += [f"**{label}:** no recorded run", ""]
            continue
        lines += [f"**{label}:** {record.sentinel} on {_describe(record)}", "", _fence(record.output_tail), ""]
    return "\n".join(lines)


def plans(verdicts, manifests: dict, records: Sequence[ValidationRecord]):
    """One auto-drop plan per *retire* verdict; every other verdict is left alone."""
    from retire.branches.autodrop import DropPlan

    out = []
    for verdict in verdicts:
        if verdict.kind != "retire":
            continue
        manifest = manifests[verdict.shim]
        links = tuple((link.role, link.url) for link in manifest.upstream.links)
        out.append(DropPlan(verdict.shim, verdict.why, verdict.floors, evidence_markdown(verdict, records), links))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patchlane retire",
        description="Without --apply: the weekly retirement report (all report options apply). "
                    "With --apply: one branch per shim whose verdict is retire, for a human to merge.",
    )
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--apply", action="store_true", help="propose auto-drop branches for retire verdicts")
    parser.add_argument("--no-pr", action="store_true", help="with --apply: make branches only, open no pull request")
    parser.add_argument("--repo", help="owner/name to open pull requests in (with a GITHUB_TOKEN)")
    parser.add_argument("--api-url", help="code host REST API base URL")
    parser.add_argument("--index-url", help="default package index for the release probes")
    parser.add_argument("--mirrors", type=Path, help="folder of local upstream clones for tag checks")
    parser.add_argument("--base", default="HEAD", help="commit the branches start from (default: HEAD)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--apply" not in argv:
        from retire.report.weekly import main as report_main

        return report_main(argv)
    args = build_parser().parse_args(argv)
    from retire.branches import autodrop
    from retire.evidence import validation
    from retire.commands.cli import Project
    from retire.verdicts.engine import gather

    root = args.root.resolve()
    project = Project(root)
    try:
        manifests, lanes = project.manifests(), project.lanes()
        records = validation.load(project.manifest)
        verdicts = gather(list(manifests.values()), lanes, project.locks_dir, project.manifest,
                          index_url=args.index_url, api_base=args.api_url, mirrors=args.mirrors,
                          cache_dir=project.state_dir / "cache" / "http")
        todo = plans(verdicts, manifests, records)
        for verdict in verdicts:
            print(f"{verdict.shim:<28} {verdict.kind:<8} {verdict.why}", flush=True)
        if not todo:
            print("no shim has a retire verdict: nothing to propose")
            return 0
        outcomes = autodrop.apply(root, todo, base=args.base, open_prs=not args.no_pr, repository=args.repo,
                                  api_base=args.api_url,
                                  on_step=lambda shim, step: print(f"  {shim}: {step}", flush=True))
    except (ConfigError, PatchlaneError) as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return 2
    for o in outcomes:
        print(f"{o.status:<17} {o.branch}" + (f" — {o.reason}" if o.reason else ""))
    return 0 if all(o.ok for o in outcomes) else 1
