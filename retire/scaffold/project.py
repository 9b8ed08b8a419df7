"""``patchlane init``: a working patchlane project in a folder (new or existing).

The plan creates ``patchlane.toml``, ``lanes/cpu.toml`` (one CPU lane, pure Python), ``shims/``,
``locks/``, ``validation/manifest.jsonl``, ``reports/`` (committed), ``noxfile.py``, the weekly
loop's three workflows (the lanes, the lock bump's pull request, the report and its tracking issue)
and ``.pre-commit-config.yaml`` with patchlane's hooks, and a README section. In a repository that
has them already, ``README.md`` gets the section appended (once), ``.gitignore`` the state folders,
``noxfile.py`` one import and ``.pre-commit-config.yaml`` one ``repos:`` entry
(:mod:`retire.scaffold.merge`); what cannot be appended safely is a note with the lines to add.

Every file that names patchlane names it from one :class:`~retire.scaffold.source.Source`
(``--from``): the install lines, the hooks, the Action (or, with no Action, the same commands in
the workflows).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

from retire.core.errors import InputError
from retire.lanes.model import PYTHON_VERSION
from retire.scaffold import Plan, newline_of, raw_text, template
from retire.scaffold.ignored import negations
from retire.scaffold.merge import Merged, merge_noxfile, merge_precommit
from retire.scaffold.source import Source, pip_note

__all__ = [
    "committed",
    "hooks_entry",
    "indented",
    "local_note",
    "plan_init",
    "template_values",
]

_README_HEADING = "## Patch lane"
_IGNORED = (".patchlane/", ".nox/")
# the lock init makes (or `nox -s lock` makes later), the files `shim new` and the next lanes
# add, and the weekly report's: committed like the files init writes (next week's report reads
# this week's JSON); a shop's `*.toml` or `*.json` rule must not keep them out
_LOCK = "locks/cpu/pylock.toml"
_LATER = (
    "lanes/<lane>.toml",
    "shims/<shim>/manifest.toml",
    "shims/<shim>/pack.toml",
    *(f"reports/<week>.{kind}" for kind in ("md", "html", "json")),
)


def template_values(source: Source, action: str | None, python: str) -> dict[str, str]:
    """What the templates' placeholders become."""
    uses = action or source.action
    # The Action installs its own source unless told otherwise: tell it when that is not --from.
    engine_input = (
        f"\n          engine: {json.dumps(source.ci_engine)}"
        if uses and uses != source.action
        else ""
    )
    values = {
        "python": python,
        "action": uses or "",
        "engineinput": engine_input,
        # shell words in the README (a path with a space or a quote stays one word)
        "engine": _shell(source.shared_engine),
        "runtime": _shell(source.shared_runtime),
        "install": json.dumps(source.shared_engine),
        "ciengine": source.ci_engine,
        "source": source.ci_engine.removeprefix("patchlane[engine]").lstrip(" @") or "the index",
        "patchlane": f"[patchlane]({source.home})" if source.home else "patchlane",
        "repository": source.repository or "",
        "rev": source.rev or "",
    }
    kind = "action" if uses else "commands"
    values["lanesteps"] = template(f"project/steps/lane-{kind}.yml", **values).rstrip("\n")
    values["reportsteps"] = template(f"project/steps/report-{kind}.yml", **values).rstrip("\n")
    return values


def hooks_entry(source: Source) -> str:
    """The one ``repos:`` item of patchlane's hooks (at indent 0): its repository at the ref, or
    local hooks that pip installs the source for."""
    if source.repository and source.rev:
        return template(
            "project/precommit-git.yaml", repository=json.dumps(source.repository), rev=source.rev
        )
    if source.inside:
        # pre-commit installs a local hook's dependencies in its own folder, where a path of
        # this repository means nothing: the hooks run the patchlane installed here
        return template("project/precommit-system.yaml")
    return template(
        "project/precommit-local.yaml",
        engine=json.dumps(source.engine),
        runtime=json.dumps(source.runtime),
    )


