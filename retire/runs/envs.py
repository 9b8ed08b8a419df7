"""Lane environments: a venv built from the lane's lock with uv, hash-checked.

Two kinds:

- **full**: a fresh venv, ``uv pip sync`` of the whole lock (uv refuses a file whose hash does
  not match the lock). Re-syncing an unchanged env with a warm cache costs milliseconds.
- **overlay**: for a GPU host whose image already carries torch/Triton. The venv sees the base
  interpreter's site-packages and receives only what the lock adds or changes; the base's
  versions are recorded with the results.

Either way the shims runtime is made importable through a ``.pth`` file pointing at a snapshot
of this checkout's ``shims`` package (plus ``packaging``, used only where the lane lacks it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit

from retire.core import childenv, uv
from retire.core.errors import PatchlaneError
from retire.lanes import revisions
from retire.lanes.model import LANE_NAME, Lane
from retire.locks.overlay import overlay_lock
from retire.runs import envcheck

RUNTIME_DIR = "patchlane-runtime"
# what the last build learnt, to skip work on a re-sync
STATE_NAME = "patchlane-env.json"
PTH_NAME = "patchlane-shims.pth"
# overlay envs: the base's site-packages, after ours
BASE_PTH_NAME = "patchlane-overlay-base.pth"
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


@dataclass(frozen=True)
class LaneEnv:
    lane: str
    path: Path
    python: Path
    # "full" | "overlay"
    kind: str
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


def describe(python: str | Path) -> dict:
    """Python version, purelib and installed distributions of an interpreter."""
    proc = subprocess.run(
        [str(python), "-c", _PROBE],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=inspect_env(),
    )
    if proc.returncode != 0:
        raise BuildError(f"cannot inspect {python}", proc.stderr.strip())
    return json.loads(proc.stdout)


def describe_paths(python: str | Path) -> dict:
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
        raise BuildError(f"cannot inspect {python}", proc.stderr.strip())
    return json.loads(proc.stdout)


def run_uv(args: list[str], what: str, *, live: bool = False) -> str:
    """uv's stderr (its summary) when it succeeds; a :class:`BuildError` saying ``what`` failed
    otherwise.
    ``live`` shows uv's progress on this terminal as well (see :func:`retire.core.uv.run`)."""
    proc = uv.run(args, live=live)
    if proc.returncode != 0:
        raise BuildError(
            f"{what}: {' / '.join(uv.failure_lines(proc.stderr)[:3]) or 'uv failed'}",
            proc.stderr.strip(),
        )
    return proc.stderr


