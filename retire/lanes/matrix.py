"""Matrix expansion: axes × values, minus excludes, plus includes, merged into lane bodies.

Pure: takes already-validated lane bodies (dicts keyed like :mod:`retire.lanes.lanefile` produces)
and returns the cells. Merge rules, so that a cell never silently changes a pin:

- lists (requirements, constraints, overrides, shims, static metadata) concatenate;
- tables (env, indexes, sources, revisions) merge, and the same key with two values is a conflict;
- scalars (python, platform, exclude-newer, …) may be set by the base and overridden once;
  two axes setting the same scalar differently is a conflict.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

LIST_KEYS = ("requirements", "constraints", "overrides", "shims", "static_metadata")
TABLE_KEYS = ("env", "indexes", "sources", "exclude_newer_package", "revisions")
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class MatrixConflictError(Exception):
    def __init__(self, key: str, problem: str, fix: str) -> None:
        self.key, self.problem, self.fix = key, problem, fix
        super().__init__(problem)


@dataclass(frozen=True)
class Cell:
    name: str
    # (axis, value) in axis order
    values: tuple[tuple[str, str], ...]
    body: dict


def _merge(into: dict, fragment: dict, owners: dict, who: str, key_prefix: str) -> None:
    for key, value in fragment.items():
        if key in LIST_KEYS:
            into[key] = list(into.get(key, ())) + list(value)
        elif key in TABLE_KEYS:
            merged = dict(into.get(key, {}))
            for sub, subvalue in value.items():
                if sub in merged and merged[sub] != subvalue:
                    raise MatrixConflictError(
                        f"{key_prefix}.{key}.{sub}",
                        f"set to two values, by {owners.get((key, sub), 'base')} and {who}",
                        "set it in one place (the base or a single axis)",
                    )
                merged[sub] = subvalue
                owners[(key, sub)] = who
            into[key] = merged
        else:
            previous = owners.get(key)
            if previous not in (None, "base") and into.get(key) != value:
                raise MatrixConflictError(
                    f"{key_prefix}.{key}",
                    f"set to two values, by {previous} and {who}",
                    "set it in one axis only, or in the base",
                )
            into[key] = value
            owners[key] = who


def render_name(template: str, values: dict[str, str]) -> str:
    def substitute(match: re.Match) -> str:
        axis = match.group(1)
        if axis not in values:
            raise MatrixConflictError(
                "matrix.name",
                f"placeholder {{{axis}}} names no axis",
                f"use one of {', '.join('{' + a + '}' for a in values)}",
            )
        return values[axis]

    return PLACEHOLDER.sub(substitute, template)


def expand(
    *,
    template: str,
    base: dict,
    axes: dict[str, dict[str, dict]],
    exclude: list[dict[str, str]],
    include: list[tuple[dict[str, str], dict]],
) -> list[Cell]:
    """Every cell of the matrix, in a deterministic order (axis order, value order, includes)."""
    axis_names = list(axes)
    combos: list[dict[str, str]] = [
        dict(zip(axis_names, chosen, strict=True))
        for chosen in itertools.product(*(list(axes[a]) for a in axis_names))
    ]
    combos = [
        c for c in combos if not any(all(c[a] == v for a, v in rule.items()) for rule in exclude)
    ]
    extras: dict[tuple, list[dict]] = {}
    for values, extra in include:
        key = tuple(values[a] for a in axis_names)
        if values not in combos:
            combos.append(dict(values))
        extras.setdefault(key, []).append(extra)

    cells = []
    for combo in combos:
        body: dict = {}
        owners: dict = {}
        label = ", ".join(f"{a}={v}" for a, v in combo.items())
        _merge(body, base, owners, "base", "matrix.base")
        for axis in axis_names:
            _merge(
                body,
                axes[axis][combo[axis]],
                owners,
                f"axis {axis}={combo[axis]}",
                f"matrix.axes.{axis}.{combo[axis]}",
            )
        for extra in extras.get(tuple(combo[a] for a in axis_names), []):
            _merge(body, extra, owners, f"include ({label})", "matrix.include")
        cells.append(Cell(render_name(template, combo), tuple(combo.items()), body))
    return cells
