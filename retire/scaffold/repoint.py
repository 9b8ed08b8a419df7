"""``patchlane init --repoint --from NEW``: what ``pre-commit autoupdate`` is to a pre-commit
config, for the places ``init`` named patchlane's source.

The old source is read back from the lanes workflow's install line (``init`` writes it there for
every kind of source); each text ``init`` derived from it — the workflows' install lines, steps and
header, the hooks' ``repos:`` entry, the README's install lines and link, the noxfile's hint — is
replaced by the same text derived from the new one. Nothing else changes; a file where an old text
is no longer found as written (edited by hand) is a note, and what still names the old source
after the change is a note with its line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from retire.core.errors import InputError
from retire.scaffold import Plan, raw_text
from retire.scaffold.project import hooks_entry, indented, local_note, template_values
from retire.scaffold.source import Source, from_ci_engine

__all__ = ["plan_repoint"]

_LANES = ".github/workflows/patchlane-lanes.yml"
_FILES = (
    _LANES,
    ".github/workflows/patchlane-report.yml",
    ".github/workflows/patchlane-bump.yml",
    ".pre-commit-config.yaml",
    "README.md",
    "noxfile.py",
)
_INSTALL = re.compile(r'^\s+run: python -m pip install "(?P<engine>[^"\n]+)"\s*$', re.MULTILINE)
_ACTION = re.compile(
    r"^      - uses: (?P<action>\S+)\n        with:\n          lanes:", re.MULTILINE
)


def _old(root: Path) -> tuple[Source, str | None, str]:
    """The source, the Action and the Python the lanes workflow was written for."""
    text = raw_text(root / _LANES, str(root / _LANES), within=root)
    found = _INSTALL.search(text or "")
    if text is None or found is None:
        raise InputError(
            str(root / _LANES),
            None,
            "has no `python -m pip install` line that init wrote: the source it names is unknown",
            "run `patchlane init` first, or edit the files by hand",
        )
    action = _ACTION.search(text)
    python = re.search(r'python-version: "(?P<v>[^"]+)"', text)
    try:
        source = from_ci_engine(found["engine"], root)
    # an install line edited by hand: the workflow's, not --from's
    except InputError as exc:
        raise InputError(
            str(root / _LANES),
            "python -m pip install",
            f"{found['engine']!r} is not a source init writes ({exc.problem}), so the source to "
            "re-point from is unknown",
            "put back the install line init wrote, or edit the files by hand",
        ) from None
    return source, action["action"] if action else None, python["v"] if python else "3.12"


def _pairs(
    name: str, was: Source, becomes: Source, old: dict[str, str], new: dict[str, str]
) -> list[tuple[str, str]]:
    """(old text, new text) for what init derived from the source in file ``name``, longest
    first."""
    if name.startswith(".github/"):
        pairs = [
            (old["lanesteps"], new["lanesteps"]),
            (old["reportsteps"], new["reportsteps"]),
            (f'install "{old["ciengine"]}"', f'install "{new["ciengine"]}"'),
            (f"# {old['source']} (", f"# {new['source']} ("),
        ]
    elif name == "README.md":
        pairs = [
            (f"install {old['engine']}\n", f"install {new['engine']}\n"),
            (f"install {old['runtime']}`", f"install {new['runtime']}`"),
            (f"with {old['patchlane']}:", f"with {new['patchlane']}:"),
        ]
    elif name == "noxfile.py":
        pairs = [
            (f"INSTALL = {old['install']}", f"INSTALL = {new['install']}"),
            # a script block's dependency (`uv run --script`)
            (json.dumps(was.engine), json.dumps(becomes.engine)),
        ]
    else:
        pairs = [
            (indented(hooks_entry(was), by), indented(hooks_entry(becomes), by)) for by in (0, 2, 4)
        ]
    return sorted({(a, b) for a, b in pairs if a != b}, key=lambda pair: len(pair[0]), reverse=True)


def plan_repoint(root: Path, source: Source, *, action: str | None = None) -> Plan:
    """The edits that re-point ``root``'s files from the source init named to ``source``."""
    old, old_action, python = _old(root)
    # an Action named on its own stays; one that came with the old source follows the source
    kept_action = old_action if old_action and old_action != old.action else None
    new_action = action or source.action or kept_action
    before = template_values(old, old_action, python)
    after = template_values(source, new_action, python)
    edit: dict[str, str] = {}
    notes: list[str] = []
    for name in _FILES:
        text = raw_text(root / name, str(root / name), within=root)
        if text is None:
            continue
        changed = text
        newline = "\r\n" if "\r\n" in text else "\n"
        for was, becomes in _pairs(name, old, source, before, after):
            changed = changed.replace(was.replace("\n", newline), becomes.replace("\n", newline))
        if changed != text:
            edit[name] = changed
        left = [
            number
            for number, line in enumerate(changed.splitlines(), 1)
            if (old.ci_engine in line and old.ci_engine not in source.ci_engine)
            or (old.engine in line and old.engine not in source.engine)
        ]
        if left:
            notes.append(
                f"{name} still names {old.engine} at line {', '.join(map(str, left))} (edited by "
                f"hand?) — change it to {source.engine}"
            )
    if source.local_only:
        # re-pointed to a place only this machine has: said as init says it
        notes.append(local_note(source))
    return Plan(root, {}, edit, tuple(notes))