def plan_init(
    root: Path, source: Source, *, action: str | None = None, python: str | None = None
) -> Plan:
    """What ``patchlane init`` writes in ``root``: patchlane from ``source``; ``action``
    (``owner/repo@ref``) the Action the workflows use (default: the source's, if it has one)."""
    python = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    # the lane reader's own rule: init never writes a lane that `patchlane lanes` refuses
    if not PYTHON_VERSION.fullmatch(python):
        raise InputError(
            None,
            "--python",
            f"{python[:40]!r} is not the major.minor of a CPython that exists (3.8 to 3.19)",
            'write major.minor, e.g. "3.12"',
        )
    values = template_values(source, action, python)
    entry = hooks_entry(source)
    create = {
        "patchlane.toml": template("project/patchlane.toml"),
        "lanes/cpu.toml": template("project/lanes-cpu.toml", **values),
        "shims/README.md": template("project/shims-README.md"),
        "locks/README.md": template("project/locks-README.md"),
        "validation/manifest.jsonl": "",
        ".github/workflows/patchlane-lanes.yml": template("project/lanes.yml", **values),
        ".github/workflows/patchlane-report.yml": template("project/weekly-report.yml", **values),
        ".github/workflows/patchlane-bump.yml": template("project/bump.yml", **values),
        "reports/README.md": template("project/reports-README.md"),
    }
    edit: dict[str, str] = {}
    notes: list[str] = []
    merges = {
        "noxfile.py": (
            template("project/noxfile.py.tmpl", **values),
            lambda text, name: merge_noxfile(text, name, _first_party(root), source.engine),
        ),
        ".pre-commit-config.yaml": (
            template("project/pre-commit-config.yaml", entry=indented(entry, 2)),
            lambda text, name: merge_precommit(text, entry, name),
        ),
    }
    for name, (fresh, merge) in merges.items():
        # read safely (a FIFO, a folder, a link there is one line), line ends as they are
        text = raw_text(root / name, str(root / name), within=root)
        if text is None:
            create[name] = fresh
            continue
        merged: Merged = merge(text, name)
        if merged.text is not None:
            edit[name] = merged.text
            if merged.note:
                notes.append(f"{name}: {merged.note}")
        else:
            notes.append(merged.note + (":\n" + merged.lines.rstrip("\n") if merged.lines else ""))
    _readme(root, values, create, edit)
    unignore, ignored_notes = negations(
        root, sorted({*create, *edit, ".gitignore", _LOCK, *_LATER})
    )
    notes.extend(ignored_notes)
    _gitignore(root, create, edit, unignore)
    if source.local_only:
        notes.append(local_note(source))
    if pip := pip_note(source, _pip_version()):
        notes.append(pip)
    return Plan(root, create, edit, tuple(notes))


def _pip_version() -> str | None:
    """The pip of the Python running patchlane: the one the README's install line runs."""
    from importlib import metadata

    try:
        return metadata.version("pip")
    except metadata.PackageNotFoundError:
        return None


def local_note(source: Source) -> str:
    """The note for a source only this machine has (a wheel or checkout outside the repository,
    a ``git+file://`` clone): what it breaks, and the one command that re-points every file."""
    return (
        f"patchlane comes from {source.local_only}, which only this machine has: the "
        "workflows and the hooks name that path, and no CI runner or other clone can install "
        "from it — re-point them with `patchlane init --repoint --from NEW`, NEW a git URL and "
        "a ref (git+https://HOST/OWNER/patchlane@v0.1.0), an index requirement "
        '("patchlane[engine]==0.1.0") or a wheel committed in this repository (vendor/…whl)'
    )


def _first_party(root: Path) -> frozenset[str]:
    """The modules of the shop's own folder, which isort sorts after the third-party ones."""
    try:
        found = {
            path.stem if path.suffix == ".py" else path.name
            for path in root.iterdir()
            if path.suffix == ".py" or (path.is_dir() and path.name.isidentifier())
        }
    except OSError:
        return frozenset()
    return frozenset(found - {"retire"})


def _shell(word: str) -> str:
    """``word`` as one shell word: in double quotes as people write it, single-quoted where it
    holds what double quotes expand (``$``, a backquote, ``"``, ``\\``, ``!``)."""
    return f'"{word}"' if not re.search(r'[$`"\\!]', word) else shlex.quote(word)


def indented(text: str, by: int) -> str:
    return "".join(f"{' ' * by}{line}\n" if line else "\n" for line in text.splitlines()).rstrip(
        "\n"
    )


def _appended(text: str, addition: str) -> str:
    """``text`` with ``addition`` (written with ``\\n``) after it, in the file's own line ends."""
    newline = newline_of(text)
    head = text if not text or text.endswith(("\n", "\r")) else text + newline
    if text.endswith("\r") and not text.endswith("\r\n"):
        # a "\n" right after the last line's lone "\r" would fuse with it into one "\r\n",
        # changing that line's end: the addition starts on the next line, without a blank one
        addition = addition.lstrip("\n")
    return head + addition.replace("\n", newline)


def _readme(root: Path, values: dict[str, str], create: dict, edit: dict) -> None:
    section = template("project/README-section.md", **values)
    # read safely (a FIFO, a folder, a link there is one line), line ends as they are
    text = raw_text(root / "README.md", str(root / "README.md"), within=root)
    if text is None:
        create["README.md"] = f"# {root.resolve().name}\n{section}"
        return
    if _README_HEADING not in text:
        # the section starts with a blank line; a README that ends in blank lines has its own
        blank = text.replace("\r\n", "\n").endswith("\n\n")
        edit["README.md"] = _appended(text, section.lstrip("\n") if blank else section)


def committed(plan: Plan) -> list[str]:
    """Every file of ``plan`` meant to be committed, the lane's lock, and the kinds of file the
    project adds later (a lane, a shim's manifest, the weekly report's files)."""
    return sorted({*plan.create, *plan.edit, _LOCK, *_LATER})


def _gitignore(root: Path, create: dict, edit: dict, unignore: list[str]) -> None:
    """The state folders ignored, and negations of the rules that would keep init's files out of
    a commit (last: in one file the last matching rule wins)."""
    # read safely (a FIFO, a folder, a link there is one line), line ends as they are
    text = raw_text(root / ".gitignore", str(root / ".gitignore"), within=root)
    existing = text is not None
    text = text or ""
    missing = [entry for entry in _IGNORED if entry not in text.splitlines()] + unignore
    if missing:
        (edit if existing else create)[".gitignore"] = _appended(text, "\n".join(missing) + "\n")
