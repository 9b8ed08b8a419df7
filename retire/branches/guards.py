"""Guards: what retirement leaves of a shim, and the two ways out of being one.

- :func:`leave_guard` (a retirement branch, :mod:`retire.branches.autodrop`): ``patch.py`` goes,
  the reproducer and manifest stay, and the manifest gains ``[guard]`` — when and why it retired,
  the lanes that carried it (they keep running the reproducer without a shim) and the commit
  that still holds the patch (the retirement commit's parent);
- :func:`restore` (``patchlane shim restore ID``): a regressed guard's ``patch.py`` comes back
  from that commit (``git show``), ``[guard]`` leaves the manifest and the shim goes back into its
  lanes — one step, in the checkout, for a person to commit;
- :func:`drop` (``patchlane shim drop ID --reason …``): the guard stops guarding for good; its
  manifest keeps the date and the reason (a second drop is refused: the first is the record).

Every edit goes through tomlkit (comments survive) and is written atomically; a guard that is
not one, a commit git cannot show or where ``patch.py`` is not a file, or a ``patch.py`` in the
checkout that git does not hold (written by hand) is a one-line error and nothing is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from retire.core.atomic import atomic_write
from retire.core.errors import InputError, PatchlaneError
from retire.core.git import Git, GitError
from retire.core.project import Project, contained
from retire.lanes import lanefile
from retire.lanes.lanedit import add_shim
from shims.manifest import load_manifest
from shims.model import ShimManifest

__all__ = [
    "DROPPED_NOTE",
    "GUARDING_NOTE",
    "Restored",
    "drop",
    "guard_table",
    "leave_guard",
    "restore",
]


#: The comment a guarding ``[guard]`` table opens with, and the one a dropped guard's says instead.
GUARDING_NOTE = "retired: the reproducer keeps running without a shim"
DROPPED_NOTE = "dropped: its lanes no longer run the reproducer"


def guard_table(
    *, reason: str, patch_commit: str, lanes: Sequence[str], retired: dt.date
) -> tomlkit.items.Table:
    """The ``[guard]`` table a retirement writes."""
    table = tomlkit.table()
    table.add(tomlkit.comment(GUARDING_NOTE))
    table["status"] = "guarding"
    table["retired"] = retired
    # one line: a multi-line verdict would read badly in every table that shows it
    table["reason"] = " ".join(reason.split()) or "retired"
    table["patch-commit"] = patch_commit
    table["lanes"] = sorted(dict.fromkeys(lanes))
    return table


def leave_guard(
    shim_dir: Path, *, reason: str, patch_commit: str, lanes: Sequence[str], retired: dt.date
) -> None:
    """Turn a shim folder into a guard: ``patch.py`` removed, ``[guard]`` added to the manifest."""
    manifest = shim_dir / "manifest.toml"
    doc = tomlkit.parse(manifest.read_text(encoding="utf-8"))
    doc["guard"] = guard_table(
        reason=reason, patch_commit=patch_commit, lanes=lanes, retired=retired
    )
    atomic_write(manifest, tomlkit.dumps(doc), within=shim_dir)
    (shim_dir / "patch.py").unlink(missing_ok=True)


@dataclass(frozen=True)
class Restored:
    """What ``shim restore`` wrote."""

    shim: str
    commit: str
    # files written, relative to the project
    files: tuple[str, ...]
    # lanes the shim went back into
    lanes: tuple[str, ...]


def _guard(project: Project, shim_id: str) -> ShimManifest:
    """The guard ``shim_id`` of the catalogue, or a one-line error."""
    guards = project.guards()
    if shim_id not in guards:
        known = ", ".join(sorted(guards)) or "none"
        raise InputError(
            None,
            "ID",
            f"{shim_id!r} is not a guard of this catalogue (guards: {known})",
            "name a retired shim whose manifest has [guard] (`patchlane shim list`)",
        )
    return guards[shim_id]


def _patch_at(project: Project, manifest: ShimManifest, commit: str) -> str:
    """``patch.py`` as the commit holds it (``git show``); a commit where it is a folder (or
    anything but a file) is refused, never its listing written as the file."""
    repo = Git(project.root)
    try:
        top = repo.toplevel()
        relative = (manifest.directory.resolve() / "patch.py").relative_to(top.resolve())
        spec = f"{commit}:{relative.as_posix()}"
        kind = repo.run("cat-file", "-t", revs=[spec])
        if kind == "blob":
            return repo.run("show", revs=[spec]) + "\n"
    except (GitError, ValueError) as exc:
        raise PatchlaneError(
            f"cannot bring back {manifest.id}'s patch.py from {commit[:12]}: {exc} — fetch the "
            "history that holds it (a shallow clone lacks it)"
        ) from None
    raise PatchlaneError(
        f"cannot bring back {manifest.id}'s patch.py from {commit[:12]}: {relative.as_posix()} is "
        f"a {'folder' if kind == 'tree' else kind} there, not a file — nothing restored; bring the "
        "patch back by hand"
    )


def _keeps_written(project: Project, path: Path, text: str) -> None:
    """Refuse, in one line, to replace ``path`` when it holds what git does not (untracked,
    modified or ignored) and is not ``text`` already: restore never loses what a person wrote."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_file() and not path.is_symlink() and path.read_bytes() == text.encode():
        return
    relative = path.relative_to(project.root).as_posix()
    said = Git(project.root).run(
        "status", "--porcelain", "--ignored", "--untracked-files=all", paths=[relative]
    )
    if said.strip() or not path.is_file() or path.is_symlink():
        raise InputError(
            relative,
            None,
            "exists and is not the committed file (written by hand, changed, or not a file): "
            "restore would replace it",
            "commit it or move it aside, then `patchlane shim restore` again",
        )


