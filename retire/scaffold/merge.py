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
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["SESSIONS", "Merged", "import_lines", "merge_noxfile", "merge_precommit"]

#: The sessions a shop's noxfile imports from retire.sessions.
SESSIONS = ("bump", "lane", "lanes", "lock", "retire", "summary")


def import_lines(names: tuple[str, ...] | list[str] = SESSIONS) -> list[str]:
    """The sessions' import, one name a line with a trailing comma: black (at any line length),
    ruff format and isort's black profile keep it as it is, and the ``noqa`` on its first line
    is where ruff and flake8 look for it."""
    return [
        "from retire.sessions import (  # noqa: F401 - patchlane's nox sessions",
        *(f"    {name}," for name in names),
        ")",
    ]


_HOOK_IDS = ("patchlane-lock-check", "patchlane-manifest-check")
# a pre-commit config names a few anchors at most; past this, the file is not read
_MAX_ALIASES = 32
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


def merge_noxfile(
    text: str,
    name: str = "noxfile.py",
    first_party: frozenset[str] = frozenset(),
    requirement: str = "",
) -> Merged:
    """``text`` with the sessions' import inserted where its imports are, sorted as isort (ruff's
    I001) sorts them (``first_party``: the modules of the shop's own folder), and ``requirement``
    added to a PEP 723 script block's dependencies; or why not."""
    by_hand = "".join(f"{line}\n" for line in import_lines())
    try:
        tree = ast.parse(text, filename=name)
    # a file nested too deeply for the parser (or this interpreter's stack) is one line too
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        problem = (
            "nested too deeply for Python's parser"
            if isinstance(exc, MemoryError | RecursionError)
            else str(exc)
        )
        return Merged(None, f"{name} does not parse ({problem}); add these lines to it", by_hand)
    imported = any(
        isinstance(node, ast.ImportFrom) and node.module == "retire.sessions"
        for node in ast.walk(tree)
    )
    if imported:
        return Merged(None, f"{name} already imports patchlane's sessions")
    # a session the shop has keeps its name: patchlane's of that name is not imported (importing
    # a name is what registers it)
    clash = sorted(_defined(tree) & set(SESSIONS))
    imported_names = [session for session in SESSIONS if session not in clash]
    notes: list[str] = []
    if clash:
        named = ", ".join(clash)
        notes.append(
            f"it defines {named} already: patchlane's {named} not imported, yours keep the name "
            f"(`patchlane {clash[0]}` does what patchlane's session would)"
        )
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    at, before, after = _import_place(tree, lines, first_party)
    block = (
        [newline] * before
        + [line + newline for line in import_lines(imported_names)]
        + [newline] * after
    )
    lines = [*lines[:at], *block, *lines[at:]]
    if requirement and (script := _script_dependencies(lines, requirement, newline)) is not None:
        # run as a script (`uv run --script`): its environment needs patchlane too
        lines, note = script
        notes.append(note)
    return Merged("".join(lines), "; ".join(notes))


def _script_dependencies(
    lines: list[str], requirement: str, newline: str
) -> tuple[list[str], str] | None:
    """``lines`` with ``requirement`` added to the ``dependencies`` of their PEP 723 ``script``
    block, and a note; None when there is no such block. A block that cannot take it as text
    (checked: the result must parse to the same list plus it) is a note with the line to add."""
    import tomllib

    stripped = [line.rstrip("\r\n") for line in lines]
    try:
        start = stripped.index("# /// script")
        end = stripped.index("# ///", start + 1)
    except ValueError:
        return None

    def dependencies(block: list[str]) -> object:
        body = "".join(line.removeprefix("#").removeprefix(" ") + "\n" for line in block)
        try:
            return tomllib.loads(body).get("dependencies")
        except tomllib.TOMLDecodeError:
            return None

    before = dependencies(stripped[start + 1 : end])
    quoted = json.dumps(requirement)
    edited = list(lines)
    for at in range(start + 1, end):
        one = re.fullmatch(r"(# dependencies\s*=\s*\[)(.*?)(,?\s*\])", stripped[at])
        if one:
            items = f"{one[2]}, {quoted}" if one[2].strip() else quoted
            edited[at] = f"{one[1]}{items}{one[3]}{newline}"
            break
        if stripped[at].startswith("# dependencies") and "]" not in stripped[at]:
            close = next((i for i in range(at + 1, end) if stripped[i].strip() == "# ]"), None)
            if close is not None:
                edited.insert(close, f"#   {quoted},{newline}")
            break
    grown = len(edited) - len(lines)
    after = dependencies([line.rstrip("\r\n") for line in edited[start + 1 : end + grown]])
    if not isinstance(before, list) or after != [*before, requirement]:
        return lines, (
            f"its script block (# /// script) could not take patchlane; add {quoted} to its "
            "dependencies"
        )
    return edited, "its script block (# /// script) lists patchlane in its dependencies"


