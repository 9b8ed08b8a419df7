"""What a retirement branch says: its commit message and its pull request body (text, no I/O).

For a plan that names its lanes, both say per lane what changed (drop: the id out of the lane's
shims; raise: the pins raised, the revision moved, the lock's new versions) and which lanes keep
the shim and why: *hold* with its until, *blocked* with its blocker, *unknown* with its action.
"""

from __future__ import annotations

from collections.abc import Sequence

from retire.branches.dropplan import DropPlan
from retire.branches.lanemoves import LaneMove, TreeEdit
from retire.core import mdsafe
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = ["TRAILER", "commit_message", "fixed_upstream", "kept_moves", "pr_body", "title"]

TRAILER = "Patchlane-Retire"


def kept_moves(plan: DropPlan) -> tuple[LaneMove, ...]:
    """The plan's lanes that keep the shim, as moves with their reason."""
    return tuple(_kept(lane) for lane in plan.keeping)


def _kept(lane: LaneVerdict) -> LaneMove:
    reason = {
        LaneStep.HOLD: lane.until and f"until {lane.until.removeprefix('until ')}",
        LaneStep.BLOCKED: lane.blocker,
        LaneStep.UNKNOWN: lane.action,
    }.get(lane.step)
    return LaneMove(lane.lane, lane.step, lane.file, reason=reason or lane.why)


def _all_moves(plan: DropPlan, edit: TreeEdit) -> tuple[list[LaneMove], list[LaneMove]]:
    """(the lanes the shim leaves on the branch, the lanes that keep it)."""
    moves = [*edit.moves, *kept_moves(plan)]
    return [m for m in moves if m.left], [m for m in moves if not m.left]


def _changes(move: LaneMove) -> list[str]:
    """The move's changes without its file's name (the line names the file once)."""
    return [c.removeprefix(f"{move.file}: ") if move.file else c for c in move.changes]


def _lane_line(move: LaneMove) -> str:
    where = f" ({move.file})" if move.file else ""
    said = "; ".join(_changes(move)) or move.reason
    return f"{move.lane}{where}: {move.step}" + (f" — {said}" if said else "")


def title(plan: DropPlan, edit: TreeEdit | None = None) -> str:
    """The pull request's title: the whole shim, or the lanes it leaves."""
    left = [m.lane for m in (edit.moves if edit else ()) if m.left]
    if plan.per_lane and edit is not None and not edit.folder_removed:
        return f"Retire shim {plan.shim_id} from {', '.join(left)}"
    return f"Retire shim {plan.shim_id}" + (
        f" ({', '.join(plan.floor_specs)})" if plan.floor_versions else ""
    )


def _folder_line(plan: DropPlan, edit: TreeEdit, kept: Sequence[LaneMove]) -> str:
    if edit.folder_removed:
        return (
            f"shims/{plan.shim_id}/patch.py removed: no lane lists it any more; its reproducer "
            "stays as a guard, run without a shim in the lanes that carried it."
        )
    return f"shims/{plan.shim_id}/ stays: {', '.join(m.lane for m in kept)} still list it."


def commit_message(plan: DropPlan, edit: TreeEdit, base: str) -> str:
    first = plan.why.strip().splitlines()[0] if plan.why.strip() else "upstream fixed the bug"
    head = title(plan, edit) if plan.per_lane and not edit.folder_removed else None
    lines = [(head or f"Retire shim {plan.shim_id}: {first}")[:72], "", plan.why.strip() or first]
    lines.append("")
    if plan.floor_versions:
        lines.append("Floors: " + ", ".join(plan.floor_specs))
    if plan.upstream_links:
        lines.append("Upstream:")
        lines += [f"- {role}: {url}" for role, url in plan.upstream_links]
    if plan.per_lane:
        left, kept = _all_moves(plan, edit)
        lines.append("Lanes the shim leaves:")
        lines += [f"- {_lane_line(m)}" for m in left]
        if kept:
            lines.append("Lanes that keep it:")
            lines += [f"- {_lane_line(m)}" for m in kept]
        lines.append(_folder_line(plan, edit, kept))
    elif edit.changes:
        lines.append("Lanes:")
        lines += [f"- {c}" for c in edit.changes]
    if edit.relocked:
        lines.append("Locks re-made: " + ", ".join(edit.relocked))
    summary = _evidence_summary(plan.evidence_markdown)
    if summary:
        lines += ["", "Evidence:", summary]
    lines += ["", f"{TRAILER}: {plan.shim_id} {plan.identity(base)}"]
    return "\n".join(lines) + "\n"


