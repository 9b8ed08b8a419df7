"""The weekly report's "Regressions" section: what broke again, and which change did it.

Pure: from the guards (retired shims' reproducers), the validation records and the culprits
recorded by bumps (``validation/culprits.jsonl``, :mod:`retire.branches.breaks`):

- every guard whose latest run in a lane that it guards reproduces the bug (*regressed*), with the
  way back (``patchlane shim restore ID``);
- every culprit recorded for a lane whose latest run of that shim or guard is still broken;
- every (shim, lane) the report finds newly broken that no culprit names yet, with the
  ``patchlane culprit`` that would name one.

The section leads the report in every format; each renderer is one small function here
(:func:`to_markdown`, :func:`to_html`, :func:`to_json`), called once by the report's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from retire.core import mdsafe
from retire.evidence import culprits as recorded
from retire.evidence.validation import Mode, RunOutcome, ValidationRecord
from shims.model import ShimManifest

__all__ = ["Regression", "find_regressions", "read_culprits", "to_json", "to_markdown"]


@dataclass(frozen=True)
class Regression:
    """One (lane, shim or guard) that broke again."""

    lane: str
    subject: str
    # guard-regressed | newly-broken
    kind: str
    # when the latest broken run started (UTC ISO)
    since: str
    # the culprit's one line, when a search found one
    culprit: str | None = None
    # what to do
    action: str = ""


def read_culprits(path: Path) -> list[dict[str, object]]:
    """The recorded culprits (a damaged line, or a FIFO or folder in the file's place, is one
    warning and skipped: the report still renders)."""
    return recorded.load(path)


def _latest(records: Iterable[ValidationRecord]) -> dict[tuple[str, str, str], ValidationRecord]:
    latest: dict[tuple[str, str, str], ValidationRecord] = {}
    for record in sorted(records, key=lambda r: r.started_at):
        latest[(record.lane, record.shim, record.mode)] = record
    return latest


def find_regressions(
    guards: Sequence[ShimManifest],
    records: Sequence[ValidationRecord],
    culprits: Sequence[dict[str, object]],
    newly_broken: Sequence[tuple[str, str, str]] = (),
) -> tuple[Regression, ...]:
    """Regressed guards first, then the other recorded culprits whose lane is still broken, then
    the report's newly broken (shim, lane, outcome) that no culprit names yet, each with the
    ``patchlane culprit`` that would find one."""
    latest = _latest(records)
    named: dict[tuple[str, str], dict[str, object]] = {
        (str(c.get("lane")), str(c.get("subject"))): c for c in culprits
    }
    found: list[Regression] = []
    for guard in sorted(guards, key=lambda g: g.id):
        if guard.guard is None or not guard.guard.guarding:
            continue
        for lane in guard.guard.lanes:
            record = latest.get((lane, guard.id, Mode.WITHOUT))
            if record is None or record.outcome != RunOutcome.BUG_REPRODUCED:
                continue
            blamed = named.pop((lane, guard.id), None)
            found.append(
                Regression(
                    lane,
                    guard.id,
                    "guard-regressed",
                    record.started_at,
                    str(blamed["line"]) if blamed else None,
                    f"patchlane shim restore {guard.id}",
                )
            )
    for (lane, subject), culprit in sorted(named.items()):
        mode = str(culprit.get("mode") or Mode.WITHOUT)
        record = latest.get((lane, subject, mode))
        if record is None or record.outcome != RunOutcome.BUG_REPRODUCED:
            continue
        line = str(culprit["line"])
        found.append(Regression(lane, subject, "newly-broken", record.started_at, line, ""))
    listed = {(r.lane, r.subject) for r in found}
    for shim, lane, outcome in newly_broken:
        if (lane, shim) in listed:
            continue
        # a shim that no longer fixes its bug broke in its with-shim run
        mode = " --mode with" if outcome == "shim-broken" else ""
        record = latest.get((lane, shim, Mode.WITH if mode else Mode.WITHOUT))
        since = record.started_at if record is not None else ""
        action = f"patchlane culprit {lane} {shim}{mode}"
        found.append(Regression(lane, shim, "newly-broken", since, None, action))
    return tuple(found)


def to_markdown(regressions: Sequence[Regression]) -> list[str]:
    if not regressions:
        return []
    lines = ["| lane | shim or guard | what | culprit | since |"]
    lines.append("|---|---|---|---|---|")
    for r in regressions:
        what = "guard regressed" if r.kind == "guard-regressed" else "newly broken"
        what += f" — {mdsafe.code(r.action)}" if r.action else ""
        # a culprit's line names packages and versions from locks and indexes: inert text
        lines.append(
            f"| {mdsafe.code(r.lane)} | {mdsafe.code(r.subject)} | {what} | "
            f"{mdsafe.text(r.culprit or 'not searched yet')} | {mdsafe.text(r.since[:10])} |"
        )
    return lines


def to_json(regressions: Sequence[Regression]) -> list[dict[str, str | None]]:
    return [
        {
            "lane": r.lane,
            "subject": r.subject,
            "kind": r.kind,
            "since": r.since,
            "culprit": r.culprit,
            "action": r.action,
        }
        for r in regressions
    ]
