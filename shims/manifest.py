"""The shim manifest: ``shims/<id>/manifest.toml`` read into immutable values.

Every problem is a :class:`InputError` (the one input-error type,
:class:`shims.errors.InputError`) whose ``str()`` is one line, ``<file>: <key>: <problem> — <fix>``;
the typed getters of :mod:`shims.tomlreader` do the checking. docs/shims.md documents every key.

The shim runtime (``shims/__init__.py``) does not import this module on its fast path:
``packaging.specifiers`` alone costs ~20 ms to import, more than the whole activation budget.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path, PurePosixPath

from shims import catalogue, tomlreader
from shims.errors import InputError
from shims.gpuneeds import GpuNeeds, read_gpu_needs
from shims.model import (
    CONDITION_KINDS,
    FIX_CLASSES,
    GUARD_STATUSES,
    LINK_ROLES,
    LINKED_STATUSES,
    PATCHLESS_FIX_CLASSES,
    RETIREMENT_MODES,
    UPSTREAM_STATUSES,
    CommitInTag,
    ConditionKind,
    Guard,
    PrReleased,
    ReproducerClean,
    ReproducerSpec,
    Retirement,
    RetirementCondition,
    ShimManifest,
    Target,
    Upstream,
    UpstreamLink,
    VersionFloor,
)
from shims.tomlreader import Table, Value
from shims.wheelbuild import read_wheel_build

# the model's names too (shims.model.__all__): callers import everything about manifests from here
__all__ = [
    "CONDITION_KINDS",
    "DISTRIBUTION_NAME",
    "FIX_CLASSES",
    "GUARD_STATUSES",
    "LINKED_STATUSES",
    "LINK_ROLES",
    "MODULE_NAME",
    "PATCHLESS_FIX_CLASSES",
    "RESERVED_IDS",
    "RETIREMENT_MODES",
    "ROOTS_ENV",
    "RUNTIME_DIR",
    "SHIM_ID",
    "UPSTREAM_STATUSES",
    "CommitInTag",
    "ConditionKind",
    "Guard",
    "PrReleased",
    "ReproducerClean",
    "ReproducerSpec",
    "Retirement",
    "RetirementCondition",
    "ShimManifest",
    "Target",
    "Upstream",
    "UpstreamLink",
    "VersionFloor",
    "discover",
    "load_manifest",
    "manifest_paths",
    "parse_manifest",
    "shim_roots",
]

#: The runtime's own folder (not a catalogue: shims.catalogue finds the shop's).
RUNTIME_DIR = Path(__file__).resolve().parent

#: Environment variable naming the catalogue's folders (``os.pathsep``-separated).
ROOTS_ENV = catalogue.PATH_ENV


def _runtime_modules() -> frozenset[str]:
    """The runtime's own modules (and any sub-package that is not a shim): listed, never typed
    out."""
    import pkgutil

    return frozenset(
        info.name
        for info in pkgutil.iter_modules([str(RUNTIME_DIR)])
        if not info.ispkg or not (RUNTIME_DIR / info.name / "manifest.toml").is_file()
    )


#: Shim ids that would shadow the runtime's own modules inside the ``shims`` package.
RESERVED_IDS = _runtime_modules()

#: The longest shim id: it names a folder, a package and files under it, well under a file
#: name's 255 bytes.
MAX_SHIM_ID = 64
#: What a shim id is (a lowercase identifier, at most :data:`MAX_SHIM_ID` characters), what a
#: distribution name is (PEP 508, ASCII only) and what a dotted module name is.
SHIM_ID = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_SHIM_ID - 1}}}")
DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMPUTE_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+")
_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_LANE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


# ---------------------------------------------------------------------------------------------
# Loading


def shim_roots(root: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The folders holding shims: ``root`` if given, else the catalogue
    (:func:`shims.catalogue.roots`)."""
    if root is not None:
        return (Path(root),)
    return tuple(Path(p) for p in catalogue.roots())


