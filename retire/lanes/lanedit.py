"""Automated edits of lane files with tomlkit, so comments, order and formatting survive.

Text in, text out where the caller decides what to write (auto-drop edits a worktree); files
edited in place are written atomically.

**The floor rule** (:func:`raise_floor`), for every requirement, constraint and override naming
the distribution, with ``F`` the floor:

- already at or above the floor — a pin ``==V`` with ``V >= F``, or a lower bound
  (``>=``, ``>``, ``~=``, ``==V.*``) at or above ``F`` — stays as written (``==0.16.1`` stays
  a pin when the floor is 0.16);
- a pin below the floor becomes ``==F`` (a pin stays a pin, at the release proven fixed);
- otherwise the lower bounds below ``F`` are replaced by ``>=F`` (``~=L`` keeps its upper
  bound as ``<U``); other clauses (``<``, ``!=``) stay. A bare name gains ``>=F``;
- when what remains cannot hold ``F`` (``<0.17`` against a floor of 0.18, a direct URL), the
  plan is aborted with a one-line reason: that lane needs a human.

A lane whose lock holds the distribution only as a dependency (no requirement names it) gets
``<dist>>=F`` appended to its ``constraints`` (``[matrix.base]`` for a matrix), so its lock
cannot keep the broken release.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from tomlkit.items import Table

from retire.core.atomic import atomic_write
from shims import times

REQUIREMENT_KEYS = ("requirements", "constraints", "overrides")


def lane_bodies(doc: tomlkit.TOMLDocument) -> Iterator[Table]:
    """Every table of a lane file that holds lane keys: the lane, or a matrix's base, axis values
    and include extras."""
    if "lane" in doc:
        yield doc["lane"]
    matrix = doc.get("matrix")
    if matrix is None:
        return
    if "base" in matrix:
        yield matrix["base"]
    for values in matrix.get("axes", {}).values():
        yield from values.values()
    for include in matrix.get("include", []):
        if "lane" in include:
            yield include["lane"]


def _as_toml_date(moment: _dt.datetime) -> _dt.date | _dt.datetime:
    moment = times.to_utc(moment)
    return moment.date() if moment.time() == _dt.time(0, 0) else moment.replace(microsecond=0)


def _moment(value: object) -> _dt.datetime | None:
    """A lane file's ``exclude-newer`` (a date or time, UTC when it names no offset), or None."""
    try:
        if isinstance(value, str):
            return times.parse(value, assume_utc=True)
        return times.to_utc(value, assume_utc=True)  # type: ignore[arg-type]
    except times.TimeError:
        return None


def _is_span(value: object) -> bool:
    try:
        return isinstance(value, str) and bool(times.parse_span(value))
    except times.TimeError:
        return False


def primary_body(doc: tomlkit.TOMLDocument) -> Table:
    """The table that speaks for the whole file: ``[lane]``, or ``[matrix.base]`` (made if
    absent)."""
    if "lane" in doc:
        return doc["lane"]
    matrix = doc["matrix"]
    if "base" not in matrix:
        matrix["base"] = tomlkit.table()
    return matrix["base"]


def roll_exclude_newer(path: Path, cutoff: _dt.datetime, *, within: Path) -> bool:
    """Move every ``exclude-newer`` in the file forward to ``cutoff`` (never backward), and give
    the file's lane (or matrix base) one if it has none, so every lane or cell is frozen.

    The cutoff is how a cooldown becomes part of the lane, so the bumped lock stays
    reproducible; an axis value with its own date still overrides the base, as matrices allow.
    A lane's own cooldown (``exclude-newer = "7 days"``) is left as written: the lock records
    the cutoff it resolves to, and a bump's re-lock measures it from now.
    """
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    changed = False
    for body in lane_bodies(doc):
        if "exclude-newer" not in body:
            continue
        if _is_span(body["exclude-newer"].unwrap()):
            continue
        current = _moment(body["exclude-newer"].unwrap())
        if current is None or current < cutoff:
            body["exclude-newer"] = _as_toml_date(cutoff)
            changed = True
    primary = primary_body(doc)
    if "exclude-newer" not in primary:
        primary["exclude-newer"] = _as_toml_date(cutoff)
        changed = True
    if changed:
        atomic_write(path, tomlkit.dumps(doc), within=within)
    return changed


