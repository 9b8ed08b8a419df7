"""Locks say where they apply (issue 21, item 8): PEP 751 ``environments`` for the lane's platform
and Python, so pip and uv refuse a lock elsewhere by name and patchlane's env build says which
platform it is for — never a missing wheel halfway through an install."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest
import tomlkit
from packaging.markers import Marker
from packaging.pylock import Pylock

from retire.core import uv
from retire.lanes import lanefile
from retire.locks import environments, integrity
from tests.conftest import run_cli
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401 - fixtures


@pytest.mark.parametrize(
    ("platform", "python", "expected"),
    [
        ("x86_64-manylinux_2_28", "3.12", ("linux", "x86_64")),
        ("aarch64-manylinux_2_28", "3.12", ("linux", "aarch64")),
        ("linux", "3.11", ("linux", "x86_64")),
        ("aarch64-apple-darwin", "3.13", ("darwin", "arm64")),
        ("macos", "3.12", ("darwin", "arm64")),
        ("x86_64-pc-windows-msvc", "3.12", ("win32", "AMD64")),
        ("riscv64-unknown-linux", "3.12", ("linux", "riscv64")),
    ],
)
def test_the_marker_names_the_lanes_platform_and_python(tmp_path, platform, python, expected):
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "l.toml").write_text(
        f'[lane]\npython = "{python}"\nplatform = "{platform}"\nrequirements = ["x"]\n'
    )
    [one] = lanefile.load_lanes(tmp_path / "lanes", root=tmp_path)
    marker = Marker(environments.environment_marker(one))
    sys_platform, machine = expected
    here = {
        "sys_platform": sys_platform,
        "platform_machine": machine,
        "implementation_name": "cpython",
        "python_version": python,
    }
    assert marker.evaluate(here)
    # another machine, another Python, another implementation: not this lock's
    for key, other in (
        ("platform_machine", "ppc64le"),
        ("python_version", "3.10"),
        ("implementation_name", "pypy"),
        ("sys_platform", "cygwin"),
    ):
        assert not marker.evaluate({**here, key: other}), key


def _lock_for(project, capsys, platform: str) -> str:
    project.write("old", lane(extra=f'platform = "{platform}"'))
    code, out, err = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out + err
    return project.lock_file("old").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_lock_declares_its_environments_and_installers_refuse_it_elsewhere(
    toy_project, capsys, tmp_path
):
    text = _lock_for(toy_project, capsys, "aarch64-manylinux_2_28")
    lock = Pylock.from_dict(tomllib.loads(text))
    expected = Marker(
        "sys_platform == 'linux' and platform_machine == 'aarch64' and "
        "implementation_name == 'cpython' and python_version == '3.11'"
    )
    assert list(lock.environments or ()) == [expected]
    assert "# For Linux aarch64 (aarch64-manylinux_2_28), CPython 3.11 only" in text
    # this host is not an aarch64 one: uv names the environment, not a missing wheel
    venv = tmp_path / "venv"
    subprocess.run([uv.binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    refused = subprocess.run(
        [uv.binary(), "pip", "install", "--python", str(venv / "bin" / "python"), "-r",
         str(toy_project.lock_file("old"))],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "target environment is not supported by the lockfile" in refused.stderr
    # and patchlane's lane run says which platform the lock is for
    code, out, err = run_cli(toy_project.root, "run", "--no-record", "--json", capsys=capsys)
    [result] = json.loads(out)["lanes"]
    assert code == 1 and result["status"] == "build-failed", err
    assert re.search(
        r"old/pylock.toml is for sys_platform == 'linux' and platform_machine == 'aarch64' .*"
        r"python_version == '3.11'; \S+ is not such an interpreter — run this lane on a host",
        result["why"],
    ), result["why"]


def _as_an_older_patchlane_wrote_it(text: str) -> str:
    """The lock without ``environments`` and the header line: what locks were before."""
    at = text.rfind(integrity.PROVENANCE_HEADER)
    body = "".join(
        line
        for line in text[:at].splitlines(keepends=True)
        if not line.startswith(("environments = ", "# For "))
    )
    table = tomllib.loads(text[at:])["tool"]["patchlane"]
    table[integrity.CONTENT_KEY] = integrity.content_digest(body)
    return body + "\n" + tomlkit.dumps({"tool": {"patchlane": table}})


@pytest.mark.slow
def test_an_older_lock_is_current_and_lock_restamps_it_offline(toy_project, universe, capsys):
    made = _lock_for(toy_project, capsys, "x86_64-manylinux_2_28")
    path = toy_project.lock_file("old")
    path.write_text(_as_an_older_patchlane_wrote_it(made), encoding="utf-8")
    # still current: --check stays green for locks made before environments
    assert run_cli(toy_project.root, "lock", "--check", capsys=capsys)[0] == 0
    requests = len(universe["main"].index.requests)
    code, out, err = run_cli(toy_project.root, "lock", capsys=capsys)
    assert code == 0, out + err
    assert "re-stamped: it now declares the environments it is for" in out
    # no resolution, no network: the same lock, byte for byte, as a fresh one of this patchlane
    assert len(universe["main"].index.requests) == requests
    assert path.read_text(encoding="utf-8") == made
    assert run_cli(toy_project.root, "lock", "--check", capsys=capsys)[0] == 0
