"""One reader for the files people write: safe reading, typed getters, one message shape.

Lane and matrix files, shim manifests, ``pack.toml``, the deny-list and the pack state all go
through here, so every problem is the same one-line :class:`~shims.errors.InputError`::

    shims/x/manifest.toml: reproducer.timeout: expected a positive number of seconds, got a number
nan — write timeout = 600

:func:`read_text` never blocks (a FIFO or a folder is an error), refuses files over
:data:`MAX_BYTES` and names the line of bad UTF-8; :func:`loads` names the line of a TOML error and
turns deep nesting and over-long integers into errors too. :class:`Table` and :class:`Value` are
the typed getters; each error names the dotted key path, and unknown keys get one "did you mean"
(:data:`CLOSE_MATCH_CUTOFF`). Standard library only (``packaging`` is imported lazily by the
requirement, specifier and version getters), so the shim runtime can use it.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import sys
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from shims.errors import InputError
from shims.filereading import MAX_BYTES, read_text
from shims.filereading import too_large as _too_large

if TYPE_CHECKING:
    from packaging.specifiers import Specifier, SpecifierSet

__all__ = [
    "CLOSE_MATCH_CUTOFF",
    "MAX_BYTES",
    "REQUIRED",
    "InputError",
    "Table",
    "Value",
    "close_match",
    "describe",
    "loads",
    "loads_json",
    "read",
    "read_text",
]

#: The one difflib ratio above which an unknown name gets "did you mean …?".
CLOSE_MATCH_CUTOFF = 0.75
#: ``default`` for a key that must be present.
REQUIRED: Any = object()

#: The type of a shortcut's ``default`` (what an absent key returns).
_Default = TypeVar("_Default")

_TOML_WHERE = re.compile(
    r"^(?P<what>.*) \(at (?P<where>line \d+, column \d+|end of document)\)$", re.DOTALL
)


# ---------------------------------------------------------------------------------------------
# Reading (the file itself: shims/filereading.py)


def read(
    path: str | os.PathLike[str], name: str | None = None, *, max_bytes: int = MAX_BYTES
) -> Table:
    """Read and parse the TOML file ``path``; errors name it ``name`` (default: the path)."""
    name = os.fspath(path) if name is None else name
    return loads(read_text(path, name, max_bytes=max_bytes) or "", name, max_bytes=max_bytes)


def loads(text: str, name: str, *, max_bytes: int = MAX_BYTES) -> Table:
    """Parse TOML ``text``; the root :class:`Table`. Every failure is one :class:`InputError`."""
    import tomllib

    if len(text) > max_bytes:
        raise _too_large(name, max_bytes)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_WHERE.match(str(exc))
        if match:
            where = "the end of the file" if match["where"] == "end of document" else match["where"]
            problem = f"invalid TOML at {where}: {match['what']}"
        else:
            problem = f"invalid TOML: {exc}"
        raise InputError(name, None, problem, "fix the syntax") from None
    except RecursionError:
        raise InputError(
            name,
            None,
            "invalid TOML: arrays or inline tables nested too deeply",
            "flatten the value",
        ) from None
    # an integer longer than Python converts (sys.get_int_max_str_digits)
    except ValueError:
        raise InputError(
            name,
            None,
            f"invalid TOML at line {_long_number_line(text)}: integer too long",
            "write a number that fits in 64 bits",
        ) from None
    return Table(data, "", name)


def loads_json(text: str, name: str, *, fix: str | None = None) -> Value:
    """Parse JSON ``text`` (state files the tool writes) into a :class:`Value`, with the same
    errors."""
    import json

    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(name, None, "not valid JSON: nested too deeply", fix) from None
    except ValueError as exc:
        raise InputError(name, None, f"not valid JSON: {exc}", fix) from None
    return Value(data, "", name)


def _long_number_line(text: str) -> int:
    digits = min(sys.get_int_max_str_digits() or 4300, 4300)
    found = re.search(rf"[0-9_]{{{digits},}}", text)
    return text.count("\n", 0, found.start()) + 1 if found else 1


def describe(value: object) -> str:
    """A value as errors show it: its TOML type, then a short rendering (never the whole of it)."""
    if isinstance(value, (bool, dict, list)):
        return (
            "a table"
            if isinstance(value, dict)
            else "an array"
            if isinstance(value, list)
            else f"a boolean {'true' if value else 'false'}"
        )
    kind = (
        "an integer"
        if isinstance(value, int)
        else "a number"
        if isinstance(value, float)
        else "a string"
        if isinstance(value, str)
        else "a date-time"
        if isinstance(value, _dt.datetime)
        else "a date"
        if isinstance(value, _dt.date)
        else "a time"
        if isinstance(value, _dt.time)
        else type(value).__name__
    )
    return f"{kind} {_short(value)}"


def _short(value: object) -> str:
    """``repr`` (dates in ISO form), cut to 40 characters."""
    try:
        text = value.isoformat() if isinstance(value, (_dt.date, _dt.time)) else repr(value)
    # an integer too long to print
    except ValueError:
        return "(too long to show)"
    return text if len(text) <= 40 else text[:37] + "..."


def close_match(name: str, options: Iterable[str]) -> str | None:
    """The one option ``name`` was probably meant to be, or ``None``."""
    import difflib

    found = difflib.get_close_matches(name, list(options), n=1, cutoff=CLOSE_MATCH_CUTOFF)
    return found[0] if found else None


def join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


# ---------------------------------------------------------------------------------------------
# Typed getters


class Value:
    """One value read from a file, with its key path: each getter returns it typed or raises."""

    __slots__ = ("key", "name", "raw")

    def __init__(self, raw: object, key: str, name: str) -> None:
        self.raw, self.key, self.name = raw, key, name

    @property
    def leaf(self) -> str:
        """The last key of the path (``needs-cuda`` of ``reproducer.needs-cuda``)."""
        return self.key.rsplit(".", 1)[-1].split("[", 1)[0] or "value"

    def error(self, problem: str, fix: str | None = None) -> InputError:
        return InputError(self.name, self.key, problem, fix)

    def expected(self, what: str, fix: str | None) -> InputError:
        return self.error(f"expected {what}, got {describe(self.raw)}", fix)

    # -- scalars ------------------------------------------------------------------------------

    def string(self, *, fix: str = "quote it", empty_ok: bool = False) -> str:
        if not isinstance(self.raw, str):
            raise self.expected("a string", fix)
        if not empty_ok and not self.raw.strip():
            raise self.error("is empty", "write something useful or remove the key")
        return self.raw

    def choice(self, choices: Collection[str], *, noun: str | None = None) -> str:
        value = self.string()
        if value not in choices:
            raise self.error(
                f"unknown {noun or self.leaf.replace('-', ' ')} {value!r}",
                f"use one of {', '.join(choices)}",
            )
        return value

    def boolean(self, *, fix: str | None = None) -> bool:
        if not isinstance(self.raw, bool):
            raise self.expected("true or false", fix or f"write {self.leaf} = true")
        return self.raw

    def number(
        self,
        *,
        integer: bool = False,
        minimum: float | None = None,
        positive: bool = False,
        maximum: float | None = None,
        what: str | None = None,
        fix: str | None = None,
    ) -> int | float:
        """An integer (``integer``) or any finite number, in range; NaN and infinities never
        pass."""
        value, kind = self.raw, "integer" if integer else "number"
        if what is None:
            what = (
                f"a positive {kind}"
                if positive
                else f"{'an' if integer else 'a'} {kind}"
                + (f" >= {minimum}" if minimum is not None else "")
            ) + (f" <= {maximum}" if maximum is not None else "")
        number = (
            value
            if isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
            else None
        )
        if number is None or not _within(number, positive, minimum, maximum):
            raise self.expected(what, fix or f"write {self.leaf} = …")
        return number

    def date(self, *, fix: str = "write an unquoted date like 2026-04-14") -> _dt.date:
        """A TOML date (not a date-time, not a quoted string)."""
        if not isinstance(self.raw, _dt.date) or isinstance(self.raw, _dt.datetime):
            raise self.expected("a date", fix)
        return self.raw

    def moment(
        self, *, fix: str = "write a date such as 2026-11-01 or 2026-11-01T12:00:00Z"
    ) -> _dt.datetime:
        """A point in time from a TOML date, date-time or ISO string, in UTC; naive means UTC."""
        from shims import times

        value = self.raw
        if not isinstance(value, (_dt.date, str)):
            raise self.expected("a date", fix)
        try:
            return (
                times.parse(value, assume_utc=True)
                if isinstance(value, str)
                else times.to_utc(value, assume_utc=True)
            )
        except times.TimeError as exc:
            if isinstance(value, str) and "not an ISO 8601" in str(exc):
                raise self.error(f"malformed date {_short(value)}", fix) from None
            raise self.error(
                f"date out of range: {describe(value)}",
                "write a date between years 1 and 9999 in UTC",
            ) from None

    def url(
        self,
        *,
        schemes: Collection[str] = ("http", "https"),
        what: str = "an http(s) URL",
        fix: str = "write the full https:// address",
    ) -> str:
        """An absolute URL with one of ``schemes`` (and a host, unless the scheme is ``file``)."""
        from urllib.parse import urlsplit

        value = self.string()
        try:
            parts = urlsplit(value)
            ok = (
                not any(ch.isspace() for ch in value)
                and parts.scheme in schemes
                and (bool(parts.netloc) if parts.scheme != "file" else bool(parts.path))
            )
        # e.g. an unclosed [IPv6] host
        except ValueError:
            ok = False
        if not ok:
            raise self.error(f"not {what}: {value!r}", fix)
        return value

    # -- Python packaging ---------------------------------------------------------------------

    def requirement(
        self, *, fix: str = "write a PEP 508 requirement such as 'torch==2.9.1' or 'numpy>=2'"
    ) -> str:
        """A PEP 508 requirement, returned as written."""
        from packaging.requirements import InvalidRequirement, Requirement

        text = self.string(fix=fix, empty_ok=True)
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            first = (str(exc).splitlines() or [""])[0]
            raise self.error(f"invalid requirement {text!r} ({first})", fix) from None
        for spec in requirement.specifier:
            if not _version_ok(spec):
                raise self.error(
                    f"invalid requirement {text!r} (version {spec.version!r} too long)", fix
                )
        return text

    def specifier(self, *, fix: str = 'use PEP 440 like ">=0.18" or ">=2.4,<2.6"') -> SpecifierSet:
        """A PEP 440 version specifier set (``packaging.specifiers.SpecifierSet``)."""
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        text = self.string()
        try:
            specifiers = SpecifierSet(text)
        except InvalidSpecifier:
            raise self.error(f"bad version specifier {text!r}", fix) from None
        if not all(_version_ok(spec) for spec in specifiers):
            raise self.error(f"bad version specifier {text!r}", fix)
        return specifiers

    def version(self, *, fix: str = "use a PEP 440 version") -> str:
        """A PEP 440 version, returned as written."""
        from packaging.version import Version

        text = self.string(fix=fix, empty_ok=True)
        try:
            Version(text)
        # InvalidVersion, or a release number too long for int()
        except ValueError:
            raise self.error(f"invalid version {text!r}", fix) from None
        return text

    # -- containers ---------------------------------------------------------------------------

    def items(self, *, what: str = "an array", fix: str | None = None) -> list[Value]:
        if not isinstance(self.raw, list):
            raise self.expected(what, fix)
        return [Value(item, f"{self.key}[{i}]", self.name) for i, item in enumerate(self.raw)]

    def strings(self, *, fix: str = 'write ["…", …]', empty_ok: bool = True) -> list[str]:
        """An array of strings."""
        return [
            item.string(fix=fix, empty_ok=empty_ok) for item in self.items(what="an array", fix=fix)
        ]

    def table(self, *, fix: str | None = None) -> Table:
        if not isinstance(self.raw, dict):
            raise self.expected(
                "a table", fix or (f"write [{self.key}]" if self.key else "write a table")
            )
        return Table(self.raw, self.key, self.name)

    def tables(self, *, fix: str | None = None) -> list[Table]:
        """An array of tables (``[[key]]``)."""
        fix = fix or f"write [[{self.key}]] entries"
        return [item.table(fix=fix) for item in self.items(what="an array of tables", fix=fix)]


def _within(number: float, positive: bool, minimum: float | None, maximum: float | None) -> bool:
    """Whether ``number`` is finite and in range (an integer beyond any float is not)."""
    try:
        return (
            math.isfinite(number)
            and (not positive or number > 0)
            and (minimum is None or number >= minimum)
            and (maximum is None or number <= maximum)
        )
    except OverflowError:
        return False


def _version_ok(spec: Specifier) -> bool:
    """Whether a specifier's version parses (``===`` takes any text; ``.*`` is a prefix)."""
    from packaging.version import Version

    try:
        return spec.operator == "===" or bool(Version(spec.version.removesuffix(".*")))
    # InvalidVersion, or a release number too long for int()
    except ValueError:
        return False


