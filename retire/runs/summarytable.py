"""The lane × shim table printed by ``patchlane run`` and ``patchlane summary``: one word per
cell, within 100 columns. Pure.

Shims down and lanes across while that fits; with many lanes, one row per lane listing its shims
by outcome. A skipped cell carries a mark whose legend line says why (each reason once, however
many cells it holds for), a lane that did not run says why once with every lane it holds for,
and a cell whose without-shim run skipped while its with-shim run printed FIX_VALIDATED reads
``mitigated``, not ``skipped``: the shim's mitigation is in effect.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from retire.evidence.validation import ShimOutcome
from retire.runs.lanerun import LaneRun, LaneStatus, ShimRun

__all__ = ["MITIGATED", "WIDTH", "summary_table"]

#: The widest line the table prints.
WIDTH = 100
#: The word of a cell skipped without the shim whose with-shim run validated the fix.
MITIGATED = "mitigated"

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class _Words:
    """Each cell's word, and the numbered reasons of the skipped ones, in the order met."""

    def __init__(self, runs: Sequence[LaneRun]) -> None:
        self.reasons: dict[str, int] = {}
        self.words: dict[tuple[str, str], str] = {}
        for run in runs:
            by_shim = {s.shim: s for s in run.shims}
            for shim in run.planned:
                self.words[(run.lane, shim)] = self._word(run, by_shim.get(shim))

    def _word(self, run: LaneRun, result: ShimRun | None) -> str:
        if result is None:
            failed = (LaneStatus.BUILD_FAILED, LaneStatus.JOB_FAILED)
            return str(run.status) if run.status in failed else ""
        if result.mitigated:
            return MITIGATED
        if result.outcome != ShimOutcome.SKIPPED:
            return str(result.outcome)
        mark = self.reasons.setdefault(result.why or "skipped", len(self.reasons) + 1)
        return f"skipped{str(mark).translate(_SUPERSCRIPT)}"

    def word(self, lane: str, shim: str) -> str:
        return self.words.get((lane, shim), "-")


def _across(runs: Sequence[LaneRun], shims: list[str], words: _Words) -> list[str]:
    """Shims down, lanes across."""
    width = max([len(s) for s in shims] + [4])
    cols = [max([len(run.lane)] + [len(words.word(run.lane, s)) for s in shims]) for run in runs]
    pairs = list(zip(runs, cols, strict=True))
    lines = ["shim".ljust(width) + "  " + "  ".join(r.lane.ljust(c) for r, c in pairs)]
    for shim in shims:
        cells = "  ".join(words.word(r.lane, shim).ljust(c) for r, c in pairs)
        lines.append(shim.ljust(width) + "  " + cells)
    return [line.rstrip() for line in lines]


def _down(runs: Sequence[LaneRun], words: _Words) -> list[str]:
    """One row per lane: its shims grouped by outcome, wrapped under the lane's name."""
    width = max([len(run.lane) for run in runs] + [4])
    lines = ["lane".ljust(width) + "  shims by outcome"]
    for run in runs:
        grouped: dict[str, list[str]] = {}
        for shim in run.planned:
            grouped.setdefault(words.word(run.lane, shim) or "no result", []).append(shim)
        text = " · ".join(f"{word}: {', '.join(shims)}" for word, shims in grouped.items())
        lines += textwrap.wrap(
            text or "no shims",
            WIDTH,
            initial_indent=run.lane.ljust(width) + "  ",
            subsequent_indent=" " * (width + 2),
            break_on_hyphens=False,
        )
    return lines


def _legend(runs: Sequence[LaneRun], words: _Words) -> list[str]:
    # a reason several lanes share (13 lanes need a CUDA host) is said once, naming them: on its
    # cells' legend line when their cells say it too
    idle: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        if run.status != LaneStatus.RAN:
            idle.setdefault((str(run.status), run.why), []).append(run.lane)
    lines = []
    for reason, mark in words.reasons.items():
        lanes = idle.get((str(LaneStatus.SKIPPED), reason), [])
        shared = f" — {len(lanes)} lanes: {', '.join(lanes)}" if len(lanes) > 1 else ""
        if shared:
            del idle[(str(LaneStatus.SKIPPED), reason)]
        lines += _wrapped(f"skipped{str(mark).translate(_SUPERSCRIPT)}: {reason}{shared}")
    if MITIGATED in words.words.values():
        lines += _wrapped(
            f"{MITIGATED}: skipped without the shim here, but the with-shim run printed "
            "FIX_VALIDATED: the shim's mitigation is in effect"
        )
    for (status, why), lanes in idle.items():
        if len(lanes) == 1:
            lines += _wrapped(f"{lanes[0]}: {status} — {why}")
        else:
            lines += _wrapped(f"{len(lanes)} lanes {status} — {why}: {', '.join(lanes)}")
    # a regressed guard is the loudest line: the lane fails for it (retire.runs.guards)
    for run in runs:
        for found in run.guards:
            word = "REGRESSED" if found.outcome == "regressed" else str(found.outcome)
            lines += _wrapped(f"guard {found.guard} in lane {run.lane}: {word} — {found.why}")
    return lines


def _wrapped(line: str) -> list[str]:
    return textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def summary_table(runs: Sequence[LaneRun]) -> str:
    """The table, then a legend line per reason a cell was skipped and per lane that did not
    run; no line over :data:`WIDTH` columns (a name longer than that aside)."""
    shims = list(dict.fromkeys(shim for run in runs for shim in run.planned))
    words = _Words(runs)
    table = _across(runs, shims, words)
    if max(len(line) for line in table) > WIDTH:
        table = _down(runs, words)
    return "\n".join([*table, *_legend(runs, words)])
