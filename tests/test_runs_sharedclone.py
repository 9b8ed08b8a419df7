"""One clone per range: each candidate checked out in it, built once, its wheel kept (real git and
uv over the toy upstream)."""

from __future__ import annotations

import sys
import zipfile

import pytest

from retire.runs.sharedclone import SharedClone, build_description, build_requires
from retire.runs.wheelbuild import WheelBuildError
from retire.runs.wheelcache import WheelCache
from shims.wheelbuild import WheelBuild
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.support.wheels import build_wheel

REPOSITORY = "https://git.example/acme/toylib"
#: The shop's named build: the checkout's own backend, the wheel into $PATCHLANE_WHEEL_DIR.
BUILD_SCRIPT = """
import os, sys
sys.path.insert(0, "_build")
import backend
print("wrote", backend.build_wheel(os.environ["PATCHLANE_WHEEL_DIR"]))
"""


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    base = tmp_path_factory.mktemp("shared")
    repo = make_window_repo(base / "upstream")
    git(base, "clone", "-q", "--mirror", str(repo.path), str(base / "mirror.git"))
    return repo, base / "mirror.git"


def clone(tmp_path, mirror_path, cache=True, **options) -> SharedClone:
    return SharedClone(
        mirror_path,
        tmp_path / "range" / "clone",
        repository=REPOSITORY,
        python=sys.executable,
        distribution="toylib",
        cache=WheelCache(tmp_path / "wheels") if cache else None,
        **options,
    )


def source_of(wheel) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read("toylib/__init__.py").decode()


def test_each_commit_is_built_once_in_one_clone_and_its_wheel_kept(tmp_path, mirror):
    repo, path = mirror
    said: list[str] = []
    shared = clone(tmp_path, path, say=said.append)
    broken, fixed = repo.introduced, repo.fixed
    assert "return a - b" in source_of(shared.wheel_for(broken))
    assert "return a + b" in source_of(shared.wheel_for(fixed))
    # a rerun of the same candidate (another shim's bisection, say) builds nothing
    again = clone(tmp_path, path, say=said.append)
    assert "return a - b" in source_of(again.wheel_for(broken[:12]))
    assert (shared.builds, again.builds) == (2, 0)
    assert f"building toylib at {broken[:7]}…" in said
    assert any(line.startswith(f"built toylib at {broken[:7]} in ") for line in said)
    assert f"toylib at {broken[:7]}: the wheel built before" in said
    # one clone, moved between the commits
    assert [p.name for p in (tmp_path / "range").iterdir() if p.name == "clone"] == ["clone"]
    assert git(tmp_path / "range" / "clone", "rev-parse", "HEAD") == fixed


def test_a_build_says_its_place_and_how_long_it_has_run_while_it_runs(tmp_path, mirror):
    """A slow build (a named one that sleeps) says its start with its place in the search, then
    how long it has run every tick, then its end; a kept wheel says so with its place."""
    repo, path = mirror
    script = tmp_path / "slow-build.py"
    script.write_text("import time\ntime.sleep(0.8)\n" + BUILD_SCRIPT)
    said: list[str] = []
    shared = clone(tmp_path, path, say=said.append)
    shared.tick = 0.2
    named = WheelBuild((sys.executable, str(script)))
    shared.wheel_for(repo.fixed, named, label="(2 of ~6)")
    at = f"toylib at {repo.fixed[:7]} (2 of ~6)"
    assert said[0] == f"building {at}…"
    ticks = [line for line in said if line.startswith(f"building {at}… ")]
    assert len(ticks) >= 2 and all(line.endswith(" s") for line in ticks), said
    assert said[-1].startswith(f"built {at} in ")
    shared.wheel_for(repo.fixed, named, label="(3 of ~6)")
    assert said[-1] == f"toylib at {repo.fixed[:7]} (3 of ~6): the wheel built before"


def test_a_checkout_leaves_nothing_of_the_previous_candidate(tmp_path, mirror):
    repo, path = mirror
    shared = clone(tmp_path, path)
    folder = shared.checkout(repo.tags["1.2"])
    (folder / "build").mkdir()
    (folder / "build" / "lib.o").write_text("object")
    (folder / "toylib" / "__init__.py").write_text("edited")
    (folder / ".gitignore").write_text("build/\n")
    assert shared.checkout(repo.tags["1.4"]) == folder
    assert not (folder / "build").exists() and not (folder / ".gitignore").exists()
    assert '__version__ = "1.4"' in (folder / "toylib" / "__init__.py").read_text()


def test_no_value_reaches_git_as_an_option_and_an_unknown_commit_is_one_error(tmp_path, mirror):
    _, path = mirror
    shared = clone(tmp_path, path)
    for bad in ("--orphan=x", "-f", "0" * 40, "", "a\nb"):
        with pytest.raises(WheelBuildError, match="no commit"):
            shared.wheel_for(bad)
    assert not (tmp_path / "range" / "clone").exists()


