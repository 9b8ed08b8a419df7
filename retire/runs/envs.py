"""Lane environments: a venv built from the lane's lock with uv, hash-checked.

Two kinds:

- **full**: a fresh venv, ``uv pip sync`` of the whole lock (uv refuses a file whose hash does
  not match the lock). Re-syncing an unchanged env with a warm cache costs milliseconds.
- **overlay**: for a GPU host whose image already carries torch/Triton. The venv sees the base
  interpreter's site-packages and receives only what the lock adds or changes; the base's
  versions are recorded with the results.

Either way the shims runtime is made importable through a ``.pth`` file pointing at a snapshot
of this checkout's ``shims`` package (plus ``packaging``, used only where the lane lacks it).

A build holds the lane's build lock (``<envs>/.build-locks/<lane>.lock``, ``flock``): a second
run of the lane on this host waits for the first one's build, saying so, then re-syncs the
finished env (which costs an audit), instead of tearing down a venv still being made.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import TypedDict

import tomlkit

from retire.core import childenv, tooltext, uv
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import contained
from retire.lanes import revisions
from retire.lanes.model import LANE_NAME, Lane
from retire.locks.overlay import overlay_lock
from retire.mirrors.config import MirrorSet
from retire.runs import envcheck, lanebuilds

RUNTIME_DIR = "patchlane-runtime"
# what the last build learnt, to skip work on a re-sync
STATE_NAME = "patchlane-env.json"
PTH_NAME = "patchlane-shims.pth"
# overlay envs: the base's site-packages, after ours
BASE_PTH_NAME = "patchlane-overlay-base.pth"
# one lock file per lane, beside the envs (never inside one: a rebuild removes the env's folder)
BUILD_LOCKS = ".build-locks"
# Run inside an interpreter: its version, install paths and distributions. The first of two
# same-named distributions on sys.path is the one imports get, so it is the one recorded.
_PROBE = """
import importlib.metadata as m, json, re, sys, sysconfig
packages = {}
for dist in m.distributions():
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()  # PEP 503 normalised
    if name and name not in packages:
        packages[name] = dist.version
paths = sysconfig.get_paths()
print(json.dumps({"python": ".".join(map(str, sys.version_info[:3])), "purelib": paths["purelib"],
                  "platlib": paths["platlib"], "packages": packages}))
"""


class BuildError(PatchlaneError):
    """A lane environment could not be built; ``detail`` carries the tool's own explanation."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class EnvInfo(TypedDict):
    """What :func:`describe` reads from an interpreter."""

    python: str
    purelib: str
    platlib: str
    # canonical name → version
    packages: dict[str, str]


class EnvKind(enum.StrEnum):
    """How a lane environment is built (the module docstring says more)."""

    #: a fresh venv with the whole lock synced
    FULL = "full"
    #: a venv over a base interpreter's site-packages, with what the lock adds or changes
    OVERLAY = "overlay"


@dataclass(frozen=True)
class LaneEnv:
    lane: str
    path: Path
    python: Path
    kind: EnvKind
    python_version: str
    # canonical name → version, base included
    installed: dict[str, str] = field(default_factory=dict)
    # overlay only: the base's versions
    base: dict[str, str] = field(default_factory=dict)
    base_python: str | None = None
    # the packages the lock put into this venv
    synced: tuple[str, ...] = ()


def env_path(envs_dir: Path, lane_name: str) -> Path:
    if not LANE_NAME.fullmatch(lane_name):
        raise ValueError(f"invalid lane name {lane_name!r}")
    return envs_dir / lane_name


def inspect_env() -> dict[str, str]:
    """The environment an interpreter is inspected in: it is lane code, so the lane allow-list
    (:mod:`retire.core.childenv`), without the caller's own Python setup."""
    return {k: v for k, v in childenv.for_lane().items() if k not in uv.CALLER_PYTHON_ENV}


def describe(python: str | os.PathLike[str]) -> EnvInfo:
    """Python version, purelib and installed distributions of an interpreter."""
    proc = subprocess.run(
        [str(python), "-c", _PROBE],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=inspect_env(),
    )
    if proc.returncode != 0:
        raise BuildError(f"cannot inspect {python}", tooltext.plain(proc.stderr).strip())
    return json.loads(proc.stdout)


