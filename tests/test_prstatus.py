"""A pull request's status is data (a state and, when skipped or failed, why), spelled in the
documents and summaries as it always was (issue 25)."""

from __future__ import annotations

import pytest

from retire.branches.prstatus import NOT_REQUESTED, PrState, PrStatus


def test_the_spelling_is_the_state_then_why() -> None:
    assert str(NOT_REQUESTED) == "not-requested" and not NOT_REQUESTED.requested
    assert str(PrStatus(PrState.OPENED)) == "opened"
    failed = PrStatus(PrState.FAILED, "opening the pull request: HTTP 401")
    assert str(failed) == "failed: opening the pull request: HTTP 401" and failed.requested


@pytest.mark.parametrize(
    ("state", "detail"),
    [(PrState.SKIPPED, ""), (PrState.FAILED, ""), (PrState.OPENED, "why"), ("merged", "")],
)
def test_a_status_says_why_exactly_when_it_was_skipped_or_failed(state, detail) -> None:
    with pytest.raises(ValueError):
        PrStatus(state, detail)
