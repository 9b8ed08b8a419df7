"""The shim manifest: ``shims/<id>/manifest.toml`` read into immutable values.

Every problem is a :class:`ManifestError` whose ``str()`` is one line,
``<file>: <key>: <problem> — <fix>``, the same shape as ``retire.errors.ConfigError``
(the runtime cannot import ``retire``). docs/shims.md documents every key.

The shim runtime (``shims/__init__.py``) does not import this module on its fast path:
``packaging.specifiers`` alone costs ~20 ms to import, more than the whole activation budget.
"""

from __future__ import annotations

import datetime
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from shims.errors import InputError
from packaging.specifiers import InvalidSpecifier, SpecifierSet

__all__ = [
    "CONDITION_KINDS",
    "DEFAULT_ROOT",
    "FIX_CLASSES",
    "LINK_ROLES",
    "RESERVED_IDS",
    "UPSTREAM_STATUSES",
    "ManifestError",
    "ReproducerSpec",
    "Retirement",
    "RetirementCondition",
    "ShimManifest",
    "Target",
    "Upstream",
    "UpstreamLink",
    "discover",
    "load_manifest",
    "manifest_paths",
    "parse_manifest",
    "shim_roots",
]

#: The folder holding the catalogue: this package.
DEFAULT_ROOT = Path(__file__).resolve().parent

#: Environment variable naming other shim roots (``os.pathsep``-separated); replaces the default.
ROOTS_ENV = "PATCHLANE_SHIMS_PATH"

FIX_CLASSES = ("source-patch", "wrapper", "compat-gate", "version-floor", "env-constraint", "packaging")
#: Fix classes whose mitigation lives outside the process (lane pins, env), so ``patch.py`` is optional.
PATCHLESS_FIX_CLASSES = frozenset({"version-floor", "env-constraint", "packaging"})
UPSTREAM_STATUSES = ("pending", "submitted", "accepted", "rejected", "not-applicable")
#: Statuses that claim an upstream conversation exists, so they must link to it.
LINKED_STATUSES = frozenset({"submitted", "accepted", "rejected"})
LINK_ROLES = ("report", "fix", "related")
RETIREMENT_MODES = ("all", "any")
CONDITION_KINDS = ("version-floor", "pr-released", "commit-in-tag", "reproducer-clean")
#: Shim ids that would shadow the runtime's own modules inside the ``shims`` package.
RESERVED_IDS = frozenset({"manifest", "reproducer"})

_ID = re.compile(r"[a-z][a-z0-9_]*")
_DIST = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMPUTE_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+")
_COMMIT = re.compile(r"[0-9a-f]{7,64}")


class ManifestError(InputError):
    """A manifest problem, rendered as one line: ``file: key: problem — fix``."""

    def __init__(self, path: str | os.PathLike[str], key: str, problem: str, fix: str) -> None:
        super().__init__(path, key, problem, fix)
        self.path = Path(path)

    def __str__(self) -> str:
        where = _display(Path(self.path))
        head = f"{where}: {self.key}: " if self.key else f"{where}: "
        return f"{head}{self.problem} — {self.fix}"


@dataclass(frozen=True)
class Target:
    """What the shim patches: the distribution that ships the bug and the module it lives in."""

    distribution: str
    module: str
    #: Versions known to carry the bug; ``None`` when unknown (the probe decides at run time).
    affected: SpecifierSet | None = None


@dataclass(frozen=True)
class UpstreamLink:
    role: str  # one of LINK_ROLES
    url: str


@dataclass(frozen=True)
class Upstream:
    """DEP-3-style state of the upstream conversation."""

    status: str  # one of UPSTREAM_STATUSES
    links: tuple[UpstreamLink, ...] = ()


@dataclass(frozen=True)
class RetirementCondition:
    """One way to learn the shim can go; which fields are set depends on ``kind``.

    - ``version-floor``: ``distribution`` released at a version in ``version`` (``>=0.18``);
    - ``pr-released``: the PR at ``url`` is merged and contained in a release of ``distribution``;
    - ``commit-in-tag``: ``commit`` of ``repository`` is contained in a release tag;
    - ``reproducer-clean``: the reproducer no longer reproduces without the shim.
    """

    kind: str
    distribution: str | None = None
    version: SpecifierSet | None = None
    url: str | None = None
    repository: str | None = None
    commit: str | None = None


