"""A bug's window found by execution, for real: a toy upstream whose git history breaks add() in
one release's range and fixes it by a commit in the middle of a later one's; its releases built
as wheels from that history on a loopback index; uv building one overlay env per release and the
package from the mirror at each commit. No evidence is given: the bisection finds both release
edges and both commits, over a crash zone, over a merge, and stops at the release edge where
the target cannot be built from source. (The search alone: tests/test_bisect_window.py.)"""

from __future__ import annotations

import math

import pytest

from retire.bisect.bisection import list_releases
from retire.bisect.job import BisectJob
from retire.bisect.transitions import Source, bisect_window
from retire.evidence import validation
from retire.history.edge import EdgeState, Place
from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror
from shims.manifest import load_manifest
from tests.support.gitrepos import git
from tests.support.historyrepo import FIXED, INTRODUCED, RELEASES, make_window_repo, release_index
from tests.support.index import IndexServer
from tests.support.shimtree import write_shim
from tests.test_json_schemas import check

pytestmark = pytest.mark.slow

UPSTREAM = "https://git.example/acme/toylib"


def _mirror(repo, folder) -> MirrorRepo:
    git(folder.parent, "clone", "-q", "--mirror", str(repo.path), str(folder))
    opened = open_mirror(Mirror(UPSTREAM, folder))
    assert isinstance(opened, MirrorRepo)
    return opened


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    base = tmp_path_factory.mktemp("linear")
    repo = make_window_repo(base / "upstream")
    return repo, _mirror(repo, base / "mirror.git"), base


@pytest.fixture
def shim(tmp_path):
    folder = write_shim(tmp_path / "project" / "shims", "toylib_add")
    return load_manifest(folder / "manifest.toml")


def _window(shim, repo, mirror, base, tmp_path, *, crash_below=0, **options):
    index = release_index(repo, tmp_path / "wheels", crash_below=crash_below)
    with IndexServer(index) as server:
        versions, yanked = list_releases(server.url, "toylib")
        run_options = BisectJob(
            shim.id,
            yanked=frozenset(yanked),
            index=server.url,
            cache=options.pop("cache", base / "cache"),
            work_dir=tmp_path / "work",
            records=tmp_path / "validation.jsonl",
        )
        return bisect_window(
            shim,
            versions,
            run_options,
            source=Source(mirror) if mirror is not None else None,
            **options,
        )


def test_no_evidence_finds_both_release_edges_and_both_commits(shim, linear, tmp_path):
    repo, mirror, base = linear
    result = _window(shim, repo, mirror, base, tmp_path)
    w = result.window
    assert w.seen, result.summary()
    assert (w.introduced.state, w.introduced.before, w.introduced.after) == (
        EdgeState.FOUND,
        "1.2",
        INTRODUCED,
    )
    assert (w.fixed.state, w.fixed.before, w.fixed.after) == (EdgeState.FOUND, "1.5", FIXED)
    fixed, introduced = w.fixed.commits, w.introduced.commits
    assert fixed is not None and introduced is not None, result.stops
    assert fixed.commit is not None and fixed.commit.sha == repo.fixed
    assert (fixed.commit.subject, fixed.commit.pull) == ("Fix add() (#63)", 63)
    assert fixed.commit.date.startswith("2026-01-01")
    assert introduced.commit is not None and introduced.commit.sha == repo.introduced
    assert introduced.commit.pull == 33 and introduced.tags == ("v1.2", "v1.3")
    # the commit just before each is on the other side
    assert fixed.before == git(repo.path, "rev-parse", f"{repo.fixed}^")
    # releases: the newest end, a sample, then a binary search per edge; commits: log2 per edge
    release_runs = [r for r in result.release_runs if not r.cached]
    assert len(release_runs) <= 1 + 8 + 2 * math.ceil(math.log2(len(RELEASES)))
    assert all(len(s.runs) <= math.ceil(math.log2(s.span.count)) + 1 for s in result.searched())
    assert result.floor == "toylib>=1.6" and result.status == "found"
    line = result.window_line()
    assert f'by {repo.fixed[:12]} "Fix add() (#63)"' in line and "introduced in 1.3" in line
    # a lane on 1.1 never needed the shim; on 1.4 it does; on 1.7 it can go
    assert [w.place(v) for v in ("1.1", "1.4", "1.7")] == [Place.BEFORE, Place.INSIDE, Place.AFTER]
    # every fresh run is evidence; commit runs carry their commit in the host stamp
    records = validation.load(tmp_path / "validation.jsonl")
    assert len(records) == result.runs == result.records_added
    built = {r.revisions.get("toylib") for r in records} - {None}
    assert repo.fixed in built and repo.introduced in built
    # asked again: every answer from the cache, nothing run or recorded
    again = _window(shim, repo, mirror, base, tmp_path)
    assert again.runs == 0 and again.window.fix_commit == result.window.fix_commit


