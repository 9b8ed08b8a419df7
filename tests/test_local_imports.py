"""Function-local imports in the commands say why they are local (issue 25, item 5).

A command module's imports belong at its top; one kept inside a function (to keep `patchlane --help`
lean, or to break a circle) carries an own-line comment right above it saying so. A run of
consecutive local imports shares the comment above its first line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ROOT / "retire" / "commands"


def unexplained(source: str) -> list[int]:
    """Lines of function-local imports with neither a comment nor another local import above."""
    lines = source.splitlines()
    tree = ast.parse(source)
    local: list[ast.stmt] = [
        sub
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Import | ast.ImportFrom)
    ]
    ends = {node.end_lineno for node in local}
    bare = []
    for node in local:
        above = node.lineno - 1
        # a blank line between two local imports (isort's grouping) keeps them one run
        while above >= 1 and not lines[above - 1].strip():
            above -= 1
        if above in ends or (above >= 1 and lines[above - 1].lstrip().startswith("#")):
            continue
        bare.append(node.lineno)
    return sorted(set(bare))


def test_every_local_import_in_the_commands_says_why() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(COMMANDS.rglob("*.py"))
        for line in unexplained(path.read_text(encoding="utf-8"))
    }
    assert not found, f"function-local imports without a comment above them: {sorted(found)}"


def test_the_check_sees_a_bare_local_import() -> None:
    source = (
        "def f():\n"
        '    """Doc."""\n'
        "    from os import path\n"
        "\n"
        "    return path\n"
        "\n"
        "\n"
        "def g():\n"
        "    # deferred: start-up\n"
        "    from os import sep\n"
        "    from sys import argv\n"
        "\n"
        "    return sep, argv\n"
    )
    assert unexplained(source) == [3]


def test_help_does_not_load_the_engine_behind_the_commands() -> None:
    # the local imports kept for start-up: `--help` must not pull these in
    heavy = [
        "retire.runs.lanerun",
        "retire.lanes.lanefile",
        "retire.mirrors.config",
        "retire.core.git",
    ]
    probe = (
        "import sys\n"
        "sys.argv = ['patchlane', '--help']\n"
        "import retire.__main__ as entry\n"
        "try:\n"
        "    entry.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print([name for name in {heavy!r} if name in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"
