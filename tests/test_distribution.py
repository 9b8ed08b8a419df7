"""patchlane installs today: `uv build` makes the sdist and the wheel, `twine check --strict` and
check-wheel-contents pass them, and both the built wheel and a git URL + ref install into a bare
venv — the engine's dependencies resolved by pip and uv from a loopback index that serves the
exact wheels this interpreter runs (tests/support/installed.py), so nothing here needs a network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import pytest

from retire.core import uv
from tests.support.index import IndexServer, PackageIndex
from tests.support.installed import closure, repack
from tests.support.shimtree import REPO_ROOT

pytestmark = pytest.mark.slow

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
WHEEL = f"patchlane-{VERSION}-py3-none-any.whl"
SDIST = f"patchlane-{VERSION}.tar.gz"
ENGINE = ("uv", "nox", "httpx", "tomlkit", "yaml")


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No user configuration for pip, uv or git; caches under ``home``; only the index given."""
    empty = home / "no-config"
    empty.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(empty),
        "UV_CACHE_DIR": str(home / "cache" / "uv"),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


def _run(*args: str | Path, env: dict[str, str], cwd: Path | None = None, timeout: float = 300):
    return subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"{proc.args}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The engine's and the build backend's dependencies, as wheels of what this interpreter has."""
    backend = PYPROJECT["build-system"]["requires"]
    try:
        needed = closure([f"patchlane[engine]=={VERSION}", *backend])
    except metadata.PackageNotFoundError as missing:
        pytest.skip(f"this interpreter lacks {missing}, which the index would serve")
    wheels = tmp_path_factory.mktemp("wheelhouse")
    served = PackageIndex()
    for name, distribution in needed.items():
        # patchlane itself comes from the wheel or the git URL under test, never the index
        if name != "patchlane":
            served.add(repack(distribution, wheels), "2026-01-01")
    with IndexServer(served) as server:
        yield server


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    # a second `uv build --sdist --wheel`: both straight from the checkout
    again_sdist: Path
    again_wheel: Path


@pytest.fixture(scope="module")
def built(index, tmp_path_factory) -> Built:
    """`uv build` as a release runs it: the sdist, then the wheel built from the sdist (build
    isolation: the backend from the index); then both again, each from the checkout."""
    home = tmp_path_factory.mktemp("build")
    env = _clean_env(home, UV_DEFAULT_INDEX=index.url)
    first, second = home / "dist", home / "again"
    build = [uv.binary(), "build", "--python", sys.executable, "--no-progress"]
    _ok(_run(*build, "-o", first, REPO_ROOT, env=env))
    _ok(_run(*build, "--sdist", "--wheel", "-o", second, REPO_ROOT, env=env))
    return Built(first / SDIST, first / WHEEL, second / SDIST, second / WHEEL)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checkout_files(*folders: str) -> set[str]:
    """The files of ``folders`` as the checkout has them (tracked or new, never ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *folders],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name for name in listed.split("\0") if name and (REPO_ROOT / name).is_file()}


def _product_files() -> set[str]:
    """What the wheel must hold: every file of retire/ and the runtime's modules, shims/*.py —
    not the catalogue's shim folders (shims/<id>/)."""
    return {
        name
        for name in _checkout_files("retire", "shims")
        if not (name.startswith("shims/") and name.count("/") > 1)
    }


def test_uv_build_makes_an_sdist_and_a_wheel_that_pass_twine_check_strict(built, tmp_path):
    assert sorted(p.name for p in built.sdist.parent.iterdir() if p.name != ".gitignore") == sorted(
        [SDIST, WHEEL]
    )
    twine = _ok(
        _run(
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            built.sdist,
            built.wheel,
            env=_clean_env(tmp_path),
        )
    )
    assert twine.stdout.count("PASSED") == 2, twine.stdout
    # check-wheel-contents reads [tool.check-wheel-contents] from the project's pyproject.toml
    contents = _ok(
        _run(
            sys.executable,
            "-m",
            "check_wheel_contents",
            built.wheel,
            env=_clean_env(tmp_path),
            cwd=REPO_ROOT,
        )
    )
    assert contents.stdout.strip().endswith(": OK"), contents.stdout


