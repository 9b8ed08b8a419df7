"""A commit search whose builds cannot find their build backend, for real: the toy upstream names
setuptools as its backend, the loopback index serves its releases but no setuptools, and uv
builds each commit candidate from the mirror. The first build fails for want of the backend:
that commit is unknown (never not applicable) with the reason and the fix, the commit search stops
there — one build, not a dozen —, each commit edge names its range and no commit, and `patchlane
bisect` exits 1. (A named build that fails: tests/test_bisect_named_build.py.)"""

from __future__ import annotations

import json
import sys

import pytest

from retire.commands import main as cli
from retire.locks.failures import missing_build_requirements
from tests.support.gitrepos import git
from tests.support.historyrepo import FIXED, INTRODUCED, make_window_repo, release_index
from tests.support.index import IndexServer
from tests.support.shimtree import manifest_text, write_shim
from tests.test_json_schemas import check

UPSTREAM = "https://github.com/acme/toylib"
FIX = "add it to the index, or name a build (`[target] build`)"


@pytest.mark.slow
def test_a_missing_build_backend_stops_the_commit_search_after_one_build(tmp_path, capsys):
    repo = make_window_repo(tmp_path / "upstream", setuptools=True)
    mirror = tmp_path / "mirrors" / "toylib.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    project = tmp_path / "project"
    text = (
        manifest_text("toylib_add")
        .replace('affected = ">=1.0,<1.1"\n', "")
        .replace("https://example.org/toylib/pull/2", f"{UPSTREAM}/pull/63")
    )
    write_shim(project / "shims", "toylib_add", manifest=text)
    (project / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\npath = "{mirror}"\n'
    )
    with IndexServer(release_index(repo, tmp_path / "wheels")) as server:
        common = ["--root", str(project), "--index", server.url, "--python", sys.executable]
        code = cli(["bisect", "toylib_add", *common, "--json"])
        out, err = capsys.readouterr()
        document = json.loads(out)
        again = cli(["bisect", "toylib_add", *common, "--all", "--no-record"])
        words, _ = capsys.readouterr()
    # the releases' window is found; the commits' could not be built: exit 1 all the same
    assert code == again == 1, err
    check("bisect", document)
    assert document["status"] == "found" and document["first_fixed"] == FIXED
    assert document["window"]["introduced"]["after"] == INTRODUCED
    edges = {e["kind"]: e for e in document["commit_edges"]}
    assert set(edges) == {"fixed", "introduced"}
    # one build was tried, for the fixed edge; it stopped the introduced edge's search too
    runs = [run for edge in document["commit_edges"] for run in edge["runs"]]
    assert len(runs) == 1 and edges["fixed"]["runs"] == runs
    [run] = runs
    assert (run["state"], run["outcome"]) == ("unknown", "env-failed")
    assert "the index serves no setuptools" in run["detail"] and FIX in run["detail"]
    for edge in edges.values():
        # an unpinned edge names its range and the commits left in it, never a commit
        assert edge["commit"] is None and edge["edge"]["state"] == "unpinned"
        assert "the index serves no setuptools" in edge["edge"]["note"]
        assert edge["edge"]["between"]
    assert edges["fixed"]["tags"] == ["v1.5", "v1.6"]
    # in words: the range, the reason and the fix; no commit is said to have fixed it
    assert "fixed in v1.5..v1.6, not pinned (one of " in words
    assert "introduced in v1.2..v1.3, not pinned" in words
    said = "not pinned: the fixed and introduced edge's commits could not be built — uv cannot"
    assert said in words and FIX in words and "fixed by " not in words


def test_uvs_words_for_a_build_backend_the_index_does_not_serve():
    """uv 0.13's failure when `[build-system] requires` cannot be resolved: the backend named
    (the one not found first, else every requirement it resolved); an index it could not reach
    or a build that failed in its backend is another failure."""
    said = (
        "error: Failed to download and build `toylib @ git+file:///m@0123`\n"
        "  cause: Failed to resolve requirements from `build-system.requires`\n"
        "  cause: No solution found when resolving: `setuptools>=61`, `wheel`\n"
        "  cause: Because setuptools was not found in the package registry and you require "
        "setuptools>=61, we can conclude that your requirements are unsatisfiable.\n"
    )
    assert missing_build_requirements(said) == ("setuptools",)
    unexplained = said.replace("Because setuptools was not found in the package registry", "")
    assert missing_build_requirements(unexplained) == ("setuptools", "wheel")
    unreachable = said + "  cause: error sending request for url (http://127.0.0.1:9/wheel/)\n"
    assert missing_build_requirements(unreachable) is None
    failed = (
        "error: Failed to build `toylib @ git+file:///m@0123`\n"
        "  cause: The build backend returned an error\n"
        "  cause: Call to `setuptools.build_meta.build_wheel` failed (exit status: 1)\n"
    )
    assert missing_build_requirements(failed) is None
