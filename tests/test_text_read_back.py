"""Nothing parses text the engine wrote (issue 25): a verdict's next actions, floors and
conditions travel as values, so no regex and no argument parser reads them back.

Grepped from the source: argparse parses one thing, the command line (``build_parser()`` in
``retire/commands/__init__.py``); no regex in the engine spells a ``patchlane`` command (only a
command the engine wrote would have one to find); no function in the engine hands the prose a
verdict or a lane verdict wrote (``why``, ``action``, ``until``, ``blocker``)
to the ``re`` module; and ``"dist>=version"`` is never split by hand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[1] / "retire"

#: The prose fields of a Verdict, a LaneVerdict and a ConditionResult (a flag's ``text`` is
#: left out: too many other things have text — an HTML parser's, a process's output).
PROSE = frozenset({"why", "action", "until", "blocker"})
RE_CALLS = frozenset({"compile", "search", "match", "fullmatch", "findall", "finditer", "sub"})

#: Still reading prose back, with what removes it: each entry is a module and the function (none
#: since the report's verdicts are typed and their release lists summarised from their floors).
KNOWN: set[tuple[str, str]] = set()


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ENGINE)), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(ENGINE.rglob("*.py"))
    ]


def _re_calls(node: ast.AST) -> list[ast.Call]:
    return [
        call
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "re"
        and call.func.attr in RE_CALLS
    ]


def _reads_prose(function: ast.AST) -> bool:
    """``x.why``, ``data["why"]`` or ``data.get("why")``: a value's prose, or its JSON's."""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and node.attr in PROSE:
            return True
        if isinstance(node, ast.Subscript) and _is_prose(node.slice):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _is_prose(node.args[0])
        ):
            return True
    return False


def _is_prose(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in PROSE


def _calls(function: ast.AST) -> set[str]:
    return {
        call.func.id
        for call in ast.walk(function)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    }


@pytest.mark.slow
def test_argparse_parses_only_the_command_line():
    found = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            imported = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            # sessions.py reads `nox -s lane -- ARGS`: the user's command line, through run's parser
            if (
                "argparse" in imported
                and not name.startswith("commands/")
                and name != "sessions.py"
            ):
                found.append(f"{name}: imports argparse")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("parse_args", "parse_known_args", "parse_intermixed_args")
                # the command line's parser, and its own parse_args (which names the command an
                # unrecognized word was given to)
                and name not in ("commands/__init__.py", "commands/base.py")
            ):
                found.append(f"{name}:{node.lineno}: {node.func.attr}")
            # the command line's own parser (usage errors on one line) is the one allowed
            if (
                isinstance(node, ast.ClassDef)
                and name != "commands/base.py"
                and any(
                    isinstance(base, ast.Attribute) and base.attr == "ArgumentParser"
                    for base in node.bases
                )
            ):
                found.append(f"{name}:{node.lineno}: a parser of its own ({node.name})")
    assert not found, found


@pytest.mark.slow
def test_no_regex_spells_a_patchlane_command():
    found = [
        f"{name}:{call.lineno}"
        for name, tree in _modules()
        for call in _re_calls(tree)
        if call.args
        and isinstance(call.args[0], ast.Constant)
        and "patchlane" in str(call.args[0].value)
    ]
    assert not found, found


@pytest.mark.slow
def test_no_function_hands_a_verdicts_prose_to_a_regex():
    """A function that reads prose and calls ``re`` (or a function of its module that does)."""
    found = []
    for name, tree in _modules():
        # scaffold/ edits the shop's own files: its `action` is a GitHub Action reference there
        if name.startswith("scaffold/"):
            continue
        functions = [
            f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        with_re = {f.name for f in functions if _re_calls(f)}
        for function in functions:
            uses_re = bool(_re_calls(function)) or bool(_calls(function) & with_re)
            if uses_re and _reads_prose(function) and (name, function.name) not in KNOWN:
                found.append(f"{name}: {function.name}")
    assert not found, found
    # an entry of KNOWN that no longer reads prose back goes
    still = {
        (name, f.name)
        for name, tree in _modules()
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef) and _reads_prose(f)
    }
    assert still >= KNOWN


def test_floors_are_never_split_by_hand():
    pattern = re.compile(r"""partition\(\s*["']>=["']\s*\)|split\(\s*["']>=["']""")
    found = [
        f"{path.relative_to(ENGINE)}"
        for path in sorted(ENGINE.rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert not found, found
