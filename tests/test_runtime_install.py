"""The product apart from the shop's data: the runtime installs with only `packaging`, and a
training venv holding nothing else activates the shop's catalogue, found by path or
patchlane.toml."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import packaging
import pytest

from tests.support.shimtree import REPO_ROOT, write_shim, write_target
from tests.support.wheels import build_wheel

ENGINE = ("uv", "nox", "httpx", "tomlkit", "pytest", "git")


def test_the_distribution_depends_on_packaging_alone_and_the_engine_is_an_extra():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["packaging>=26"]
    engine = {req.split("=")[0].split(">")[0] for req in project["optional-dependencies"]["engine"]}
    assert {"uv", "nox", "httpx", "tomlkit"} <= engine
    assert "patchlane[engine]" in project["optional-dependencies"]["test"]


def _packaging_wheel(dest: Path) -> Path:
    """A real wheel of the packaging this interpreter has (no index needed)."""
    source = Path(packaging.__file__).parent
    files = {
        f"packaging/{p.relative_to(source).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(source.rglob("*"))
        if p.is_file() and p.suffix in (".py", ".typed")
    }
    return build_wheel(dest, "packaging", packaging.__version__, files=files)


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory) -> Path:
    """`python -m venv` + pip install of the runtime wheel with --no-deps, plus packaging: nothing
    else."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (test extra) is needed to build the wheel offline")
    work = tmp_path_factory.mktemp("runtime")
    wheels = work / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(wheels),
            str(REPO_ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            *map(str, sorted(wheels.glob("patchlane-*.whl"))),
            str(_packaging_wheel(wheels)),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return venv


PROGRAM = """
import importlib.util, json, shims
states = shims.activate()
import toylib
print(json.dumps({
    "runtime": shims.__file__,
    "states": {k: v.state for k, v in shims.status().items()},
    "fixed": toylib.add(2, 2),
    "engine": [m for m in @ENGINE@ if importlib.util.find_spec(m) is not None],
}))
""".replace("@ENGINE@", repr(ENGINE))


def _run(
    venv: Path, cwd: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_a_training_venv_with_only_the_runtime_activates_the_shops_catalogue(
    runtime_venv, tmp_path
):
    site = next((runtime_venv / "lib").glob("python*/site-packages"))
    # toylib 1.0, the buggy release, installed in the training venv
    write_target(site)
    # The wheel is the product: the runtime's modules, none of this repository's shims.
    installed = sorted(
        p.name for p in (site / "shims").iterdir() if p.is_dir() and p.name != "__pycache__"
    )
    assert installed == []
    shop = tmp_path / "shop"
    # a plain folder: no __init__.py, shadows nothing
    write_shim(shop / "shims", "toy_fix")
    (shop / "patchlane.toml").write_text("# the shop; [catalogue] path defaults to shims\n")
    (shop / "train").mkdir()

    # From the shop's root (cwd first on sys.path, its shims/ folder with it) and from a folder
    # below.
    for cwd in (shop, shop / "train"):
        result = _run(runtime_venv, cwd, _clean_env(tmp_path), "-c", PROGRAM)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        # the installed runtime, not the shop's folder
        assert report["runtime"].startswith(str(site))
        assert report["states"] == {"toy_fix": "applied"} and report["fixed"] == 4
        # no uv, nox, httpx, tomlkit, pytest, GitPython in a training venv
        assert report["engine"] == []

    # A declared catalogue elsewhere in the project, and the image's way: PATCHLANE_SHIMS_PATH.
    (shop / "shims").rename(shop / "fixes")
    (shop / "patchlane.toml").write_text('[catalogue]\npath = "fixes"\n')
    declared = _run(runtime_venv, shop, _clean_env(tmp_path), "-c", PROGRAM)
    assert json.loads(declared.stdout)["states"] == {"toy_fix": "applied"}, declared.stderr
    image = _run(
        runtime_venv,
        tmp_path,
        _clean_env(tmp_path, PATCHLANE_SHIMS_PATH=str(shop / "fixes")),
        "-c",
        PROGRAM,
    )
    assert json.loads(image.stdout)["states"] == {"toy_fix": "applied"}, image.stderr

    # Outside any project and without the variable: no shims at all (never a catalogue of its own).
    listing = _run(runtime_venv, tmp_path, _clean_env(tmp_path), "-m", "shims", "--json")
    assert listing.returncode == 0 and json.loads(listing.stdout) == [], listing.stderr

    # The engine's command says what to install, in one line.
    cli = subprocess.run(
        [str(runtime_venv / "bin" / "patchlane"), "lanes"],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert cli.stderr.strip().count("\n") == 0 and "patchlane[engine]" in cli.stderr


@pytest.mark.slow
def test_a_catalogue_path_that_leaves_the_project_is_one_line(runtime_venv, tmp_path):
    shop = tmp_path / "shop"
    shop.mkdir()
    (shop / "patchlane.toml").write_text('[catalogue]\npath = "../elsewhere"\n')
    result = _run(runtime_venv, shop, _clean_env(tmp_path), "-m", "shims", "--check")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "shims: error: shop/patchlane.toml: catalogue.path: '../elsewhere' leaves the "
        'project — use a folder inside the project such as "shims"; elsewhere, set '
        "PATCHLANE_SHIMS_PATH"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["-m", "retire", "--root", "{empty}", "shims", "--json"],
        ["-m", "retire", "--root", "{empty}", "catalogue", "--json"],
        ["-m", "shims", "--root", "{empty}", "--json"],
    ],
)
def test_every_listing_honours_root_in_an_empty_repository(tmp_path, command):
    """Run from this repository (its patchlane.toml and ten shims right there): --root wins."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, *(part.format(empty=empty) for part in command)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_dependency_floors_are_the_releases_that_brought_the_features_used():
    """nox 2026.8.10 brought allow_parallel (retire/sessions.py), packaging 26.0 packaging.pylock
    (the
    locks); tests/test_nox.py, test_locking.py and this file passed with exactly those releases."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert "packaging>=26" in project["dependencies"]
    assert "nox>=2026.8.10" in project["optional-dependencies"]["engine"]
    assert "allow_parallel=" in (REPO_ROOT / "retire" / "sessions.py").read_text()
    uses_pylock = [
        p for p in (REPO_ROOT / "retire").rglob("*.py") if "packaging.pylock" in p.read_text()
    ]
    assert uses_pylock


def test_a_reproducer_gets_the_runtime_and_nothing_else_of_the_engines_environment(tmp_path):
    """run_reproducer puts `shims` on the child's path through a folder holding it alone, so the
    engine's own packages (retire, httpx, …) never shadow what a lane locked."""
    from retire.runs.reproduce import run_reproducer
    from shims.manifest import load_manifest

    lane = tmp_path / "lane"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(lane)], check=True)
    probe = """
import importlib.util
from shims import reproducer


def check(with_shim):
    leaked = [m for m in ("retire", "httpx", "tests") if importlib.util.find_spec(m) is not None]
    print("# leaked:", leaked)
    return reproducer.BUG_REPRODUCED if leaked else reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check)
"""
    folder = write_shim(
        tmp_path / "catalogue", "no_leak", reproducer=probe, patch=None, fix_class="version-floor"
    )
    # no PYTHONPATH: what the child finds is what run_reproducer gives it
    env = _clean_env(tmp_path)
    record = run_reproducer(
        load_manifest(folder / "manifest.toml"), "without", python=lane / "bin" / "python", env=env
    )
    assert record.outcome == "fix-validated", record.output_tail


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# no catalogue here\n[mirrors]\nfolder = 'm'\n",
        '[catalogue]\npath = "fixes"\n',
        (
            '# the catalogue\n[catalogue]  # ours\n\npath = "fixes"   # one folder per '
            "shim\n[mirrors]\n"
        ),
        "[catalogue]\npath = 'fixes'\n",
        'catalogue.path = "fixes"\n',
        'catalogue = { path = "fixes" }\n',
        "[catalogue]\n",
        '[catalogue]\npath = "a#b"\n',
    ],
)
def test_the_catalogue_setting_reads_as_toml_reads_it(tmp_path, text):
    """The runtime reads the plain form without importing a TOML parser; whatever it reads,
    tomllib agrees."""
    from shims.catalogue import configured

    (tmp_path / "patchlane.toml").write_text(text)
    expected = tomllib.loads(text).get("catalogue", {}).get("path", "shims")
    assert configured(tmp_path) == str(tmp_path / expected)


def test_activation_from_a_plain_patchlane_toml_imports_no_toml_parser(tmp_path):
    shop = tmp_path / "shop"
    write_shim(shop / "fixes", "toy_fix")
    (shop / "patchlane.toml").write_text('# the shop\n[catalogue]\npath = "fixes"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")} | {
        "PYTHONPATH": str(REPO_ROOT)
    }
    program = "import sys, shims; s = shims.activate(); print(sorted(s), 'tomllib' in sys.modules)"
    runs = [
        subprocess.run(
            [sys.executable, "-c", program],
            cwd=shop,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for _ in range(2)
    ]
    # The first run validates the manifest (a cache miss parses it); the next only reads the index.
    assert runs[0].stdout.strip() == "['toy_fix'] True", runs[0].stderr
    assert runs[1].stdout.strip() == "['toy_fix'] False", runs[1].stderr
