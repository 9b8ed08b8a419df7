"""A named build run (:class:`shims.wheelbuild.WheelBuild`): the target checked out from its mirror
at one commit, turned into one wheel by the shop's own command.

The checkout is a shared clone of the mirror (``git clone --shared``: no object copied, the
mirror only read) in the candidate's own folder, so candidates built at the same time never share
a file; a mirror that lacks files the package's build never reads (a snapshot without its large
test data) is checked out without them, and the checkout says which. The command runs there (in
the package's subdirectory), in its own session and marked like a reproducer
(:mod:`retire.runs.reaper`: a timeout or a stop kills all it started), with the environment lane
code gets (:func:`retire.core.childenv.for_lane`: no secret-named variable) and:

- ``PATCHLANE_WHEEL_DIR``: the empty folder the wheel goes into;
- ``PATCHLANE_BUILD_COMMIT``: the commit checked out;
- the folder of the interpreter the wheel is for first on ``PATH`` (``VIRTUAL_ENV`` too where it
  is a venv's): ``python`` is that interpreter — a bisection candidate's overlay, seeing the
  base's packages (torch, for an extension built against it), or a lane's.

Its output goes to a log file; a failure is a :class:`WheelBuildError` naming the log and its
tail (secrets scrubbed). :func:`stamp_commit` then makes the installed wheel's
``direct_url.json`` name the commit, as uv's install from git does, so the reproducer's host
stamp says which commit ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from retire.core import childenv, tooltext
from retire.core.atomic import atomic_write
from retire.core.errors import PatchlaneError
from retire.core.git import Git, GitError, revision
from retire.core.secrets import scrub
from retire.mirrors.packagetree import MissingFiles, missing_files
from retire.runs import cancelling
from retire.runs.reaper import REAPER
from shims.wheelbuild import WheelBuild

__all__ = [
    "COMMIT_ENV",
    "WHEEL_DIR_ENV",
    "BuiltWheel",
    "Checkout",
    "WheelBuildError",
    "build_wheel",
    "checkout",
    "stamp_commit",
]

#: Where the named build writes its wheel.
WHEEL_DIR_ENV = "PATCHLANE_WHEEL_DIR"
#: The commit the checkout is at.
COMMIT_ENV = "PATCHLANE_BUILD_COMMIT"
#: How much of the log's end a failure quotes.
_TAIL_LINES = 12


class WheelBuildError(PatchlaneError):
    """The named build did not give one wheel of the target; the message names the log and ends
    with its tail. ``detail``: the build tool's own words where uv built it (what
    :func:`retire.locks.failures.missing_build_requirements` reads)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class BuiltWheel:
    """The wheel a named build wrote, and how long it took."""

    wheel: Path
    seconds: float


@dataclass(frozen=True)
class Checkout:
    """A checkout of the mirror at one commit: the package's folder in it, and the files the
    mirror lacks that were left out (none of them read by the package's build)."""

    package: Path
    missing: MissingFiles = field(default_factory=MissingFiles)

    @property
    def says(self) -> str:
        """What was left out (``""``: nothing)."""
        return self.missing.says


def checkout(mirror: Path, commit: str, folder: Path, subdirectory: str | None = None) -> Checkout:
    """The mirror's tree at ``commit`` in ``folder`` (a shared clone); the package's folder in it
    (``subdirectory``), which never lies outside it. A mirror that lacks some files' contents (a
    snapshot without its large files) still gives the checkout when the package's build reads
    none of them: they are left out (:mod:`retire.mirrors.packagetree`), and the value says which;
    one the build reads is a :class:`WheelBuildError` naming it."""
    try:
        missing = missing_files(Git(mirror, search_parents=False), commit, subdirectory)
    except GitError as exc:
        raise WheelBuildError(f"cannot check out {commit[:12]} from {mirror}: {exc}") from None
    if missing.needed:
        raise WheelBuildError(missing.why_not(commit))
    try:
        Git(mirror, search_parents=False).run(
            "clone",
            "--quiet",
            "--shared",
            "--no-checkout",
            "--",
            os.fspath(mirror),
            os.fspath(folder),
        )
        check_out(Git(folder, search_parents=False), commit, missing.left_out)
    except GitError as exc:
        raise WheelBuildError(f"cannot check out {commit[:12]} from {mirror}: {exc}") from None
    return Checkout(package_folder(folder, subdirectory, commit), missing)


