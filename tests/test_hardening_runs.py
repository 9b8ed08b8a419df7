"""Issue 20, classes 2, 6 and 7, through real `patchlane run` processes on a toy lane (real uv,
a loopback index): lane code cannot read patchlane's token, two runs of one lane at once share
its env build, and both isolations give the same outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from retire.runs import envs
from tests.conftest import ROOT, subprocess_env
from tests.support import shimtree
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.slow

LANE = """
[lane]
python = "3.11"
requirements = ["toylib==1.0"]
shims = {shims}

[lane.indexes.main]
url = "{url}"
default = true
"""


@pytest.fixture(scope="module")
def toy_index(tmp_path_factory):
    index = PackageIndex()
    wheels = tmp_path_factory.mktemp("toy-wheels")
    files = {"toylib.py": textwrap.dedent(shimtree.BUGGY_TARGET)}
    index.add(build_wheel(wheels, "toylib", "1.0", files=files), "2026-01-05")
    with IndexServer(index) as server:
        yield server


def make_project(root: Path, server: IndexServer, shims: dict[str, str | None]) -> Path:
    """A project with one lane, ``cpu``, running ``shims`` (id → reproducer text or the toy's),
    locked against ``server``."""
    (root / "lanes").mkdir(parents=True)
    for shim, reproducer in shims.items():
        if reproducer is None:
            shimtree.write_shim(root / "shims", shim)
        else:
            shimtree.write_shim(root / "shims", shim, reproducer=reproducer)
    (root / "lanes" / "cpu.toml").write_text(
        LANE.format(shims=json.dumps(list(shims)), url=server.url)
    )
    done = patchlane(root, "lock")
    assert done.returncode == 0, done.stderr
    return root


def patchlane(root: Path, *args: str, env: dict[str, str] | None = None, **popen):
    return subprocess.run(
        [sys.executable, "-m", "retire", "--root", str(root), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env or subprocess_env(),
        cwd=ROOT,
        timeout=300,
        **popen,
    )


def start(root: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "retire", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )


def outcomes(root: Path, run_id: str) -> dict[str, str]:
    summary = json.loads((root / ".patchlane" / "runs" / run_id / "cpu.json").read_text())
    return {s["shim"]: s["outcome"] for s in summary["shims"]}


# -- class 6: two runs of one lane at once -------------------------------------------------------


def test_two_runs_of_a_lane_at_once_share_its_env_build(toy_index, tmp_path):
    """The second run starts while the first is installing into the lane's new env (the index is
    slow, the uv cache cold). Before: nothing kept them apart — the second found the half-made env
    without its state file and removed it under the first (which failed as build-failed when that
    hit its `uv venv`; here, with luck, both may pass). Now: it waits for the build lock, says so,
    and re-syncs the finished env."""
    root = make_project(tmp_path / "project", toy_index, {"toy": None})
    env = subprocess_env(UV_CACHE_DIR=str(tmp_path / "cold-uv-cache"))
    toy_index.index.latency = 3.0
    try:
        first = start(root, "run", "--run-id", "first", env=env)
        venv = root / ".patchlane" / "envs" / "cpu" / "pyvenv.cfg"
        deadline = time.monotonic() + 60
        while not venv.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        second = start(root, "run", "--run-id", "second", env=env)
        out = [process.communicate(timeout=300) for process in (first, second)]
    finally:
        toy_index.index.latency = 0.0
    for process, (stdout, stderr) in zip((first, second), out, strict=True):
        assert process.returncode == 0, (stdout, stderr)
        assert "build failed" not in stderr and "build-failed" not in stdout, stderr
    assert "waiting: another run" in out[1][0], out[1]
    assert outcomes(root, "first") == outcomes(root, "second") == {"toy": "needed"}


def test_a_missing_interpreter_is_blamed_only_when_uv_says_so(toy_index, tmp_path):
    """A lane whose Python this host lacks is blamed on the interpreter, as uv says; a venv that
    cannot be made for another reason (a file where its folder goes) is not."""
    root = make_project(tmp_path / "project", toy_index, {"toy": None})
    (root / "lanes" / "cpu.toml").write_text(
        (root / "lanes" / "cpu.toml").read_text().replace('"3.11"', '"3.19"')
    )
    assert patchlane(root, "lock").returncode == 0
    env = subprocess_env(UV_PYTHON_DOWNLOADS="never")
    done = patchlane(root, "run", "--run-id", "no-python", env=env)
    assert done.returncode == 1 and "is Python 3.19 installed?" in done.stdout, done.stdout
    (tmp_path / "file").write_text("")
    with pytest.raises(envs.BuildError) as caught:
        envs._venv(tmp_path / "file" / "env", "3.11")
    assert "installed?" not in str(caught.value) and str(tmp_path / "file") in str(caught.value)
