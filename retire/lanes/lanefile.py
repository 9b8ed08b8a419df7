"""Read ``lanes/*.toml`` into :class:`~retire.lanes.Lane` values, rejecting bad input in one line.

A file holds either one lane (``[lane]``; the lane is named after the file) or one matrix
(``[matrix]``; its cells become lanes). See docs/lanes.md for every key.
"""

from __future__ import annotations

import tomllib
from datetime import date, datetime, time, timezone
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.lanes import matrix as matrix_mod
from retire.core.errors import ConfigError
from retire.lanes.model import (
    ENV_NAME,
    INDEX_NAME,
    LANE_NAME,
    PLATFORM,
    PRERELEASE_MODES,
    PYTHON_VERSION,
    SHIM_ID,
    IndexSpec,
    Lane,
    StaticMetadata,
)

BODY_KEYS = {
    "description": "description",
    "python": "python",
    "platform": "platform",
    "requirements": "requirements",
    "constraints": "constraints",
    "overrides": "overrides",
    "indexes": "indexes",
    "sources": "sources",
    "exclude-newer": "exclude_newer",
    "prerelease": "prerelease",
    "static-metadata": "static_metadata",
    "env": "env",
    "shims": "shims",
    "needs-cuda": "needs_cuda",
}
MATRIX_KEYS = ("name", "description", "base", "axes", "exclude", "include")
AXIS_VALUE_HINT = "axis names and values are lowercase: letters, digits, '.', '_', '-'"


def _type_name(value: object) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


