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


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.report.catalogue import build, render_markdown

    rows = build(
        project.manifests().values(), validation.load(args.validation or project.validation)
    )
    if args.json:
        emit_json(to_json(rows))
        return ExitCode.OK
    text = render_markdown(rows)
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