def describe_paths(python: str | Path) -> dict[str, str]:
    """purelib of an interpreter (without listing its distributions)."""
    code = (
        "import json, sysconfig; print(json.dumps({'purelib': sysconfig.get_paths()['purelib']}))"
    )
    proc = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=inspect_env(),
    )
    if proc.returncode != 0:
        raise BuildError(f"cannot inspect {python}", tooltext.plain(proc.stderr).strip())
    return json.loads(proc.stdout)


def run_uv(
    args: list[str], what: str, *, live: bool = False, indexes: Mapping[str, str] | None = None
) -> str:
    """uv's stderr (its summary) when it succeeds; a :class:`BuildError` saying ``what`` failed
    otherwise.
    ``live`` shows uv's progress on this terminal as well (see :func:`retire.core.uv.run`)."""
    proc = uv.run(args, live=live, indexes=indexes)
    if proc.returncode != 0:
        raise BuildError(
            f"{what}: {' / '.join(uv.failure_lines(proc.stderr)[:3]) or 'uv failed'}",
            proc.stderr.strip(),
        )
    return proc.stderr


@contextlib.contextmanager
def build_lock(
    envs_dir: Path, lane_name: str, say: Callable[[str], None] = lambda message: None
) -> Iterator[None]:
    """Hold the lane's build lock; when another process holds it, say so and wait for it."""
    try:
        import fcntl
    # not POSIX: builds are not serialised
    except ImportError:
        yield
        return
    folder = env_path(envs_dir, lane_name).parent / BUILD_LOCKS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(folder / f"{lane_name}.lock", flags, 0o644)
    except OSError as exc:
        raise BuildError(
            f"cannot take the build lock of lane {lane_name} under {folder}: {exc.strerror or exc}"
        ) from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode("ascii", "replace").strip() or "?"
            say(f"waiting: another run (pid {holder}) is building this lane's env")
            began = time.monotonic()
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            say(f"the other run's build ended after {time.monotonic() - began:.0f} s: re-syncing")
        # the holder's pid over the whole of what is read back: no ftruncate, which costs a
        # journal entry on every re-sync (7 ms of a 40 ms one here)
        os.pwrite(descriptor, f"{os.getpid():<31}\n".encode(), 0)
        yield
    finally:
        # closing releases the lock
        os.close(descriptor)


def _venv(path: Path, python: str, lane: Lane | None = None) -> Path:
    interpreter = path / "bin" / "python"
    if interpreter.exists() and (path / "pyvenv.cfg").exists():
        return interpreter
    if path.exists():
        shutil.rmtree(path)
    try:
        run_uv(
            ["venv", "--quiet", "--python", python, str(path)], f"cannot create a venv at {path}"
        )
    except BuildError as exc:
        # blame the interpreter only when uv did
        if _NO_PYTHON.search(exc.detail):
            raise BuildError(no_python(python, exc.detail, lane), exc.detail) from None
        raise
    return interpreter


# what uv says when it has no interpreter for a version: none at all, a download it may not make,
# or one on PATH that does not run (a pyenv shim for a version pyenv has not activated: exit 127)
_NO_PYTHON = re.compile(
    r"no interpreter found|no python|failed to inspect python interpreter|no download found"
    r"|failed to download",
    re.IGNORECASE,
)


def no_python(python: str, detail: str, lane: Lane | None = None) -> str:
    """One line for a lane whose Python uv cannot find: which Python, what uv found instead, and
    the three ways to provide it (pyenv, ``uv python install``, another ``python =``)."""
    said = uv.failure_lines(detail)
    first = said[0].removeprefix("error: ") if said else "uv found none"
    # pyenv's shim names the versions that have the command: one of them, activated, is the fix
    listed = re.search(r"exists in these Python versions:\n((?:[ \t]+[0-9][^\s]*\n?)+)", detail)
    versions = listed[1].split() if listed else []
    pyenv = (
        f"`export PYENV_VERSION=$(pyenv version-name):{versions[-1]}` (pyenv has "
        f"{', '.join(versions)})"
        if versions
        else "a pyenv version in PYENV_VERSION"
    )
    if lane is None:
        where, who = "the lane's file", "this needs"
    else:
        where, who = lane.file or f"lanes/{lane.name}.toml", f"lane {lane.name} needs"
    return (
        f"{who} Python {python}, which uv cannot find here ({first}) — is Python {python} "
        f"installed? Provide it: {pyenv}, or `uv python install {python}`, or write "
        f'`python = "X.Y"` in {where} for a Python this host has'
    )


