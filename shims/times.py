"""UTC moments: the one ISO 8601 parser and formatter (runtime and engine; stdlib only).

Every time the engine reads (an index's upload time, a pull request's merge time, a recorded
run's start, a filing, a ``--now`` flag, a lane's freeze date) goes through :func:`parse` or
:func:`to_utc` and comes back as an aware UTC ``datetime``; every time it writes for people or
tools goes through :func:`format_utc`. A value with no offset is an error unless the caller
says its input is documented as UTC (``assume_utc``): comparing a naive and an aware time is a
crash waiting for the first odd input.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["UTC", "TimeError", "format_span", "format_utc", "now", "parse", "parse_span", "to_utc"]

UTC = _dt.UTC


class TimeError(ValueError):
    """A time that cannot be read as a UTC moment; ``str()`` is one line saying why."""


def now() -> _dt.datetime:
    """This moment, in UTC."""
    return _dt.datetime.now(UTC)


def to_utc(value: _dt.datetime | _dt.date, *, assume_utc: bool = False) -> _dt.datetime:
    """``value`` as an aware UTC datetime; a date is its midnight UTC.

    A naive datetime is taken as UTC only with ``assume_utc`` (inputs documented as UTC, such
    as a lane file's ``exclude-newer`` or a ``--now`` flag); otherwise it is a :class:`TimeError`.
    """
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            if not assume_utc:
                raise TimeError(f"{value.isoformat()} has no UTC offset: add Z or +00:00")
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise TimeError(f"{value.isoformat()} is out of range in UTC") from None
    if isinstance(value, _dt.date):
        return _dt.datetime.combine(value, _dt.time(0, 0), tzinfo=UTC)
    raise TimeError(f"expected a date or time, got {type(value).__name__} {value!r}")


def parse(text: str, *, assume_utc: bool = False) -> _dt.datetime:
    """An aware UTC datetime from ISO 8601 text such as ``2026-11-15T09:00:00Z`` or ``…+02:00``.

    Text without an offset (``2026-11-15``, ``2026-11-15T09:00``) is midnight / that time UTC
    only with ``assume_utc``. Raises :class:`TimeError` for anything else (see :func:`to_utc`).
    """
    if not isinstance(text, str):
        raise TimeError(f"expected an ISO 8601 time as text, got {type(text).__name__} {text!r}")
    try:
        moment = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise TimeError(f"not an ISO 8601 date or time: {text!r}") from None
    return to_utc(moment, assume_utc=assume_utc)


def format_utc(moment: _dt.datetime) -> str:
    """``2026-11-15T09:00:00Z``: UTC, whole seconds (the form locks and filings record)."""
    return to_utc(moment).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


_SPAN_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_FRIENDLY_SPAN = re.compile(r"(\d{1,6})\s*(second|minute|hour|day|week)s?", re.IGNORECASE)
_ISO_SPAN = re.compile(
    r"P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,6})S)?)?",
    re.IGNORECASE,
)


def parse_span(text: str) -> _dt.timedelta:
    """A span of time as uv's ``exclude-newer`` reads one: ``"7 days"``, ``"1 week"``, ``"24
    hours"``
    or ISO 8601 ``"P7D"`` / ``"PT24H"``. Days are 24 hours; months and years are refused (their
    length varies). Raises :class:`TimeError` for anything else, including a zero span."""
    if not isinstance(text, str):
        raise TimeError(f"expected a span such as '7 days', got {type(text).__name__} {text!r}")
    stripped = text.strip()
    seconds = None
    if friendly := _FRIENDLY_SPAN.fullmatch(stripped):
        seconds = int(friendly.group(1)) * _SPAN_UNITS[friendly.group(2).lower()]
    elif (
        (iso := _ISO_SPAN.fullmatch(stripped))
        and any(iso.groups())
        and not stripped.upper().endswith("T")
    ):
        weeks, days, hours, minutes, secs = (int(g or 0) for g in iso.groups())
        seconds = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + secs
    if seconds is None:
        varies = re.search(r"month|year|^P[^T]*[MY]", stripped, re.IGNORECASE)
        raise TimeError(
            f"not a span of time: {text!r}"
            + (" (months and years vary in length)" if varies else "")
        )
    if seconds == 0:
        raise TimeError(f"{text!r} is no time at all")
    return _dt.timedelta(seconds=seconds)


def format_span(span: _dt.timedelta) -> str:
    """``7 days``, ``36 hours``, ``90 minutes``: the largest whole unit (how lanes and locks
    record a cooldown)."""
    seconds = int(span.total_seconds())
    for unit in ("day", "hour", "minute", "second"):
        size = _SPAN_UNITS[unit]
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    # every whole number of seconds divides by one
    raise AssertionError(seconds)
