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

import json
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.utils import canonicalize_name

from retire import uv
from retire.errors import PatchlaneError
from retire.lanes import LANE_NAME, Lane

RUNTIME_DIR = "patchlane-runtime"
PTH_NAME = "patchlane-shims.pth"
_PROBE = (
    "import importlib.metadata as m, json, sys, sysconfig;"
    "print(json.dumps({'python': '.'.join(map(str, sys.version_info[:3])),"
    " 'purelib': sysconfig.get_paths()['purelib'],"
    " 'packages': {d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}}))"
)


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
    kind: str  # "full" | "overlay"
    python_version: str
    installed: dict[str, str] = field(default_factory=dict)  # canonical name → version, base included
    base: dict[str, str] = field(default_factory=dict)  # overlay only: the base's versions
    base_python: str | None = None
    synced: tuple[str, ...] = ()  # the packages the lock put into this venv


def env_path(envs_dir: Path, lane_name: str) -> Path:
    if not LANE_NAME.fullmatch(lane_name):
        raise ValueError(f"invalid lane name {lane_name!r}")
    return envs_dir / lane_name


def describe(python: str | Path) -> dict:
    """Python version, purelib and installed distributions of an interpreter."""
    proc = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BuildError(f"cannot inspect {python}", proc.stderr.strip())
    data = json.loads(proc.stdout)
    data["packages"] = {str(canonicalize_name(k)): v for k, v in data["packages"].items()}
    return data


def _run_uv(args: list[str], what: str) -> None:
    proc = subprocess.run([uv.binary(), *args], capture_output=True, text=True, env=uv.base_env(),
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("warning:")]
        raise BuildError(f"{what}: {' / '.join(lines[:3]) or 'uv failed'}", proc.stderr.strip())


def _venv(path: Path, python: str, *, system_site_packages: bool) -> Path:
    interpreter = path / "bin" / "python"
    marker = path / "pyvenv.cfg"
    wanted_system = "include-system-site-packages = true" if system_site_packages else "include-system-site-packages = false"
    if interpreter.exists() and marker.exists() and wanted_system in marker.read_text():
        return interpreter
    if path.exists():
        shutil.rmtree(path)
    args = ["venv", "--quiet", "--python", python, str(path)]
    if system_site_packages:
        args.insert(1, "--system-site-packages")
    _run_uv(args, f"cannot create a Python {python} venv (is that interpreter installed? uv looks on PATH)")
    return interpreter


def overlay_lock(lock: dict, base: dict[str, str]) -> tuple[dict, list[str]]:
    """The lock cut down to the packages the base lacks or has at another version."""
    keep = [p for p in lock.get("packages", []) if base.get(str(canonicalize_name(p["name"]))) != p.get("version")]
    cut = {k: v for k, v in lock.items() if k not in ("packages", "tool")}
    cut["packages"] = keep
    return cut, [p["name"] for p in keep]


def _install_runtime(env_dir: Path, purelib: str) -> None:
    """Snapshot ``shims`` (and ``packaging``) into the env and put them on its path."""
    import packaging

    import shims

    runtime = env_dir / RUNTIME_DIR
    if runtime.exists():
        shutil.rmtree(runtime)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(shims.__file__).parent, runtime / "shims", ignore=ignore)
    # Appended after site-packages, so a lane that locks its own packaging keeps it.
    shutil.copytree(Path(packaging.__file__).parent, runtime / "packaging", ignore=ignore)
    Path(purelib, PTH_NAME).write_text(str(runtime.resolve()) + "\n", encoding="utf-8")


def build(lane: Lane, lock_file: Path, envs_dir: Path, *, overlay: str | None = None) -> LaneEnv:
    """Build (or re-sync) the lane's environment from its lock. Raises :class:`BuildError`."""
    if not lock_file.is_file():
        raise BuildError(f"no lock at {lock_file}: run `nox -s lock -- {lane.name}`")
    try:
        lock = tomllib.loads(lock_file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BuildError(f"{lock_file} is not valid TOML ({exc})") from None
    path = env_path(envs_dir, lane.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    base: dict[str, str] = {}
    if overlay:
        base_info = describe(overlay)
        base = base_info["packages"]
        python = _venv(path, overlay, system_site_packages=True)
        cut, synced = overlay_lock(lock, base)
        cut_file = path / "overlay" / "pylock.toml"
        cut_file.parent.mkdir(exist_ok=True)
        cut_file.write_text(tomlkit.dumps(cut), encoding="utf-8")
        sync_from = cut_file
    else:
        python = _venv(path, lane.python, system_site_packages=False)
        synced = [p["name"] for p in lock.get("packages", [])]
        sync_from = lock_file
    _run_uv(["pip", "sync", "--preview-features", "pylock", "--python", str(python), str(sync_from)],
            f"cannot install {sync_from.name} into the lane")
    info = describe(python)
    if not overlay and info["python"].rsplit(".", 1)[0] != lane.python:
        raise BuildError(f"the venv runs Python {info['python']}, the lane asks for {lane.python}")
    _install_runtime(path, info["purelib"])
    return LaneEnv(
        lane=lane.name, path=path, python=python, kind="overlay" if overlay else "full",
        python_version=info["python"], installed=info["packages"], base=base, base_python=overlay,
        synced=tuple(synced),
    )
