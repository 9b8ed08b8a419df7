"""Guards: what retirement leaves of a shim, and the two ways out of being one.

- :func:`leave_guard` (a retirement branch, :mod:`retire.branches.autodrop`): ``patch.py`` goes,
  the reproducer and manifest stay, and the manifest gains ``[guard]`` — when and why it retired,
  the lanes that carried it (they keep running the reproducer without a shim) and the commit
  that still holds the patch (the retirement commit's parent);
- :func:`restore` (``patchlane shim restore ID``): a regressed guard's ``patch.py`` comes back
  from that commit (``git show``), ``[guard]`` leaves the manifest and the shim goes back into its
  lanes — one step, in the checkout, for a person to commit;
- :func:`drop` (``patchlane shim drop ID --reason …``): the guard stops guarding for good; its
  manifest keeps the date and the reason.

Every edit goes through tomlkit (comments survive) and is written atomically; a guard that is
not one, or a commit git cannot show, is a one-line error and nothing is written.
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

__all__ = ["Restored", "drop", "guard_table", "leave_guard", "restore"]


def guard_table(
    *, reason: str, patch_commit: str, lanes: Sequence[str], retired: dt.date
) -> tomlkit.items.Table:
    """The ``[guard]`` table a retirement writes."""
    table = tomlkit.table()
    table.add(tomlkit.comment("retired: the reproducer keeps running without a shim"))
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
    """``patch.py`` as the commit holds it (``git show``)."""
    repo = Git(project.root)
    try:
        top = repo.toplevel()
        relative = (manifest.directory.resolve() / "patch.py").relative_to(top.resolve())
        return repo.run("show", revs=[f"{commit}:{relative.as_posix()}"]) + "\n"
    except (GitError, ValueError) as exc:
        raise PatchlaneError(
            f"cannot bring back {manifest.id}'s patch.py from {commit[:12]}: {exc} — fetch the "
            "history that holds it (a shallow clone lacks it)"
        ) from None


def restore(project: Project, shim_id: str) -> Restored:
    """Bring a guard's patch back from git history: ``patch.py`` from the commit that still held
    it, ``[guard]`` out of the manifest, the shim back into the lanes that carried it."""
    manifest = _guard(project, shim_id)
    assert manifest.guard is not None
    commit = manifest.guard.patch_commit
    # read everything before writing anything
    patch = _patch_at(project, manifest, commit)
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
    atomic_write(manifest.manifest_path, tomlkit.dumps(doc), within=folder)
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
    stop running the reproducer. Returns the manifest written."""
    manifest = _guard(project, shim_id)
    if not reason.strip():
        raise InputError(
            None, "--reason", "is empty", 'say why the guard can go: --reason "covered by …"'
        )
    doc = tomlkit.parse(manifest.manifest_path.read_text(encoding="utf-8"))
    table = doc["guard"]
    assert isinstance(table, dict)
    table["status"] = "dropped"
    table["dropped"] = today
    table["drop-reason"] = " ".join(reason.split())
    atomic_write(manifest.manifest_path, tomlkit.dumps(doc), within=manifest.directory)
    return manifest.manifest_path
