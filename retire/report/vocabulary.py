"""How every vocabulary word looks when rendered: the one table of glyphs, labels and colours.

Markdown shows ``emoji``; the HTML grid shows ``glyph`` on ``colour`` (a plain character, so the
grid reads without colour vision too) and verdict tags in ``ink`` on ``colour``. Renderers take
their looks from here and keep no table of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from retire.evidence.validation import ShimOutcome
from retire.verdicts.model import ConditionState, Decision, FlagKind, LaneStep

__all__ = [
    "CONDITIONS",
    "FLAG",
    "OUTCOMES",
    "PLAIN",
    "STEPS",
    "VERDICTS",
    "Look",
    "condition",
    "step",
    "verdict",
]


@dataclass(frozen=True)
class Look:
    # Markdown
    emoji: str = ""
    # HTML grid cell
    glyph: str = ""
    # legend text
    label: str = ""
    # HTML background
    colour: str = ""
    # HTML text on that background
    ink: str = ""


#: Lane × shim outcomes, in legend order: glyph in ``ink`` on ``colour``, each pair ≥ 4.5:1
#: contrast.
OUTCOMES: dict[ShimOutcome, Look] = {
    ShimOutcome.NEEDED: Look(
        "🩹", "✓", "needed — bug reproduces, shim fixes it", "#2563eb", "#ffffff"
    ),
    ShimOutcome.UPSTREAM_FIXED: Look(
        "🟢", "★", "upstream fixed — bug gone without the shim", "#15803d", "#ffffff"
    ),
    ShimOutcome.SHIM_BROKEN: Look(
        "🔴", "✗", "shim broken — bug reproduces with the shim", "#dc2626", "#ffffff"
    ),
    ShimOutcome.CRASHED: Look(
        "💥", "!", "crashed — a reproducer crashed or broke the protocol", "#a21caf", "#ffffff"
    ),
    ShimOutcome.TIMEOUT: Look("⏱️", "◷", "timeout — a reproducer was killed", "#c2410c", "#ffffff"),
    ShimOutcome.SKIPPED: Look(
        "⏭️", "–", "skipped — the host lacks what it needs", "#cbd5e1", "#334155"
    ),
    ShimOutcome.NOT_RUN: Look(
        "⬜", "?", "not run — the lane lists it, nothing recorded", "#ffffff", "#475569"
    ),
}

#: Lane steps (what one lane does with one shim), in legend order: glyph in ``ink`` on
#: ``colour``, each pair ≥ 4.5:1 contrast.
STEPS: dict[LaneStep, Look] = {
    LaneStep.DROP: Look(
        "✂️",
        "−",
        "drop — the lane is at or past the fix: the id goes, no pin moves",
        "#15803d",
        "#ffffff",
    ),
    LaneStep.RAISE: Look(
        "⏫",
        "↑",
        "raise — a follow lane below the fix: its pin rises past it",
        "#0f766e",
        "#ffffff",
    ),
    LaneStep.HOLD: Look(
        "✋",
        "‖",
        "hold — the lane holds its pins by policy: the shim stays until they move",
        "#475569",
        "#ffffff",
    ),
    LaneStep.BLOCKED: Look(
        "⛔",
        "⊘",
        "blocked — raising does not resolve: the blocker is named",
        "#b91c1c",
        "#ffffff",
    ),
    LaneStep.KEEP: Look("📌", "●", "keep — the shim is needed in this lane", "#1d4ed8", "#ffffff"),
    LaneStep.NOT_NEEDED: Look(
        "💤",
        "○",
        "not needed — the lane is before the bug's window: the shim stays listed, unused there",
        "#e0e7ff",
        "#3730a3",
    ),
    LaneStep.UNKNOWN: Look(
        "❔",
        "?",
        "unknown — nothing decides this lane yet: the next step says what would",
        "#fef3c7",
        "#92400e",
    ),
}

#: Verdict tags: the decisions, and the flags that are shown as a tag of their own.
VERDICTS: dict[str, Look] = {
    Decision.RETIRE: Look("🟢", colour="#dcfce7", ink="#166534"),
    Decision.RETIRE_IN_SOME: Look("🟩", colour="#ecfccb", ink="#3f6212"),
    Decision.KEEP: Look("🔵", colour="#dbeafe", ink="#1e40af"),
    Decision.UNKNOWN: Look("❔", colour="#fef3c7", ink="#92400e"),
    FlagKind.STALE: Look("🟠", colour="#ffedd5", ink="#9a3412"),
    FlagKind.DRIFT: Look("🟣", colour="#f3e8ff", ink="#6b21a8"),
}
#: Any flag in a list of flags.
FLAG = Look("⚑")

CONDITIONS: dict[ConditionState, Look] = {
    ConditionState.HOLDS: Look("✅"),
    ConditionState.FAILS: Look("❌"),
    ConditionState.UNDECIDED: Look("❔"),
}

#: A word this table does not know (a verdict from a newer report, say): no emoji, grey tag.
PLAIN = Look(colour="#e2e8f0", ink="#334155")


def verdict(name: str) -> Look:
    return VERDICTS.get(name, PLAIN)


def step(name: str) -> Look:
    """The look of a lane step; one this table does not know (a newer report's) is plain."""
    try:
        return STEPS[LaneStep(name)]
    except ValueError:
        return Look(label=str(name), colour=PLAIN.colour, ink=PLAIN.ink)


def condition(state: str) -> Look:
    """The look of a condition state; one this table does not know shows as its own word."""
    try:
        return CONDITIONS[ConditionState(state)]
    except ValueError:
        return Look(str(state))
