"""``patchlane catalogue``: the shim catalogue as Markdown, with where each shim was proven."""

from __future__ import annotations

import argparse
from pathlib import Path

from retire.commands.base import Command, ExitCode, emit_json, emit_text, existing_file, say, shown
from retire.core.atomic import atomic_write
from retire.core.project import Project
from retire.evidence import validation


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--validation",
        type=existing_file,
        help="validation manifest (default: validation/manifest.jsonl)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write here (atomically) instead of to stdout, e.g. docs/catalogue.md",
    )
    out.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document: a row per shim with its proofs",
    )


def to_json(rows) -> list[dict]:
    """The catalogue's rows as plain data (what the Markdown shows, without the prose)."""
    return [
        {
            "id": row.manifest.id,
            "title": row.manifest.title,
            "fix_class": row.manifest.fix_class,
            "target": {
                "distribution": row.manifest.target.distribution,
                "module": row.manifest.target.module,
                "affected": str(row.manifest.target.affected)
                if row.manifest.target.affected is not None
                else None,
            },
            "upstream": {
                "status": row.manifest.upstream.status,
                "links": [
                    {"role": link.role, "url": link.url} for link in row.manifest.upstream.links
                ],
            },
            "proven": row.proven,
            "proofs": [
                {
                    "lane": p.lane,
                    "host": p.host,
                    "versions": dict(p.versions),
                    "without": p.without,
                    "with": p.with_,
                    "verdict": p.verdict,
                }
                for p in row.proofs
            ],
        }
        for row in rows
    ]


def _guards_json(rows, states) -> list[dict]:
    """The guards' rows: a shim's row, with ``guard`` their standing (word and why)."""
    return [
        {**row, "guard": {"word": states[row["id"]].word, "why": states[row["id"]].why}}
        for row in to_json(rows)
    ]


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.report.catalogue import build, render_markdown
    from retire.runs.guardstate import guard_states

    records = validation.load(args.validation or project.validation)
    rows = build(project.manifests().values(), records)
    # the retired shims whose reproducers still run, with where each stands
    guards = project.guards()
    states = guard_states(guards.values(), records)
    standing = [(guards[key], states[key]) for key in sorted(guards)]
    if args.json:
        emit_json(to_json(rows) + _guards_json(build(guards.values(), records), states))
        return ExitCode.OK
    text = render_markdown(rows, standing)
    if args.output:
        # inside the project, never through a link on the way; elsewhere, where the user said
        output = project.output_file(args.output)
        atomic_write(output, text, within=output.parent)
        say(f"wrote {shown(args.output)}")
    else:
        emit_text(text)
    return ExitCode.OK


COMMAND = Command(
    "catalogue",
    "the shim catalogue as Markdown, with where each shim was proven",
    add_arguments,
    run,
)
