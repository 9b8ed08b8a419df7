"""The engine's shared plumbing: UTC times."""

from __future__ import annotations

import datetime as dt

import pytest

from retire.core import times

UTC = dt.timezone.utc


def test_times_parse_accepts_z_and_offsets_and_returns_utc():
    assert times.parse("2026-11-15T09:00:00Z") == dt.datetime(2026, 11, 15, 9, tzinfo=UTC)
    moment = times.parse("2026-11-15T11:00:00.5+02:00")
    assert moment.tzinfo is UTC and moment == dt.datetime(2026, 11, 15, 9, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize("text, why", [
    ("2026-11-15T09:00:00", "has no UTC offset"),
    ("2026-11-15", "has no UTC offset"),
    ("last tuesday", "not an ISO 8601 date or time"),
    ("9999-12-31T23:00:00-05:00", "out of range in UTC"),
    ("0001-01-01T00:00:00+01:00", "out of range in UTC"),
])
def test_times_parse_rejects_naive_malformed_and_overflowing_values_in_one_line(text, why):
    with pytest.raises(times.TimeError, match=why) as caught:
        times.parse(text)
    assert "\n" not in str(caught.value) and isinstance(caught.value, ValueError)


def test_times_naive_input_documented_as_utc_is_read_as_utc():
    assert times.parse("2026-11-15T09:00", assume_utc=True) == dt.datetime(2026, 11, 15, 9, tzinfo=UTC)
    assert times.parse("2026-11-15", assume_utc=True) == dt.datetime(2026, 11, 15, tzinfo=UTC)
    assert times.to_utc(dt.date(2026, 11, 15)) == dt.datetime(2026, 11, 15, tzinfo=UTC)
    with pytest.raises(times.TimeError):
        times.to_utc(dt.datetime(2026, 11, 15))


def test_times_format_utc_is_whole_seconds_with_z():
    assert times.format_utc(dt.datetime(2026, 11, 15, 11, 0, 0, 999, tzinfo=dt.timezone(dt.timedelta(hours=2)))) \
        == "2026-11-15T09:00:00Z"
    assert times.parse(times.format_utc(times.now())).tzinfo is UTC
