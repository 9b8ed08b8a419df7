"""The informed commit search wired into `patchlane bisect`, for real: a toy upstream whose ranges
between two tags hold 13 first-parent commits, of which only the breaking (or fixing) commit and
the release commit touch the target's package (the others change docs/notes.md), mirrored, its
releases on a loopback index, each commit candidate built by real uv. Each commit edge is pinned in
at most ⌈log2 k⌉ + 2 commit runs (k = 2: 3), fewer than the full binary search's ⌈log2 13⌉ = 4,
on the same commit; the output and --json say how the commits were searched and which files were
read. (The search alone over random histories: tests/test_bisect_informed.py.)"""

from __future__ import annotations

import json
import math
import sys

import pytest

from retire.commands import main as cli
from retire.core.git import Git
from retire.history.edge import CommitSearch
from retire.mirrors.history import commits_between
from retire.mirrors.touching import touching
from tests.support.gitrepos import git
from tests.support.historyrepo import FIXED, INTRODUCED, make_window_repo, release_index
from tests.support.index import IndexServer
from tests.support.shimtree import manifest_text, write_shim
from tests.test_json_schemas import check

pytestmark = pytest.mark.slow

UPSTREAM = "https://github.com/acme/toylib"
PER_RELEASE, AT = 12, 5


def test_each_commit_edge_is_pinned_among_the_commits_that_touch_the_target(tmp_path, capsys):
    repo = make_window_repo(tmp_path / "upstream", quiet=True, per_release=PER_RELEASE, at=AT)
    mirror = tmp_path / "mirrors" / "toylib.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    # most commits of a range leave the package alone: k = 2 of 13
    read = touching(Git(mirror), "v1.5", "v1.6", ("toylib",))
    assert read.paths == ("toylib",) and read.commits == {repo.fixed, repo.tags["1.6"]}
    project = tmp_path / "project"
    text = manifest_text("toylib_add").replace(
        "https://example.org/toylib/pull/2", f"{UPSTREAM}/pull/63"
    )
    write_shim(project / "shims", "toylib_add", manifest=text)
    (project / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\npath = "{mirror}"\n'
    )
    with IndexServer(release_index(repo, tmp_path / "wheels")) as server:
        common = ["--root", str(project), "--index", server.url, "--python", sys.executable]
        common += ["--all", "--no-record"]
        code = cli(["bisect", "toylib_add", *common, "--json", "--cache", str(tmp_path / "c1")])
        out, said = capsys.readouterr()
        document = json.loads(out)
        again = cli(["bisect", "toylib_add", *common, "--cache", str(tmp_path / "c2")])
        words, _ = capsys.readouterr()
    assert code == again == 0, said
    check("bisect", document)
    assert (document["first_fixed"], document["window"]["introduced"]["after"]) == (
        FIXED,
        INTRODUCED,
    )
    edges = {edge["kind"]: edge for edge in document["commit_edges"]}
    assert edges["fixed"]["commit"]["sha"] == repo.fixed
    assert edges["introduced"]["commit"]["sha"] == repo.introduced
    full = math.ceil(math.log2(PER_RELEASE + 1))
    for kind, edge in edges.items():
        search = edge["search"]
        assert search["how"] == str(CommitSearch.TOUCHING), search
        assert search["paths"] == ["toylib"] and search["touching"] == 2
        assert search["note"].startswith("informed: 2 of 13 commits touch the target's files")
        # the commit runs that pinned it: at most ⌈log2 2⌉ + 2, fewer than the full search
        fresh = [run for run in edge["runs"] if not run["cached"]]
        assert len(fresh) <= math.ceil(math.log2(2)) + 2 < full + 1, (kind, fresh)
        assert len(fresh) < full, (kind, len(fresh))
        # the commit before the edge's, run and on the old side: the confirmation
        commits = commits_between_shas(mirror, edge["tags"])
        before = commits[commits.index(edge["commit"]["sha"]) - 1]
        assert edge["edge"]["before"] == before
        assert before in {run["version"] for run in edge["runs"]}
    # said as it went, and in the answer
    assert "the fixed edge in v1.5..v1.6: informed: 2 of 13 commits touch" in said
    assert "The fixed edge's commits: informed: 2 of 13 commits touch the target's files" in words
    assert f"fixed by {repo.fixed[:12]}" in words


def commits_between_shas(mirror, tags) -> list[str]:
    """The older tag's commit, then the first-parent commits up to the newer tag's."""
    from retire.mirrors.config import Mirror
    from retire.mirrors.repo import MirrorRepo, open_mirror

    opened = open_mirror(Mirror(UPSTREAM, mirror))
    assert isinstance(opened, MirrorRepo)
    old = opened.git.rev_parse(f"{tags[0]}^{{commit}}")
    return [old, *(c.sha for c in commits_between(opened, tags[0], tags[1]))]