class _Reader:
    """Validates one file; every error names this file and the key path."""

    def __init__(self, path: Path, display: str) -> None:
        self.path = path
        self.display = display

    def error(self, key: str | None, problem: str, fix: str | None = None) -> ConfigError:
        return ConfigError(self.display, key, problem, fix)

    def expect(self, value: object, kind: type, key: str, example: str) -> object:
        if kind is str and isinstance(value, str):
            return value
        if kind is bool and isinstance(value, bool):
            return value
        if kind is list and isinstance(value, list):
            return value
        if kind is dict and isinstance(value, dict):
            return value
        raise self.error(key, f"expected {_type_name(kind())}, got {_type_name(value)} {value!r}", f"write it as {example}")

    def strings(self, value: object, key: str, example: str) -> list[str]:
        items = self.expect(value, list, key, example)
        for i, item in enumerate(items):
            self.expect(item, str, f"{key}[{i}]", example)
        return list(items)

    def requirement(self, text: str, key: str) -> str:
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0]
            raise self.error(key, f"invalid requirement {text!r} ({first})",
                             "write a PEP 508 requirement such as 'torch==2.9.1' or 'numpy>=2'") from None
        return text

    def moment(self, value: object, key: str) -> datetime:
        if isinstance(value, datetime):
            moment = value
        elif isinstance(value, date):
            moment = datetime.combine(value, time(0, 0))
        elif isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise self.error(key, f"malformed date {value!r}",
                                 "write a date such as 2026-11-01 or 2026-11-01T12:00:00Z") from None
        else:
            raise self.error(key, f"expected a date, got {_type_name(value)} {value!r}",
                             "write a date such as 2026-11-01")
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    # -- one lane body (also a matrix base, axis value or include fragment) -------------

    def body(self, raw: object, prefix: str) -> dict:
        raw = self.expect(raw, dict, prefix, "a table")
        out: dict = {}
        for key, value in raw.items():
            where = f"{prefix}.{key}"
            if key not in BODY_KEYS:
                raise self.error(where, "unknown key", f"allowed keys: {', '.join(BODY_KEYS)}")
            out[BODY_KEYS[key]] = self._value(key, value, where)
        return out

    def _value(self, key: str, value: object, where: str) -> object:
        if key == "description":
            return self.expect(value, str, where, '"one sentence"')
        if key == "python":
            text = self.expect(value, str, where, 'a quoted version such as "3.12"')
            if not PYTHON_VERSION.fullmatch(text):
                raise self.error(where, f"invalid Python version {text!r}", 'use major.minor such as "3.12"')
            return text
        if key == "platform":
            text = self.expect(value, str, where, '"x86_64-manylinux_2_28"')
            if not PLATFORM.fullmatch(text):
                raise self.error(where, f"unknown target platform {text!r}",
                                 "use a uv --python-platform target such as x86_64-manylinux_2_28 or linux")
            return text
        if key in ("requirements", "constraints", "overrides"):
            items = self.strings(value, where, "a list of requirements such as [\"torch==2.9.1\"]")
            return [self.requirement(item, f"{where}[{i}]") for i, item in enumerate(items)]
        if key == "indexes":
            return self._indexes(value, where)
        if key == "sources":
            table = self.expect(value, dict, where, '{ torch = "pytorch-nightly" }')
            sources = {}
            for package, index in table.items():
                self.expect(index, str, f"{where}.{package}", '"<index name>"')
                sources[str(canonicalize_name(package))] = index
            return sources
        if key == "exclude-newer":
            return self.moment(value, where)
        if key == "prerelease":
            text = self.expect(value, str, where, '"if-necessary"')
            if text not in PRERELEASE_MODES:
                raise self.error(where, f"unknown pre-release mode {text!r}", f"use one of {', '.join(PRERELEASE_MODES)}")
            return text
        if key == "static-metadata":
            items = self.expect(value, list, where, "an array of tables [[lane.static-metadata]]")
            return [self._static(item, f"{where}[{i}]") for i, item in enumerate(items)]
        if key == "env":
            table = self.expect(value, dict, where, '{ NAME = "value" }')
            for name, text in table.items():
                if not ENV_NAME.fullmatch(name):
                    raise self.error(f"{where}.{name}", "invalid environment variable name", "use UPPER_CASE letters, digits and _")
                self.expect(text, str, f"{where}.{name}", 'a quoted string such as "1"')
            return dict(table)
        if key == "shims":
            ids = self.strings(value, where, '["shim_id", …]')
            for i, shim in enumerate(ids):
                if not SHIM_ID.fullmatch(shim):
                    raise self.error(f"{where}[{i}]", f"invalid shim id {shim!r}", "shim ids look like dsa_indexer_memory")
            return ids
        if key == "needs-cuda":
            return self.expect(value, bool, where, "true or false")
        raise AssertionError(key)  # BODY_KEYS and this dispatch list the same keys

    def _indexes(self, value: object, where: str) -> dict[str, IndexSpec]:
        table = self.expect(value, dict, where, "[lane.indexes.<name>] tables")
        out = {}
        for name, spec in table.items():
            key = f"{where}.{name}"
            if not INDEX_NAME.fullmatch(name):
                raise self.error(key, f"invalid index name {name!r}", "use lowercase letters, digits, '.', '_', '-'")
            spec = self.expect(spec, dict, key, "a table with url and/or default")
            unknown = set(spec) - {"url", "default"}
            if unknown:
                raise self.error(f"{key}.{sorted(unknown)[0]}", "unknown key", "allowed keys: url, default")
            url = spec.get("url")
            if url is not None:
                self.expect(url, str, f"{key}.url", '"<index URL>"')
                if not url.startswith(("http://", "https://", "file://")):
                    raise self.error(f"{key}.url", f"not a URL: {url!r}", "use an http(s):// or file:// URL")
            default = self.expect(spec.get("default", False), bool, f"{key}.default", "true or false")
            out[name] = IndexSpec(name=name, url=url, default=default)
        return out

    def _static(self, raw: object, where: str) -> StaticMetadata:
        raw = self.expect(raw, dict, where, "a table with name, version, requires-dist")
        allowed = {"name", "version", "requires-dist", "requires-python", "provides-extras"}
        for key in raw:
            if key not in allowed:
                raise self.error(f"{where}.{key}", "unknown key", f"allowed keys: {', '.join(sorted(allowed))}")
        for key in ("name", "version"):
            if key not in raw:
                raise self.error(f"{where}.{key}", "missing", "static metadata needs name and version")
        name = self.expect(raw["name"], str, f"{where}.name", '"mamba-ssm"')
        version = self.expect(raw["version"], str, f"{where}.version", '"2.2.4"')
        try:
            Version(version)
        except InvalidVersion:
            raise self.error(f"{where}.version", f"invalid version {version!r}", "use a PEP 440 version") from None
        requires = self.strings(raw.get("requires-dist", []), f"{where}.requires-dist", '["torch"]')
        for i, req in enumerate(requires):
            self.requirement(req, f"{where}.requires-dist[{i}]")
        requires_python = raw.get("requires-python")
        if requires_python is not None:
            self.expect(requires_python, str, f"{where}.requires-python", '">=3.9"')
        extras = self.strings(raw.get("provides-extras", []), f"{where}.provides-extras", '["dev"]')
        return StaticMetadata(name, version, tuple(requires), requires_python, tuple(extras))

    # -- whole lanes -------------------------------------------------------------------

    def lane(self, name: str, body: dict, key: str, origin: str) -> Lane:
        if not LANE_NAME.fullmatch(name):
            raise self.error(key, f"invalid lane name {name!r}",
                             "lane names are lowercase letters, digits, '.', '_', '-', starting with a letter or digit")
        for required, example in (("python", 'python = "3.12"'), ("requirements", 'requirements = ["torch"]')):
            if required not in body:
                raise self.error(f"{key}.{required}", "missing", f"add {example}")
        indexes = body.get("indexes", {})
        for package, index in body.get("sources", {}).items():
            if index not in indexes:
                known = ", ".join(indexes) or "none defined"
                raise self.error(f"{key}.sources.{package}", f"unknown index name {index!r} (indexes: {known})",
                                 f"define [lane.indexes.{index}] or fix the name")
        defaults = [i.name for i in indexes.values() if i.default]
        if len(defaults) > 1:
            raise self.error(f"{key}.indexes", f"two default indexes: {', '.join(defaults)}", "mark only one default = true")
        self._no_conflicting_pins(body, key)
        return Lane(
            name=name,
            python=body["python"],
            platform=body.get("platform", "x86_64-manylinux_2_28"),
            requirements=tuple(body["requirements"]),
            constraints=tuple(body.get("constraints", ())),
            overrides=tuple(body.get("overrides", ())),
            indexes=tuple(indexes.values()),
            sources=tuple(sorted(body.get("sources", {}).items())),
            exclude_newer=body.get("exclude_newer"),
            prerelease=body.get("prerelease"),
            static_metadata=tuple(body.get("static_metadata", ())),
            env=tuple(sorted(body.get("env", {}).items())),
            shims=tuple(dict.fromkeys(body.get("shims", ()))),
            needs_cuda=body.get("needs_cuda", False),
            description=body.get("description", ""),
            origin=origin,
        )

    def _no_conflicting_pins(self, body: dict, key: str) -> None:
        """Two exact pins of one package that no version satisfies both (``==2.11`` and
        ``==2.11.0`` agree; a wildcard ``==2.11.*`` is a range, not a pin)."""
        pins: dict[str, tuple[str, str]] = {}
        for field in ("requirements", "constraints"):
            for i, text in enumerate(body.get(field, ())):
                req = Requirement(text)
                for spec in req.specifier:
                    if spec.operator not in ("==", "===") or spec.version.endswith(".*"):
                        continue
                    name = str(canonicalize_name(req.name))
                    if name in pins and not _same_version(pins[name][0], spec.version):
                        raise self.error(
                            f"{key}.{field}[{i}]",
                            f"conflicting pins for {name}: =={pins[name][0]} ({pins[name][1]}) and =={spec.version}",
                            "keep one pin",
                        )
                    pins[name] = (spec.version, f"{field}[{i}]")

    def matrix(self, raw: object) -> list[Lane]:
        raw = self.expect(raw, dict, "matrix", "a [matrix] table")
        for key in raw:
            if key not in MATRIX_KEYS:
                raise self.error(f"matrix.{key}", "unknown key", f"allowed keys: {', '.join(MATRIX_KEYS)}")
        axes_raw = self.expect(raw.get("axes", {}), dict, "matrix.axes", "[matrix.axes.<axis>.<value>] tables")
        if not axes_raw:
            raise self.error("matrix.axes", "a matrix needs at least one axis", "add [matrix.axes.<axis>.<value>]")
        axes: dict[str, dict[str, dict]] = {}
        for axis, values in axes_raw.items():
            if not LANE_NAME.fullmatch(axis):
                raise self.error(f"matrix.axes.{axis}", f"invalid axis name {axis!r}", AXIS_VALUE_HINT)
            values = self.expect(values, dict, f"matrix.axes.{axis}", "tables, one per value")
            if not values:
                raise self.error(f"matrix.axes.{axis}", "an axis needs at least one value", "add [matrix.axes.<axis>.<value>]")
            axes[axis] = {}
            for value, fragment in values.items():
                if not LANE_NAME.fullmatch(value):
                    raise self.error(f"matrix.axes.{axis}.{value}", f"invalid axis value {value!r}", AXIS_VALUE_HINT)
                axes[axis][value] = self.body(fragment, f"matrix.axes.{axis}.{value}")
        base = self.body(raw.get("base", {}), "matrix.base")
        if "description" in raw:  # the matrix's own description is every cell's unless one says otherwise
            base.setdefault("description", self.expect(raw["description"], str, "matrix.description", '"one sentence"'))
        exclude = [self._cell_rule(rule, f"matrix.exclude[{i}]", axes, full=False)
                   for i, rule in enumerate(self.expect(raw.get("exclude", []), list, "matrix.exclude", "[[matrix.exclude]] tables"))]
        include = []
        for i, rule in enumerate(self.expect(raw.get("include", []), list, "matrix.include", "[[matrix.include]] tables")):
            rule = dict(self.expect(rule, dict, f"matrix.include[{i}]", "a table"))
            extra = self.body(rule.pop("lane", {}), f"matrix.include[{i}].lane")
            include.append((self._cell_rule(rule, f"matrix.include[{i}]", axes, full=True), extra))
        template = raw.get("name", "-".join([self.path.stem] + ["{" + a + "}" for a in axes]))
        self.expect(template, str, "matrix.name", '"torch{torch}-te{te}"')
        try:
            cells = matrix_mod.expand(template=template, base=base, axes=axes, exclude=exclude, include=include)
        except matrix_mod.MatrixConflict as exc:
            raise self.error(exc.key, exc.problem, exc.fix) from None
        lanes = []
        for cell in cells:
            label = ", ".join(f"{a}={v}" for a, v in cell.values)
            lanes.append(self.lane(cell.name, cell.body, f"matrix.name ({label})", f"{self.display} [{label}]"))
        return lanes

    def _cell_rule(self, raw: object, where: str, axes: dict[str, dict], *, full: bool) -> dict[str, str]:
        rule = self.expect(raw, dict, where, "a table of axis = value")
        for axis, value in rule.items():
            if axis not in axes:
                raise self.error(f"{where}.{axis}", f"names unknown axis {axis!r}", f"axes are: {', '.join(axes)}")
            self.expect(value, str, f"{where}.{axis}", '"<value>"')
            if value not in axes[axis]:
                raise self.error(f"{where}.{axis}", f"unknown value {value!r} for axis {axis!r}",
                                 f"values are: {', '.join(axes[axis])}")
        if full and set(rule) != set(axes):
            missing = ", ".join(a for a in axes if a not in rule)
            raise self.error(where, f"an include must name every axis; missing: {missing}", "add the missing axes")
        if not rule:
            raise self.error(where, "empty rule", "name at least one axis = value")
        return dict(rule)


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:  # === arbitrary strings compare as text
        return a == b


