"""Read ``lanes/*.toml`` into :class:`~retire.lanes.Lane` values, rejecting bad input in one line.

A file holds either one lane (``[lane]``; the lane is named after the file) or one matrix
(``[matrix]``; its cells become lanes). See docs/lanes.md for every key.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from retire.core.errors import InputError
from retire.core.project import Project
from retire.lanes import matrix as matrix_mod
from retire.lanes.model import (
    ENV_NAME,
    INDEX_NAME,
    LANE_NAME,
    LANE_NAME_MAX,
    MAX_SHIM_ID,
    PLATFORM,
    PRERELEASE_MODES,
    PYTHON_VERSION,
    SHIM_ID,
    Cooldown,
    Freeze,
    IndexSpec,
    Lane,
    LanePolicy,
    PackageFreeze,
    StaticMetadata,
)
from retire.lanes.revisions import parse_revisions
from shims import times, tomlreader
from shims.gpuneeds import GpuNeeds, read_gpu_needs
from shims.tomlreader import Table, Value

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
    "exclude-newer-package": "exclude_newer_package",
    "prerelease": "prerelease",
    "static-metadata": "static_metadata",
    "env": "env",
    "shims": "shims",
    "needs-cuda": "needs_cuda",
    "gpus": "gpus",
    "policy": "policy",
    "revisions": "revisions",
}
MATRIX_KEYS = ("name", "description", "base", "axes", "exclude", "include")
AXIS_VALUE_HINT = "axis names and values are lowercase: letters, digits, '.', '_', '-'"
# a quoted date or time, not a span
_DATE_TEXT = re.compile(r"\d{4}-")
# PEP 508 / PEP 503
_PROJECT_NAME = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
#: The most cells one matrix may expand to (each is a lane with its own lock).
MAX_CELLS = 4096


def _as(example: str) -> str:
    return f"write it as {example}"


def _or_default(table: Table, name: str, default: object) -> Value:
    """The value of ``name`` in ``table``, or ``default`` read as if the file had written it."""
    found = table.get(name)
    return (
        found if found is not None else Value(default, tomlreader.join(table.key, name), table.name)
    )


def _requires_python(value: Value) -> str:
    """A static ``requires-python``, as written: a PEP 440 specifier, checked when the lane is
    read rather than when uv reads it at lock time."""
    text = value.string(fix=_as('">=3.9"'), empty_ok=True)
    value.specifier(fix=_as('a PEP 440 specifier such as ">=3.9"'))
    return text


class _Reader:
    """Validates one file; every error names this file and the key path."""

    def __init__(self, path: Path, display: str) -> None:
        self.path = path
        self.display = display

    def error(self, key: str | None, problem: str, fix: str | None = None) -> InputError:
        return InputError(self.display, key, problem, fix)

    # -- one lane body (also a matrix base, axis value or include fragment) -------------

    def body(self, value: Value) -> dict:
        table = value.table(fix=_as("a table")).check_keys(BODY_KEYS)
        return {BODY_KEYS[key]: self._value(key, item) for key, item in table.entries()}

    def _value(self, key: str, value: Value) -> object:
        """One body key's value, checked by the reader of that key."""
        if key == "description":
            return value.string(fix=_as('"one sentence"'), empty_ok=True)
        if key == "python":
            return self._python(value)
        if key == "platform":
            return self._platform(value)
        if key in ("requirements", "constraints", "overrides"):
            return [
                item.requirement()
                for item in value.items(fix=_as('a list of requirements such as ["torch==2.9.1"]'))
            ]
        if key == "indexes":
            return self._indexes(value)
        if key == "sources":
            return self._sources(value)
        if key == "exclude-newer":
            return self._freeze(value, exempt_ok=False)
        if key == "exclude-newer-package":
            return self._package_freezes(value)
        if key == "prerelease":
            return value.choice(PRERELEASE_MODES, noun="pre-release mode")
        if key == "static-metadata":
            return [
                self._static(item)
                for item in value.tables(fix=_as("an array of tables [[lane.static-metadata]]"))
            ]
        if key == "env":
            return self._env(value)
        if key == "shims":
            return self._shims(value)
        if key == "needs-cuda":
            return value.boolean(fix=_as("true or false"))
        if key == "gpus":
            return read_gpu_needs(value)
        if key == "policy":
            return LanePolicy(value.choice(tuple(LanePolicy), noun="lane policy"))
        # a table by distribution, so matrix cells merge it like sources
        if key == "revisions":
            revisions = parse_revisions(value.raw, self.display, value.key, here=self.path.parent)
            return {r.distribution: r for r in revisions}
        # BODY_KEYS and this dispatch list the same keys
        raise AssertionError(key)

    def _python(self, value: Value) -> str:
        text = value.string(fix=_as('a quoted version such as "3.12"'), empty_ok=True)
        if not PYTHON_VERSION.fullmatch(text):
            raise value.error(
                f"invalid Python version {text!r}",
                'use the major.minor of a CPython that exists, 3.8 to 3.19, such as "3.12"',
            )
        return text

    def _platform(self, value: Value) -> str:
        text = value.string(fix=_as('"x86_64-manylinux_2_28"'), empty_ok=True)
        if not PLATFORM.fullmatch(text):
            raise value.error(
                f"unknown target platform {text!r}",
                "use a uv --python-platform target such as x86_64-manylinux_2_28 or linux",
            )
        return text

    def _sources(self, value: Value) -> dict[str, str]:
        """Package → the name of the index it is taken from."""
        table = value.table(fix=_as('{ torch = "pytorch-nightly" }'))
        return {
            str(canonicalize_name(package)): index.string(fix=_as('"<index name>"'), empty_ok=True)
            for package, index in table.entries()
        }

    def _package_freezes(self, value: Value) -> dict[str, Freeze]:
        """Package → its own freeze (``false``: not frozen at all)."""
        table = value.table(fix=_as("a table such as { torch = false, numpy = 2026-11-01 }"))
        for package, item in table.entries():
            if not _PROJECT_NAME.fullmatch(package):
                raise item.error(
                    f"not a package name: {package!r}",
                    "use the name as the index lists it, e.g. torch",
                )
        return {
            str(canonicalize_name(package)): self._freeze(item, exempt_ok=True)
            for package, item in table.entries()
        }

    def _env(self, value: Value) -> dict[str, str]:
        env = {}
        for name, item in value.table(fix=_as('{ NAME = "value" }')).entries():
            if not ENV_NAME.fullmatch(name):
                raise item.error(
                    "invalid environment variable name", "use UPPER_CASE letters, digits and _"
                )
            env[name] = item.string(fix=_as('a quoted string such as "1"'), empty_ok=True)
        return env

    def _shims(self, value: Value) -> list[str]:
        ids = value.strings(fix=_as('["shim_id", …]'))
        for i, shim in enumerate(ids):
            if not SHIM_ID.fullmatch(shim):
                raise self.error(
                    f"{value.key}[{i}]",
                    f"invalid shim id {shim[:80]!r}",
                    "shim ids look like dsa_indexer_memory "
                    f"(a lowercase identifier, at most {MAX_SHIM_ID} characters)",
                )
        return ids

    def _freeze(self, value: Value, *, exempt_ok: bool) -> Freeze:
        """A date or time (UTC when it names no offset), a span before lock time such as
        ``"7 days"``, or — for one package — ``false``: not frozen at all."""
        examples = '2026-11-15, 2026-11-15T09:00:00Z, "7 days" or "24 hours"' + (
            ", or false" if exempt_ok else ""
        )
        if isinstance(value.raw, bool):
            if exempt_ok and value.raw is False:
                return None
            raise value.error(
                f"{str(value.raw).lower()} is not a cutoff",
                "write false to exempt the package from the freeze, or a date"
                if exempt_ok
                else f"write {examples}",
            )
        if isinstance(value.raw, str) and not _DATE_TEXT.match(value.raw.strip()):
            try:
                return Cooldown(times.parse_span(value.raw))
            except times.TimeError as exc:
                raise value.error(str(exc), f"write {examples}") from None
        return value.moment(fix=f"write {examples}")

    def _indexes(self, value: Value) -> dict[str, IndexSpec]:
        out = {}
        for name, item in value.table(fix=_as("[lane.indexes.<name>] tables")).entries():
            if not INDEX_NAME.fullmatch(name):
                raise item.error(
                    f"invalid index name {name!r}", "use lowercase letters, digits, '.', '_', '-'"
                )
            spec = item.table(fix=_as("a table with url and/or default")).check_keys(
                ("url", "default")
            )
            url = spec.get("url")
            out[name] = IndexSpec(
                name=name,
                url=url.url(
                    schemes=("http", "https", "file"),
                    what="a URL",
                    fix="use an http(s):// or file:// URL",
                )
                if url is not None
                else None,
                default=_or_default(spec, "default", False).boolean(fix=_as("true or false")),
            )
        return out

    def _static(self, table: Table) -> StaticMetadata:
        table.check_keys(("name", "provides-extras", "requires-dist", "requires-python", "version"))
        for key in ("name", "version"):
            table.need(key, fix="static metadata needs name and version")
        name = table.need("name").string(fix=_as('"mamba-ssm"'), empty_ok=True)
        version = table.need("version").version()
        requires = [
            item.requirement()
            for item in _or_default(table, "requires-dist", []).items(fix=_as('["torch"]'))
        ]
        requires_python = table.get("requires-python")
        extras = _or_default(table, "provides-extras", []).strings(fix=_as('["dev"]'))
        return StaticMetadata(
            name,
            version,
            tuple(requires),
            _requires_python(requires_python) if requires_python else None,
            tuple(extras),
        )

    # -- whole lanes -------------------------------------------------------------------

    def lane(self, name: str, body: dict, key: str, origin: str) -> Lane:
        if not LANE_NAME.fullmatch(name):
            raise self.error(
                key,
                f"invalid lane name {name!r}",
                "lane names are lowercase letters, digits, '.', '_', '-', starting with a letter "
                "or digit, "
                f"at most {LANE_NAME_MAX} characters",
            )
        for required, example in (
            ("python", 'python = "3.12"'),
            ("requirements", 'requirements = ["torch"]'),
        ):
            if required not in body:
                raise self.error(f"{key}.{required}", "missing", f"add {example}")
        indexes = body.get("indexes", {})
        for package, index in body.get("sources", {}).items():
            if index not in indexes:
                known = ", ".join(indexes) or "none defined"
                raise self.error(
                    f"{key}.sources.{package}",
                    f"unknown index name {index!r} (indexes: {known})",
                    f"define [lane.indexes.{index}] or fix the name",
                )
        defaults = [i.name for i in indexes.values() if i.default]
        if len(defaults) > 1:
            raise self.error(
                f"{key}.indexes",
                f"two default indexes: {', '.join(defaults)}",
                "mark only one default = true",
            )
        self._no_conflicting_pins(body, key)
        self._gpus_agree(body, key)
        return Lane(
            name=name,
            python=body["python"],
            platform=body.get("platform", "x86_64-manylinux_2_28"),
            requirements=tuple(body["requirements"]),
            constraints=tuple(body.get("constraints", ())),
            overrides=tuple(body.get("overrides", ())),
            indexes=tuple(indexes.values()),
            sources=tuple(sorted(body.get("sources", {}).items())),
            exclude_newer=freeze
            if isinstance(freeze := body.get("exclude_newer"), datetime)
            else None,
            cooldown=freeze if isinstance(freeze, Cooldown) else None,
            exclude_newer_package=tuple(
                PackageFreeze(name, when)
                for name, when in sorted(body.get("exclude_newer_package", {}).items())
            ),
            prerelease=body.get("prerelease"),
            static_metadata=tuple(body.get("static_metadata", ())),
            env=tuple(sorted(body.get("env", {}).items())),
            shims=tuple(dict.fromkeys(body.get("shims", ()))),
            needs_cuda=body.get("needs_cuda", False) or bool(body.get("gpus", GpuNeeds()).count),
            gpus=body.get("gpus"),
            policy=body.get("policy", LanePolicy.FOLLOW),
            description=body.get("description", ""),
            revisions=tuple(
                sorted(body.get("revisions", {}).values(), key=lambda r: r.distribution)
            ),
            origin=origin,
            file=self.display,
        )

    def _gpus_agree(self, body: dict, key: str) -> None:
        """``gpus`` and ``needs-cuda`` say the same thing, and the GPUs a lane sees are given
        by the run (``CUDA_VISIBLE_DEVICES``), never fixed in its env."""
        gpus = body.get("gpus")
        if gpus is not None and gpus.count and body.get("needs_cuda") is False:
            raise self.error(
                f"{key}.gpus", "set while needs-cuda = false", "set needs-cuda = true or drop gpus"
            )
        if gpus is not None and not gpus.count and body.get("needs_cuda"):
            raise self.error(
                f"{key}.gpus",
                "0 GPUs on a needs-cuda lane",
                "ask for at least one GPU: gpus = 1, or set needs-cuda = false",
            )
        if "CUDA_VISIBLE_DEVICES" in body.get("env", {}):
            raise self.error(
                f"{key}.env.CUDA_VISIBLE_DEVICES",
                "a run gives each lane its own GPUs",
                "drop it and say what the lane needs: gpus = 2 (docs/lanes.md, GPUs)",
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
                            f"conflicting pins for {name}: =={pins[name][0]} ({pins[name][1]}) and "
                            f"=={spec.version}",
                            "keep one pin",
                        )
                    pins[name] = (spec.version, f"{field}[{i}]")

    def matrix(self, value: Value) -> list[Lane]:
        raw = value.table(fix=_as("a [matrix] table")).check_keys(MATRIX_KEYS)
        axes = self._axes(raw)
        base = self.body(_or_default(raw, "base", {}))
        # the matrix's own description is every cell's unless one says otherwise
        if "description" in raw:
            base.setdefault(
                "description",
                raw.need("description").string(fix=_as('"one sentence"'), empty_ok=True),
            )
        exclude = [
            self._cell_rule(rule.table(fix=_as("a table of axis = value")), axes, full=False)
            for rule in _or_default(raw, "exclude", []).items(fix=_as("[[matrix.exclude]] tables"))
        ]
        include = []
        for item in _or_default(raw, "include", []).items(fix=_as("[[matrix.include]] tables")):
            rule = item.table(fix=_as("a table"))
            extra = self.body(_or_default(rule, "lane", {}))
            picked = Table({k: v for k, v in rule.data.items() if k != "lane"}, rule.key, rule.name)
            include.append((self._cell_rule(picked, axes, full=True), extra))
        template = raw.string(
            "name",
            "-".join([self.path.stem] + ["{" + a + "}" for a in axes]),
            fix=_as('"torch{torch}-te{te}"'),
            empty_ok=True,
        )
        try:
            cells = matrix_mod.expand(
                template=template, base=base, axes=axes, exclude=exclude, include=include
            )
        except matrix_mod.MatrixConflictError as exc:
            raise self.error(exc.key, exc.problem, exc.fix) from None
        # a matrix that silently defines no lane would drop its cells from every run
        if not cells:
            raise self.error(
                "matrix.exclude",
                "the excludes remove every cell: the matrix defines no lane",
                "drop an exclude, or delete the file",
            )
        lanes = []
        for cell in cells:
            label = ", ".join(f"{a}={v}" for a, v in cell.values)
            lanes.append(
                self.lane(
                    cell.name, cell.body, f"matrix.name ({label})", f"{self.display} [{label}]"
                )
            )
        return lanes

    def _axes(self, raw: Table) -> dict[str, dict[str, dict]]:
        """Axis → value → the lane body that value sets; at most ``MAX_CELLS`` combinations."""
        axes_raw = _or_default(raw, "axes", {}).table(
            fix=_as("[matrix.axes.<axis>.<value>] tables")
        )
        if not len(axes_raw):
            raise self.error(
                "matrix.axes",
                "a matrix needs at least one axis",
                "add [matrix.axes.<axis>.<value>]",
            )
        axes: dict[str, dict[str, dict]] = {}
        for axis, item in axes_raw.entries():
            if not LANE_NAME.fullmatch(axis):
                raise item.error(f"invalid axis name {axis!r}", AXIS_VALUE_HINT)
            values = item.table(fix=_as("tables, one per value"))
            if not len(values):
                raise item.error(
                    "an axis needs at least one value", "add [matrix.axes.<axis>.<value>]"
                )
            axes[axis] = {}
            for name, fragment in values.entries():
                if not LANE_NAME.fullmatch(name):
                    raise fragment.error(f"invalid axis value {name!r}", AXIS_VALUE_HINT)
                axes[axis][name] = self.body(fragment)
        count = math.prod(len(values) for values in axes.values())
        if count > MAX_CELLS:
            raise self.error(
                "matrix.axes",
                f"expands to {count} cells, more than {MAX_CELLS}",
                "split the matrix, or exclude cells by fewer axis values",
            )
        return axes

    def _cell_rule(self, rule: Table, axes: dict[str, dict], *, full: bool) -> dict[str, str]:
        chosen: dict[str, str] = {}
        for axis, value in rule.entries():
            if axis not in axes:
                raise value.error(f"names unknown axis {axis!r}", f"axes are: {', '.join(axes)}")
            text = value.string(fix=_as('"<value>"'), empty_ok=True)
            if text not in axes[axis]:
                raise value.error(
                    f"unknown value {text!r} for axis {axis!r}",
                    f"values are: {', '.join(axes[axis])}",
                )
            chosen[axis] = text
        if full and set(rule) != set(axes):
            missing = ", ".join(a for a in axes if a not in rule)
            raise self.error(
                rule.key,
                f"an include must name every axis; missing: {missing}",
                "add the missing axes",
            )
        if not len(rule):
            raise self.error(rule.key, "empty rule", "name at least one axis = value")
        return chosen


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    # InvalidVersion: === arbitrary strings compare as text
    except ValueError:
        return a == b


