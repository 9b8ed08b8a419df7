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

from retire.runs import envs, launcher
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


# -- class 2: lane code cannot read patchlane's secrets --------------------------------------------

TOKEN = "ghp_p4bIssue20TokenThatMustStayHidden"
SNOOPER = """
import json, os
from shims import reproducer

TOKEN = {token!r}
OUT = {out!r}


def ancestors():
    pid, chain = os.getpid(), []
    while pid > 1 and len(chain) < 32:
        chain.append(pid)
        try:
            with open(f"/proc/{{pid}}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return chain


def look(pid):
    try:
        with open(f"/proc/{{pid}}/environ", "rb") as environ:
            block = environ.read()
    except OSError as exc:
        return {{"pid": pid, "readable": False, "why": type(exc).__name__}}
    with open(f"/proc/{{pid}}/cmdline", "rb") as cmdline:
        command = cmdline.read().replace(b"\\0", b" ").decode(errors="replace")[:200]
    return {{"pid": pid, "readable": True, "found": TOKEN.encode() in block, "cmd": command}}


def check(with_shim):
    seen = [look(pid) for pid in ancestors()]
    seen.append({{"pid": "os.environ", "found": any(TOKEN in v for v in os.environ.values())}})
    with open(OUT, "a") as out:
        out.write(json.dumps({{"with_shim": with_shim, "seen": seen}}) + "\\n")
    return reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("snoop", check)
"""


@pytest.mark.parametrize("isolation", ["process", "launcher"])
def test_lane_code_finds_no_token_in_any_ancestor_environment(toy_index, tmp_path, isolation):
    """A reproducer reads its own environment and /proc/<pid>/environ of every ancestor it can
    (its launcher, the engine, what started the engine) while the engine runs with GITHUB_TOKEN
    and another secret in its environment. Before: the engine's start-up environment carried
    both. Now: the engine re-executed itself without them (and closed its /proc files), so no
    block lane code can read holds them."""
    out = tmp_path / "seen.jsonl"
    reproducer = SNOOPER.format(token=TOKEN, out=str(out))
    root = make_project(tmp_path / "project", toy_index, {"snoop": reproducer})
    env = subprocess_env(GITHUB_TOKEN=TOKEN, MY_SERVICE_PASSWORD=TOKEN + "-pw")
    done = patchlane(root, "run", "--isolation", isolation, "--run-id", "snoop", env=env)
    assert done.returncode in (0, 1), done.stderr
    looks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(looks) == 2, done.stdout
    for look in looks:
        assert not any(entry.get("found") for entry in look["seen"]), look["seen"]
        # the reproducer itself, its parent (launcher or engine) and beyond were looked at
        assert len(look["seen"]) >= 4, look["seen"]
    engine = [
        entry
        for entry in looks[0]["seen"]
        if "retire" in entry.get("cmd", "") and "run" in entry.get("cmd", "")
    ]
    assert engine or any(not entry.get("readable", True) for entry in looks[0]["seen"]), looks
    # the token still worked where the engine needs it: nothing here probes, but it was held
    assert TOKEN not in done.stdout + done.stderr


def test_the_engine_keeps_its_secrets_in_memory_only(tmp_path):
    """`patchlane` started with a token: its own environment block no longer holds it, yet the
    engine still reads it (the probes' GITHUB_TOKEN, uv's index credentials)."""
    probe = (
        "import os, sys\n"
        "from retire.core import heldsecrets\n"
        "heldsecrets.shed()\n"
        "block = open('/proc/self/environ', 'rb').read()\n"
        "print(os.environ.get('GITHUB_TOKEN') == sys.argv[1], sys.argv[1].encode() in block)\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(probe)
    done = subprocess.run(
        [sys.executable, str(script), TOKEN],
        capture_output=True,
        text=True,
        env=subprocess_env(GITHUB_TOKEN=TOKEN),
        timeout=60,
    )
    assert done.stdout.split() == ["True", "False"], done


# -- class 7: the same outcome under both isolations ---------------------------------------------

#: toylib, as a module file in the shim's own folder: add() is right here
SHADOW = '''
"""A module beside the reproducer, named like the library the launcher preloads."""
__version__ = "1.0"

def add(a, b):
    return a + b
'''


@pytest.mark.parametrize("preload", [True, False], ids=["preloaded", "not-preloaded"])
def test_a_module_beside_the_reproducer_gives_one_outcome_under_both_isolations(
    toy_index, tmp_path, preload
):
    """``shims/toy/toylib.py`` shadows the lane's toylib in a fresh interpreter (the script's
    folder is first on sys.path), not in a fork of a launcher that imported toylib. Before: the
    without-shim run was fix-validated under process isolation and bug-reproduced under the
    launcher. Now: the launcher sends that shim's runs to a fresh interpreter, with a note."""
    root = tmp_path / "project"
    folder = shimtree.write_shim(root / "shims", "toy")
    (folder / "toylib.py").write_text(SHADOW)
    if preload:
        manifest = folder / "manifest.toml"
        manifest.write_text(
            manifest.read_text().replace("timeout = 60", 'timeout = 60\npreload = ["toylib"]')
        )
    make_project(root, toy_index, {})
    (root / "lanes" / "cpu.toml").write_text(LANE.format(shims='["toy"]', url=toy_index.url))
    assert patchlane(root, "lock").returncode == 0
    found = {}
    for isolation in ("process", "launcher"):
        done = patchlane(root, "run", "--isolation", isolation, "--run-id", isolation)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        records = [
            json.loads(line)
            for line in (root / "validation" / "manifest.jsonl").read_text().splitlines()
            if json.loads(line).get("run") == isolation
        ]
        found[isolation] = (
            outcomes(root, isolation),
            sorted((r["mode"], r["outcome"]) for r in records),
            done.stdout,
        )
    assert found["process"][:2] == found["launcher"][:2], found
    assert ("without", "fix-validated") in found["process"][1], found
    if preload:
        summary = json.loads((root / ".patchlane/runs/launcher/cpu.json").read_text())
        assert "toylib, which the launcher imported" in summary["note"], summary
        assert "runs in a fresh interpreter" in found["launcher"][2]


def test_shadowing_names_module_files_and_packages_only(tmp_path):
    for name in ("toylib.py", "numpy.cpython-311-x86_64-linux-gnu.so", "json.pyc", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    # a namespace folder does not shadow a regular package
    (tmp_path / "triton").mkdir()
    held = {"toylib", "numpy", "json", "notes", "torch", "triton", "os"}
    assert launcher.shadowing(tmp_path, held) == ["json", "numpy", "torch", "toylib"]