def restore(project: Project, shim_id: str) -> Restored:
    """Bring a guard's patch back from git history: ``patch.py`` from the commit that still held
    it, ``[guard]`` out of the manifest, the shim back into the lanes that carried it."""
    manifest = _guard(project, shim_id)
    assert manifest.guard is not None
    commit = manifest.guard.patch_commit
    # read everything before writing anything
    patch = _patch_at(project, manifest, commit)
    _keeps_written(project, manifest.directory / "patch.py", patch)
    doc = tomlkit.parse(manifest.manifest_path.read_text(encoding="utf-8"))
    doc.pop("guard", None)
    lanes = {lane.name: lane for lane in lanefile.project_lanes(project)}
    files: dict[Path, str] = {}
    back: list[str] = []
    for name in manifest.guard.lanes:
        lane = lanes.get(name)
        if lane is None or shim_id in lane.shims:
            continue
        path = contained(project.root, Path(lane.file))
        text = files.get(path) or path.read_text(encoding="utf-8")
        files[path] = add_shim(text, shim_id)
        back.append(name)
    folder = manifest.directory
    atomic_write(folder / "patch.py", patch, within=folder)
    # the blank line that stood before [guard] goes with it
    atomic_write(manifest.manifest_path, tomlkit.dumps(doc).rstrip("\n") + "\n", within=folder)
    for path, text in files.items():
        atomic_write(path, text, within=project.root)
    # the restored manifest must load as a shim again
    load_manifest(manifest.manifest_path)
    written = [folder / "patch.py", manifest.manifest_path, *files]
    return Restored(
        shim_id,
        commit,
        tuple(p.relative_to(project.root).as_posix() for p in written),
        tuple(back),
    )


def drop(project: Project, shim_id: str, reason: str, *, today: dt.date) -> Path:
    """Retire a guard for good: ``status = "dropped"`` with the date and the reason; its lanes
    stop running the reproducer. A guard dropped already is refused (its date and reason are the
    record; a second drop would replace them). Returns the manifest written."""
    manifest = _guard(project, shim_id)
    if not reason.strip():
        raise InputError(
            None, "--reason", "is empty", 'say why the guard can go: --reason "covered by …"'
        )
    assert manifest.guard is not None
    if not manifest.guard.guarding:
        raise InputError(
            manifest.manifest_path.relative_to(project.root).as_posix(),
            "guard.status",
            f"{shim_id} was dropped already on {manifest.guard.dropped} "
            f"({manifest.guard.drop_reason!r})",
            "leave the record as it is; to say more, edit guard.drop-reason by hand",
        )
    doc = tomlkit.parse(manifest.manifest_path.read_text(encoding="utf-8"))
    table = doc["guard"]
    assert isinstance(table, tomlkit.items.Table)
    doc["guard"] = _dropped(table, today, " ".join(reason.split()))
    atomic_write(manifest.manifest_path, tomlkit.dumps(doc), within=manifest.directory)
    return manifest.manifest_path


def _dropped(table: tomlkit.items.Table, today: dt.date, reason: str) -> tomlkit.items.Table:
    """``table`` as a dropped guard's: its comment says so (no longer that the reproducer keeps
    running), a person's own comments and keys stay, then the date and the reason."""
    dropped = tomlkit.table()
    for key, item in table.value.body:
        if isinstance(item, tomlkit.items.Comment):
            text = item.as_string().strip()
            dropped.add(
                tomlkit.comment(DROPPED_NOTE if GUARDING_NOTE in text else text[1:].strip())
            )
        elif key is not None:
            dropped.add(key, item)
    dropped["status"] = "dropped"
    dropped["dropped"] = today
    dropped["drop-reason"] = reason
    return dropped
