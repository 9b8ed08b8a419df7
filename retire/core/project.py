"""Where a patchlane project keeps its things, computed in one place.

Every command gets one :class:`Project` (from ``--root``) and asks it for paths; no other module
builds ``root / "locks"`` or looks at its own ``__file__`` to find a project. A worktree made
for a proposal branch is a project too: ``Project(worktree)``.

The layout::

    patchlane.toml             project settings (optional): the catalogue's folder, git mirrors
    lanes/                     lane and matrix files
    locks/<lane>/pylock.toml   one lock per lane
    shims/<id>/                the shop's catalogue (manifest.toml, patch.py, reproduce.py,
pack.toml);
                               [catalogue] path in patchlane.toml names another folder
    validation/manifest.jsonl  recorded reproducer runs
    reports/                   weekly reports
    packs/                     filing state and deny list
    .patchlane/                envs, caches, run summaries (never committed)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from retire.core.errors import InputError
from shims.catalogue import configured
from shims.manifest import discover
from shims.model import ShimManifest

__all__ = ["Project", "boundary", "contained", "find_root"]

# A run id names a folder under .patchlane/runs: letters, digits, dot, dash, underscore only.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def contained(
    root: str | os.PathLike[str], path: str | os.PathLike[str], *, key: str | None = None
) -> Path:
    """``path`` (absolute, or relative to ``root``) if it stays inside ``root`` and nothing below
    ``root`` on the way to it is a symbolic link; else a one-line :class:`InputError`.

    The one check for "a path built from a name, a flag or a committed file never leaves the
    project": committed links under ``locks/`` or ``reports/``, a ``reproduce.py`` linked out of
    its shim folder, ``..`` in a name. ``root`` itself may be reached through links (a checkout
    under a linked home folder); nothing is resolved, every part below it is checked with lstat.
    """
    base = Path(os.path.abspath(root))
    target = Path(os.path.normpath(base / path))
    if not target.is_relative_to(base):
        raise InputError(os.fspath(path), key, f"leaves {_shown(base)}", "use a path inside it")
    current = base
    for part in target.relative_to(base).parts:
        current = current / part
        try:
            linked = current.is_symlink()
        # a name too long for the file system, or a folder that cannot be searched
        except OSError as exc:
            raise InputError(
                _shown(current)[:200],
                key,
                f"cannot be used: {exc.strerror or exc}",
                "use a shorter path that patchlane can reach",
            ) from None
        if linked:
            raise InputError(
                _shown(current),
                key,
                f"is a symbolic link (to {os.readlink(current)}): not followed",
                "replace the link with the file or folder itself",
            )
    return target


def boundary(root: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """The folder a write into ``folder`` must stay inside: the project ``root`` when ``folder``
    is in it (so no link from the root down is followed), else ``folder`` itself (one the user
    named outside the project, where only links below it are refused)."""
    base = Path(os.path.abspath(root))
    target = Path(os.path.normpath(base / folder))
    return base if target.is_relative_to(base) else target


def find_root(start: Path) -> Path:
    """The project a command run in ``start`` works on, found as git and nox find theirs: the
    nearest folder from ``start`` upwards with a ``patchlane.toml``, else the nearest with a
    ``lanes/`` folder, else ``start`` itself (a folder that is no project yet)."""
    start = start.absolute()
    folders = [start, *start.parents]
    for folder in folders:
        if (folder / "patchlane.toml").is_file():
            return folder
    for folder in folders:
        if (folder / "lanes").is_dir():
            return folder
    return start


def _shown(path: Path) -> str:
    """Relative to the working folder when inside it (what a user types), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    # outside it, or no working folder any more
    except (ValueError, OSError):
        return str(path)