def _venv(path: Path, python: str) -> Path:
    interpreter = path / "bin" / "python"
    if interpreter.exists() and (path / "pyvenv.cfg").exists():
        return interpreter
    if path.exists():
        shutil.rmtree(path)
    run_uv(
        ["venv", "--quiet", "--python", python, str(path)],
        f"cannot create a Python {python} venv (is that interpreter installed? uv looks on PATH)",
    )
    return interpreter


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
    """Cheap identity of source trees (paths, sizes, mtimes): unchanged trees are not recopied."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
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


def build(
    lane: Lane,
    lock_file: Path,
    envs_dir: Path,
    *,
    overlay: str | None = None,
    live: bool = False,
    wheelhouse: Path | None = None,
    mirrors=None,
) -> LaneEnv:
    """Build (or re-sync) the lane's environment from its lock. Raises :class:`BuildError`.

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
    lock_bytes = lock_file.read_bytes()
    path = env_path(envs_dir, lane.name)
    _make_folder(path)
    state_file = path / STATE_NAME
    state = _read_state(state_file)
    made_from = ["overlay", overlay] if overlay else ["full", lane.python]
    identity = {"lock": hashlib.sha256(lock_bytes).hexdigest(), "overlay": overlay}
    if wheelhouse is not None:
        identity["wheelhouse"] = str(wheelhouse.resolve())
    # Another interpreter or kind (a re-sync cannot turn one into the other), or another lock (a
    # re-sync would only audit): install afresh, hash-checked.
    if path.exists() and (
        state.get("made_from") != made_from
        or (state.get("identity") or {}).get("lock") not in (None, identity["lock"])
    ):
        shutil.rmtree(path)
        state = {}
    lock: dict | None = None
    base: dict[str, str] = {}
    # the lock as this host installs it, when it differs from the file
    to_sync: dict | None = None
    if overlay:
        base_info = describe(overlay)
        base = base_info["packages"]
        identity["base"] = hashlib.sha256(json.dumps(base, sort_keys=True).encode()).hexdigest()
        python = _venv(path, overlay)
        lock = _parse_lock(lock_file, lock_bytes)
        to_sync, synced = overlay_lock(lock, base)
    else:
        python = _venv(path, lane.python)
    if wheelhouse is not None or sources:
        if lock is None:
            lock = _parse_lock(lock_file, lock_bytes)
        to_sync = _localized(
            to_sync or {k: v for k, v in lock.items() if k != "tool"},
            lane,
            identity["lock"],
            wheelhouse,
            sources,
        )
    if to_sync is None:
        # uv reads (and hash-checks) the lock itself
        sync_from = lock_file
    else:
        sync_from = path / ("overlay" if overlay else "local") / "pylock.toml"
        sync_from.parent.mkdir(exist_ok=True)
        sync_from.write_text(tomlkit.dumps(to_sync), encoding="utf-8")
    # --find-links: an sdist's or a revision's build requirements, where their wheels were put in
    # the folder
    offline = (
        ["--offline", "--no-index", "--find-links", str(wheelhouse)]
        if wheelhouse is not None
        else []
    )
    output = run_uv(
        [
            "pip",
            "sync",
            "--preview-features",
            "pylock",
            *offline,
            "--python",
            str(python),
            str(sync_from),
        ],
        f"cannot install {lock_file.parent.name}/{lock_file.name} into the lane"
        + (f" from the wheelhouse {wheelhouse}" if wheelhouse is not None else ""),
        live=live,
    )
    if overlay:
        link_base(describe_paths(python)["purelib"], [base_info["purelib"], base_info["platlib"]])
    if state.get("identity") == identity and _synced_nothing(output) and "expected" in state:
        info, synced, expected = state["info"], state["synced"], state["expected"]
    else:
        if lock is None:
            lock = _parse_lock(lock_file, lock_bytes)
        if not overlay:
            synced = [p["name"] for p in lock.get("packages", [])]
        info = (None if overlay else _full_env_info(path, lock)) or describe(python)
        expected = envcheck.expected_versions(to_sync if overlay else lock, info["python"])
    if not overlay and info["python"].rsplit(".", 1)[0] != lane.python:
        raise BuildError(f"the venv runs Python {info['python']}, the lane asks for {lane.python}")
    if problems := envcheck.mismatches(
        expected, envcheck.installed_versions(info["purelib"], info["platlib"])
    ):
        raise BuildError(
            f"the env at {path} does not match {lock_file.name}: {'; '.join(problems[:3])}"
            f"{' …' if len(problems) > 3 else ''} (delete the env to rebuild it)"
        )
    sources_dirs = _runtime_sources()
    runtime = _fingerprint(sources_dirs)
    if state.get("runtime") != runtime or not Path(info["purelib"], PTH_NAME).exists():
        _install_runtime(path, info["purelib"], sources_dirs)
    state_file.write_text(
        json.dumps(
            {
                "made_from": made_from,
                "identity": identity,
                "info": info,
                "runtime": runtime,
                "synced": list(synced),
                "expected": expected,
            }
        ),
        encoding="utf-8",
    )
    return LaneEnv(
        lane=lane.name,
        path=path,
        python=python,
        kind="overlay" if overlay else "full",
        python_version=info["python"],
        installed=info["packages"],
        base=base,
        base_python=overlay,
        synced=tuple(synced),
    )


def _make_folder(path: Path) -> None:
    """The folder of lane envs; a stray file where it or the lane's env goes is one line, not a
    traceback."""
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


def _full_env_info(path: Path, lock: dict) -> dict | None:
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
