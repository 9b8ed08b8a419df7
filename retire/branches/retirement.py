"""From retire verdicts to auto-drop plans: the evidence a reviewer reads in the pull request.

``patchlane retire --apply`` (``retire.commands.retire``) gathers verdicts, turns each *retire*
or *retire-in-some* verdict into a :class:`retire.branches.dropplan.DropPlan` here, and hands the
plans to :func:`retire.branches.autodrop.apply`. A plan lists exactly the lanes the shim leaves
(``Verdict.leaving``: drop or raise) and the lanes that keep it, with why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from retire.branches.dropplan import DropPlan
from retire.core import mdsafe
from retire.evidence.validation import FIXED, Mode, RunOutcome, ValidationRecord
from retire.history.mirrored import TargetMirror, shim_window
from retire.history.window import Window
from retire.verdicts.model import Decision, FlagKind, Verdict
from shims.model import ShimManifest


def _fence(text: str) -> str:
    # the reproducer's output is data: a ``` line in it must not close the fence
    return mdsafe.fence("\n".join(text.rstrip().splitlines()[-25:]))


def _describe(record: ValidationRecord) -> str:
    versions = (
        ", ".join(f"{k} {v}" for k, v in sorted(record.versions.items()) if v)
        or "versions not reported"
    )
    host = record.host.get("gpu") or "no CUDA"
    # the host stamp is what the reproducer printed: every part is shown as text
    return (
        f"lane {mdsafe.code(record.lane)} on {mdsafe.text(record.host.get('hostname', '?'))} "
        f"({mdsafe.text(host)}), {mdsafe.text(record.started_at[:19])}Z — {mdsafe.text(versions)}"
    )


def evidence_markdown(verdict: Verdict, records: Sequence[ValidationRecord]) -> str:
    """The evidence a reviewer needs: why, the conditions, and the reproducer before and after."""
    lines = [f"**Verdict:** {verdict.decision} — {mdsafe.text(verdict.why)}", ""]
    # evidence that disagrees is shown to the reviewer, never resolved out of sight
    conflicts = [f.text for f in verdict.flags if f.kind == FlagKind.CONFLICT and f.text.strip()]
    if conflicts:
        lines += ["**Conflict:**", *[f"- {mdsafe.text(text)}" for text in conflicts], ""]
    if verdict.conditions:
        lines += [
            "**Retirement conditions:**",
            *[
                f"- {mdsafe.code(c.kind)}: {c.state} — {mdsafe.text(c.why)}"
                for c in verdict.conditions
            ],
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
            f"**{label}:** {mdsafe.text(record.sentinel)} on {_describe(record)}",
            "",
            _fence(record.output_tail),
            "",
        ]
    return "\n".join(lines)


def _fix(window: Window | None) -> tuple[str | None, str | None, int | None, str | None]:
    """(first fixed release, fix commit, its pull request, how the mirror that named the commit
    was found) of the window's fixed edge, else of the fix on a followed branch (in no release,
    or a release nobody ran)."""
    if window is None:
        return None, None, None, None
    found = window.source.mirror
    released: str | None
    if window.first_fixed is not None:
        released, commit = window.first_fixed, window.fixed.commit
    elif window.branch_fix is not None and window.branch_fix.commit is not None:
        released, commit = window.branch_fix.released_in, window.branch_fix.commit
    else:
        return None, None, None, None
    if commit is None:
        return released, None, None, None
    return released, commit.sha, commit.pull, found.says if found is not None else None


def plans(
    verdicts: Iterable[Verdict],
    manifests: Mapping[str, ShimManifest],
    records: Sequence[ValidationRecord],
    mirror_of: Callable[[ShimManifest], TargetMirror | None] | None = None,
) -> list[DropPlan]:
    """One auto-drop plan per *retire* or *retire-in-some* verdict that some lane can leave;
    every other verdict is left alone. Each plan says where the bug was fixed upstream: the
    verdict's window, else the one reading of ``records`` (``mirror_of`` opens the target's
    mirror, to name the fix commit).

    A verdict without per-lane verdicts although lanes carry the shim (made before lanes were
    judged one by one) gives a plan without lanes: every lane file, as auto-drop always did.
    """
    out = []
    for verdict in verdicts:
        if verdict.decision not in (Decision.RETIRE, Decision.RETIRE_IN_SOME):
            continue
        per_lane = bool(verdict.lane_verdicts) or not verdict.lanes
        if per_lane and verdict.lane_verdicts and not verdict.leaving:
            continue
        manifest = manifests[verdict.shim]
        links = tuple((link.role, link.url) for link in manifest.upstream.links)
        window = verdict.window or shim_window(manifest, records, mirror_of)
        released, sha, pull, mirror = _fix(window)
        out.append(
            DropPlan(
                verdict.shim,
                verdict.why,
                verdict.floors,
                evidence_markdown(verdict, records),
                links,
                lanes=verdict.lane_verdicts if per_lane else None,
                first_released=released,
                fix_commit=sha,
                fix_pull=pull,
                fix_mirror=mirror,
            )
        )
    return out