@dataclass(frozen=True)
class Retirement:
    mode: str  # "all": every condition must hold; "any": one is enough
    conditions: tuple[RetirementCondition, ...]


@dataclass(frozen=True)
class ReproducerSpec:
    """Where the reproducer is (relative to the shim folder) and what the host needs to run it."""

    path: PurePosixPath = PurePosixPath("reproduce.py")
    needs_cuda: bool = False
    min_compute_capability: str | None = None
    packages: tuple[str, ...] = ()
    timeout: float = 600.0


@dataclass(frozen=True)
class ShimManifest:
    id: str
    title: str
    fix_class: str
    explanation: str
    numerics: str
    owner: str
    created: datetime.date
    target: Target
    upstream: Upstream
    retirement: Retirement
    reproducer: ReproducerSpec
    #: Variables an env-constraint shim sets, as sorted ``(name, value)`` pairs (hashable).
    env: tuple[tuple[str, str], ...] = ()
    #: The shim folder; ``patch.py`` and the reproducer are found relative to it.
    directory: Path = Path(".")
    #: Whether ``patch.py`` exists (recorded by the loader so the model stays free of I/O).
    has_patch: bool = False

    @property
    def manifest_path(self) -> Path:
        return self.directory / "manifest.toml"

    @property
    def patch_path(self) -> Path | None:
        return self.directory / "patch.py" if self.has_patch else None

    @property
    def reproducer_path(self) -> Path:
        return self.directory / self.reproducer.path

    @property
    def env_vars(self) -> dict[str, str]:
        return dict(self.env)


# ---------------------------------------------------------------------------------------------
# Loading