@dataclass(frozen=True)
class Project:
    """A project folder: paths, and the shim catalogue (the ground floor's own data).

    Lanes, mirrors and locks are loaded by the packages that own them:
    :func:`retire.lanes.lanefile.project_lanes`, :func:`retire.mirrors.config.project_mirrors`
    and :func:`retire.locks.locking.lock_path`."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())

    # Committed data -------------------------------------------------------------------------
    # The folders patchlane writes in are checked as they are handed out: no link from the root
    # down to them (contained()); atomic_write checks from there down to each file.
    @property
    def lanes_dir(self) -> Path:
        return self.root / "lanes"

    @property
    def locks_dir(self) -> Path:
        return self.inside("locks")

    @property
    def shims_dir(self) -> Path:
        """The shop's shim catalogue, one folder per shim: ``[catalogue] path`` of
        ``patchlane.toml`` (default ``shims``)."""
        return Path(configured(self.root))

    @property
    def validation(self) -> Path:
        """The validation manifest (JSON Lines of reproducer runs)."""
        return self.inside("validation", "manifest.jsonl")

    @property
    def reports_dir(self) -> Path:
        return self.inside("reports")

    @property
    def packs_dir(self) -> Path:
        return self.inside("packs")

    # Local state, never committed ------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return self.inside(".patchlane")

    @property
    def envs_dir(self) -> Path:
        return self.inside(".patchlane", "envs")

    @property
    def http_cache(self) -> Path:
        return self.inside(".patchlane", "cache", "http")

    @property
    def trial_cache(self) -> Path:
        """Answers of trial re-locks of frozen lanes (retire.locks.trial)."""
        return self.inside(".patchlane", "cache", "trials")

    @property
    def trial_dir(self) -> Path:
        """Scratch locks of trial re-locks."""
        return self.inside(".patchlane", "trial")

    @property
    def mirror_cache(self) -> Path:
        """What is computed from the mirrors (the pull requests found by patch, per range)."""
        return self.inside(".patchlane", "cache", "mirrors")

    @property
    def bisect_cache(self) -> Path:
        return self.inside(".patchlane", "cache", "bisect")

    @property
    def wheel_cache(self) -> Path:
        """Wheels built from a mirror at a commit (retire.runs.wheelcache)."""
        return self.inside(".patchlane", "cache", "wheels")

    def inside(self, *parts: str | os.PathLike[str]) -> Path:
        """``root/<parts>``, refused in one line when it leaves the root or a link is on the way
        (:func:`contained`)."""
        return contained(self.root, Path(*parts))

    def output(self, folder: str | os.PathLike[str]) -> tuple[Path, Path]:
        """A folder named by a flag (``--out``), relative to the root, and the folder its writes
        must stay inside (:func:`boundary`); inside the project, a link on the way is refused
        here."""
        path = Path(os.path.normpath(self.root / folder))
        within = boundary(self.root, path)
        return contained(within, path), within

    def output_file(self, path: str | os.PathLike[str]) -> Path:
        """A file named by a flag (``-o``, ``--manifest``; relative to the working folder):
        inside the project, refused in one line when a link is on the way from the root."""
        target = Path(path).absolute()
        return contained(boundary(self.root, target.parent), target)

    def run_dir(self, run_id: str) -> Path:
        """Where one lane run's summaries live; a run id can never name a folder elsewhere."""
        if not _RUN_ID.fullmatch(run_id or ""):
            raise InputError(
                None,
                "--run-id",
                f"{run_id!r} is not a run id",
                "use letters, digits, '.', '-' and '_' only (at most 64), e.g. --run-id nightly-42",
            )
        # and never a link
        return contained(self.root, Path(".patchlane", "runs", run_id), key="--run-id")

    def interrupted_mark(self, run_id: str) -> Path:
        """Present when a lane of the run was interrupted: its summary is never printed as if
        whole."""
        return self.run_dir(run_id) / "interrupted"

    def latest_run(self) -> str | None:
        """The id of the run whose lanes finished last (``summary`` without ``--run-id``)."""
        runs = self.state_dir / "runs"
        newest: tuple[int, str] | None = None
        for folder in runs.iterdir() if runs.is_dir() else ():
            if not _RUN_ID.fullmatch(folder.name) or folder.is_symlink():
                continue
            for summary in folder.glob("*.json"):
                try:
                    stamp = (summary.stat().st_mtime_ns, folder.name)
                except OSError:
                    continue
                newest = max(newest or stamp, stamp)
        return newest[1] if newest else None

    def interrupted_after(self, run_id: str | None) -> str | None:
        """The newest run interrupted after ``run_id``'s lanes finished (after any, when None):
        ``summary`` says it shows the previous complete run instead."""
        runs = self.state_dir / "runs"
        finished = (
            max((p.stat().st_mtime_ns for p in self.run_dir(run_id).glob("*.json")), default=0)
            if run_id
            else 0
        )
        newest: tuple[int, str] | None = None
        for mark in runs.glob("*/interrupted") if runs.is_dir() else ():
            folder = mark.parent
            if not _RUN_ID.fullmatch(folder.name) or folder.is_symlink():
                continue
            try:
                stamp = (mark.stat().st_mtime_ns, folder.name)
            except OSError:
                continue
            if stamp[0] > finished:
                newest = max(newest or stamp, stamp)
        return newest[1] if newest else None

    # Loading --------------------------------------------------------------------------------
    def manifests(self) -> dict[str, ShimManifest]:
        """The shims of this project's catalogue by id (none when it has no ``shims/`` folder)."""
        # read from patchlane.toml: once
        folder = self.shims_dir
        found = discover(folder) if folder.is_dir() else []
        # a guard is a retired shim: no lane carries it, no verdict is made for it
        return {m.id: m for m in found if m.guard is None}

    def guards(self) -> dict[str, ShimManifest]:
        """The catalogue's guards by id: retired shims whose reproducers still run (dropped ones
        included; :attr:`shims.model.Guard.guarding` tells)."""
        folder = self.shims_dir
        found = discover(folder) if folder.is_dir() else []
        return {m.id: m for m in found if m.guard is not None}

    def shim_ids(self) -> set[str]:
        """Ids of the shims in this project's catalogue (folder names, without loading them)."""
        folder = self.shims_dir
        return {p.parent.name for p in folder.glob("*/manifest.toml")} if folder.is_dir() else set()
