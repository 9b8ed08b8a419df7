"""patchlane's shim runtime: apply each shim once, when its target is imported, if still needed.

Usage in a training process (as early as possible, before the targets are imported)::

    import shims
    shims.activate()

The shims are the shop's catalogue, found by :mod:`shims.catalogue`: ``$PATCHLANE_SHIMS_PATH``,
else ``[catalogue] path`` of the nearest ``patchlane.toml`` (default ``shims/``), else none — never
this installed package. For every shim ``<catalogue>/<id>/`` the runtime waits for ``[target]
module`` to be imported (or acts at once if it already is), then calls
``patch.check_shape(module)`` (a mismatch: not applied, loud warning), ``patch.probe(module)``
(``None``: upstream is fine, not applied) and ``patch.apply(module)``. Environment variables:

- ``PATCHLANE_SHIMS_PATH``: the catalogue's folders (``os.pathsep``-separated), e.g. in a training
image;
- ``PATCHLANE_SHIMS_DISABLE``: comma-separated shim ids not to activate;
- ``PATCHLANE_STRICT=1`` (or ``PATCHLANE_SHIMS_STRICT=1``): no catalogue found, shape
  mismatches, patch errors and bad manifests raise :class:`ShimError` instead of warning (for CI).

No catalogue at all is never silent: :func:`activate` warns once
(:class:`CatalogueNotFoundWarning`, naming where it looked).

Importing this package imports nothing beyond what the interpreter has already loaded but the
index entry's field names (``shims._entry``, no imports of its own); activation adds
``shims.catalogue`` and ``shims._index``, the validators only on a cache miss, ``warnings`` only
to warn. The manifests are read through a small index cached in the project's ``.patchlane/``
(or the user's cache folder), so activation costs a directory listing and two ``stat`` calls per
shim.
"""

# not threading: that would pull functools and collections into every process
import _thread
import os
import sys

from shims._entry import DIST, ENV, ERROR, FIX_CLASS, HAS_PATCH, ID, MODULE, Entry

# The annotations below name these in strings: `typing` and importlib's machinery stay unloaded.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Literal, Self

    #: A shim's state in this process (the values of :data:`STATES`).
    State = Literal[
        "inactive",
        "pending-import",
        "applied",
        "not-needed",
        "shape-mismatch",
        "disabled",
        "overridden",
        "lane-only",
        "error",
    ]

__all__ = [
    "DISABLE_ENV",
    "PATH_ENV",
    "STATES",
    "STRICT_ENV",
    "STRICT_ENVS",
    "CatalogueNotFoundWarning",
    "ShimError",
    "ShimNotAppliedWarning",
    "ShimStatus",
    "activate",
    "env_constraints",
    "status",
]

# shims.catalogue.PATH_ENV (not imported here: import shims stays free)
PATH_ENV = "PATCHLANE_SHIMS_PATH"
DISABLE_ENV = "PATCHLANE_SHIMS_DISABLE"
STRICT_ENV = "PATCHLANE_SHIMS_STRICT"
#: Either turns warnings into :class:`ShimError`: ``PATCHLANE_STRICT`` is the one CI sets for
#: every part of patchlane, ``PATCHLANE_SHIMS_STRICT`` the runtime's own older name.
STRICT_ENVS = ("PATCHLANE_STRICT", STRICT_ENV)

#: Every state a shim can be in, in this process.
STATES: "tuple[State, ...]" = (
    # activate() has not been called
    "inactive",
    # waiting for its target module to be imported
    "pending-import",
    # patch applied (or, for env-constraint shims, variables in effect)
    "applied",
    # probe found the broken behaviour absent
    "not-needed",
    # the target no longer has the shape the patch was written for
    "shape-mismatch",
    # PATCHLANE_SHIMS_DISABLE, or not selected by activate(only=...)
    "disabled",
    # env-constraint variable already set to another value; the environment wins
    "overridden",
    # version-floor / packaging shim without patch.py: the lane's pins carry it
    "lane-only",
    # bad manifest, or patch.py raised
    "error",
)