def test_the_wheel_holds_the_runtime_and_the_engine_and_none_of_the_catalogue(built):
    with zipfile.ZipFile(built.wheel) as archive:
        names = set(archive.namelist())
        info = f"patchlane-{VERSION}.dist-info"
        meta = HeaderParser().parsestr(archive.read(f"{info}/METADATA").decode())
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    product = {name for name in names if not name.startswith(f"{info}/")}
    # the docs travel with the engine (`patchlane docs`), under retire/docs/
    # and the README, for `patchlane docs readme` and `patchlane docs adoption`
    assert product == _product_files() | {f"retire/{name}" for name in _checkout_files("docs")} | {
        "retire/docs/README.md"
    }
    # the engine's templates travel with it: `patchlane init` works from an installed copy
    assert "retire/scaffold/templates/project/lanes.yml" in product
    # PEP 561: a shop's mypy checks its noxfile's `from retire.sessions import …` against ours
    assert {"retire/py.typed", "shims/py.typed"} <= product
    assert not any(name.startswith("shims/") and name.count("/") > 1 for name in product)
    assert {name.split("/")[0] for name in product} == {"retire", "shims"}
    # The runtime depends on packaging alone; everything else is behind the engine extra.
    requires = meta.get_all("Requires-Dist")
    assert [r for r in requires if "extra ==" not in r] == ["packaging>=26"]
    assert "engine" in meta.get_all("Provides-Extra")
    assert meta["Version"] == VERSION and meta["License-Expression"] == "Apache-2.0"
    assert "patchlane = retire.commands:main" in entry_points


def test_the_sdist_is_the_wheels_source_and_builds_are_reproducible(built):
    with tarfile.open(built.sdist) as archive:
        members = {
            name.split("/", 1)[1]
            for name in archive.getnames()
            if "/" in name and archive.getmember(name).isfile()
        }
    docs = _checkout_files("docs")
    assert members == _product_files() | docs | {
        "pyproject.toml",
        "PKG-INFO",
        "README.md",
        ".gitignore",
    }
    # not the reference shop's data, its tests or its CI
    assert not {m.split("/")[0] for m in members} & {
        "tests",
        "lanes",
        "locks",
        "validation",
        ".github",
    }
    # The wheel built from the sdist is byte for byte the one built from the checkout: the sdist
    # holds everything the wheel needs. A second build gives the same bytes again.
    assert _sha256(built.wheel) == _sha256(built.again_wheel)
    assert _sha256(built.sdist) == _sha256(built.again_sdist)


def _bare_venv(path: Path) -> Path:
    """`python -m venv --without-pip`: nothing but the interpreter; pip installs from outside."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def _installed(python: Path, env: dict[str, str]) -> dict[str, str]:
    """The distributions in the venv of ``python``, by canonical name: version."""
    program = (
        "import json, importlib.metadata as m, re; print(json.dumps({re.sub(r'[-_.]+', '-', "
        "d.metadata['Name']).lower(): d.version for d in m.distributions()}))"
    )
    return json.loads(_ok(_run(python, "-c", program, env=env)).stdout)


def _direct_url(python: Path, env: dict[str, str]) -> dict:
    """PEP 610: where the installed patchlane came from (a file, a git commit)."""
    program = (
        "import importlib.metadata as m; "
        "print(m.distribution('patchlane').read_text('direct_url.json'))"
    )
    return json.loads(_ok(_run(python, "-c", program, env=env)).stdout)


def _pip(python: Path, index: IndexServer, requirement: str, env: dict[str, str]):
    """This interpreter's pip installing into the venv of ``python`` (pip --python)."""
    return _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--index-url",
        index.url,
        requirement,
        env=env,
    )


def _uv_pip(python: Path, index: IndexServer, requirement: str, env: dict[str, str]):
    return _run(
        uv.binary(),
        "pip",
        "install",
        "--python",
        python,
        "--default-index",
        index.url,
        "--no-progress",
        requirement,
        env=env,
    )


