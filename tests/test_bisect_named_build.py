"""A named build takes a compiled target's bisection into the commits, for real: the toy upstream of
tests/support/historyrepo.py with a C source in its tree (a compiled extension: uv's build from
the mirror is refused), its releases on a loopback index, and the shim's own build script beside
its manifest (``[target] build``), which makes a pure-Python wheel of the checkout with the
repository's in-tree PEP 517 backend (no network). Without the build the search stops at the
release edge; with it, it names the commits; a build that fails leaves each commit unknown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from retire.bisect.bisection import list_releases
from retire.bisect.job import BisectJob
from retire.bisect.transitions import Source, bisect_window
from retire.core.project import Project
from retire.evidence import validation
from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror
from shims.manifest import load_manifest
from tests.support.gitrepos import git
from tests.support.historyrepo import FIXED, INTRODUCED, make_window_repo, release_index
from tests.support.index import IndexServer
from tests.support.shimtree import manifest_text, write_shim
from tests.test_json_schemas import check

pytestmark = pytest.mark.slow

UPSTREAM = "https://github.com/acme/toylib"

#: The shop's build script: the checkout's own backend, the wheel into $PATCHLANE_WHEEL_DIR.
BUILD_SCRIPT = """
import os, sys
assert os.path.isfile("pyproject.toml"), os.getcwd()
sys.path.insert(0, "_build")
import backend
print("building toylib at", os.environ["PATCHLANE_BUILD_COMMIT"], "with", sys.executable)
print("wrote", backend.build_wheel(os.environ["PATCHLANE_WHEEL_DIR"]))
"""
FAILING_SCRIPT = """
import sys
from pathlib import Path
print("compiling toylib/_speedups.c")
print("nvcc fatal   : Unsupported gpu architecture 'compute_100'")
sys.exit(1)
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    base = tmp_path_factory.mktemp("compiled")
    repo = make_window_repo(base / "upstream", compiled=True)
    folder = base / "mirror.git"
    git(base, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder))
    assert isinstance(mirror, MirrorRepo)
    return repo, mirror, base


def _shim(root, script: str, *, name: str = "build_wheel.py"):
    """The toy shim whose ``[target] build`` runs ``script``, kept beside its manifest."""
    text = (
        manifest_text("toylib_add")
        .replace('affected = ">=1.0,<1.1"\n', f'build = ["python", "{{here}}/{name}"]\n')
        .replace("https://example.org/toylib/pull/2", f"{UPSTREAM}/pull/63")
    )
    folder = write_shim(root, "toylib_add", manifest=text)
    (folder / name).write_text(script)
    return load_manifest(folder / "manifest.toml")


def _window(shim, repo, source, base, tmp_path):
    index = release_index(repo, tmp_path / "wheels")
    with IndexServer(index) as server:
        versions, yanked = list_releases(server.url, "toylib")
        options = BisectJob(
            shim.id,
            yanked=frozenset(yanked),
            index=server.url,
            cache=base / "cache",
            work_dir=tmp_path / "work",
            records=tmp_path / "validation.jsonl",
        )
        return bisect_window(shim, versions, options, source=source)


def test_without_a_named_build_the_compiled_target_stops_at_the_release_edge(compiled, tmp_path):
    repo, mirror, base = compiled
    shim = _shim(tmp_path / "shims", BUILD_SCRIPT)
    result = _window(shim, repo, Source(mirror), base, tmp_path)
    assert (result.window.introduced.after, result.window.fixed.after) == (INTRODUCED, FIXED)
    assert result.searched() == () and result.window.fix_commit is None
    assert result.stops and all("compiled sources (toylib/_speedups.c)" in s for s in result.stops)