class ShimStatus(tuple[str, "State", str, str, str, str]):
    """One shim's state in this process and why; ``target`` is the module, ``distribution`` ships
    it.

    An immutable tuple with named fields (a hand-written namedtuple: creating one with
    ``collections.namedtuple`` costs more than the rest of ``import shims``).
    """

    __slots__ = ()
    _fields = ("id", "state", "reason", "target", "fix_class", "distribution")

    def __new__(
        cls,
        id: str,
        state: "State",
        reason: str,
        target: str,
        fix_class: str,
        distribution: str,
    ) -> "Self":
        return tuple.__new__(cls, (id, state, reason, target, fix_class, distribution))

    @property
    def id(self) -> str:
        return self[0]

    @property
    def state(self) -> "State":
        return self[1]

    @property
    def reason(self) -> str:
        return self[2]

    @property
    def target(self) -> str:
        return self[3]

    @property
    def fix_class(self) -> str:
        return self[4]

    @property
    def distribution(self) -> str:
        return self[5]

    def _asdict(self) -> dict[str, str]:
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        return (
            "ShimStatus("
            + ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True))
            + ")"
        )


class ShimError(RuntimeError):
    """A shim could not be applied and strict mode (``PATCHLANE_SHIMS_STRICT=1``) is on."""


class ShimNotAppliedWarning(UserWarning):
    """A shim was not applied because its target changed shape or its patch failed."""


class CatalogueNotFoundWarning(UserWarning):
    """:func:`activate` found no shim catalogue: the process runs with no shim at all."""


_PATCHLESS = frozenset({"version-floor", "env-constraint", "packaging"})

_lock = _thread.RLock()
_activated = False
_states: dict[str, ShimStatus] = {}
# target module -> index entries still to apply
_waiting: dict[str, list[Entry]] = {}
_env: dict[str, str] = {}
# the installed _ShimFinder, while some shim still waits for its target
_finder: "_ShimFinder | None" = None


# ---------------------------------------------------------------------------------------------
# Public API


def activate(
    only: set[str] | frozenset[str] | list[str] | tuple[str, ...] | None = None,
) -> dict[str, ShimStatus]:
    """Install the import hook for every shim (or only the ids in ``only``); returns :func:`status`.

    Idempotent: a second call changes nothing. Env-constraint variables are set with
    ``os.environ.setdefault`` so a value the launcher, the lane or the user chose explicitly
    wins over the shim (that is how one re-tests an upstream fix with the constraint lifted);
    such a shim reports ``overridden``.
    """
    global _activated, _finder
    with _lock:
        if _activated:
            return status()
        strict = _strict()
        entries = _load_index(warn=True)
        known = {entry[ID] for entry in entries}
        selected = None if only is None else set(only)
        if selected is not None and selected - known:
            missing = ", ".join(sorted(selected - known))
            raise ShimError(
                f"unknown shim id(s): {missing} (known: {', '.join(sorted(known)) or 'none'})"
            )
        disabled = {
            part.strip() for part in os.environ.get(DISABLE_ENV, "").split(",") if part.strip()
        }

        # Activated before anything can raise: a retry after a strict ShimError must not queue
        # the shims that were already enabled a second time.
        _activated = True
        try:
            for entry in entries:
                shim_id = entry[ID]
                # Selection first: a broken shim nobody asked for must not stop the others.
                if shim_id in disabled:
                    _set(entry, "disabled", f"listed in {DISABLE_ENV}")
                elif selected is not None and shim_id not in selected:
                    _set(entry, "disabled", "not selected by activate(only=...)")
                elif entry[ERROR] is not None:
                    _set(entry, "error", entry[ERROR])
                    _complain(entry, entry[ERROR], strict, fix="")
                else:
                    _enable(entry, strict)
        finally:
            if _waiting and _finder is None:
                _finder = _ShimFinder()
                sys.meta_path.insert(0, _finder)
        # Targets imported before activate(): act now (outside the loop so errors stay per shim).
        for module_name in list(_waiting):
            module = sys.modules.get(module_name)
            if module is not None:
                _on_imported(module_name, module)
        return status()


