"""A code host's answer about one link, checked: both APIs (REST in
:mod:`retire.probes.codehost`, GraphQL in :mod:`retire.probes.graphql`) end here.

Fields are read with their types checked (:func:`field`, :func:`moment`); an answer of the wrong
shape raises :class:`WrongShapeError` saying what was wrong, never a guess.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Literal, TypeVar, overload

from retire.evidence.values import IssueState, LinkStatus, ProbeFailure, PullState
from retire.probes.http import Fetcher
from retire.probes.links import LinkRef
from shims import times

__all__ = ["LinkState", "WrongShapeError", "field", "moment", "not_found", "state_of"]

#: What a probe of one link ends in.
LinkState = PullState | IssueState | ProbeFailure

T = TypeVar("T")


class WrongShapeError(ValueError):
    """An answer that is not the object asked for; the message says what was wrong."""


def moment(data: Mapping[str, object], key: str) -> _dt.datetime | None:
    """A time the API sent (``2026-02-01T10:00:00Z``) or None when null; WrongShapeError when
    unreadable."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise WrongShapeError(f"{key} is {str(value)[:40]!r}, not a time")
    try:
        return times.parse(value)
    except times.TimeError:
        raise WrongShapeError(f"{key} is {str(value)[:40]!r}, not a time") from None


@overload
def field(
    data: Mapping[str, object], key: str, kinds: tuple[type[T], ...], *, required: Literal[True]
) -> T: ...


@overload
def field(
    data: Mapping[str, object], key: str, kinds: tuple[type[T], ...], *, required: bool = False
) -> T | None: ...


def field(
    data: Mapping[str, object], key: str, kinds: tuple[type[T], ...], *, required: bool = False
) -> T | None:
    """``data[key]`` when of one of ``kinds`` (or absent / null unless ``required``)."""
    value = data.get(key)
    if value is None and not required:
        return None
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        what = "missing" if key not in data else "null" if value is None else type(value).__name__
        raise WrongShapeError(f"{key} is {what}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


def state_of(
    fetcher: Fetcher,
    ref: LinkRef,
    *,
    state: str,
    merged: bool,
    merged_at: _dt.datetime | None,
    merge_commit: str | None,
    state_reason: str | None,
    updated_at: _dt.datetime | None,
    closed_at: _dt.datetime | None,
    title: str,
) -> PullState | IssueState:
    """The value for ``ref`` from checked fields, every string redacted."""
    status: LinkStatus
    if state == "open":
        status = "open"
    elif state == "closed":
        status = "closed"
    else:
        raise WrongShapeError(f"state is {state!r}, not open or closed")
    title = fetcher.redact(title)
    if ref.kind == "pull":
        merged = merged or merged_at is not None
        return PullState(
            url=ref.url,
            number=ref.number,
            state=status,
            merged=merged,
            merged_at=merged_at,
            merge_commit_sha=merge_commit if merged else None,
            updated_at=updated_at,
            closed_at=closed_at,
            title=title,
        )
    return IssueState(
        url=ref.url,
        number=ref.number,
        state=status,
        state_reason=state_reason,
        updated_at=updated_at,
        closed_at=closed_at,
        title=title,
    )


def not_found(ref: LinkRef, how: str, attempts: int = 1) -> ProbeFailure:
    return ProbeFailure(
        "codehost",
        ref.url,
        f"{ref.kind} not found ({how}): private, moved or mistyped",
        attempts=attempts,
    )