def link_base(purelib: str | Path, site_dirs: list[str], name: str = BASE_PTH_NAME) -> None:
    """Put a base interpreter's site-packages behind a venv's own (overlay envs, bisection).

    Not ``--system-site-packages``: a GPU image's python is often itself a venv, and a venv made
    from it would see the system's site-packages, not the image's torch. ``addsitedir`` also runs
    the base's own .pth files (editable installs, namespace hooks).
    """
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in dict.fromkeys(site_dirs))
    Path(purelib, name).write_text(lines, encoding="utf-8")


def _runtime_sources() -> list[Path]:
    import packaging

    import shims

    return [Path(shims.__file__).parent, Path(packaging.__file__).parent]


def _fingerprint(folders: list[Path]) -> str:
    """Cheap identity of source trees (paths, sizes, mtimes): unchanged trees are not recopied.

    ``os.walk``, not ``Path.rglob``: every re-sync of a lane takes it, and sorting a few hundred
    Path objects was a tenth of a warm re-sync (issue 37)."""
    digest = hashlib.sha256()
    for folder in folders:
        for top, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(top, name)
                try:
                    stat = os.stat(path)
                except OSError:
                    continue
                if S_ISREG(stat.st_mode):
                    digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _install_runtime(env_dir: Path, purelib: str, sources: list[Path]) -> None:
    """Snapshot ``shims`` (and ``packaging``) into the env and put them on its path."""
    runtime = env_dir / RUNTIME_DIR
    if runtime.exists():
        shutil.rmtree(runtime)
    pycache = shutil.ignore_patterns("__pycache__", "*.pyc")

    def ignore(folder: str, names: list[str]) -> set[str]:
        # The runtime only: a catalogue that happens to sit in the runtime's folder (this
        # repository's) is found through PATCHLANE_SHIMS_PATH like any shop's, never copied.
        return set(pycache(folder, names)) | {
            n for n in names if Path(folder, n, "manifest.toml").is_file()
        }

    for source in sources:
        # packaging is appended after site-packages, so a lane that locks its own keeps it.
        shutil.copytree(source, runtime / source.name, ignore=ignore)
    Path(purelib, PTH_NAME).write_text(str(runtime.resolve()) + "\n", encoding="utf-8")


def _synced_nothing(uv_output: str) -> bool:
    """uv said it only audited the env: nothing was installed, removed or rebuilt."""
    return ("Audited" in uv_output or "Checked" in uv_output) and not any(
        word in uv_output for word in ("Installed", "Uninstalled", "Prepared", "Built")
    )


def _parse_lock(lock_file: Path, data: bytes) -> dict:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise BuildError(f"{lock_file} is not valid TOML ({exc})") from None


@dataclass(frozen=True)
class _Plan:
    """What one build is made from, settled before anything is installed."""

    lane: Lane
    lock_file: Path
    lock_bytes: bytes
    path: Path
    # the base interpreter of an overlay env (None: a full env)
    overlay: str | None
    wheelhouse: Path | None
    # upstream git URL → this host's mirror (a revision lane's packages)
    sources: dict[str, str]
    # the revisions whose wheels a named build makes (``[lane.revisions]`` ``build``)
    builds: tuple[lanebuilds.LaneBuild, ...] = ()

    @property
    def made_from(self) -> list[str]:
        return ["overlay", self.overlay] if self.overlay else ["full", self.lane.python]

    @property
    def lock_sha256(self) -> str:
        return hashlib.sha256(self.lock_bytes).hexdigest()

    def parse_lock(self) -> dict:
        return _parse_lock(self.lock_file, self.lock_bytes)


@dataclass(frozen=True)
class _Venv:
    """The venv made (or found) for a plan, and the lock as this host installs into it."""

    python: Path
    # what the state file compares: lock, overlay, wheelhouse, base
    identity: dict[str, str | None]
    # the parsed lock, where a step needed it
    lock: dict | None
    # the lock as this host installs it, when it differs from the file
    to_sync: dict | None
    # overlay only: the base interpreter and its packages
    base: EnvInfo | None
    # overlay only: what the lock adds to the base
    synced: list[str] | None


