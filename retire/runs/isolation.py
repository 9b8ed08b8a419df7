"""How reproducers run (``--isolation``): its own module so that naming it loads no launcher."""

from __future__ import annotations

import enum

__all__ = ["ISOLATIONS", "Isolation"]


class Isolation(enum.StrEnum):
    """How a lane's (or a bisection's) reproducers run."""

    #: one interpreter per run
    PROCESS = "process"
    #: forks of one interpreter per lane, which imported the preloads once
    LAUNCHER = "launcher"


#: ``--isolation`` values.
ISOLATIONS = tuple(str(isolation) for isolation in Isolation)
