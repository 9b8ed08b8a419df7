"""One way to read and write times: ISO 8601, always UTC."""

from __future__ import annotations

import datetime as _dt

__all__ = ["parse_utc"]


def parse_utc(text: str) -> _dt.datetime:
    """An ISO 8601 date or time as an aware UTC datetime (``Z`` accepted; naive means UTC)."""
    try:
        moment = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise ValueError(f"not an ISO date or time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    try:
        return moment.astimezone(_dt.timezone.utc)
    except OverflowError:
        raise ValueError(f"out of range in UTC: {text!r}") from None
