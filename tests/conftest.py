"""Shared fixtures: a loopback package index (and a second one for nightlies) over wheels built
here."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_sdist, build_wheel

ROOT = Path(__file__).resolve().parent.parent

# `nox -s tests` runs this suite inside a nox session, whose noxfile exported the invocation's run
# id for its own lane sessions; the nox runs and lane runs the tests start are invocations of their
# own.
os.environ.pop("PATCHLANE_RUN_ID", None)


@pytest.fixture(autouse=True)
def _isolated_uv(tmp_path_factory, monkeypatch):
    """Tests never read the developer's uv configuration and share one warm uv cache."""
    empty = tmp_path_factory.mktemp("no-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(empty))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(empty))
    monkeypatch.delenv("UV_INDEX", raising=False)
    # Nothing in a test may fall back to a real registry: the default index is a closed port.
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    monkeypatch.delenv("UV_INDEX_URL", raising=False)
    monkeypatch.delenv("UV_EXTRA_INDEX_URL", raising=False)
    monkeypatch.setenv("UV_CACHE_DIR", str(_shared_cache(tmp_path_factory)))


_CACHE: list[Path] = []


def _shared_cache(factory) -> Path:
    if not _CACHE:
        _CACHE.append(factory.mktemp("uv-cache"))
    return _CACHE[0]


@pytest.fixture(scope="session")
def universe(tmp_path_factory):
    """Two loopback indexes: ``main`` (releases, a yanked one, an unbuildable sdist) and
    ``nightly`` (a ``.devYYYYMMDD`` series, plus a decoy ``helper`` that must never be taken)."""
    root = tmp_path_factory.mktemp("wheels")
    main, nightly = PackageIndex(), PackageIndex()
    for version, when in [
        ("2.0.0", "2026-01-10"),
        ("2.1.0", "2026-03-10"),
        ("2.2.0", "2026-06-10"),
    ]:
        main.add(build_wheel(root / "main", "torchlike", version, requires=["helper>=1"]), when)
    main.add(build_wheel(root / "main", "torchlike", "2.1.1"), "2026-04-01", yanked="broken wheel")
    for version, when in [("1.0", "2026-01-01"), ("1.5", "2026-05-01"), ("2.0", "2026-10-01")]:
        main.add(build_wheel(root / "main", "helper", version), when)
    main.add(
        build_wheel(root / "main", "kernels", "0.5.0", requires=["torchlike>=2.0", "cudaext"]),
        "2026-02-01",
    )
    main.add(build_sdist(root / "main", "cudaext", "1.0.0", requires=["helper"]), "2026-02-01")
    for day in ("20260701", "20260702", "20260703"):
        nightly.add(
            build_wheel(root / "nightly", "torchlike", f"2.3.0.dev{day}", requires=["helper>=1"]),
            f"{day[:4]}-{day[4:6]}-{day[6:]}",
        )
    nightly.add(build_wheel(root / "nightly", "helper", "99.0"), "2026-07-01")
    with IndexServer(main) as main_server, IndexServer(nightly) as nightly_server:
        yield {"main": main_server, "nightly": nightly_server, "root": root}


class LaneProject:
    """A patchlane project in a temp folder whose lanes resolve only against loopback indexes."""

    def __init__(self, root: Path, universe: dict) -> None:
        self.root = root
        self.universe = universe
        (root / "lanes").mkdir()

    def write(self, name: str, body: str) -> Path:
        path = self.root / "lanes" / f"{name}.toml"
        text = textwrap.dedent(body)
        text = text.replace("@MAIN@", self.universe["main"].url).replace(
            "@NIGHTLY@", self.universe["nightly"].url
        )
        path.write_text(text)
        return path

    def lock_file(self, lane: str) -> Path:
        return self.root / "locks" / lane / "pylock.toml"


@pytest.fixture
def project(tmp_path, universe) -> LaneProject:
    return LaneProject(tmp_path, universe)


def run_cli(root: Path, *args: str, capsys=None) -> tuple[int, str, str]:
    from retire.commands import main

    code = main(["--root", str(root), *args])
    if capsys is None:
        return code, "", ""
    out, err = capsys.readouterr()
    return code, out, err


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


PYTHON = sys.executable


@pytest.fixture(scope="module")
def einops_index(tmp_path_factory):
    """A loopback index with a small pure-Python einops: what a scaffolded shop's CPU lane asks
    for."""
    index = PackageIndex()
    wheels = tmp_path_factory.mktemp("einops")
    index.add(
        build_wheel(
            wheels, "einops", "0.8.1", files={"einops/__init__.py": '__version__ = "0.8.1"\n'}
        ),
        "2026-01-10",
    )
    with IndexServer(index) as server:
        yield server
