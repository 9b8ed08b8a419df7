"""JSON text exactly as ``json.dumps(value, indent=1)`` writes it, in about half the time.

The weekly report's JSON is 3 MB of small objects, and the standard library indents only in its
pure-Python encoder (generators within generators); this writer appends to one list and leaves
each string to the same C function the standard library uses. A value it does not know (a key
that is not a string, a type JSON has no form for, a cycle) is left to ``json.dumps`` whole, so
an error is the standard library's. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii

__all__ = ["dumps"]

_INFINITY = float("inf")


class _LeftToJsonError(Exception):
    """A value the writer leaves to ``json.dumps``."""


def _number(value: float) -> str:
    # json's own spelling of the floats that are not numbers
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def _writer(append: Callable[[str], None]) -> Callable[[object, str], None]:
    def write(value: object, indent: str) -> None:
        if isinstance(value, str):
            append(encode_basestring_ascii(value))
        elif value is None:
            append("null")
        elif value is True:
            append("true")
        elif value is False:
            append("false")
        elif isinstance(value, int):
            append(int.__repr__(value))
        elif isinstance(value, float):
            append(_number(value))
        elif isinstance(value, dict):
            if not value:
                append("{}")
                return
            inner, separator = indent + " ", "{"
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _LeftToJsonError
                append(f"{separator}{inner}{encode_basestring_ascii(key)}: ")
                write(item, inner)
                separator = ","
            append(f"{indent}}}")
        elif isinstance(value, list | tuple):
            if not value:
                append("[]")
                return
            inner, separator = indent + " ", "["
            for item in value:
                append(separator + inner)
                write(item, inner)
                separator = ","
            append(f"{indent}]")
        else:
            raise _LeftToJsonError

    return write


def dumps(value: object) -> str:
    """``json.dumps(value, indent=1)``."""
    parts: list[str] = []
    try:
        _writer(parts.append)(value, "\n")
    except (_LeftToJsonError, RecursionError):
        return json.dumps(value, indent=1)
    return "".join(parts)