@dataclass(frozen=True)
class _Learnt:
    """What a build knows of the env once synced: its interpreter, packages and what the lock
    puts there."""

    info: EnvInfo
    synced: list[str]
    expected: dict[str, str]


def build(
    lane: Lane,
    lock_file: Path,
    envs_dir: Path,
    *,
    overlay: str | None = None,
    live: bool = False,
    wheelhouse: Path | None = None,
    mirrors: MirrorSet | None = None,
    say: Callable[[str], None] = lambda message: None,
) -> LaneEnv:
    """Build (or re-sync) the lane's environment from its lock, holding the lane's build lock
    (:func:`build_lock`; ``say`` tells of a wait for it). Raises :class:`BuildError`.

    ``wheelhouse`` (a folder from ``patchlane wheelhouse gather``/``join``) installs every file from
    that folder with no index and no network, each checked against the lock's sha256; ``mirrors``
    (a MirrorSet) is where a revision lane's packages build from on this host: the lock's upstream
    git URLs are mapped to them (a InputError, naming the lane file, when one is missing).

    A re-sync that changes nothing reuses what the last build learnt about the env (its
    packages, its runtime snapshot) and does not even parse the lock, so a warm rebuild costs
    little more than uv's own sync.
    """
    if not lock_file.is_file():
        raise BuildError(f"no lock at {lock_file}: run `nox -s lock -- {lane.name}`")
    sources = revisions.local_urls(lane.revisions, mirrors, lane.origin) if lane.revisions else {}
    plan = _Plan(
        lane,
        lock_file,
        lock_file.read_bytes(),
        env_path(envs_dir, lane.name),
        overlay,
        wheelhouse,
        sources,
        lanebuilds.lane_builds(lane.revisions, mirrors, lane.origin),
    )
    _make_folder(plan.path)
    with build_lock(envs_dir, lane.name, say):
        state = _usable_state(plan)
        venv, built = _named_builds(plan, _make_venv(plan), say)
        output = _sync(plan, venv, live=live)
        if venv.base is not None or built:
            purelib = describe_paths(venv.python)["purelib"]
            if venv.base is not None:
                link_base(purelib, [venv.base["purelib"], venv.base["platlib"]])
            lanebuilds.stamp_lane_builds(Path(purelib), plan.builds, built)
        learnt = _learn(plan, venv, state, output)
        _check(plan, learnt)
        return _finish(plan, venv, learnt, state)


def _named_builds(
    plan: _Plan, venv: _Venv, say: Callable[[str], None]
) -> tuple[_Venv, dict[str, str]]:
    """The venv's lock with each named build's wheel in place of uv's build of its revision, and
    ``{distribution: commit}`` of those; the venv as it was when the lane names no build. The
    build runs for the interpreter the wheel is for: an overlay's base (whose packages it sees),
    else the lane's venv."""
    if not plan.builds or venv.to_sync is None:
        return venv, {}
    python = Path(plan.overlay) if plan.overlay else venv.python
    names = ", ".join(b.revision.distribution for b in plan.builds)
    say(f"{plan.lane.name}: {names} from its named build")
    try:
        to_sync, built = lanebuilds.with_built_wheels(venv.to_sync, plan.builds, plan.path, python)
    except PatchlaneError as exc:
        raise BuildError(f"{plan.lane.name}: {exc}") from None
    return dataclasses.replace(venv, to_sync=to_sync), built


def _usable_state(plan: _Plan) -> dict:
    """What the last build learnt, or nothing when the env must be made afresh."""
    state = _read_state(plan.path / STATE_NAME)
    # Another interpreter or kind (a re-sync cannot turn one into the other), or another lock (a
    # re-sync would only audit): install afresh, hash-checked.
    if plan.path.exists() and (
        state.get("made_from") != plan.made_from
        or (state.get("identity") or {}).get("lock") not in (None, plan.lock_sha256)
    ):
        shutil.rmtree(plan.path)
        return {}
    return state


