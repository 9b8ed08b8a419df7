"""``patchlane shim new ID``: a shim that ``patchlane shim list --check`` accepts, ready to be
written.

``<catalogue>/<id>/`` gets ``manifest.toml`` (every key, commented), ``patch.py``
(``check_shape``/``probe``/``apply``, standing down until written) and ``reproduce.py`` (the
protocol of :mod:`shims.reproducer`; it skips until written). The id is added to the lanes named.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import keyword
import os
import re
import shutil
import tempfile
import unicodedata
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from retire.core.atomic import make_folder, stage
from retire.core.errors import InputError
from retire.core.project import Project, contained
from retire.lanes.model import Lane
from retire.scaffold import Plan, template
from shims.manifest import DISTRIBUTION_NAME, MAX_SHIM_ID, MODULE_NAME, RESERVED_IDS, SHIM_ID

__all__ = ["check_id", "check_owner", "no_lane_installs", "plan_shim", "write_shim"]


def check_id(shim_id: str) -> str:
    """``shim_id`` when it can name a shim: a lowercase identifier that shadows no runtime
    module."""
    if not SHIM_ID.fullmatch(shim_id) or keyword.iskeyword(shim_id):
        raise InputError(
            None,
            "ID",
            f"{shim_id[:80]!r} is not a shim id",
            "use a lowercase Python identifier: a letter, then letters, digits and _, at most "
            f"{MAX_SHIM_ID} characters (e.g. my_fix)",
        )
    if shim_id in RESERVED_IDS:
        raise InputError(
            None,
            "ID",
            f"{shim_id!r} would shadow the runtime's module shims.{shim_id}",
            f"pick another id (reserved: "
            f"{', '.join(sorted(i for i in RESERVED_IDS if SHIM_ID.fullmatch(i)))})",
        )
    return shim_id


def check_owner(owner: str) -> str:
    """``owner`` when the manifest can hold it as given: one line of text, not blank."""
    odd = next((c for c in owner if unicodedata.category(c) in ("Cc", "Cs")), None)
    if odd is not None or not owner.strip():
        problem = f"{owner[:80]!r} " + (
            f"holds the control character {odd!r}" if odd is not None else "is blank"
        )
        raise InputError(
            None, "--owner", problem, "name who answers for the shim on one line, e.g. an e-mail"
        )
    return owner


def _lane_target(lane: Lane) -> str | None:
    for text in lane.requirements:
        try:
            return Requirement(text).name
        except InvalidRequirement:
            continue
    return None


def _target(
    chosen: list[Lane], distribution: str | None, module: str | None
) -> tuple[str, str, list[str]]:
    """The shim's distribution and module — named, or defaulted from the first lane — and a note
    for each default taken (``shim new`` prints them)."""
    notes = []
    if not distribution and chosen and (distribution := _lane_target(chosen[0])):
        notes.append(
            f"distribution {distribution}: the first requirement of lane {chosen[0].name} "
            f"(--distribution to name another)"
        )
    if not distribution:
        raise InputError(
            None,
            "--distribution",
            "no target distribution",
            "name the distribution that ships the bug, e.g. --distribution megatron-core",
        )
    if not module:
        module = re.sub(r"[-.]", "_", distribution).lower()
        notes.append(
            f"module {module}: the import name {distribution} usually has (--module to name "
            f"another, e.g. a submodule)"
        )
    if not DISTRIBUTION_NAME.fullmatch(distribution):
        raise InputError(
            None,
            "--distribution",
            f"{distribution[:80]!r} is not a distribution name",
            "use the name pip installs (letters, digits, . _ -), e.g. megatron-core",
        )
    if not MODULE_NAME.fullmatch(module):
        raise InputError(
            None,
            "--module",
            f"{module!r} is not a module name",
            "use a dotted module such as megatron.core",
        )
    return distribution, module, notes


def plan_shim(
    project: Project,
    shim_id: str,
    *,
    lanes: list[str],
    distribution: str | None = None,
    module: str | None = None,
    owner: str | None = None,
    today: _dt.date | None = None,
) -> Plan:
    """What ``patchlane shim new`` writes: the shim's files, and each named lane with the id added.

    ``lanes`` empty: the project's only lane, when it has exactly one. ``distribution`` defaults to
    the first requirement of the first lane, ``module`` to the distribution's import name.
    """
    from retire.lanes import lanedit, lanefile

    check_id(shim_id)
    catalogue = project.shims_dir
    folder = catalogue / shim_id
    if folder.exists():
        raise InputError(str(folder), None, "exists", "pick another id, or edit that shim")
    known = lanefile.project_lanes(project)
    by_name = {lane.name: lane for lane in known}
    if not lanes and len(known) == 1:
        lanes = [known[0].name]
    unknown = [name for name in lanes if name not in by_name]
    if unknown:
        raise InputError(
            None,
            "--lane",
            f"unknown lane {unknown[0]!r}",
            f"known lanes: {', '.join(by_name) or 'none'}",
        )
    chosen = [by_name[name] for name in lanes]
    distribution, module, notes = _target(chosen, distribution, module)
    values = {
        "id": shim_id,
        "distribution": distribution,
        "module": module,
        # a TOML string as the TOML library writes it: a backslash or a quote loads back as given
        "owner": tomlkit.string(check_owner(owner or "someone@example.org")).as_string(),
        "today": (today or _dt.date.today()).isoformat(),
    }
    base = folder.relative_to(project.root).as_posix()
    sources = {
        "manifest.toml": "manifest.toml",
        "patch.py": "patch.py.tmpl",
        "reproduce.py": "reproduce.py.tmpl",
    }
    create = {
        f"{base}/{name}": template(f"shim/{source}", **values) for name, source in sources.items()
    }
    edit: dict[str, str] = {}
    for lane in chosen:
        path = project.root / lane.file
        text = edit.get(path.relative_to(project.root).as_posix()) or path.read_text(
            encoding="utf-8"
        )
        edit[path.relative_to(project.root).as_posix()] = lanedit.add_shim(text, shim_id)
    return Plan(project.root, create, edit, tuple(notes))


def write_shim(plan: Plan, shim_id: str) -> list[str]:
    """Write the plan of :func:`plan_shim` all at once or not at all: the shim's folder is built
    beside its place (a hidden folder) and moved in whole, each lane edit is staged beside its
    file, and only then do the moves happen (a move takes no space). A full disk or any other
    failure leaves the project as it was, so the same command can be run again."""
    root = plan.root.resolve()
    for relative in [*plan.create, *plan.edit]:
        contained(root, relative)
    folder = contained(root, next(iter(plan.create))).parent
    if folder.exists() or folder.is_symlink():
        raise InputError(str(folder), None, "exists", "pick another id, or edit that shim")
    catalogue_made = not folder.parent.exists()
    staged: list[tuple[Path, Path]] = []
    building = None
    try:
        building = Path(
            tempfile.mkdtemp(
                dir=make_folder(folder.parent, within=root), prefix=f".{shim_id}.", suffix=".new"
            )
        )
        # mkdtemp makes it 0700 (private while it fills); the shim's folder is the umask's, as
        # `mkdir` would make it: every clone, CI runner and colleague reads it
        umask = os.umask(0)
        os.umask(umask)
        building.chmod(0o777 & ~umask)
        for relative, text in plan.create.items():
            target = building / (root / relative).relative_to(folder)
            os.replace(stage(target, text, within=root), target)
        for relative, text in plan.edit.items():
            staged.append((stage(root / relative, text, within=root), root / relative))
        # fails, without replacing it, when the folder appeared meanwhile
        os.rename(building, folder)
        building = None
        for temporary, target in staged:
            os.replace(temporary, target)
    except OSError as exc:
        _undo(building, staged, folder.parent if catalogue_made else None)
        # name what was not written: a full disk's own message names no file
        raise OSError(
            exc.errno, f"{exc.strerror or exc}; nothing was written", str(folder)
        ) from exc
    except BaseException:
        _undo(building, staged, folder.parent if catalogue_made else None)
        raise
    return [*plan.create, *plan.edit]


def _undo(building: Path | None, staged: list[tuple[Path, Path]], catalogue: Path | None) -> None:
    if building is not None:
        shutil.rmtree(building, ignore_errors=True)
    for temporary, _target in staged:
        with contextlib.suppress(OSError):
            temporary.unlink()
    if catalogue is not None:
        with contextlib.suppress(OSError):
            catalogue.rmdir()


def no_lane_installs(project: Project, distribution: str, files: list[str]) -> str:
    """A warning when no lane installs ``distribution`` (by its requirements or its lock): the
    shim's reproducer would only ever skip ("… is not installed"); "" when one does."""
    from retire.lanes import lanefile
    from retire.locks.integrity import locked_versions
    from retire.locks.locking import lock_path
    from shims.filereading import read_text

    wanted = canonicalize_name(distribution)
    known = lanefile.project_lanes(project)
    for lane in known:
        names = set()
        for text in lane.requirements:
            try:
                names.add(canonicalize_name(Requirement(text).name))
            except InvalidRequirement:
                continue
        try:
            lock = read_text(lock_path(project.locks_dir, lane.name), missing_ok=True) or ""
        except InputError:
            lock = ""
        if wanted in names or wanted in locked_versions(lock):
            return ""
    where = ", ".join(files) or "a lane file"
    return (
        f"no lane installs {distribution}: the shim's reproducer will skip ({distribution} is not "
        f"installed) until one does — add it to the requirements of {where}"
    )