def shim_roots(root: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The folders holding shims: ``root`` if given, else ``$PATCHLANE_SHIMS_PATH``, else this package."""
    if root is not None:
        return (Path(root),)
    configured = os.environ.get(ROOTS_ENV, "")
    parts = [Path(p) for p in configured.split(os.pathsep) if p]
    return tuple(parts) if parts else (DEFAULT_ROOT,)


def manifest_paths(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every ``<root>/<id>/manifest.toml``, sorted by id then root order."""
    found: list[Path] = []
    for base in shim_roots(root):
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            candidate = Path(entry.path) / "manifest.toml"
            if entry.is_dir() and candidate.is_file():
                found.append(candidate)
    return found


def discover(root: str | os.PathLike[str] | None = None) -> list[ShimManifest]:
    """Load every manifest under the shim roots, sorted by id; the first bad one raises."""
    manifests = [load_manifest(path) for path in manifest_paths(root)]
    seen: dict[str, ShimManifest] = {}
    for manifest in manifests:
        if manifest.id in seen:
            raise ManifestError(
                manifest.manifest_path,
                "id",
                f"shim id {manifest.id!r} is also defined by {_display(seen[manifest.id].manifest_path)}",
                "give each shim a unique id",
            )
        seen[manifest.id] = manifest
    return sorted(manifests, key=lambda m: m.id)


def load_manifest(path: str | os.PathLike[str], *, check_files: bool = True) -> ShimManifest:
    """Read and validate one ``manifest.toml``.

    With ``check_files`` (the default) the reproducer must exist, and so must ``patch.py`` unless
    the fix class needs none; the runtime passes ``False`` (it only needs the target, and reports
    a missing patch itself).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(path, "", "file not found", "create it or fix the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, "", f"cannot read: {exc}", "check the file") from None
    manifest = parse_manifest(text, path)
    directory = manifest.directory
    has_patch = (directory / "patch.py").is_file()
    if not check_files:
        return _replace(manifest, has_patch=has_patch)
    if not (directory / manifest.reproducer.path).is_file():
        raise ManifestError(
            path,
            "reproducer.path",
            f"file not found: {manifest.reproducer.path}",
            "create the reproducer or fix the path",
        )
    if not has_patch and manifest.fix_class not in PATCHLESS_FIX_CLASSES:
        raise ManifestError(
            path,
            "fix-class",
            f"{manifest.fix_class} shims need a patch.py next to the manifest",
            "add patch.py with check_shape(), probe() and apply()",
        )
    return _replace(manifest, has_patch=has_patch)


def parse_manifest(text: str, path: str | os.PathLike[str]) -> ShimManifest:
    """Validate manifest TOML ``text`` (no file access); ``path`` names it in errors."""
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(path, "", f"invalid TOML: {exc}", "fix the syntax") from None
    return _Parser(path).manifest(data)


def _replace(manifest: ShimManifest, **changes: object) -> ShimManifest:
    import dataclasses

    return dataclasses.replace(manifest, **changes)


class _Parser:
    """Walks the TOML document; each method validates one table and names keys in errors."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str, fix: str) -> ManifestError:
        return ManifestError(self.path, key, problem, fix)

    # -- generic helpers ----------------------------------------------------------------------

    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> Mapping[str, object]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {_describe(value)}", f"write [{key}]")
        for name in value:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                hint = _close_match(name, allowed)
                fix = f"did you mean {hint!r}?" if hint else f"allowed keys: {', '.join(allowed)}"
                raise self.fail(where, f"unknown key {name!r}", fix)
        return value

    def required(self, table: Mapping[str, object], key: str, name: str) -> object:
        if name not in table:
            raise self.fail(_join(key, name), "missing", f"add {name} = …")
        return table[name]

    def string(self, table: Mapping[str, object], key: str, name: str, *, required: bool = True) -> str | None:
        if name not in table:
            if required:
                raise self.fail(_join(key, name), "missing", f'add {name} = "…"')
            return None
        value = table[name]
        if not isinstance(value, str):
            raise self.fail(_join(key, name), f"expected a string, got {_describe(value)}", "quote it")
        if not value.strip():
            raise self.fail(_join(key, name), "is empty", "write something useful or remove the key")
        return value

    def choice(self, table: Mapping[str, object], key: str, name: str, choices: tuple[str, ...], *, default: str | None = None) -> str:
        if name not in table and default is not None:
            return default
        value = self.string(table, key, name)
        assert value is not None
        if value not in choices:
            noun = name.replace("-", " ")
            raise self.fail(_join(key, name), f"unknown {noun} {value!r}", f"use one of {', '.join(choices)}")
        return value

    def url(self, table: Mapping[str, object], key: str, name: str) -> str:
        value = self.string(table, key, name)
        assert value is not None
        if not _is_http_url(value):
            raise self.fail(_join(key, name), f"not an http(s) URL: {value!r}", "write the full https:// address")
        return value

    def specifier(self, table: Mapping[str, object], key: str, name: str, *, required: bool) -> SpecifierSet | None:
        value = self.string(table, key, name, required=required)
        if value is None:
            return None
        try:
            return SpecifierSet(value)
        except InvalidSpecifier:
            raise self.fail(
                _join(key, name),
                f"bad version specifier {value!r}",
                'use PEP 440 like ">=0.18" or ">=2.4,<2.6"',
            ) from None

    def distribution(self, table: Mapping[str, object], key: str, name: str, *, required: bool = True) -> str | None:
        value = self.string(table, key, name, required=required)
        if value is not None and not _DIST.fullmatch(value):
            raise self.fail(_join(key, name), f"not a distribution name: {value!r}", 'use the name pip installs, like "megatron-core"')
        return value

    # -- tables -------------------------------------------------------------------------------

    def manifest(self, data: Mapping[str, object]) -> ShimManifest:
        self.table(
            data,
            "",
            ("id", "title", "fix-class", "explanation", "numerics", "owner", "created",
             "target", "upstream", "retirement", "reproducer", "env"),
        )
        shim_id = self.string(data, "", "id")
        assert shim_id is not None
        folder = self.path.parent.name
        if not _ID.fullmatch(shim_id):
            raise self.fail("id", f"invalid shim id {shim_id!r}", "use [a-z][a-z0-9_]* (it is a package name)")
        if shim_id in RESERVED_IDS:
            raise self.fail("id", f"shim id {shim_id!r} is reserved by the runtime", "pick another id")
        if shim_id != folder:
            raise self.fail("id", f"id {shim_id!r} does not match its folder {folder!r}", f'rename the folder or set id = "{folder}"')
        fix_class = self.choice(data, "", "fix-class", FIX_CLASSES)
        created = self.required(data, "", "created")
        if not isinstance(created, datetime.date) or isinstance(created, datetime.datetime):
            raise self.fail("created", f"expected a date, got {_describe(created)}", "write an unquoted date like 2026-04-14")
        target = self.target(self.required(data, "", "target"))
        env = self.env(data.get("env"), fix_class)
        return ShimManifest(
            id=shim_id,
            title=self.string(data, "", "title") or "",
            fix_class=fix_class,
            explanation=self.string(data, "", "explanation") or "",
            numerics=self.string(data, "", "numerics") or "",
            owner=self.string(data, "", "owner") or "",
            created=created,
            target=target,
            upstream=self.upstream(self.required(data, "", "upstream")),
            retirement=self.retirement(self.required(data, "", "retirement"), target),
            reproducer=self.reproducer(data.get("reproducer", {})),
            env=env,
            directory=self.path.parent,
        )

    def target(self, value: object) -> Target:
        table = self.table(value, "target", ("distribution", "module", "affected"))
        module = self.string(table, "target", "module")
        assert module is not None
        if not _MODULE.fullmatch(module):
            raise self.fail("target.module", f"not a module path: {module!r}", 'use the dotted import name, like "megatron.core"')
        return Target(
            distribution=self.distribution(table, "target", "distribution") or "",
            module=module,
            affected=self.specifier(table, "target", "affected", required=False),
        )

    def upstream(self, value: object) -> Upstream:
        table = self.table(value, "upstream", ("status", "links"))
        status = self.choice(table, "upstream", "status", UPSTREAM_STATUSES)
        raw_links = table.get("links", [])
        if not isinstance(raw_links, list):
            raise self.fail("upstream.links", f"expected an array of tables, got {_describe(raw_links)}", "write [[upstream.links]] entries")
        links = []
        for index, raw in enumerate(raw_links):
            key = f"upstream.links[{index}]"
            link = self.table(raw, key, ("role", "url"))
            links.append(UpstreamLink(role=self.choice(link, key, "role", LINK_ROLES), url=self.url(link, key, "url")))
        if status in LINKED_STATUSES and not links:
            raise self.fail("upstream.links", f"status {status!r} needs a link to the upstream report or fix", "add [[upstream.links]] with role and url")
        return Upstream(status=status, links=tuple(links))

    def retirement(self, value: object, target: Target) -> Retirement:
        table = self.table(value, "retirement", ("mode", "conditions"))
        mode = self.choice(table, "retirement", "mode", RETIREMENT_MODES, default="all")
        raw = table.get("conditions", [])
        if not isinstance(raw, list):
            raise self.fail("retirement.conditions", f"expected an array of tables, got {_describe(raw)}", "write [[retirement.conditions]] entries")
        if not raw:
            raise self.fail(
                "retirement.conditions",
                "no retirement condition: every shim must say when it can be deleted",
                'add [[retirement.conditions]] with kind = "reproducer-clean" or a version floor',
            )
        conditions = tuple(self.condition(item, f"retirement.conditions[{i}]", target) for i, item in enumerate(raw))
        return Retirement(mode=mode, conditions=conditions)

    def condition(self, value: object, key: str, target: Target) -> RetirementCondition:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {_describe(value)}", "write [[retirement.conditions]]")
        kind = self.choice(value, key, "kind", CONDITION_KINDS)
        if kind == "version-floor":
            table = self.table(value, key, ("kind", "distribution", "version"))
            return RetirementCondition(
                kind=kind,
                distribution=self.distribution(table, key, "distribution", required=False) or target.distribution,
                version=self.specifier(table, key, "version", required=True),
            )
        if kind == "pr-released":
            table = self.table(value, key, ("kind", "url", "distribution"))
            return RetirementCondition(
                kind=kind,
                url=self.url(table, key, "url"),
                distribution=self.distribution(table, key, "distribution", required=False) or target.distribution,
            )
        if kind == "commit-in-tag":
            table = self.table(value, key, ("kind", "repository", "commit"))
            commit = self.string(table, key, "commit")
            assert commit is not None
            if not _COMMIT.fullmatch(commit):
                raise self.fail(f"{key}.commit", f"not a commit sha: {commit!r}", "use the lowercase hex sha (7 to 64 characters)")
            return RetirementCondition(kind=kind, repository=self.url(table, key, "repository"), commit=commit)
        self.table(value, key, ("kind",))
        return RetirementCondition(kind=kind)

    def reproducer(self, value: object) -> ReproducerSpec:
        table = self.table(value, "reproducer", ("path", "needs-cuda", "min-compute-capability", "packages", "timeout"))
        raw_path = self.string(table, "reproducer", "path", required=False) or "reproduce.py"
        relative = PurePosixPath(raw_path)
        if relative.is_absolute() or raw_path.startswith(("/", "\\")) or ".." in relative.parts or re.match(r"[A-Za-z]:", raw_path):
            raise self.fail("reproducer.path", f"{raw_path!r} leaves the shim folder", 'use a path inside it, like "reproduce.py"')
        needs_cuda = table.get("needs-cuda", False)
        if not isinstance(needs_cuda, bool):
            raise self.fail("reproducer.needs-cuda", f"expected true or false, got {_describe(needs_cuda)}", "write needs-cuda = true")
        capability = self.string(table, "reproducer", "min-compute-capability", required=False)
        if capability is not None:
            if not _COMPUTE_CAPABILITY.fullmatch(capability):
                raise self.fail("reproducer.min-compute-capability", f"expected major.minor, got {capability!r}", 'write it like "9.0"')
            if "needs-cuda" in table and not needs_cuda:
                raise self.fail("reproducer.min-compute-capability", "set while needs-cuda = false", "set needs-cuda = true or drop the capability")
            needs_cuda = True
        packages = table.get("packages", [])
        if not isinstance(packages, list) or not all(isinstance(p, str) and _DIST.fullmatch(p) for p in packages):
            raise self.fail("reproducer.packages", f"expected a list of distribution names, got {packages!r}", 'write packages = ["torch", "megatron-core"]')
        timeout = table.get("timeout", 600)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise self.fail("reproducer.timeout", f"expected a positive number of seconds, got {_describe(timeout)}", "write timeout = 600")
        return ReproducerSpec(
            path=relative,
            needs_cuda=needs_cuda,
            min_compute_capability=capability,
            packages=tuple(packages),
            timeout=float(timeout),
        )

    def env(self, value: object, fix_class: str) -> tuple[tuple[str, str], ...]:
        if value is None:
            if fix_class == "env-constraint":
                raise self.fail("env", "env-constraint shims must say which variables they set", 'add [env] with NAME = "value"')
            return ()
        if fix_class != "env-constraint":
            raise self.fail("env", f"only env-constraint shims set environment variables, this one is {fix_class}", 'set fix-class = "env-constraint" or drop [env]')
        if not isinstance(value, dict) or not value:
            raise self.fail("env", f"expected a non-empty table, got {_describe(value)}", 'write [env] with NAME = "value"')
        for name, setting in value.items():
            if not _ENV_NAME.fullmatch(name):
                raise self.fail(f"env.{name}", "not an environment variable name", "use letters, digits and _")
            if not isinstance(setting, str):
                raise self.fail(f"env.{name}", f"expected a string, got {_describe(setting)}", "quote it")
        return tuple(sorted(value.items()))


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _describe(value: object) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_http_url(value: str) -> bool:
    if any(ch.isspace() for ch in value):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _close_match(name: str, allowed: tuple[str, ...]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _display(path: Path) -> str:
    """The path relative to the working directory when it lies under it (what users type)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