def load_file(path: Path, root: Path | None = None) -> list[Lane]:
    display = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
    reader = _Reader(path, display)
    doc = tomlreader.read(path, display).check_keys(
        ("lane", "matrix"), fix="a lane file has [lane] or [matrix], nothing else"
    )
    if len(doc) != 1:
        raise reader.error(
            None,
            "a lane file holds exactly one [lane] or one [matrix] table",
            "split it into two files",
        )
    if "lane" in doc:
        return [reader.lane(path.stem, reader.body(doc.need("lane")), "lane", display)]
    return reader.matrix(doc.need("matrix"))


def load_lanes(
    lanes_dir: Path, *, root: Path | None = None, known_shims: set[str] | None = None
) -> list[Lane]:
    """All lanes of a project, in file order; names are unique across files."""
    if not lanes_dir.is_dir():
        raise InputError(
            lanes_dir,
            None,
            "no lanes folder",
            "create it and add a lane file such as lanes/cpu.toml",
        )
    lanes: list[Lane] = []
    seen: dict[str, Lane] = {}
    for path in sorted(lanes_dir.glob("*.toml")):
        for lane in load_file(path, root):
            if lane.name in seen:
                raise InputError(
                    lane.origin,
                    lane.name,
                    f"duplicate lane name {lane.name!r} (also from {seen[lane.name].origin})",
                    "rename one lane, or change the matrix name template",
                )
            if known_shims is not None:
                for shim in lane.shims:
                    if shim not in known_shims:
                        raise InputError(
                            lane.origin,
                            f"{lane.name}.shims",
                            f"unknown shim {shim!r}",
                            "use an id listed by `patchlane shim list`",
                        )
            seen[lane.name] = lane
            lanes.append(lane)
    return lanes


def project_lanes(project: Project) -> list[Lane]:
    """Every lane of the project's ``lanes/``, with shim ids checked against its catalogue."""
    return load_lanes(project.lanes_dir, root=project.root, known_shims=project.shim_ids())


def select(lanes: list[Lane], names: list[str]) -> list[Lane]:
    """The lanes named (all when none are), in definition order; unknown names are an error."""
    if not names:
        return list(lanes)
    by_name = {lane.name: lane for lane in lanes}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise InputError(
            None,
            None,
            f"unknown lane {unknown[0]!r}",
            f"known lanes: {', '.join(by_name) or 'none'}",
        )
    return [lane for lane in lanes if lane.name in set(names)]
