"""From retire verdicts to auto-drop plans: the evidence a reviewer reads in the pull request.

``patchlane retire --apply`` (``retire.commands.retire``) gathers verdicts, turns each *retire*
verdict into a :class:`retire.branches.autodrop.DropPlan` here, and hands the plans to
:func:`retire.branches.autodrop.apply`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from retire.branches.autodrop import DropPlan
from retire.evidence.validation import FIXED, Mode, RunOutcome, ValidationRecord
from retire.verdicts.model import Decision, Verdict
from shims.model import ShimManifest


def _fence(text: str) -> str:
    body = "\n".join(text.rstrip().splitlines()[-25:])
    return f"```text\n{body}\n```"


def _describe(record: ValidationRecord) -> str:
    versions = (
        ", ".join(f"{k} {v}" for k, v in sorted(record.versions.items()) if v)
        or "versions not reported"
    )
    host = record.host.get("gpu") or "no CUDA"
    return (
        f"lane `{record.lane}` on {record.host.get('hostname', '?')} ({host}), "
        f"{record.started_at[:19]}Z — {versions}"
    )


def evidence_markdown(verdict: Verdict, records: Sequence[ValidationRecord]) -> str:
    """The evidence a reviewer needs: why, the conditions, and the reproducer before and after."""
    lines = [f"**Verdict:** retire — {verdict.why}", ""]
    if verdict.conditions:
        lines += [
            "**Retirement conditions:**",
            *[f"- `{c.kind}`: {c.state} — {c.why}" for c in verdict.conditions],
            "",
        ]
    without = sorted(
        (r for r in records if r.shim == verdict.shim and r.mode == Mode.WITHOUT),
        key=lambda r: r.started_at,
    )
    before = next((r for r in reversed(without) if r.outcome == RunOutcome.BUG_REPRODUCED), None)
    after = next((r for r in reversed(without) if r.outcome in FIXED), None)
    for label, record in (
        ("Before (bug reproduces without the shim)", before),
        ("After (upstream fixed)", after),
    ):
        if record is None:
            lines += [f"**{label}:** no recorded run", ""]
            continue
        lines += [
            f"**{label}:** {record.sentinel} on {_describe(record)}",
            "",
            _fence(record.output_tail),
            "",
        ]
    return "\n".join(lines)


def plans(
    verdicts: Iterable[Verdict],
    manifests: Mapping[str, ShimManifest],
    records: Sequence[ValidationRecord],
) -> list[DropPlan]:
    """One auto-drop plan per *retire* verdict; every other verdict is left alone."""
    out = []
    for verdict in verdicts:
        if verdict.decision != Decision.RETIRE:
            continue
        manifest = manifests[verdict.shim]
        links = tuple((link.role, link.url) for link in manifest.upstream.links)
        out.append(
            DropPlan(
                verdict.shim,
                verdict.why,
                verdict.floors,
                evidence_markdown(verdict, records),
                links,
            )
        )
    return out