def _evidence_summary(markdown: str) -> str:
    """The first paragraph of the evidence that is prose, not a heading or table."""
    for block in markdown.split("\n\n"):
        text = " ".join(
            line.strip()
            for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith(("#", "|", "```"))
        )
        if text:
            return text[:600]
    return ""


def _lane_sections(plan: DropPlan, edit: TreeEdit) -> list[str]:
    """The per-lane tables of a plan that names its lanes."""
    left, kept = _all_moves(plan, edit)
    lines = ["### Lanes the shim leaves", "", "| lane | step | what changed |", "|---|---|---|"]
    lines += [
        f"| {mdsafe.code(m.lane)} | {m.step} | "
        f"{'<br>'.join(mdsafe.text(c) for c in _changes(m)) or 'the id leaves its shims'} |"
        for m in left
    ]
    if kept:
        lines += ["", "### Lanes that keep it", "", "| lane | step | why |", "|---|---|---|"]
        # a blocker is the resolver's own words: text, never Markdown
        lines += [
            f"| {mdsafe.code(m.lane)} | {m.step} | {mdsafe.text(m.reason or '—')} |" for m in kept
        ]
    return [*lines, "", mdsafe.text(_folder_line(plan, edit, kept))]


def fixed_upstream(plan: DropPlan) -> str | None:
    """``Fixed upstream by `<sha>` (#PR), first released in `X` — mirror of X: declared in
    patchlane.toml, matched by ….``, as much of it as the plan knows (None: nothing); the sha and
    version are code, never links or markup, and where the mirror came from is text."""
    released = plan.first_released
    if plan.fix_commit is None:
        return f"Fixed upstream in {mdsafe.code(released)}." if released else None
    said = f"Fixed upstream by {mdsafe.code(plan.fix_commit)}"
    said += f" (#{plan.fix_pull})" if plan.fix_pull is not None else ""
    said += f", first released in {mdsafe.code(released)}" if released else ""
    return said + (f" — {mdsafe.text(plan.fix_mirror)}." if plan.fix_mirror else ".")


def pr_body(plan: DropPlan, edit: TreeEdit) -> str:
    left = [m.lane for m in edit.moves if m.left]
    partial = plan.per_lane and not edit.folder_removed
    heading = f"## Retire shim {mdsafe.code(plan.shim_id)}" + (
        f" from {mdsafe.text(', '.join(left))}" if partial else ""
    )
    lines = [heading, "", mdsafe.text(plan.why), ""]
    if (fixed := fixed_upstream(plan)) is not None:
        lines += [fixed, ""]
    if plan.per_lane:
        lines += _lane_sections(plan, edit)
        if edit.relocked:
            locks = ", ".join(f"`locks/{n}/pylock.toml`" for n in edit.relocked)
            lines += ["", f"Locks re-made: {locks}"]
    else:
        lines += [
            "### What this branch changes",
            "",
            (
                f"- removes `shims/{plan.shim_id}/patch.py`; the reproducer stays as a guard "
                "(`[guard]` in its manifest)"
            ),
        ]
        lines += [f"- {mdsafe.text(c)}" for c in edit.changes]
        if edit.relocked:
            locks = ", ".join(f"`locks/{n}/pylock.toml`" for n in edit.relocked)
            lines.append(f"- locks re-made: {locks}")
            lines += [f"  - {mdsafe.text(n)}" for n in edit.notes]
    if plan.floor_versions:
        lines += ["", "Retirement floor: " + ", ".join(mdsafe.code(s) for s in plan.floor_specs)]
    if plan.upstream_links:
        lines += ["", "### Upstream", ""]
        links = plan.upstream_links
        lines += [f"- {mdsafe.text(role)}: {mdsafe.link(url, url)}" for role, url in links]
    if plan.evidence_markdown.strip():
        lines += ["", "### Evidence", "", plan.evidence_markdown.strip()]
    lines += [
        "",
        "---",
        (
            "Proposed by `patchlane retire --apply`. patchlane never merges: review the evidence, "
            "let CI run the lanes, then merge by hand."
        ),
    ]
    return "\n".join(lines) + "\n"
