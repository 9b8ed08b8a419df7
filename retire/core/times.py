"""The engine's name for the one ISO 8601 parser, which lives in the runtime (``shims.times``)
because the runtime's readers need it too and cannot import the engine."""

from shims.times import UTC, TimeError, format_span, format_utc, now, parse, parse_span, to_utc

__all__ = ["UTC", "TimeError", "format_span", "format_utc", "now", "parse", "parse_span", "to_utc"]