def test_the_shims_named_build_takes_the_command_into_the_commits(compiled, tmp_path, capsys):
    """`patchlane bisect` on the shim whose manifest names its build: each commit's wheel built by
    the script from a checkout, the fix commit and the introducing one named, the build said in
    --json and in words, every commit run recorded with its commit."""
    from retire.commands import main as cli

    repo, mirror, base = compiled
    project = tmp_path / "project"
    shim = _shim(project / "shims", BUILD_SCRIPT)
    (project / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\npath = "{mirror.mirror.path}"\n'
    )
    index = release_index(repo, tmp_path / "wheels")
    with IndexServer(index) as server:
        common = ["--root", str(project), "--index", server.url, "--cache", str(base / "cache")]
        common += ["--python", sys.executable]
        code = cli(["bisect", "toylib_add", *common, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        document = json.loads(out)
        code = cli(["bisect", "toylib_add", *common])
        words, _ = capsys.readouterr()
    check("bisect", document)
    assert document["stops"] == []
    edges = {e["kind"]: e for e in document["commit_edges"]}
    assert edges["fixed"]["commit"]["sha"] == repo.fixed
    assert edges["introduced"]["commit"]["sha"] == repo.introduced
    assert shim.target.build is not None
    assert {e["build"] for e in edges.values()} == {shim.target.build.describe()}
    assert f'fixed by {repo.fixed[:12]} "Fix add() (#63)"' in words
    assert "Commits built with python {here}/build_wheel.py" in words
    # the wheel's install says the commit it was built from: the host stamp names it
    records = validation.load(Project(project).validation)
    built = {r.revisions.get("toylib") for r in records} - {None}
    assert repo.fixed in built and repo.introduced in built


def test_a_named_build_that_fails_leaves_each_commit_unknown(compiled, tmp_path):
    repo, mirror, base = compiled
    shim = _shim(tmp_path / "shims", FAILING_SCRIPT, name="fail.py")
    result = _window(shim, repo, Source(mirror, build=shim.target.build), base, tmp_path)
    assert result.window.fixed.after == FIXED and result.stops == ()
    runs = [r for searched in result.searched() for r in searched.runs]
    assert runs and all(r.state == "unknown" for r in runs)
    assert all("the named build failed (exit 1)" in r.detail for r in runs)
    assert all("Unsupported gpu architecture 'compute_100'" in r.detail for r in runs)
    # never read as the fix: no commit named, nothing recorded for a build that did not run
    assert result.window.fix_commit is None
    # an unpinned commit edge names its range, never a commit
    assert not any(searched.span.commit is not None for searched in result.searched())
    # the log a person reads is kept, named in the detail
    log = runs[0].detail.split("; log ", 1)[1].split(": ", 1)[0]
    assert "nvcc fatal" in Path(log).read_text()


def test_a_named_build_finds_a_fix_on_the_branch_in_no_release(tmp_path):
    """Still broken in every release since 1.3, the compiled target's fix only on main: the branch's
    commits are built by the named build too, and the fix commit is named."""
    repo = make_window_repo(tmp_path / "upstream", compiled=True, released=False)
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(tmp_path / "mirror.git"))
    mirror = open_mirror(Mirror(UPSTREAM, tmp_path / "mirror.git"))
    assert isinstance(mirror, MirrorRepo)
    shim = _shim(tmp_path / "shims", BUILD_SCRIPT)
    bare = _window(shim, repo, Source(mirror, branch="main"), tmp_path, tmp_path)
    assert bare.window.branch_fix is None
    assert any("main since 1.8 is not searched" in s and "compiled" in s for s in bare.stops)
    source = Source(mirror, branch="main", build=shim.target.build)
    result = _window(shim, repo, source, tmp_path, tmp_path)
    branch = result.window.branch_fix
    assert branch is not None and branch.commit is not None, result.stops
    assert (branch.commit.sha, branch.branch) == (repo.fixed, "main")
    assert shim.target.build is not None and branch.span.build == shim.target.build.describe()


def test_a_lanes_revision_may_name_the_build_when_the_shim_does_not(compiled, tmp_path):
    """The bisection's source takes the shim's `[target] build`, else the build a lane's
    `[lane.revisions]` entry for the target names ({here}: the lane file's folder)."""
    from retire.bisect.sources import project_source

    _, mirror, _ = compiled
    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    (root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\npath = "{mirror.mirror.path}"\n'
    )
    (root / "lanes" / "dev.toml").write_text(
        '[lane]\npython = "3.11"\nrequirements = ["toylib"]\n[lane.revisions]\n'
        f'toylib = {{ mirror = "{UPSTREAM}", rev = "main", build = ["bash", "{{here}}/b.sh"] }}\n'
    )
    plain = write_shim(root / "shims", "toylib_add")
    source = project_source(Project(root), load_manifest(plain / "manifest.toml"))
    assert source.repo is not None and source.build is not None
    assert source.build.argv() == ["bash", str((root / "lanes" / "b.sh").resolve())]
    assert "lanes/dev.toml lane.revisions.toylib.build" in source.build.describe()
    own = _shim(tmp_path / "own", BUILD_SCRIPT)
    assert project_source(Project(root), own).build == own.target.build
