"""Next actions as data: what a verdict asks a person (or the weekly run) to do next (pure).

A flag or a verdict that names a command carries it as one of these values; its text is written
from the value (``str()``: the command line, as a person types it), and whoever acts on it — the
weekly bisection budget, a reader — takes the value, never the text back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from packaging.version import Version

__all__ = ["Bisect", "LinkUpstream", "LockLanes", "NextAction", "RunLane"]


@dataclass(frozen=True)
class Bisect:
    """``patchlane bisect SHIM [--since V] [--until V]``: find the first fixed release."""

    shim: str
    since: Version | None = None
    until: Version | None = None

    def __str__(self) -> str:
        words = ["patchlane", "bisect", self.shim]
        if self.since is not None:
            words += ["--since", self.since.public]
        if self.until is not None:
            words += ["--until", self.until.public]
        return " ".join(words)


@dataclass(frozen=True)
class RunLane:
    """``patchlane run LANE``: run the lane's reproducers (without each shim too)."""

    lane: str

    def __str__(self) -> str:
        return f"patchlane run {self.lane}"


@dataclass(frozen=True)
class LockLanes:
    """``nox -s lock -- LANE …``: lock lanes that have no lock."""

    lanes: tuple[str, ...]

    def __str__(self) -> str:
        return "nox -s lock -- " + " ".join(self.lanes)


@dataclass(frozen=True)
class LinkUpstream:
    """File the shim's bug upstream and add the link to its manifest (no command does it)."""

    shim: str

    def __str__(self) -> str:
        return "file it upstream and link it"


#: Every next action a verdict can name: a closed union (``match`` on it).
NextAction: TypeAlias = Bisect | RunLane | LockLanes | LinkUpstream