def status() -> dict[str, ShimStatus]:
    """Every shim's :class:`ShimStatus` in this process, by id (``inactive`` before activate())."""
    with _lock:
        if _activated:
            return dict(sorted(_states.items()))
        result = {}
        for entry in _load_index():
            reason = entry[ERROR] or "shims.activate() was not called"
            result[entry[ID]] = ShimStatus(
                entry[ID], "inactive", reason, entry[MODULE], entry[FIX_CLASS], entry[DIST]
            )
        return result


def env_constraints() -> dict[str, str]:
    """The merged ``[env]`` of all env-constraint shims (disabled ones excluded), for launchers.

    Before :func:`activate`, every valid env-constraint shim counts; when two shims disagree on a
    variable, the one with the smaller id wins (the other reports ``overridden`` once activated).
    """
    with _lock:
        if _activated:
            return dict(_env)
        disabled = {
            part.strip() for part in os.environ.get(DISABLE_ENV, "").split(",") if part.strip()
        }
        merged: dict[str, str] = {}
        for entry in _load_index():
            if entry[ERROR] is None and entry[ID] not in disabled:
                for name, value in entry[ENV]:
                    merged.setdefault(name, value)
        return merged


# ---------------------------------------------------------------------------------------------
# Activation


def _enable(entry: Entry, strict: bool) -> None:
    notes = []
    overridden = []
    for name, value in entry[ENV]:
        chosen = _env.get(name, value)
        if chosen != value:
            overridden.append(f"{name}={chosen!r} chosen by another shim, wanted {value!r}")
            continue
        actual = os.environ.setdefault(name, value)
        # what is in effect: launchers copy env_constraints() to their ranks
        _env[name] = actual
        if actual != value:
            overridden.append(f"{name}={actual!r} set by the environment, shim wants {value!r}")
        else:
            notes.append(f"{name}={value}")
    if entry[ENV] and entry[MODULE] in sys.modules:
        notes.append(
            f"warning: {entry[MODULE]} was imported before activate(), settings read at its "
            f"import came too late"
        )
    if overridden:
        _set(entry, "overridden", "; ".join(overridden))
        return
    if not entry[HAS_PATCH]:
        if entry[ENV]:
            _set(entry, "applied", "env " + ", ".join(notes))
        elif entry[FIX_CLASS] in _PATCHLESS:
            _set(
                entry,
                "lane-only",
                f"{entry[FIX_CLASS]} shim without patch.py: the lane's requirements carry it",
            )
        else:
            reason = f"{entry[FIX_CLASS]} shim has no patch.py"
            _set(entry, "error", reason)
            _complain(entry, reason, strict, fix="add patch.py or change the fix class")
        return
    _set(
        entry,
        "pending-import",
        f"waiting for import of {entry[MODULE]}" + (f"; env {', '.join(notes)}" if notes else ""),
    )
    _waiting.setdefault(entry[MODULE], []).append(entry)


def _on_imported(module_name: str, module: "ModuleType") -> None:
    """Apply every shim waiting for ``module_name``; each at most once."""
    with _lock:
        entries = _waiting.pop(module_name, [])
        if not _waiting and _finder is not None and _finder in sys.meta_path:
            # nothing left to wait for: leave imports untouched
            sys.meta_path.remove(_finder)
    # a module may replace itself in sys.modules
    module = sys.modules.get(module_name, module)
    strict = _strict()
    for entry in entries:
        _apply(entry, module, strict)


def _apply(entry: Entry, module: "ModuleType", strict: bool) -> None:
    shim_id, target = entry[ID], entry[MODULE]
    try:
        # __import__, not importlib.import_module: importlib would cost every process an import
        name = f"shims.{shim_id}.patch"
        __import__(name)
        patch = sys.modules[name]
        for hook in ("check_shape", "probe", "apply"):
            if not callable(getattr(patch, hook, None)):
                raise AttributeError(f"patch.py defines no {hook}()")
        mismatch = patch.check_shape(module)
        if mismatch is not None:
            reason = f"{target} changed shape: {mismatch}"
            _set(entry, "shape-mismatch", reason)
            _complain(entry, reason, strict)
            return
        present = patch.probe(module)
        if present is None:
            _set(entry, "not-needed", "probe: the broken behaviour is absent")
            return
        patch.apply(module)
        _set(entry, "applied", str(present))
    except ShimError:
        raise
    # a broken shim must never stop the others (or the import)
    except Exception as exc:  # noqa: BLE001
        reason = f"{type(exc).__name__}: {exc}"
        _set(entry, "error", reason)
        _complain(entry, reason, strict, cause=exc, fix="fix the shim's patch.py")