class FloorConflictError(ValueError):
    """A requirement cannot be raised to the floor automatically."""


def _compatible_upper(version: str) -> str:
    """``~=1.4.2`` allows ``<1.5``; ``~=0.15`` allows ``<1``."""
    release = Version(version).release
    head = list(release[:-1]) if len(release) > 1 else list(release)
    head[-1] += 1
    return ".".join(map(str, head))


def raise_floor(text: str, floor: str) -> str:
    """``text`` with its lower bound raised to ``floor`` (see the module docstring for the rule)."""
    req = Requirement(text)
    if req.url:
        raise FloorConflictError(f"{text!r} points at a URL; raise it to >={floor} by hand")
    f = Version(floor)
    specs = sorted(req.specifier, key=str)
    pinned_below = False
    for spec in specs:
        op, version = spec.operator, spec.version
        if op in ("==", "===") and not version.endswith(".*"):
            try:
                if Version(version) >= f:
                    return text
            except InvalidVersion:
                raise FloorConflictError(
                    f"{text!r} pins a non-PEP 440 version; raise it by hand"
                ) from None
            pinned_below = True
        elif (op in (">=", ">", "~=") and Version(version) >= f) or (
            op == "==" and Version(version[:-2]) >= f
        ):
            return text
    if pinned_below:
        clauses = [f"=={f}"]
    else:
        clauses = [f">={f}"]
        for spec in specs:
            if spec.operator in (">=", ">"):
                continue
            if spec.operator == "~=":
                clauses.append(f"<{_compatible_upper(spec.version)}")
            else:
                clauses.append(str(spec))
        if not SpecifierSet(",".join(clauses)).contains(f, prereleases=True):
            raise FloorConflictError(f"{text!r} excludes {req.name} {f}; the lane needs a human")
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f"; {req.marker}" if req.marker else ""
    return f"{req.name}{extras}{','.join(clauses)}{marker}"


def _edit_body(body, shim_id: str, floors: Mapping[str, str], changes: list[str]) -> None:
    shims = body.get("shims")
    if isinstance(shims, list):
        for i in reversed([i for i, item in enumerate(shims) if item == shim_id]):
            del shims[i]
            changes.append(f"dropped shim {shim_id}")
    for key in REQUIREMENT_KEYS:
        items = body.get(key)
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            if not isinstance(item, str):
                continue
            try:
                name = str(canonicalize_name(Requirement(item).name))
            except InvalidRequirement:
                continue
            if name in floors:
                try:
                    raised = raise_floor(str(item), floors[name])
                except FloorConflictError as exc:
                    raise FloorConflictError(f"{key}[{i}]: {exc}") from None
                if raised != str(item):
                    items[i] = raised
                    changes.append(f"{item} → {raised}")


def edit_lane_text(text: str, shim_id: str, floors: Mapping[str, str]) -> tuple[str, list[str]]:
    """A lane / matrix file with ``shim_id`` dropped and ``floors`` raised; (new text, changes).

    Only the touched array items change: comments, order and layout stay as they were.
    """

    doc = tomlkit.parse(text)
    changes: list[str] = []
    canonical = {str(canonicalize_name(k)): v for k, v in floors.items()}
    for body in lane_bodies(doc):
        _edit_body(body, shim_id, canonical, changes)
    return (tomlkit.dumps(doc) if changes else text), changes


def _append_once(text: str, key: str, item: str) -> str:
    """Append ``item`` to the list ``key`` of the file's ``[lane]`` (or ``[matrix.base]``), once."""
    doc = tomlkit.parse(text)
    table = primary_body(doc)
    if key not in table:
        table[key] = [item]
    elif item not in table[key]:
        table[key].append(item)
    return tomlkit.dumps(doc)


def add_constraint(text: str, requirement: str) -> str:
    """Append ``requirement`` to the file's ``[lane]`` (or ``[matrix.base]``) constraints, once."""
    return _append_once(text, "constraints", requirement)


def add_shim(text: str, shim_id: str) -> str:
    """Append ``shim_id`` to the file's ``[lane]`` (or ``[matrix.base]``) shims, once."""
    return _append_once(text, "shims", shim_id)
