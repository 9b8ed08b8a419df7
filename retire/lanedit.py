"""Automated edits of lane files with tomlkit, so comments, order and formatting survive.

Each function edits one file in place (atomically) and says whether it changed anything.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Iterator

import tomlkit
from tomlkit.items import Table

from retire.atomic import atomic_write


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
        for fragment in values.values():
            yield fragment
    for include in matrix.get("include", []):
        if "lane" in include:
            yield include["lane"]


def _as_toml_date(moment: _dt.datetime) -> _dt.date | _dt.datetime:
    moment = moment.astimezone(_dt.timezone.utc)
    return moment.date() if moment.time() == _dt.time(0, 0) else moment.replace(microsecond=0)


def _moment(value: object) -> _dt.datetime | None:
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.date):
        return _dt.datetime.combine(value, _dt.time(0, 0), tzinfo=_dt.timezone.utc)
    return None


def roll_exclude_newer(path: Path, cutoff: _dt.datetime) -> bool:
    """Move every ``exclude-newer`` in the file forward to ``cutoff`` (never backward).

    A file with no freeze date at all gets one on its lane (or matrix base): the cutoff is how
    a cooldown becomes part of the lane, so the bumped lock stays reproducible.
    """
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    changed, seen = False, False
    for body in lane_bodies(doc):
        if "exclude-newer" not in body:
            continue
        seen = True
        current = _moment(body["exclude-newer"].unwrap())
        if current is None or current < cutoff:
            body["exclude-newer"] = _as_toml_date(cutoff)
            changed = True
    if not seen:
        first = next(lane_bodies(doc), None)
        if first is not None:
            first["exclude-newer"] = _as_toml_date(cutoff)
            changed = True
    if changed:
        atomic_write(path, tomlkit.dumps(doc))
    return changed