def check_out(
    git: Git, commit: str, left_out: tuple[str, ...] = (), *, from_tree: bool = False
) -> None:
    """``commit`` checked out in the clone of ``git``, less the ``left_out`` paths: git's own
    checkout reads every blob, so with some left out the index is read from the commit's tree,
    they are marked skip-worktree (a clean ``git status``, as a build's version tool reads it),
    the rest is written, and HEAD is detached at the commit. ``from_tree``: read the index from
    the commit's tree even with nothing left out (a clone reused after a checkout that left files
    out: their skip-worktree marks must not carry over)."""
    if not (left_out or from_tree):
        git.run("checkout", "--quiet", "--force", "--detach", revision(commit))
        return
    git.run("read-tree", revs=[commit])
    if left_out:
        paths = "\0".join(left_out) + "\0"
        git.run("update-index", "--skip-worktree", "-z", "--stdin", input=paths)
    git.run("checkout-index", "--all", "--force", "--quiet")
    git.run("update-ref", "--no-deref", revs=["HEAD", commit])


def package_folder(root: Path, subdirectory: str | None, commit: str) -> Path:
    """The package's folder in the checkout at ``root`` (``subdirectory``, never outside it); a
    :class:`WheelBuildError` when there is none."""
    package = (root / subdirectory).resolve() if subdirectory else root.resolve()
    if not package.is_relative_to(root.resolve()) or not package.is_dir():
        raise WheelBuildError(f"no folder {subdirectory!r} in the checkout of {commit[:12]}")
    return package


def build_wheel(
    build: WheelBuild,
    source: Path,
    out: Path,
    log: Path,
    *,
    python: Path,
    commit: str,
    distribution: str,
) -> BuiltWheel:
    """Run ``build`` in ``source`` for the interpreter ``python``; the one wheel of
    ``distribution`` it wrote into ``out``. Its output goes to ``log``. Raises
    :class:`WheelBuildError`."""
    out.mkdir(parents=True, exist_ok=True)
    env = childenv.for_lane()
    folder = Path(python).parent
    env.update(
        {
            WHEEL_DIR_ENV: os.fspath(out),
            COMMIT_ENV: commit,
            "PATH": os.pathsep.join([os.fspath(folder), env.get("PATH", os.defpath)]),
        }
    )
    if (folder.parent / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = os.fspath(folder.parent)
    argv = build.argv()
    began = time.monotonic()
    with open(log, "wb") as sink:
        try:
            process = REAPER.spawn(
                argv,
                env=env,
                cwd=os.fspath(source),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        except OSError as exc:
            raise WheelBuildError(
                f"the named build could not start {argv[0]}: {exc.strerror or exc}"
            ) from None
        try:
            # a cancelled candidate's build is killed (its failure then never reads as the commit's)
            with cancelling.killing(lambda: REAPER.kill(process)):
                process.wait(timeout=build.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            REAPER.kill(process)
            process.wait()
        finally:
            REAPER.finish(process)
    # stopped (Ctrl-C, SIGTERM) while it built: a killed build is no failure of the commit
    REAPER.check()
    seconds = round(time.monotonic() - began, 3)
    if timed_out:
        raise _failed(f"the named build timed out after {build.timeout:g} s", log)
    if process.returncode != 0:
        raise _failed(f"the named build failed (exit {process.returncode})", log)
    return BuiltWheel(_the_wheel(out, distribution, log), seconds)


def _the_wheel(out: Path, distribution: str, log: Path) -> Path:
    """The one wheel of ``distribution`` in ``out``."""
    target = canonicalize_name(distribution)
    found = []
    for path in sorted(out.glob("*.whl")):
        try:
            name = parse_wheel_filename(path.name)[0]
        except InvalidWheelFilename:
            continue
        if name == target and path.is_file():
            found.append(path)
    if len(found) != 1:
        what = "no wheel" if not found else f"{len(found)} wheels"
        raise _failed(f"the named build wrote {what} of {distribution} into ${WHEEL_DIR_ENV}", log)
    return found[0]


def _failed(problem: str, log: Path) -> WheelBuildError:
    """``problem``, the log's place and its last lines (scrubbed)."""
    try:
        text = log.read_bytes()[-16384:].decode("utf-8", errors="replace")
    except OSError:
        text = ""
    lines = tooltext.lines(text)[-_TAIL_LINES:]
    tail = " / ".join(lines) if lines else "(no output)"
    return WheelBuildError(scrub(f"{problem}; log {log}: {tail}"))


def stamp_commit(
    site: Path, distribution: str, mirror: Path, commit: str, subdirectory: str | None = None
) -> None:
    """The ``direct_url.json`` (PEP 610) of ``distribution`` installed in ``site`` says the
    mirror and commit it was built from, as uv's install from ``git+file://`` does: the
    reproducer's host stamp then names the commit."""
    target = canonicalize_name(distribution)
    origin: dict[str, object] = {
        "url": mirror.resolve().as_uri(),
        "vcs_info": {"vcs": "git", "commit_id": commit},
    }
    if subdirectory:
        origin["subdirectory"] = subdirectory
    for info in site.glob("*.dist-info"):
        if canonicalize_name(info.name.removesuffix(".dist-info").rpartition("-")[0]) == target:
            atomic_write(info / "direct_url.json", json.dumps(origin), within=site)