def _make_venv(plan: _Plan) -> _Venv:
    """The venv (kept when it is one), and the lock cut down to what this host installs."""
    identity: dict[str, str | None] = {"lock": plan.lock_sha256, "overlay": plan.overlay}
    if plan.wheelhouse is not None:
        identity["wheelhouse"] = str(plan.wheelhouse.resolve())
    lock: dict | None = None
    to_sync: dict | None = None
    base: EnvInfo | None = None
    synced: list[str] | None = None
    if plan.overlay:
        base = describe(plan.overlay)
        identity["base"] = hashlib.sha256(
            json.dumps(base["packages"], sort_keys=True).encode()
        ).hexdigest()
        python = _venv(plan.path, plan.overlay)
        lock = plan.parse_lock()
        to_sync, synced = overlay_lock(lock, base["packages"])
    else:
        python = _venv(plan.path, plan.lane.python, plan.lane)
    if plan.wheelhouse is not None or plan.sources:
        if lock is None:
            lock = plan.parse_lock()
        to_sync = _localized(
            to_sync or {k: v for k, v in lock.items() if k != "tool"},
            plan.lane,
            plan.lock_sha256,
            plan.wheelhouse,
            plan.sources,
        )
    return _Venv(python, identity, lock, to_sync, base, synced)


def _sync(plan: _Plan, venv: _Venv, *, live: bool) -> str:
    """``uv pip sync`` of the lock (or of what this host installs of it); uv's summary."""
    if venv.to_sync is None:
        # uv reads (and hash-checks) the lock itself
        sync_from = plan.lock_file
    else:
        sync_from = plan.path / ("overlay" if plan.overlay else "local") / "pylock.toml"
        sync_from.parent.mkdir(exist_ok=True)
        sync_from.write_text(tomlkit.dumps(venv.to_sync), encoding="utf-8")
    wheelhouse = plan.wheelhouse
    # --find-links: an sdist's or a revision's build requirements, where their wheels were put in
    # the folder
    offline = (
        ["--offline", "--no-index", "--find-links", str(wheelhouse)]
        if wheelhouse is not None
        else []
    )
    shown = f"{plan.lock_file.parent.name}/{plan.lock_file.name}"
    try:
        return run_uv(
            [
                "pip",
                "sync",
                "--preview-features",
                "pylock",
                *offline,
                "--python",
                str(venv.python),
                str(sync_from),
            ],
            f"cannot install {shown} into the lane"
            + (f" from the wheelhouse {wheelhouse}" if wheelhouse is not None else ""),
            live=live,
            # the lane's own indexes: the host's credentials for them reach uv
            indexes={i.name: i.url for i in plan.lane.indexes if i.url},
        )
    except BuildError as exc:
        # uv's "the target environment is not supported by the lockfile": say which one it is for
        if "not supported by the lock" not in exc.detail:
            raise
        lock = venv.lock if venv.lock is not None else plan.parse_lock()
        declared = " or ".join(str(m) for m in lock.get("environments") or ()) or "?"
        raise BuildError(
            f"{shown} is for {declared}; {venv.python} is not such an interpreter — run this "
            f"lane on a host it was locked for, or lock it for this one (the lane's platform and "
            f"python)",
            exc.detail,
        ) from None


def _learn(plan: _Plan, venv: _Venv, state: dict, output: str) -> _Learnt:
    """The env's interpreter and packages: from the last build when uv changed nothing, else
    read afresh."""
    if state.get("identity") == venv.identity and _synced_nothing(output) and "expected" in state:
        return _Learnt(state["info"], state["synced"], state["expected"])
    lock = venv.lock if venv.lock is not None else plan.parse_lock()
    if venv.base is not None and venv.synced is not None and venv.to_sync is not None:
        info = describe(venv.python)
        return _Learnt(info, venv.synced, envcheck.expected_versions(venv.to_sync, info["python"]))
    info = _full_env_info(plan.path, lock) or describe(venv.python)
    synced = [p["name"] for p in lock.get("packages", [])]
    return _Learnt(info, synced, envcheck.expected_versions(lock, info["python"]))