class Table:
    """A table read from a file: its items, its key path, and typed getters by key."""

    __slots__ = ("data", "key", "name")

    def __init__(self, data: dict[str, object], key: str, name: str) -> None:
        self.data, self.key, self.name = data, key, name

    def __contains__(self, item: object) -> bool:
        return item in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def entries(self) -> list[tuple[str, Value]]:
        """Every ``(key, Value)`` in file order."""
        return [
            (name, Value(raw, join(self.key, name), self.name)) for name, raw in self.data.items()
        ]

    def error(self, name: str | None, problem: str, fix: str | None = None) -> InputError:
        """An error about key ``name`` of this table (or the table itself when ``None``)."""
        return InputError(self.name, join(self.key, name) if name else self.key, problem, fix)

    def check_keys(self, allowed: Collection[str], *, fix: str | None = None) -> Table:
        """Reject the first key not in ``allowed``: "did you mean" when one is close, else
        ``fix``."""
        for name in self.data:
            if name not in allowed:
                hint = close_match(name, allowed)
                raise self.error(
                    name,
                    f"unknown key {name!r}",
                    f"did you mean {hint!r}?"
                    if hint
                    else fix or f"allowed keys: {', '.join(allowed)}",
                )
        return self

    @overload
    def get(self, name: str, default: None = None) -> Value | None: ...

    @overload
    def get(self, name: str, default: object) -> Value: ...

    def get(self, name: str, default: object = None) -> Value | None:
        """The value of ``name``; when absent, ``default`` as a value (``None``: no value)."""
        if name in self.data:
            return Value(self.data[name], join(self.key, name), self.name)
        return None if default is None else Value(default, join(self.key, name), self.name)

    def need(self, name: str, *, fix: str | None = None) -> Value:
        """The value of ``name``, which must be present."""
        if name not in self.data:
            raise self.error(name, "missing", fix or f"add {name} = …")
        return Value(self.data[name], join(self.key, name), self.name)

    # Shortcuts: an absent key is an error with ``default=REQUIRED``, else returns ``default``.

    @overload
    def string(
        self, name: str, *, missing: str | None = None, fix: str = ..., empty_ok: bool = ...
    ) -> str: ...

    @overload
    def string(
        self,
        name: str,
        default: _Default,
        *,
        missing: str | None = None,
        fix: str = ...,
        empty_ok: bool = ...,
    ) -> str | _Default: ...

    def string(
        self, name: str, default: Any = REQUIRED, *, missing: str | None = None, **options: Any
    ) -> Any:
        if name not in self.data and default is not REQUIRED:
            return default
        return self.need(name, fix=missing or f'add {name} = "…"').string(**options)

    @overload
    def choice(self, name: str, choices: Collection[str], *, noun: str | None = None) -> str: ...

    @overload
    def choice(
        self,
        name: str,
        choices: Collection[str],
        default: _Default,
        *,
        noun: str | None = None,
    ) -> str | _Default: ...

    def choice(
        self, name: str, choices: Collection[str], default: Any = REQUIRED, **options: Any
    ) -> Any:
        if name not in self.data and default is not REQUIRED:
            return default
        return self.need(name, fix=f'add {name} = "…"').choice(choices, **options)

    @overload
    def table(self, name: str, *, fix: str | None = None) -> Table: ...

    @overload
    def table(
        self, name: str, default: _Default, *, fix: str | None = None
    ) -> Table | _Default: ...

    def table(self, name: str, default: Any = REQUIRED, *, fix: str | None = None) -> Any:
        if name not in self.data and default is not REQUIRED:
            return default
        return self.need(name, fix=f"add a [{join(self.key, name)}] table").table(fix=fix)
