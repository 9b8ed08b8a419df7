"""The evidence and failures one verdict met, each once, in the order met (no I/O)."""

from __future__ import annotations

from retire.evidence.values import ProbeFailure

__all__ = ["Used"]


class Used:
    """Collects what the conditions and rules rested on: the verdict shows exactly these."""

    def __init__(self) -> None:
        self.evidence: list[object] = []
        self.failures: list[ProbeFailure] = []

    def add(self, value: object) -> None:
        if value is None:
            return
        if isinstance(value, ProbeFailure):
            if not any(value is seen for seen in self.failures):
                self.failures.append(value)
        elif not any(value is seen for seen in self.evidence):
            self.evidence.append(value)