def _check(plan: _Plan, learnt: _Learnt) -> None:
    """A :class:`BuildError` unless the env runs the lane's Python and holds what the lock
    says."""
    info = learnt.info
    if not plan.overlay and info["python"].rsplit(".", 1)[0] != plan.lane.python:
        raise BuildError(
            f"the venv runs Python {info['python']}, the lane asks for {plan.lane.python}"
        )
    if problems := envcheck.mismatches(
        learnt.expected, envcheck.installed_versions(info["purelib"], info["platlib"])
    ):
        raise BuildError(
            f"the env at {plan.path} does not match {plan.lock_file.name}: "
            f"{'; '.join(problems[:3])}"
            f"{' …' if len(problems) > 3 else ''} (delete the env to rebuild it)"
        )


def _finish(plan: _Plan, venv: _Venv, learnt: _Learnt, state: dict) -> LaneEnv:
    """The runtime snapshot refreshed where it changed, what was learnt kept for the next
    build, and the env."""
    info = learnt.info
    sources_dirs = _runtime_sources()
    runtime = _fingerprint(sources_dirs)
    if state.get("runtime") != runtime or not Path(info["purelib"], PTH_NAME).exists():
        _install_runtime(plan.path, info["purelib"], sources_dirs)
    text = json.dumps(
        {
            "made_from": plan.made_from,
            "identity": venv.identity,
            "info": info,
            "runtime": runtime,
            "synced": list(learnt.synced),
            "expected": learnt.expected,
        }
    )
    # a re-sync that changed nothing leaves the file as it is (the write was a tenth of it)
    if json.loads(text) != state:
        (plan.path / STATE_NAME).write_text(text, encoding="utf-8")
    return LaneEnv(
        lane=plan.lane.name,
        path=plan.path,
        python=venv.python,
        kind=EnvKind.OVERLAY if plan.overlay else EnvKind.FULL,
        python_version=info["python"],
        installed=info["packages"],
        base=venv.base["packages"] if venv.base is not None else {},
        base_python=plan.overlay,
        synced=tuple(learnt.synced),
    )


def _make_folder(path: Path) -> None:
    """The folder of lane envs; a stray file or a link where it or the lane's env goes is one
    line, not a traceback (a link is never followed: the env is deleted and remade)."""
    try:
        contained(path.parent, path)
    except InputError as exc:
        raise BuildError(str(exc)) from None
    for folder in (path.parent, path):
        if folder.exists() and not folder.is_dir():
            raise BuildError(
                f"{folder} is a file where the lane env folder goes: delete it (patchlane makes "
                f"the folder)"
            )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(
            f"cannot make {path.parent}: {exc.strerror or exc} (a stray file on the way?)"
        ) from None


def _localized(
    lock: dict, lane: Lane, lock_sha256: str, wheelhouse: Path | None, sources: dict[str, str]
) -> dict:
    """The lock as this host installs it: revisions from the local mirrors, files from the
    wheelhouse."""
    from retire.core.errors import InputError
    from retire.lanes.revisions import localize_vcs
    from retire.locks import wheelhouse as houses

    lock = localize_vcs(lock, sources)
    if wheelhouse is None:
        return lock
    try:
        house = houses.Wheelhouse.load(wheelhouse)
        return houses.localize(lock, house, wheelhouse, lane=lane.name, lock_sha256=lock_sha256)
    except InputError as exc:
        raise BuildError(str(exc)) from None


def _full_env_info(path: Path, lock: dict) -> EnvInfo | None:
    """What :func:`describe` would say of a full env, without starting its interpreter.

    ``uv pip sync`` leaves exactly the lock's packages in the venv, and uv's pyvenv.cfg names the
    interpreter's version; None where the layout is not the one uv makes on POSIX.
    """
    try:
        config = dict(
            line.split(" = ", 1)
            for line in (path / "pyvenv.cfg").read_text().splitlines()
            if " = " in line
        )
    except OSError:
        return None
    version = config.get("version_info", "")
    purelib = path / "lib" / f"python{'.'.join(version.split('.')[:2])}" / "site-packages"
    if config.get("implementation") != "CPython" or not purelib.is_dir():
        return None
    # A package whose marker does not hold here was not installed: judge markers as the venv would.
    packages = envcheck.expected_versions(lock, version)
    return {
        "python": version,
        "purelib": str(purelib),
        "platlib": str(purelib),
        "packages": packages,
    }


def _read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