def _section(node: ast.Import | ast.ImportFrom, first_party: frozenset[str]) -> int:
    """isort's section of an import: 0 future, 1 standard library, 2 third party, 3 first party,
    4 local (relative)."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return 4
    module = node.module or "" if isinstance(node, ast.ImportFrom) else node.names[0].name
    top = module.split(".")[0]
    if top == "__future__":
        return 0
    if top in sys.stdlib_module_names:
        return 1
    return 3 if top in first_party else 2


def _key(node: ast.Import | ast.ImportFrom) -> tuple[int, str]:
    """isort's order inside a section: straight imports first, then by module."""
    if isinstance(node, ast.ImportFrom):
        return 1, (node.module or "").lower()
    return 0, node.names[0].name.lower()


def _import_place(
    tree: ast.Module, lines: list[str], first_party: frozenset[str]
) -> tuple[int, int, int]:
    """Where the sessions' import goes: (line index, blank lines before it, blank lines after).

    In the module's first block of imports (after its docstring), in the third-party section, in
    order; a section of its own when the block has none; after the docstring when there is no
    block — never after code (``if __name__ == "__main__"``), so the file runs as a script."""
    body = list(tree.body)
    docstring = (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    start = 1 if docstring else 0
    block: list[ast.Import | ast.ImportFrom] = []
    for node in body[start:]:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            break
        block.append(node)
    if not block:
        if docstring:
            at = body[0].end_lineno or 0
            return at, 1, 1 if at < len(lines) else 0
        # after a shebang and the comments that head the file
        at = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
        return at, 0, 1 if at < len(lines) else 0
    ours = (2, (1, "retire.sessions"))
    later = [node for node in block if (_section(node, first_party), _key(node)) > ours]
    if not later:
        last = block[-1]
        return last.end_lineno or last.lineno, 0 if _section(last, first_party) == 2 else 1, 0
    following = later[0]
    index = block.index(following)
    previous = block[index - 1] if index else None
    if _section(following, first_party) == 2:
        return _above_comments(lines, following.lineno - 1), 0, 0
    if previous is not None and _section(previous, first_party) == 2:
        return previous.end_lineno or previous.lineno, 0, 0
    # a third-party section of its own, before the first-party one
    return _above_comments(lines, following.lineno - 1), 0, 1


def _above_comments(lines: list[str], at: int) -> int:
    """The line index above the comment lines that head line ``at`` (they belong to it)."""
    while at > 0 and lines[at - 1].lstrip().startswith("#"):
        at -= 1
    return at


def _defined(tree: ast.Module) -> set[str]:
    """The names the module binds at its top level, and the sessions it names."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            # @nox.session(name="lock") registers the session under that name
            names.update(
                keyword.value.value
                for decorator in node.decorator_list
                if isinstance(decorator, ast.Call)
                for keyword in decorator.keywords
                if keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            )
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
        aliases = _aliases(yaml, text)
        if aliases > _MAX_ALIASES:
            return Merged(
                None,
                f"{name} uses {aliases} YAML aliases (*name), more than the {_MAX_ALIASES} "
                "patchlane reads (a file of a few hundred bytes can expand to billions of nodes); "
                "add this under its repos:",
                entry,
            )
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
    newline = "\r\n" if "\r\n" in text else "\n"
    block = "".join(
        f"{' ' * indent}{line}{newline}" if line else newline for line in entry.splitlines()
    )
    head = text if text.endswith(("\n", "\r")) else text + newline
    merged = (
        head + f"{' ' * indent}# patchlane's hooks (added by `patchlane init`){newline}" + block
    )
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


def _aliases(yaml: Any, text: str) -> int:
    """How many aliases the YAML text uses: counted by the scanner, which reads tokens in one pass
    and never expands them (the loader would: an alias of an alias of … is a billion nodes)."""
    return sum(
        isinstance(token, yaml.AliasToken) for token in yaml.scan(text, Loader=yaml.SafeLoader)
    )


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
