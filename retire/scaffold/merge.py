"""``patchlane init`` in a repository that has a ``noxfile.py`` and a ``.pre-commit-config.yaml``:
lines appended to them, never a rewrite.

The noxfile gets one import line (the sessions of :mod:`retire.sessions`) when it parses and
defines none of those names; the pre-commit config gets one ``repos:`` entry, appended as text
(comments, quoting and order kept) when the file parses as YAML, its ``repos:`` list is the last
thing in it, and the result parses to the same list plus the new entry. Whatever cannot be edited
that safely is left alone: the result says why and gives the exact lines to add by hand.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["SESSIONS", "Merged", "merge_noxfile", "merge_precommit"]

#: The sessions a shop's noxfile imports from retire.sessions.
SESSIONS = ("bump", "lane", "lanes", "lock", "retire", "summary")
_IMPORT = (
    f"from retire.sessions import {', '.join(SESSIONS)}  # noqa: E402,F401 - patchlane's sessions"
)
_HOOK_IDS = ("patchlane-lock-check", "patchlane-manifest-check")
_TOP_LEVEL_KEY = re.compile(r"^[^\s#-][^:]*:")
_REPOS = re.compile(r"^repos\s*:\s*(#.*)?$")
_ITEM = re.compile(r"^(?P<indent>[ ]*)-\s")


@dataclass(frozen=True)
class Merged:
    """One existing file's merge: its new text (None: leave it as it is) and what to tell the
    person (why it was left alone, the lines to add by hand; "" when appended)."""

    text: str | None
    note: str = ""
    # the lines a person adds by hand when the file was left alone
    lines: str = ""


def merge_noxfile(text: str, name: str = "noxfile.py") -> Merged:
    """``text`` with the sessions' import appended, or why not."""
    by_hand = _IMPORT + "\n"
    try:
        tree = ast.parse(text, filename=name)
    except (SyntaxError, ValueError) as exc:
        return Merged(None, f"{name} does not parse ({exc}); add this line to it", by_hand)
    imported = any(
        isinstance(node, ast.ImportFrom) and node.module == "retire.sessions"
        for node in ast.walk(tree)
    )
    if imported:
        return Merged(None, f"{name} already imports patchlane's sessions")
    clash = sorted(_defined(tree) & set(SESSIONS))
    if clash:
        return Merged(
            None,
            f"{name} defines {', '.join(clash)} already; import patchlane's sessions under other "
            "names, e.g.",
            f"from retire.sessions import {', '.join(f'{n} as patchlane_{n}' for n in clash)}"
            "  # noqa: F401\n",
        )
    head = text if text.endswith("\n") or not text else text + "\n"
    return Merged(head + "\n# patchlane's sessions (added by `patchlane init`)\n" + by_hand)


def _defined(tree: ast.Module) -> set[str]:
    """The names the module binds at its top level."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def merge_precommit(text: str, entry: str, name: str = ".pre-commit-config.yaml") -> Merged:
    """``text`` with ``entry`` (one ``repos:`` item, written at indent 0) appended, or why not."""
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        return Merged(
            None, f"PyYAML is not installed here to check {name}; add this under its repos:", entry
        )
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        return Merged(
            None, f"{name} does not parse as YAML{line}; add this under its repos:", entry
        )
    repos = document.get("repos") if isinstance(document, dict) else None
    if not isinstance(repos, list):
        return Merged(None, f"{name} has no repos: list; add this under one", entry)
    hooks = {
        hook.get("id")
        for repo in repos
        if isinstance(repo, dict)
        for hook in repo.get("hooks") or []
        if isinstance(hook, dict)
    }
    if hooks & set(_HOOK_IDS):
        return Merged(None, f"{name} already has patchlane's hooks")
    indent = _item_indent(text)
    if indent is None:
        return Merged(
            None,
            f"{name} cannot be appended to as text (its repos: list is written inline, or is not "
            "the last block of the file); add this under its repos:",
            entry,
        )
    block = "".join(f"{' ' * indent}{line}\n" if line else "\n" for line in entry.splitlines())
    head = text if text.endswith("\n") else text + "\n"
    merged = head + f"{' ' * indent}# patchlane's hooks (added by `patchlane init`)\n" + block
    try:
        after = yaml.safe_load(merged)
    except yaml.YAMLError:
        after = None
    wanted = [*repos, yaml.safe_load(entry)[0]]
    if after != {**document, "repos": wanted}:
        return Merged(
            None, f"{name} cannot be appended to safely; add this under its repos:", entry
        )
    return Merged(merged)


def _item_indent(text: str) -> int | None:
    """The indentation of the items of ``repos:``, when that list is the file's last top-level
    block (so an item appended at the end joins it); else None."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _REPOS.match(line)), None)
    if start is None:
        return None
    indent = None
    for line in lines[start + 1 :]:
        if _TOP_LEVEL_KEY.match(line):
            return None
        found = _ITEM.match(line)
        if found and indent is None:
            indent = len(found["indent"])
    return indent