def manifest_paths(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every ``<root>/<id>/manifest.toml``, sorted by id then root order."""
    found: list[Path] = []
    for base in shim_roots(root):
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            # no shim id starts with a dot: `shim new` builds a shim in a hidden folder beside
            # its place before moving it in
            if entry.name.startswith("."):
                continue
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
            raise InputError(
                _display(manifest.manifest_path),
                "id",
                f"shim id {manifest.id!r} is also defined by "
                f"{_display(seen[manifest.id].manifest_path)}",
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
    text = tomlreader.read_text(path, _display(path))
    assert text is not None
    manifest = parse_manifest(text, path)
    directory = manifest.directory
    has_patch = (directory / "patch.py").is_file()
    if check_files and not (directory / manifest.reproducer.path).is_file():
        raise InputError(
            _display(path),
            "reproducer.path",
            f"file not found: {manifest.reproducer.path}",
            "create the reproducer or fix the path",
        )
    # a guard has no patch: the shim retired, its reproducer stays as regression coverage
    needs_patch = manifest.fix_class not in PATCHLESS_FIX_CLASSES and manifest.guard is None
    if check_files and not has_patch and needs_patch:
        raise InputError(
            _display(path),
            "fix-class",
            f"{manifest.fix_class} shims need a patch.py next to the manifest",
            "add patch.py with check_shape(), probe() and apply()",
        )
    return dataclasses.replace(manifest, has_patch=has_patch)


def parse_manifest(text: str, path: str | os.PathLike[str]) -> ShimManifest:
    """Validate manifest TOML ``text`` (no file access); ``path`` names it in errors."""
    path = Path(path)
    return _manifest(tomlreader.loads(text, _display(path)), path)


# ---------------------------------------------------------------------------------------------
# One function per table; the typed getters name every key in their errors

TOP_KEYS = (
    "id",
    "title",
    "fix-class",
    "explanation",
    "numerics",
    "owner",
    "created",
    "target",
    "upstream",
    "retirement",
    "reproducer",
    "env",
    "guard",
)


def _manifest(doc: Table, path: Path) -> ShimManifest:
    doc.check_keys(TOP_KEYS)
    shim_id = doc.string("id")
    folder = path.parent.name
    if not SHIM_ID.fullmatch(shim_id):
        raise doc.error(
            "id",
            f"invalid shim id {shim_id[:80]!r}",
            f"use [a-z][a-z0-9_]*, at most {MAX_SHIM_ID} characters (it is a package name)",
        )
    if shim_id in RESERVED_IDS:
        raise doc.error(
            "id",
            f"shim id {shim_id!r} is reserved by the runtime (shims/{shim_id}.py)",
            "pick another id",
        )
    if shim_id != folder:
        raise doc.error(
            "id",
            f"id {shim_id!r} does not match its folder {folder!r}",
            f'rename the folder or set id = "{folder}"',
        )
    fix_class = doc.choice("fix-class", FIX_CLASSES)
    created = doc.need("created").date()
    target = _target(doc.table("target"), path)
    env = _env(doc, fix_class)
    return ShimManifest(
        id=shim_id,
        title=doc.string("title"),
        fix_class=fix_class,
        explanation=doc.string("explanation"),
        numerics=doc.string("numerics"),
        owner=doc.string("owner"),
        created=created,
        target=target,
        upstream=_upstream(doc.table("upstream")),
        retirement=_retirement(doc.table("retirement"), target),
        reproducer=_reproducer(doc.get("reproducer", {}).table()),
        env=env,
        directory=path.parent,
        guard=_guard(doc.get("guard", {}).table()) if "guard" in doc else None,
    )


def _distribution(table: Table, name: str, default: str | None = None) -> str:
    """A distribution name (``default``, when given, stands in for an absent key)."""
    if name not in table and default is not None:
        return default
    value = table.string(name)
    if not DISTRIBUTION_NAME.fullmatch(value):
        raise table.error(
            name,
            f"not a distribution name: {value!r}",
            'use the name pip installs, like "megatron-core"',
        )
    return value


def _target(table: Table, path: Path) -> Target:
    table.check_keys(("distribution", "module", "affected", "build"))
    module = table.string("module")
    if not MODULE_NAME.fullmatch(module):
        raise table.error(
            "module",
            f"not a module path: {module!r}",
            'use the dotted import name, like "megatron.core"',
        )
    affected = table.get("affected")
    build = table.get("build")
    return Target(
        distribution=_distribution(table, "distribution"),
        module=module,
        affected=affected.specifier() if affected is not None else None,
        build=(
            read_wheel_build(build, path.parent, f"{_display(path)} [target] build")
            if build is not None
            else None
        ),
    )


def _upstream(table: Table) -> Upstream:
    table.check_keys(("status", "links"))
    status = table.choice("status", UPSTREAM_STATUSES)
    links = []
    for link in table.get("links", []).tables():
        link.check_keys(("role", "url"))
        links.append(UpstreamLink(role=link.choice("role", LINK_ROLES), url=link.need("url").url()))
    if status in LINKED_STATUSES and not links:
        raise table.error(
            "links",
            f"status {status!r} needs a link to the upstream report or fix",
            "add [[upstream.links]] with role and url",
        )
    return Upstream(status=status, links=tuple(links))


def _retirement(table: Table, target: Target) -> Retirement:
    table.check_keys(("mode", "conditions"))
    mode = table.choice("mode", RETIREMENT_MODES, default="all")
    conditions = table.get("conditions", []).tables()
    if not conditions:
        raise table.error(
            "conditions",
            "no retirement condition: every shim must say when it can be deleted",
            'add [[retirement.conditions]] with kind = "reproducer-clean" or a version floor',
        )
    return Retirement(mode=mode, conditions=tuple(_condition(item, target) for item in conditions))


def _condition(table: Table, target: Target) -> RetirementCondition:
    # an unknown kind is an error here, naming the file and the key: never a guess
    kind = ConditionKind(table.choice("kind", CONDITION_KINDS))
    if kind is ConditionKind.VERSION_FLOOR:
        table.check_keys(("kind", "distribution", "version"))
        return VersionFloor(
            distribution=_distribution(table, "distribution", target.distribution),
            version=table.need("version").specifier(),
        )
    if kind is ConditionKind.PR_RELEASED:
        table.check_keys(("kind", "url", "distribution"))
        return PrReleased(
            url=table.need("url").url(),
            distribution=_distribution(table, "distribution", target.distribution),
        )
    if kind is ConditionKind.COMMIT_IN_TAG:
        table.check_keys(("kind", "repository", "commit"))
        commit = table.string("commit")
        if not _COMMIT.fullmatch(commit):
            raise table.error(
                "commit",
                f"not a commit sha: {commit!r}",
                "use the lowercase hex sha (7 to 64 characters)",
            )
        return CommitInTag(repository=table.need("repository").url(), commit=commit)
    table.check_keys(("kind",))
    return ReproducerClean()


def _guard(table: Table) -> Guard:
    """``[guard]``: the shim retired and its reproducer guards against the bug's return."""
    table.check_keys(
        ("status", "retired", "reason", "patch-commit", "lanes", "dropped", "drop-reason")
    )
    status = table.choice("status", GUARD_STATUSES, default="guarding")
    commit = table.string("patch-commit")
    if not _COMMIT.fullmatch(commit):
        raise table.error(
            "patch-commit",
            f"not a commit sha: {commit[:80]!r}",
            "use the lowercase hex sha of the commit that still holds patch.py",
        )
    lanes = table.get("lanes", []).strings(fix='write lanes = ["cpu", "nightly"]', empty_ok=False)
    for index, lane in enumerate(lanes):
        if not _LANE_NAME.fullmatch(lane):
            raise table.error(
                f"lanes[{index}]",
                f"not a lane name: {lane[:80]!r}",
                "use the lane's name, [a-z0-9][a-z0-9._-]*",
            )
    dropped = table.need("dropped").date() if "dropped" in table else None
    drop_reason = table.string("drop-reason", None) or ""
    if status == "dropped" and (dropped is None or not drop_reason):
        raise table.error(
            "drop-reason" if dropped is not None else "dropped",
            "a dropped guard must say when and why it was dropped",
            'run `patchlane shim drop ID --reason "…"`, which writes both',
        )
    if status == "guarding" and (dropped is not None or drop_reason):
        raise table.error(
            "status",
            "dropped and drop-reason are set but the guard is still guarding",
            'set status = "dropped" or remove dropped and drop-reason',
        )
    return Guard(
        status=status,
        retired=table.need("retired").date(),
        reason=table.string("reason"),
        patch_commit=commit,
        lanes=tuple(dict.fromkeys(lanes)),
        dropped=dropped,
        drop_reason=drop_reason,
    )


#: The longest a reproducer may run (four months): more is a typo, and no timer takes it.
MAX_TIMEOUT_S = 1e7


def _reproducer(table: Table) -> ReproducerSpec:
    table.check_keys(
        ("path", "needs-cuda", "min-compute-capability", "gpus", "packages", "timeout", "preload")
    )
    raw_path = table.string("path", None) or "reproduce.py"
    relative = PurePosixPath(raw_path)
    if (
        relative.is_absolute()
        or raw_path.startswith(("/", "\\"))
        or ".." in relative.parts
        or re.match(r"[A-Za-z]:", raw_path)
    ):
        raise table.error(
            "path",
            f"{raw_path!r} leaves the shim folder",
            'use a path inside it, like "reproduce.py"',
        )
    needs_cuda = table.get("needs-cuda", False).boolean()
    capability = table.string("min-compute-capability", None)
    if capability is not None:
        if not _COMPUTE_CAPABILITY.fullmatch(capability):
            raise table.error(
                "min-compute-capability",
                f"expected major.minor, got {capability!r}",
                'write it like "9.0"',
            )
        if "needs-cuda" in table and not needs_cuda:
            raise table.error(
                "min-compute-capability",
                "set while needs-cuda = false",
                "set needs-cuda = true or drop the capability",
            )
        needs_cuda = True
    gpus = _gpus(table, needs_cuda, capability)
    packages = table.get("packages", []).strings(
        fix='write packages = ["torch", "megatron-core"]', empty_ok=False
    )
    for index, package in enumerate(packages):
        if not DISTRIBUTION_NAME.fullmatch(package):
            raise table.error(
                f"packages[{index}]",
                f"not a distribution name: {package!r}",
                'write packages = ["torch", "megatron-core"]',
            )
    timeout = table.get("timeout", 600).number(
        positive=True,
        maximum=MAX_TIMEOUT_S,
        what=f"a positive number of seconds up to {MAX_TIMEOUT_S:.0f}",
        fix="write timeout = 600",
    )
    preload = table.get("preload", []).strings(
        fix='write preload = ["torch", "megatron.core"]', empty_ok=False
    )
    for index, module in enumerate(preload):
        if not MODULE_NAME.fullmatch(module):
            raise table.error(
                f"preload[{index}]",
                f"not a module path: {module!r}",
                'write the dotted import name, like preload = ["torch", "megatron.core"]',
            )
    return ReproducerSpec(
        path=relative,
        min_compute_capability=capability,
        packages=tuple(packages),
        timeout=float(timeout),
        preload=tuple(dict.fromkeys(preload)),
        gpus=gpus,
        needs_cuda=needs_cuda or bool(gpus and gpus.count),
    )


def _gpus(table: Table, needs_cuda: bool, capability: str | None) -> GpuNeeds | None:
    """``[reproducer] gpus``, checked against ``needs-cuda`` and ``min-compute-capability``."""
    value = table.get("gpus")
    if value is None:
        return None
    gpus = read_gpu_needs(value)
    if gpus.count and "needs-cuda" in table and not needs_cuda:
        raise table.error(
            "gpus", "set while needs-cuda = false", "set needs-cuda = true or drop gpus"
        )
    if not gpus.count and needs_cuda:
        raise table.error(
            "gpus", "0 GPUs while the reproducer needs CUDA", "ask for at least one GPU: gpus = 1"
        )
    if capability is not None and gpus.min_compute_capability is not None:
        raise table.error(
            "gpus.min-compute-capability",
            "set twice (also min-compute-capability)",
            "keep one of them",
        )
    if capability is not None:
        return dataclasses.replace(gpus, min_compute_capability=capability)
    return gpus


def _env(doc: Table, fix_class: str) -> tuple[tuple[str, str], ...]:
    value: Value | None = doc.get("env")
    if value is None:
        if fix_class == "env-constraint":
            raise doc.error(
                "env",
                "env-constraint shims must say which variables they set",
                'add [env] with NAME = "value"',
            )
        return ()
    if fix_class != "env-constraint":
        raise doc.error(
            "env",
            f"only env-constraint shims set environment variables, this one is {fix_class}",
            'set fix-class = "env-constraint" or drop [env]',
        )
    if not isinstance(value.raw, dict) or not value.raw:
        raise value.expected("a non-empty table", 'write [env] with NAME = "value"')
    settings = []
    for name, setting in value.table().entries():
        if not _ENV_NAME.fullmatch(name):
            raise doc.error(
                f"env.{name}", "not an environment variable name", "use letters, digits and _"
            )
        settings.append((name, setting.string(empty_ok=True)))
    return tuple(sorted(settings))


def _display(path: Path) -> str:
    """The path relative to the working directory when it lies under it (what users type)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
