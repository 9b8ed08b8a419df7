"""A trial re-lock: would a lane resolve with its pins raised to a retirement floor?

A follow lane below a shim's proven floor can take the fix only if its requirements still
resolve with the target raised. :func:`try_raise` locks the lane, raised, into a scratch folder
(never the lane's own lock) and says so; when the resolver refuses, its own explanation is the
lane's *blocker* ("mamba-ssm==2.3.2.post1 depends on tilelang==0.1.8").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from retire.lanes.model import Lane
from retire.lanes.revisions import MirrorLookup

__all__ = ["RaiseTrial", "try_raise"]


@dataclass(frozen=True)
class RaiseTrial:
    """What one trial re-lock of one lane with raised floors gave."""

    lane: str
    # the floors tried, as requirements ("tilelang>=0.1.15")
    floors: tuple[str, ...]
    # the raised lane resolved
    resolved: bool
    # resolved: {canonical name: version} of the targets in the trial lock
    versions: Mapping[str, str] = field(default_factory=dict)
    # not resolved: the resolver's explanation, one line
    blocker: str | None = None
    # the resolver could not answer (an index unreachable, uv failed otherwise): neither raise
    # nor blocked
    failure: str | None = None


def try_raise(
    lane: Lane,
    floors: Mapping[str, str],
    *,
    locks_dir: Path,
    scratch_dir: Path,
    mirrors: MirrorLookup | None = None,
) -> RaiseTrial:
    """Lock ``lane`` with ``floors`` ({distribution: version}) raised, in ``scratch_dir``."""
    raise NotImplementedError("retire.locks.trial.try_raise: being written (issue 19)")
