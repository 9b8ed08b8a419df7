"""What became of a branch's pull request: a state, and for a skipped or failed one, why.

``str()`` is the one spelling the ``--json`` documents and the summary lines carry: ``opened``,
``exists``, ``not-requested``, ``skipped: <why>``, ``failed: <why>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["NOT_REQUESTED", "PrState", "PrStatus"]


class PrState(StrEnum):
    NOT_REQUESTED = "not-requested"
    OPENED = "opened"
    #: a pull request for the branch was already there
    EXISTS = "exists"
    #: not attempted (no token, no repository): the body is saved beside the branch
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class PrStatus:
    state: PrState
    # why it was skipped or failed (scrubbed of the token); empty for the others
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", PrState(self.state))
        needs_detail = self.state in (PrState.SKIPPED, PrState.FAILED)
        if needs_detail != bool(self.detail):
            raise ValueError(f"a {self.state} pull request status takes a detail: {self.detail!r}")

    def __str__(self) -> str:
        return f"{self.state}: {self.detail}" if self.detail else str(self.state)

    @property
    def requested(self) -> bool:
        return self.state != PrState.NOT_REQUESTED


NOT_REQUESTED = PrStatus(PrState.NOT_REQUESTED)
