"""Every merge style names its pull request: a merge commit (its subject, or ``refs/pull/N/head``
at its second parent), and — with no ``(#N)`` in any subject — a rebase (each commit copied onto
main) or a squash (one commit of the request's whole diff), found by ``git patch-id --stable``
against ``refs/pull/N/head``, once per range and cached on disk. Toy upstreams built in the test
(tests/support/landings.py), real git; then bisections with real uv on a loopback index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retire.core.git import Git
from retire.mirrors.config import Mirror
from retire.mirrors.history import commits_between
from retire.mirrors.patchids import pulls_by_patch
from retire.mirrors.repo import MirrorRepo, open_mirror
from tests.support.gitrepos import git
from tests.support.landings import LandedRepo, make_landed_repo

UPSTREAM = "https://git.example/acme/toylib"


def _mirror(repo: LandedRepo, folder: Path, cache: Path | None = None) -> MirrorRepo:
    git(folder.parent, "clone", "-q", "--mirror", str(repo.path), str(folder))
    opened = open_mirror(Mirror(UPSTREAM, folder), cache)
    assert isinstance(opened, MirrorRepo)
    return opened


@pytest.fixture(scope="module")
def rebased(tmp_path_factory):
    base = tmp_path_factory.mktemp("rebased")
    repo = make_landed_repo(base / "upstream", fix="rebase")
    return repo, _mirror(repo, base / "mirror.git")


@pytest.fixture(scope="module")
def squashed(tmp_path_factory):
    base = tmp_path_factory.mktemp("squashed")
    repo = make_landed_repo(base / "upstream", fix="squash", squashed_extra=True)
    return repo, _mirror(repo, base / "mirror.git")


@pytest.mark.slow
def test_a_rebased_request_is_named_by_the_patch_of_each_of_its_commits(rebased):
    repo, mirror = rebased
    commits = {c.sha: c for c in commits_between(mirror, "v1.5", "v1.6")}
    fixed = commits[repo.fixed]
    # no number in the subject, not a merge, not the request's own head: only the patch says
    assert (fixed.subject, fixed.merge, fixed.pull) == ("Fix add()", False, 63)
    assert repo.fixed != repo.fix_branch_tip
    note = next(c for c in commits.values() if c.subject == "Start on fix-add")
    assert note.pull == 63
    # the other commits keep what their subjects say
    assert {c.pull for c in commits.values() if c.subject.startswith("Tidy 1.6")} == {61, 62, 64}
    assert all(c.pull is None for c in commits.values() if c.subject.startswith("Tidy main"))


def test_a_merge_commit_is_named_by_the_head_at_its_second_parent(rebased):
    repo, mirror = rebased
    merge = next(c for c in commits_between(mirror, "v1.2", "v1.3") if c.sha == repo.introduced)
    assert (merge.subject, merge.merge, merge.pull) == ("Merge branch 'rework'", True, 33)


@pytest.mark.slow
def test_a_squashed_request_is_named_by_its_combined_diff(squashed):
    repo, mirror = squashed
    fixed = next(c for c in commits_between(mirror, "v1.5", "v1.6") if c.sha == repo.fixed)
    assert (fixed.subject, fixed.pull) == ("Fix the sign", 63)
    docs = next(c for c in commits_between(mirror, "v1.6", "v1.7") if c.sha == repo.squashed)
    assert (docs.subject, docs.pull) == ("Write the docs", 71)


@pytest.mark.slow
def test_the_answer_is_kept_per_range_and_refs_and_asked_again_when_a_ref_moves(tmp_path):
    repo = make_landed_repo(tmp_path / "upstream", fix="squash")
    cache = tmp_path / "cache"
    mirror = _mirror(repo, tmp_path / "mirror.git", cache)

    def pull() -> int | None:
        return next(c.pull for c in commits_between(mirror, "v1.5", "v1.6") if c.sha == repo.fixed)

    assert pull() == 63
    (kept,) = cache.glob("*.json")
    assert json.loads(kept.read_text()) == {repo.fixed: 63}
    # the kept answer is what a second reading uses: nothing is computed again
    kept.write_text(json.dumps({repo.fixed: 99}))
    assert pull() == 99
    # another request's head moves: another key, computed afresh
    git(mirror.git.repo, "update-ref", "refs/pull/5/head", repo.tags["1.0"])
    assert pull() == 63 and len(list(cache.glob("*.json"))) == 2
    # a cache that cannot be read is no answer, never an error
    for path in cache.glob("*.json"):
        path.write_text("{not json")
    assert pull() == 63


@pytest.mark.slow
def test_a_patch_two_requests_share_names_neither(tmp_path):
    repo = make_landed_repo(tmp_path / "upstream", fix="squash")
    # the same two commits again, as another request (a re-opened duplicate)
    git(repo.path, "checkout", "-q", "-b", "dup", f"{repo.fix_branch_tip}~2")
    picked = f"{repo.fix_branch_tip}~2..{repo.fix_branch_tip}"
    git(repo.path, "cherry-pick", picked, when="2026-01-01T00:30:00Z")
    git(repo.path, "checkout", "-q", "main")
    git(repo.path, "update-ref", "refs/pull/64/head", "dup")
    mirror = _mirror(repo, tmp_path / "mirror.git")
    fixed = next(c for c in commits_between(mirror, "v1.5", "v1.6") if c.sha == repo.fixed)
    assert fixed.pull is None


def test_without_pull_heads_or_commits_nothing_is_asked(tmp_path):
    git_ = Git(tmp_path)
    assert pulls_by_patch(git_, [], "a", "b", {"c": 1}) == {}
    assert pulls_by_patch(git_, ["a"], "a", "b", {}) == {}
    # a failing git names nothing, never raises
    assert pulls_by_patch(git_, ["0" * 40], "a", "b", {"c": 1}) == {}


# ---------------------------------------------------------------------------------------------
# The window's commits, bisected with real uv


@pytest.mark.slow
@pytest.mark.parametrize("landing", ["rebase", "squash"])
def test_a_window_whose_fix_landed_without_a_number_names_both_pull_requests(landing, tmp_path):
    from retire.bisect.transitions import Source
    from shims.manifest import load_manifest
    from tests.support.historyrepo import FIXED, INTRODUCED, bisect_releases
    from tests.support.shimtree import write_shim

    repo = make_landed_repo(tmp_path / "upstream", fix=landing)
    mirror = _mirror(repo, tmp_path / "mirror.git", tmp_path / "cache" / "mirrors")
    manifest = load_manifest(write_shim(tmp_path / "shims", "toylib_add") / "manifest.toml")
    cache = tmp_path / "cache" / "bisect"
    result = bisect_releases(manifest, repo, Source(mirror), tmp_path, cache=cache, records=False)
    assert (result.window.introduced.after, result.window.fixed.after) == (INTRODUCED, FIXED)
    introduced, fixed = result.window.introduced.commits, result.window.fixed.commits
    assert introduced is not None and fixed is not None, result.stops
    assert introduced.commit is not None and introduced.commit.sha == repo.introduced
    assert (introduced.commit.merge, introduced.commit.pull) == (True, 33)
    assert fixed.commit is not None and fixed.commit.sha == repo.fixed
    assert fixed.commit.pull == 63
    assert "(#63)" in result.window_line() or "#63" in result.summary()