def _check_engine(venv: Path, env: dict[str, str], tmp_path: Path) -> None:
    """The CLI, the runtime and init's templates work from the installed copy."""
    bin_ = venv / "bin"
    version = _ok(_run(bin_ / "patchlane", "--version", env=env))
    assert version.stdout.strip() == f"patchlane {VERSION}"
    usage = _ok(_run(bin_ / "patchlane", "--help", env=env))
    assert "init" in usage.stdout and "lanes" in usage.stdout
    # the installed copy documents itself, and --help says where
    docs = _ok(_run(bin_ / "patchlane", "docs", env=env, cwd=tmp_path)).stdout
    assert f"(in {venv}" in docs and "/retire/docs;" in docs
    page = _ok(_run(bin_ / "patchlane", "docs", "commands", env=env, cwd=tmp_path)).stdout
    assert page == (REPO_ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert "/retire/docs" in " ".join(usage.stdout.split())
    where = _ok(
        _run(
            bin_ / "python",
            "-c",
            "import shims, retire; print(shims.__file__)",
            env=env,
            cwd=tmp_path,
        )
    )
    assert where.stdout.startswith(str(venv)), where.stdout
    shop = tmp_path / "shop"
    _ok(_run(bin_ / "patchlane", "init", "--no-lock", shop, env=env, cwd=tmp_path))
    assert (shop / ".github" / "workflows" / "patchlane-lanes.yml").is_file()


@pytest.mark.parametrize("installer", [_pip, _uv_pip], ids=["pip", "uv"])
def test_the_built_wheel_installs_with_its_engine_into_a_bare_venv(
    built, index, tmp_path, installer
):
    env = _clean_env(tmp_path)
    python = _bare_venv(tmp_path / "venv")
    _ok(installer(python, index, f"patchlane[engine] @ {built.wheel.as_uri()}", env))
    expected = closure([f"patchlane[engine]=={VERSION}"])
    assert set(_installed(python, env)) == set(expected)
    assert _direct_url(python, env)["url"] == built.wheel.as_uri()
    _check_engine(tmp_path / "venv", env, tmp_path)


def test_the_runtime_alone_pulls_only_packaging(built, index, tmp_path):
    env = _clean_env(tmp_path)
    python = _bare_venv(tmp_path / "venv")
    _ok(_pip(python, index, f"patchlane @ {built.wheel.as_uri()}", env))
    assert set(_installed(python, env)) == {"patchlane", "packaging"}
    program = (
        "import importlib.util, shims; shims.activate(); "
        f"print([m for m in {ENGINE!r} if importlib.util.find_spec(m) is not None])"
    )
    assert _ok(_run(python, "-c", program, env=env, cwd=tmp_path)).stdout.strip() == "[]"


def _clone_of_the_checkout(path: Path, tag: str) -> str:
    """A git repository holding the checkout's files as they are now (edits included), with
    ``tag`` on its one commit: what a shop's `git+URL@ref` names. Returns the commit."""
    for name in _checkout_files("."):
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    identity = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(path.parent),
        "PATH": os.environ["PATH"],
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"], ["tag", tag]):
        subprocess.run(["git", *args], cwd=path, env=identity, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=path,
        env=identity,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.mark.parametrize("installer", [_pip, _uv_pip], ids=["pip", "uv"])
def test_a_git_url_and_a_ref_install_patchlane_with_its_engine(index, tmp_path, installer):
    tag = f"v{VERSION}"
    commit = _clone_of_the_checkout(tmp_path / "patchlane", tag)
    env = _clean_env(tmp_path)
    python = _bare_venv(tmp_path / "venv")
    url = f"git+{(tmp_path / 'patchlane').as_uri()}@{tag}"
    _ok(installer(python, index, f"patchlane[engine] @ {url}", env))
    assert set(_installed(python, env)) == set(closure([f"patchlane[engine]=={VERSION}"]))
    origin = _direct_url(python, env)
    assert origin["vcs_info"]["vcs"] == "git" and origin["vcs_info"]["commit_id"] == commit
    _check_engine(tmp_path / "venv", env, tmp_path)