def _set(entry: Entry, state: "State", reason: str) -> None:
    # one line, whatever the patch raised
    reason = " ".join(str(reason).split())
    _states[entry[ID]] = ShimStatus(
        entry[ID], state, reason, entry[MODULE], entry[FIX_CLASS], entry[DIST]
    )


def _complain(
    entry: Entry,
    reason: str,
    strict: bool,
    *,
    fix: str = "update the shim or retire it",
    cause: BaseException | None = None,
) -> None:
    """patch-package style: say which shim, which target, why — on stderr and as a warning."""
    target = entry[MODULE] or "its target"
    line = f"patchlane: shim {entry[ID]!r} NOT applied to {target}: {reason}" + (
        f" — {fix}" if fix else ""
    )
    if strict:
        raise ShimError(line) from cause
    # Both: the stderr line survives `-W ignore` (common in launchers); the warning can be filtered
    # or turned into an error by category (ShimNotAppliedWarning) like any other.
    print(line, file=sys.stderr, flush=True)
    # only on this rare path: most processes never need the module
    import warnings

    warnings.warn(line, ShimNotAppliedWarning, stacklevel=2)


def _strict() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in STRICT_ENVS
    )


class _ShimFinder:
    """A ``sys.meta_path`` finder that only reacts to target modules (one dict lookup per
    import)."""

    def find_spec(
        self,
        fullname: str,
        path: "Sequence[str] | None" = None,
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            # a legacy finder may have no find_spec
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, fullname)
        return spec

    def invalidate_caches(self) -> None:
        pass


# A loader to the type checker; at run time a plain class (importlib.abc costs an import), which
# importlib accepts as it accepts any object with exec_module.
if TYPE_CHECKING:
    _LoaderBase = Loader
else:
    _LoaderBase = object


class _PatchingLoader(_LoaderBase):
    """Wraps the real loader: runs the module, then its shims. Delegates everything else."""

    def __init__(self, loader: "Loader", fullname: str) -> None:
        self._loader = loader
        self._fullname = fullname

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        if not hasattr(self._loader, "create_module"):
            return None
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: "ModuleType") -> None:
        # Put the real loader back first, so the module (and importlib.resources) see no wrapper.
        module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self._loader
        self._loader.exec_module(module)
        _on_imported(self._fullname, module)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


def _load_index(*, warn: bool = False) -> list[Entry]:
    """The catalogue's index entries (shims/_index.py); a bad ``patchlane.toml`` is one line, no
    shims. ``warn`` (activation): no catalogue at all is a :class:`CatalogueNotFoundWarning`, or a
    :class:`ShimError` in strict mode — a training job never runs unpatched in silence."""
    from shims import _index

    try:
        entries, roots = _index.load(__path__)
    except Exception as exc:
        # shims.errors only now: the common path never needs it
        from shims.errors import InputError

        if not isinstance(exc, InputError):
            raise
        line = f"patchlane: no shims activated: {exc}"
        if _strict():
            raise ShimError(line) from None
        print(line, file=sys.stderr, flush=True)
        return []
    if warn and not entries:
        missing = _index.unfound(roots)
        if missing is not None:
            line = (
                f"patchlane: {missing} — no shim is active; set ${PATH_ENV} to the catalogue "
                f"folder (PATCHLANE_STRICT=1 makes this an error)"
            )
            if _strict():
                raise ShimError(line)
            # only on this rare path: most processes never need the module
            import warnings

            warnings.warn(line, CatalogueNotFoundWarning, stacklevel=3)
    return entries
