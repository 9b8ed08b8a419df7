"""Source fingerprints: how a patch knows its target still has the shape it was written for.

Imported by patch modules only (never by ``import shims``), like patch-package's check that a
patch still fits the installed version.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Callable, Mapping
from types import ModuleType

#: What has source to read: a module, a class, a function or method (``inspect.getsource``).
Sourced = ModuleType | type | Callable[..., object]


def fingerprint(obj: Sourced) -> str:
    """sha256[:16] of the object's source, docstrings stripped, normalised through the AST.

    Formatting and docstring edits keep the fingerprint; any change to the code changes it.
    """
    node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    for item in ast.walk(node):
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item.body:
            first = item.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                item.body = item.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.unparse(node).encode()).hexdigest()[:16]


def unknown_shape(obj: Sourced, known: Mapping[str, str] | str, what: str) -> str | None:
    """None when ``obj``'s fingerprint is one of ``known`` (digest → description), else why not."""
    try:
        digest = fingerprint(obj)
    except (OSError, TypeError, SyntaxError) as exc:
        return f"cannot read the source of {what}: {exc}"
    known = {known: what} if isinstance(known, str) else known
    if digest not in known:
        return f"{what} source fingerprint {digest} is not a known shape {sorted(known)}"
    return None


def changed_parameters(
    fn: Callable[..., object], leading: tuple[str, ...], what: str
) -> str | None:
    """None when ``fn``'s parameters start with ``leading`` (the ones a wrapper relies on), else
    why not."""
    try:
        params = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError) as exc:
        return f"cannot read the signature of {what}: {exc}"
    if params[: len(leading)] != tuple(leading):
        return f"{what} parameters changed: {params}"
    return None


def function_shape(module: object, name: str, leading: tuple[str, ...], marker: str) -> str | None:
    """``check_shape`` of a shim that wraps the module-level function ``name``: why it does not
    fit (missing, parameters changed), or None — also when ``name`` is already the shim's wrapper
    (``marker`` set on it: activate() ran before in this process)."""
    function = getattr(module, name, None)
    if not callable(function):
        return f"{name} is missing"
    if getattr(function, marker, False):
        return None
    return changed_parameters(function, leading, name)


def unpatched_source(obj: Sourced, marker: str) -> str | None:
    """The source a ``probe`` reads to tell whether upstream still has the bug, or None when
    ``obj`` is the shim's own wrapper (``marker`` set on it): nothing left to probe."""
    if getattr(obj, marker, False):
        return None
    return inspect.getsource(obj)
