"""A package universe for the lock and lane benchmarks: generated wheels with a layered
dependency graph, served on loopback by tests.support's real index, with a realistic latency.

Nothing here reaches beyond 127.0.0.1: lanes name the loopback index as their default index,
and the host's uv configuration is hidden for the duration (as tests/conftest.py does).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import BUGGY_TARGET
from tests.support.wheels import build_wheel

ROOT = Path(__file__).resolve().parent.parent
LAYERS = 4
PER_LAYER = 12
VERSIONS = ("1.0.0", "1.1.0", "2.0.0")
#: per request, like a nearby mirror; a CDN far away is slower still.
LATENCY_S = 0.03
# the interpreter running these benchmarks: no pyenv needed
LANE_PYTHON = "3.11"
LANE_PLATFORM = "x86_64-manylinux_2_28"
_HIDDEN_UV_SETTINGS = (
    "UV_INDEX",
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_CONFIG_FILE",
    "UV_NO_CONFIG",
    "UV_OFFLINE",
    "UV_CACHE_DIR",
    "VIRTUAL_ENV",
)


def package_name(layer: int, number: int) -> str:
    return f"bench-l{layer}-p{number:02d}"


def dependencies(layer: int, number: int) -> list[str]:
    """Two packages of the next layer down (leaves have none): a graph that fans out and
    overlaps."""
    if layer == LAYERS - 1:
        return []
    picks = sorted({(number * 5 + 1) % PER_LAYER, (number * 7 + 3) % PER_LAYER})
    return [package_name(layer + 1, pick) for pick in picks]


def closure(requirements: list[str]) -> set[str]:
    """Every package a lane with these top-level packages (plain names) resolves to."""
    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        _, layer, number = name.rsplit("-", 2)
        todo += dependencies(int(layer[1:]), int(number[1:]))
    return seen


def lane_requirements(lane_number: int) -> list[str]:
    """Top-level packages of bench lane ``lane_number``: 2 to 5 of them, so lanes differ in size
    (17 to 38 packages each) and overlap, as a shop's lanes do."""
    top = 2 + lane_number % 4
    return [package_name(0, (lane_number + step * 5) % PER_LAYER) for step in range(top)]


def build_index(dest: Path, latency: float = LATENCY_S) -> PackageIndex:
    index = PackageIndex(latency=latency)
    for layer in range(LAYERS):
        for number in range(PER_LAYER):
            requires = [f"{dep}>=1.0" for dep in dependencies(layer, number)]
            for month, version in enumerate(VERSIONS, start=1):
                wheel = build_wheel(dest, package_name(layer, number), version, requires=requires)
                index.add(wheel, f"2026-0{month}-01")
    # toylib 1.0 and its bug (tests.support.shimtree): what the lane-run benchmark's shim fixes.
    toylib = build_wheel(dest, "toylib", "1.0", files={"toylib.py": textwrap.dedent(BUGGY_TARGET)})
    index.add(toylib, "2026-01-05")
    return index


def lane_toml(
    requirements: list[str],
    index_url: str,
    *,
    python: str = LANE_PYTHON,
    shims: tuple[str, ...] = (),
) -> str:
    listed = ", ".join(f'"{req}"' for req in requirements)
    shim_list = ", ".join(f'"{shim}"' for shim in shims)
    return (
        "[lane]\n"
        f'python = "{python}"\n'
        f'platform = "{LANE_PLATFORM}"\n'
        f"requirements = [{listed}]\n"
        f"shims = [{shim_list}]\n\n"
        "[lane.indexes.loopback]\n"
        f'url = "{index_url}"\n'
        "default = true\n"
    )


@contextlib.contextmanager
def isolated_uv(work: Path) -> Iterator[None]:
    """uv sees no configuration of this host (no mirror, no user uv.toml), only the lanes' index."""
    empty = work / "no-uv-config"
    empty.mkdir(parents=True, exist_ok=True)
    saved = {
        key: os.environ.get(key)
        for key in (*_HIDDEN_UV_SETTINGS, "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS")
    }
    for key in _HIDDEN_UV_SETTINGS:
        os.environ.pop(key, None)
    os.environ["XDG_CONFIG_HOME"] = str(empty)
    os.environ["XDG_CONFIG_DIRS"] = str(empty)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def uv_cache(path: Path | None = None) -> Iterator[Path]:
    """``UV_CACHE_DIR`` for the duration: ``path`` (a warm cache kept by the caller), or a fresh,
    empty one that is deleted afterwards (a cold cache)."""
    fresh = path is None
    folder = Path(tempfile.mkdtemp(prefix="patchlane-bench-uv-cache-")) if path is None else path
    previous = os.environ.get("UV_CACHE_DIR")
    os.environ["UV_CACHE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop("UV_CACHE_DIR", None)
        else:
            os.environ["UV_CACHE_DIR"] = previous
        if fresh:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class RunningIndex:
    url: str
    latency: float
    pid: int

    def cpu_seconds(self) -> float:
        """CPU the index server has used so far (Linux /proc; 0 where unavailable)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(work: Path, latency: float = LATENCY_S) -> Iterator[RunningIndex]:
    """The universe's index on loopback, in a process of its own (so the server's Python never
    competes with patchlane's threads for one GIL), with uv isolated from the host's
    configuration."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._universe", str(work / "wheels"), str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    # both are pipes (PIPE above); the check tells the type checker so
    stdout, stdin = proc.stdout, proc.stdin
    if stdout is None or stdin is None:
        proc.kill()
        raise RuntimeError("the loopback index's pipes did not open")
    try:
        first = stdout.readline().split()
        if first[:1] != ["SERVING"]:
            raise RuntimeError(f"the loopback index did not start (exit {proc.poll()})")
        with isolated_uv(work):
            yield RunningIndex(first[1], latency, proc.pid)
    finally:
        # the server exits when its stdin closes
        stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _serve(wheels: Path, latency: float) -> None:
    index = build_index(wheels, latency)
    with IndexServer(index) as server:
        print("SERVING", server.url, flush=True)
        # until the benchmark closes our stdin (or dies)
        sys.stdin.read()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), float(sys.argv[2]))