def test_a_crash_zone_below_the_window_is_told_from_clean(shim, linear, tmp_path):
    """Six old releases crash on import (too old for today's dependencies): unknown, never read
    as clean, and the window is still found above them."""
    repo, mirror, base = linear
    result = _window(shim, repo, mirror, base, tmp_path, crash_below=6, cache=tmp_path / "c")
    w = result.window
    assert w.seen and (w.introduced.after, w.fixed.after) == (INTRODUCED, FIXED)
    crashed = [r for r in result.release_runs if r.version.startswith("0.")]
    assert all(r.state == "unknown" and r.outcome == "crashed" for r in crashed)
    assert result.window.fix_commit is not None and result.window.fix_commit.sha == repo.fixed


def test_a_fix_merged_by_a_merge_commit_is_named_by_the_merge_and_its_pull_request(shim, tmp_path):
    repo = make_window_repo(tmp_path / "upstream", merges=True)
    mirror = _mirror(repo, tmp_path / "mirror.git")
    result = _window(shim, repo, mirror, tmp_path, tmp_path)
    commit = result.window.fix_commit
    # first-parent: the merge is the step; refs/pull/63/head names its pull request
    assert commit is not None and commit.sha == repo.fixed and commit.merge
    assert (commit.subject, commit.pull) == ("Merge branch 'fix-add'", 63)


def test_a_compiled_target_stops_at_the_release_edge_and_says_why(shim, tmp_path):
    repo = make_window_repo(tmp_path / "upstream", compiled=True)
    mirror = _mirror(repo, tmp_path / "mirror.git")
    result = _window(shim, repo, mirror, tmp_path, tmp_path)
    assert (result.window.introduced.after, result.window.fixed.after) == (INTRODUCED, FIXED)
    assert result.searched() == ()
    assert result.stops and all("compiled sources (toylib/_speedups.c)" in s for s in result.stops)
    assert "The fixed edge stops at 1.5 → 1.6" in result.summary()
    # without a mirror: the same stop, another reason
    bare = _window(shim, repo, None, tmp_path, tmp_path)
    assert bare.runs == 0 and all("not mirrored" in s for s in bare.stops)