def load_file(path: Path, root: Path | None = None) -> list[Lane]:
    display = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
    reader = _Reader(path, display)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise reader.error(None, f"not valid TOML ({exc})", "fix the syntax") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise reader.error(None, f"cannot read ({exc})") from None
    kinds = [k for k in ("lane", "matrix") if k in raw]
    extra = [k for k in raw if k not in ("lane", "matrix")]
    if extra:
        raise reader.error(extra[0], "unknown top-level key", "a lane file has [lane] or [matrix], nothing else")
    if len(kinds) != 1:
        raise reader.error(None, "a lane file holds exactly one [lane] or one [matrix] table", "split it into two files")
    if kinds[0] == "lane":
        return [reader.lane(path.stem, reader.body(raw["lane"], "lane"), "lane", display)]
    return reader.matrix(raw["matrix"])


def load_lanes(lanes_dir: Path, *, root: Path | None = None, known_shims: set[str] | None = None) -> list[Lane]:
    """All lanes of a project, in file order; names are unique across files."""
    if not lanes_dir.is_dir():
        raise ConfigError(lanes_dir, None, "no lanes folder", "create it and add a lane file such as lanes/cpu.toml")
    lanes: list[Lane] = []
    seen: dict[str, Lane] = {}
    for path in sorted(lanes_dir.glob("*.toml")):
        for lane in load_file(path, root):
            if lane.name in seen:
                raise ConfigError(lane.origin, lane.name,
                                  f"duplicate lane name {lane.name!r} (also from {seen[lane.name].origin})",
                                  "rename one lane, or change the matrix name template")
            if known_shims is not None:
                for shim in lane.shims:
                    if shim not in known_shims:
                        raise ConfigError(lane.origin, f"{lane.name}.shims", f"unknown shim {shim!r}",
                                          "use an id listed by `patchlane shims`")
            seen[lane.name] = lane
            lanes.append(lane)
    return lanes


def select(lanes: list[Lane], names: list[str]) -> list[Lane]:
    """The lanes named (all when none are), in definition order; unknown names are an error."""
    if not names:
        return list(lanes)
    by_name = {lane.name: lane for lane in lanes}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ConfigError(None, None, f"unknown lane {unknown[0]!r}", f"known lanes: {', '.join(by_name) or 'none'}")
    return [lane for lane in lanes if lane.name in set(names)]
