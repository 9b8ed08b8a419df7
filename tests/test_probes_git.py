"""The git probe against real repositories built here: tags, a merge commit, a mirror clone."""

from __future__ import annotations

import pytest

from retire.evidence.values import ProbeFailure, TagContainment
from retire.probes.gitrepo import mirror_for, probe_containment, probe_tag_contains, tag_version
from tests.support.gitrepos import commit, git, make_upstream


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    return make_upstream(tmp_path_factory.mktemp("git") / "toylib")


@pytest.fixture(scope="module")
def mirror(upstream, tmp_path_factory):
    """A bare mirror clone, as a CI cache would keep."""
    path = tmp_path_factory.mktemp("mirrors") / "org" / "toylib.git"
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "clone", "-q", "--mirror", str(upstream.path), str(path))
    return path


def test_fix_commit_is_in_the_release_tag_after_its_merge(upstream, mirror):
    found = probe_containment(mirror, upstream.fix, repository="https://github.com/org/toylib")
    assert isinstance(found, TagContainment)
    assert found.contained
    assert found.release_tags == ("v1.1",)
    assert "nightly-2026-03-01" in found.tags  # contains it, but is not a release tag
    assert [str(v) for v in found.released_versions()] == ["1.1"]
    assert found.commit == upstream.fix


def test_merge_commit_and_abbreviated_sha(upstream, mirror):
    found = probe_containment(mirror, upstream.merge[:10])
    assert isinstance(found, TagContainment)
    assert found.commit == upstream.merge
    assert found.release_tags == ("v1.1",)


def test_old_commit_is_in_every_release(upstream, mirror):
    found = probe_containment(mirror, upstream.first)
    assert set(found.release_tags) == {"v1.0", "v1.1"}
    assert {str(v) for v in found.known_versions()} == {"1.0", "1.1"}


def test_unreleased_commit_is_in_no_release_tag(upstream, mirror):
    found = probe_containment(mirror, upstream.unreleased)
    assert isinstance(found, TagContainment)
    assert not found.contained and found.tags == ()
    assert {t for t, _ in found.tag_versions} == {"v1.0", "v1.1"}  # the mirror knows its releases


def test_missing_commit_is_a_failure_naming_the_fix(mirror):
    found = probe_containment(mirror, "0123456789abcdef0123456789abcdef01234567")
    assert isinstance(found, ProbeFailure)
    assert "not in the mirror" in found.reason and "git fetch" in found.reason


def test_missing_mirror_and_not_a_repository(tmp_path):
    assert "no local mirror" in probe_containment(tmp_path / "nope", "abcdef1").reason
    (tmp_path / "plain").mkdir()
    assert "not a git repository" in probe_containment(tmp_path / "plain", "abcdef1").reason


def test_release_tag_pattern_is_configurable(upstream, tmp_path):
    repo = tmp_path / "mono"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    sha = commit(repo, "a", "1", "first")
    git(repo, "tag", "core_v0.16.0")
    git(repo, "tag", "v9.9")
    found = probe_containment(repo, sha, release_tag=r"core_v(\d+(?:\.\d+)*)")
    assert found.release_tags == ("core_v0.16.0",)
    assert [str(v) for v in found.released_versions()] == ["0.16.0"]
    assert tag_version("core_v0.16.0", r"core_v(\d+(?:\.\d+)*)") == "0.16.0"
    assert tag_version("v1.2") == "1.2" and tag_version("nightly") is None
    bad = probe_containment(repo, sha, release_tag="(")
    assert isinstance(bad, ProbeFailure) and "pattern" in bad.reason


def test_tag_contains_and_tag_that_does_not_exist(upstream, mirror):
    assert probe_tag_contains(mirror, upstream.fix, "v1.1") is True
    assert probe_tag_contains(mirror, upstream.fix, "v1.0") is False
    missing = probe_tag_contains(mirror, upstream.fix, "v2.0")
    assert isinstance(missing, ProbeFailure)
    assert "tag 'v2.0' does not exist" in missing.reason


def test_mirror_lookup(mirror, tmp_path):
    root = mirror.parent.parent
    assert mirror_for("https://github.com/org/toylib", root) == mirror
    assert mirror_for("https://github.com/org/other", root) is None
    assert mirror_for("https://github.com/../..", root) is None
    assert mirror_for("https://github.com/org/toylib.git", {"https://github.com/org/toylib": tmp_path}) == tmp_path
    assert mirror_for("https://github.com/org/toylib", None) is None