def test_the_command_follows_the_shims_link_to_the_mirror_and_names_the_commits(
    linear, tmp_path, capsys
):
    """`patchlane bisect` with no evidence on record: the window over every release, the mirror
    found from the shim's link, the fix commit and its pull request in --json and in words."""
    import json
    import sys

    from retire.commands import main as cli
    from tests.support.shimtree import manifest_text

    repo, mirror, base = linear
    project = tmp_path / "project"
    text = (
        manifest_text("toylib_add")
        .replace('affected = ">=1.0,<1.1"\n', "")
        .replace("https://example.org/toylib/pull/2", "https://github.com/acme/toylib/pull/63")
    )
    write_shim(project / "shims", "toylib_add", manifest=text)
    (project / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\n'
        f'path = "{mirror.mirror.path}"\n'
    )
    index = release_index(repo, tmp_path / "wheels")
    with IndexServer(index) as server:
        common = ["--root", str(project), "--index", server.url, "--cache", str(base / "cache")]
        code = cli(["bisect", "toylib_add", *common, "--python", sys.executable, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        document = json.loads(out)
        code = cli(["bisect", "toylib_add", *common, "--python", sys.executable])
        words, _ = capsys.readouterr()
    check("bisect", document)
    assert document["range_note"].startswith("every release")
    assert document["window"]["introduced"]["after"] == INTRODUCED
    fixed = next(e for e in document["commit_edges"] if e["kind"] == "fixed")
    assert fixed["commit"]["sha"] == repo.fixed and fixed["commit"]["pull"] == 63
    assert fixed["tags"] == ["v1.5", "v1.6"]
    assert f'fixed by {repo.fixed[:12]} "Fix add() (#63)"' in words
    assert "first released in 1.6" in words


def test_a_fix_in_no_release_is_found_on_the_branch_after_the_newest_release(shim, tmp_path):
    """Still broken in every release since 1.3; main's newest commit is clean: the commit that
    fixed it, on main, in no release yet (the fixed edge over releases stays open)."""
    repo = make_window_repo(tmp_path / "upstream", released=False)
    mirror = _mirror(repo, tmp_path / "mirror.git")
    index = release_index(repo, tmp_path / "wheels")
    with IndexServer(index) as server:
        versions, _ = list_releases(server.url, "toylib")
        options = BisectJob(
            shim.id, index=server.url, cache=tmp_path / "cache", work_dir=tmp_path / "work"
        )
        result = bisect_window(shim, versions, options, source=Source(mirror, branch="main"))
    assert result.window.fixed.state == EdgeState.OPEN and result.first_fixed is None
    branch = result.window.branch_fix
    assert branch is not None and branch.commit is not None, result.stops
    assert (branch.commit.sha, branch.commit.pull, branch.branch) == (repo.fixed, 92, "main")
    assert f"fixed on main at {repo.fixed[:12]}" in result.window_line()
    assert "in no release yet" in result.window_line()
    # no release is fixed: no floor to propose
    assert result.status == "no-transition" and result.floor is None


LANE = """[lane]
python = "3.12"
platform = "linux"
requirements = ["toylib"]
shims = ["toylib_add"]
"""


def _lock(root, lane: str, version: str, commit: str | None = None) -> None:
    folder = root / "locks" / lane
    folder.mkdir(parents=True)
    vcs = (
        f'[packages.vcs]\ntype = "git"\nurl = "https://github.com/acme/toylib.git"\n'
        f'commit-id = "{commit}"\n'
        if commit
        else ""
    )
    (folder / "pylock.toml").write_text(
        f'lock-version = "1.0"\ncreated-by = "tests"\n\n[[packages]]\nname = "toylib"\n'
        f'version = "{version}"\n{vcs}'
    )


def test_each_lane_is_placed_before_inside_or_after_the_window(linear, tmp_path, capsys):
    """A lane on 1.1 never needed the shim, one on 1.4 does, one on 1.7 can let it go; a revision
    lane is placed by its commit: past the fix commit it can go, before the breaking one it never
    needed the shim."""
    import json
    import sys

    from retire.commands import main as cli
    from tests.support.shimtree import manifest_text

    repo, mirror, base = linear
    project = tmp_path / "project"
    text = manifest_text("toylib_add").replace('affected = ">=1.0,<1.1"\n', "")
    write_shim(project / "shims", "toylib_add", manifest=text)
    (project / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\n'
        f'path = "{mirror.mirror.path}"\n'
    )
    (project / "lanes").mkdir()
    revision = (
        '\n[lane.revisions]\ntoylib = { mirror = "https://github.com/acme/toylib", rev = "main" }\n'
    )
    for name, version in (("old", "1.1"), ("mid", "1.4"), ("new", "1.7")):
        (project / "lanes" / f"{name}.toml").write_text(LANE)
        _lock(project, name, version)
    for name, commit in (
        ("dev", repo.fixed),
        ("stale", git(repo.path, "rev-parse", f"{repo.introduced}^")),
    ):
        (project / "lanes" / f"{name}.toml").write_text(LANE + revision)
        _lock(project, name, "1.5", commit)
    with IndexServer(release_index(repo, tmp_path / "wheels")) as server:
        common = ["--root", str(project), "--index", server.url, "--cache", str(base / "cache")]
        code = cli(["bisect", "toylib_add", *common, "--python", sys.executable, "--json"])
        out, err = capsys.readouterr()
    assert code == 0, err
    check("bisect", json.loads(out))
    places = {p["lane"]: p["place"] for p in json.loads(out)["lanes"]}
    assert places == {
        "old": "before",
        "mid": "inside",
        "new": "after",
        "dev": "after",
        "stale": "before",
    }
    says = {p["lane"]: p["says"] for p in json.loads(out)["lanes"]}
    assert "the shim is not needed there" in says["old"]
    assert f"at or past the fix {repo.fixed[:12]}" in says["dev"]


def test_compiled_sources_of_a_separate_project_or_of_tests_do_not_stop_the_build(tmp_path):
    """Liger-Kernel 0.8.2 carries a CMake project (liger_cute_kernels/, with its own build files)
    and C++ tests beside its pure-Python package: uv builds the package in seconds, so the search
    goes on into the commits. Sources in the package itself still stop it."""
    from retire.mirrors.history import build_obstacle

    upstream = tmp_path / "upstream"
    files = {
        "pyproject.toml": "[project]\nname = 'toylib'\n",
        "src/toylib/__init__.py": "",
        "cute/pyproject.toml": "[project]\nname = 'cute'\n",
        "cute/CMakeLists.txt": "project(cute)\n",
        "cute/csrc/moe.cu": "// kernel\n",
        "cute/tests/cpp/test.cpp": "// test\n",
        "tests/helper.c": "/* fixture */\n",
    }
    for name, text in files.items():
        (upstream / name).parent.mkdir(parents=True, exist_ok=True)
        (upstream / name).write_text(text)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "pure package, compiled neighbours")
    mirror = _mirror(type("Repo", (), {"path": upstream}), tmp_path / "mirror.git")
    assert build_obstacle(mirror, "main") is None
    (upstream / "src/toylib/_speedups.c").write_text("/* an extension of the package */\n")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "an extension")
    mirror = _mirror(type("Repo", (), {"path": upstream}), tmp_path / "mirror2.git")
    assert "compiled sources (src/toylib/_speedups.c)" in (build_obstacle(mirror, "main") or "")
