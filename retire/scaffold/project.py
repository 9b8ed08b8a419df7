"""``patchlane init``: a working patchlane project in a folder (new or existing).

The plan creates ``patchlane.toml``, ``lanes/cpu.toml`` (one CPU lane, pure Python), ``shims/``,
``locks/``, ``validation/manifest.jsonl``, ``noxfile.py``, two workflows that use patchlane's
GitHub Action, ``.pre-commit-config.yaml`` with its hooks, and a README section; an existing
``README.md`` gets the section appended (once) and an existing ``.gitignore`` the state folder.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from retire.core.errors import InputError
from retire.lanes.model import PYTHON_VERSION
from retire.scaffold import Plan, template
from shims.filereading import read_text

__all__ = ["ACTION", "action_version", "plan_init"]

#: Where patchlane's GitHub Action and pre-commit hooks live (``owner/repo``).
ACTION = "patchlane/patchlane"
_ACTION_REF = re.compile(r"(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<ref>[A-Za-z0-9_./-]+)")
_README_HEADING = "## Patch lane"
_IGNORED = (".patchlane/", ".nox/")


def action_version() -> str:
    """``owner/repo@vX.Y.Z`` of the Action matching this engine (``@main`` when its version is
    unknown)."""
    from importlib import metadata

    try:
        return f"{ACTION}@v{metadata.version('patchlane')}"
    except metadata.PackageNotFoundError:
        return f"{ACTION}@main"


def plan_init(root: Path, *, action: str | None = None, python: str | None = None) -> Plan:
    """What ``patchlane init`` writes in ``root``; ``action`` is ``owner/repo@ref`` (default:
    :func:`action_version`)."""
    action = action or action_version()
    match = _ACTION_REF.fullmatch(action)
    if match is None:
        raise InputError(
            None,
            "--action",
            f"{action!r} is not owner/repo@ref",
            "write it like patchlane/patchlane@v0.1.0",
        )
    python = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    # the lane reader's own rule: init never writes a lane that `patchlane lanes` refuses
    if not PYTHON_VERSION.fullmatch(python):
        raise InputError(
            None,
            "--python",
            f"{python[:40]!r} is not the major.minor of a CPython that exists (3.8 to 3.19)",
            'write major.minor, e.g. "3.12"',
        )
    values = {
        "python": python,
        "action": action,
        "repository": f"https://github.com/{match['repo']}",
        "rev": match["ref"],
    }
    create = {
        "patchlane.toml": template("project/patchlane.toml"),
        "lanes/cpu.toml": template("project/lanes-cpu.toml", **values),
        "shims/README.md": template("project/shims-README.md"),
        "locks/README.md": template("project/locks-README.md"),
        "validation/manifest.jsonl": "",
        "noxfile.py": template("project/noxfile.py.tmpl"),
        ".github/workflows/patchlane-lanes.yml": template("project/lanes.yml", **values),
        ".github/workflows/patchlane-report.yml": template("project/weekly-report.yml", **values),
        ".pre-commit-config.yaml": template("project/pre-commit-config.yaml", **values),
    }
    edit: dict[str, str] = {}
    section = template("project/README-section.md", **values)
    # read safely: a FIFO, a folder or a device there is one line, never a block
    text = read_text(root / "README.md", str(root / "README.md"), missing_ok=True)
    if text is None:
        create["README.md"] = f"# {root.resolve().name}\n{section}"
    elif _README_HEADING not in text:
        edit["README.md"] = text.rstrip("\n") + "\n" + section
    ignored = read_text(root / ".gitignore", str(root / ".gitignore"), missing_ok=True)
    lines = ignored.splitlines() if ignored is not None else []
    missing = [entry for entry in _IGNORED if entry not in lines]
    if missing:
        (edit if ignored is not None else create)[".gitignore"] = (
            "\n".join([*lines, *missing]) + "\n"
        )
    return Plan(root, create, edit)