def test_a_named_build_is_kept_apart_from_uvs(tmp_path, mirror):
    repo, path = mirror
    script = tmp_path / "build-wheel.py"
    script.write_text(BUILD_SCRIPT)
    named = WheelBuild((sys.executable, str(script)))
    shared = clone(tmp_path, path)
    assert "return a + b" in source_of(shared.wheel_for(repo.fixed, named))
    assert shared.cached(repo.fixed, None) is None
    assert shared.cached(repo.fixed, named) is not None
    assert build_description(named) != build_description(None)
    assert build_description(None, "base:abc") == "uv-build|base:abc"
    failing = WheelBuild((sys.executable, "-c", "import sys; print('nvcc fatal'); sys.exit(1)"))
    with pytest.raises(WheelBuildError, match="nvcc fatal"):
        shared.wheel_for(repo.introduced, failing)
    assert shared.cached(repo.introduced, failing) is None
    # nothing of the failed build is left but its log
    assert not list((tmp_path / "range").glob("wheel-*"))
    [log] = (tmp_path / "range").glob("build-*.log")
    assert log.name.startswith(f"build-{repo.introduced[:12]}-") and "nvcc fatal" in log.read_text()


def test_without_a_cache_every_call_builds(tmp_path, mirror):
    repo, path = mirror
    shared = clone(tmp_path, path, cache=False)
    first, second = shared.wheel_for(repo.fixed), shared.wheel_for(repo.fixed)
    assert shared.builds == 2 and first != second and first.is_file() and second.is_file()


def test_the_range_builds_in_one_warm_environment_made_again_when_its_requirements_change(
    tmp_path,
):
    repo = make_window_repo(tmp_path / "upstream")
    before = git(repo.path, "rev-parse", "HEAD")
    helper = build_wheel(tmp_path / "helpers", "toyhelper", "1.0", files={"toyhelper.py": ""})
    pyproject = (repo.path / "pyproject.toml").read_text()
    (repo.path / "pyproject.toml").write_text(
        pyproject.replace("requires = []", f'requires = ["toyhelper @ {helper.as_uri()}"]')
    )
    git(repo.path, "commit", "-q", "-am", "Build with toyhelper")
    after = git(repo.path, "rev-parse", "HEAD")
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(tmp_path / "mirror.git"))
    shared = clone(tmp_path, tmp_path / "mirror.git")
    env = tmp_path / "range" / "build-env"
    shared.wheel_for(repo.tags["1.1"])
    marker = env / "made-for-the-first-requirements"
    marker.write_text("")
    shared.wheel_for(repo.tags["1.2"])
    shared.wheel_for(before)
    # the same (no) requirements: the same environment
    assert marker.exists() and not list(env.glob("lib/python*/site-packages/toyhelper.py"))
    shared.wheel_for(after)
    assert not marker.exists() and list(env.glob("lib/python*/site-packages/toyhelper.py"))
    assert shared.builds == 4


def test_build_requirements_are_read_from_pyproject_or_pep_517s_default(tmp_path):
    def tree(name: str, pyproject: str | None, setup: bool = False):
        folder = tmp_path / name
        folder.mkdir()
        if pyproject is not None:
            (folder / "pyproject.toml").write_text(pyproject)
        if setup:
            (folder / "setup.py").write_text("")
        return folder

    build = '[build-system]\nrequires = ["setuptools>=70", "wheel"]\n'
    assert build_requires(tree("a", build)) == ("setuptools>=70", "wheel")
    assert build_requires(tree("b", None, setup=True)) == ("setuptools>=40.8.0",)
    assert build_requires(tree("c", '[project]\nname = "x"\n', setup=True)) == (
        "setuptools>=40.8.0",
    )
    # what cannot be told leaves the build to uv's isolated environments
    assert build_requires(tree("d", None)) is None
    assert build_requires(tree("e", "[build-system\n")) is None
    assert build_requires(tree("f", "[build-system]\nrequires = 3\n")) is None
    assert build_requires(tree("g", '[project]\nname = "x"\n')) is None


def test_a_damaged_mirror_is_checked_out_without_what_the_build_never_reads(tmp_path):
    from tests.test_damaged_mirror import damage

    repo = make_window_repo(tmp_path / "upstream")
    (repo.path / "tests" / "data").mkdir(parents=True)
    (repo.path / "tests" / "data" / "big.bin").write_bytes(b"\x00" * 4096)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", "Test data")
    with_data = git(repo.path, "rev-parse", "HEAD")
    (repo.path / "toylib" / "__init__.py").write_text("def add(a, b):\n    return b + a\n")
    git(repo.path, "commit", "-q", "-am", "Commute")
    last = git(repo.path, "rev-parse", "HEAD")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    damage(mirror, with_data, "tests/data/big.bin")
    said: list[str] = []
    shared = clone(tmp_path, mirror, say=said.append)
    folder = tmp_path / "range" / "clone"
    # a whole commit, then one without its test data, then whole again, then without again
    for commit, source in (
        (repo.tags["1.4"], "return a - b"),
        (with_data, "return a + b"),
        (repo.tags["1.7"], "return a + b"),
        (last, "return b + a"),
    ):
        assert source in source_of(shared.wheel_for(commit))
        assert not (folder / "tests" / "data" / "big.bin").exists()
        assert git(folder, "rev-parse", "HEAD") == commit
        assert git(folder, "status", "--porcelain") == ""
    left_out = "1 file missing from the mirror was left out: tests/data/big.bin"
    told = [line for line in said if "left out" in line]
    assert told == [f"{with_data[:7]}: {left_out}", f"{last[:7]}: {left_out}"]
    # a missing file the build reads: a clear failure of that commit
    damage(mirror, last, "toylib/__init__.py")
    fresh = clone(tmp_path / "again", mirror, cache=False)
    with pytest.raises(WheelBuildError, match=r"toylib/__init__\.py"):
        fresh.wheel_for(last)
