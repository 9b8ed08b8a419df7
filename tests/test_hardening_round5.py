"""Hardening, fifth round (issue 35): the regression loop, leases and evidence files under faults
and hostile input. Real git, real file systems (a tmpfs for a full disk, RLIMIT_FSIZE for a write
that fails midway), real signals; one section per class of the issue."""

from __future__ import annotations

import pytest

from retire.core.git import Git, GitError, revision
from retire.mirrors.config import Mirror
from retire.mirrors.history import build_obstacle, commits_between, release_tag
from retire.mirrors.repo import MirrorRepo, open_mirror
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo

UPSTREAM = "https://git.example/acme/toylib"
#: A release-tag pattern a shop may well write: anything ending in vX.Y.
PERMISSIVE = r".*v(?P<version>\d+(?:\.\d+)*)"


# ---------------------------------------------------------------------------------------------
# Class 2: option injection into git


def test_a_revision_that_looks_like_an_option_is_refused_where_git_would_read_one():
    assert revision("v1.0") == "v1.0" and revision("refs/tags/--x") == "refs/tags/--x"
    for text in ("--output=/tmp/x", "-p", "", "a\nb", "a\0b"):
        with pytest.raises(GitError) as caught:
            revision(text)
        assert "\n" not in str(caught.value)


def test_a_mirror_tag_named_like_an_option_is_a_tag_and_never_writes_a_file(tmp_path):
    """A tag `--output=DIR/x-v1.2`, a release under a permissive pattern. Before: `git log`
    read it as --output and wrote DIR/x-v1.2^{commit}..v1.3^{commit}. Now: the range is read
    as the range it names, and nothing is written."""
    repo = make_window_repo(tmp_path / "upstream")
    out = tmp_path / "out"
    out.mkdir()
    hostile = f"--output={out}/x-v1.2"
    git(repo.path, "update-ref", f"refs/tags/{hostile}", repo.tags["1.2"])
    git(repo.path, "tag", "-d", "v1.2")
    folder = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder, tags=PERMISSIVE))
    assert isinstance(mirror, MirrorRepo)
    assert release_tag(mirror, "1.2") == hostile
    commits = commits_between(mirror, hostile, "v1.3")
    assert [c.sha for c in commits][-1] == repo.tags["1.3"] and len(commits) == 5
    assert repo.introduced in {c.sha for c in commits}
    assert build_obstacle(mirror, hostile) is None
    # the mirror's other reads take it as a tag too
    contained = mirror.probe_commit(repo.tags["1.0"])
    assert hostile in contained.release_tags
    ancestry = mirror.probe_ancestry(repo.introduced)
    assert ancestry.contains == (hostile, "1.2")
    assert list(out.iterdir()) == []


def _project_in_git(root) -> None:
    """A project with a lane, its (hand-written) lock and a shim, committed."""
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "cpu.toml").write_text(
        '[lane]\npython = "3.11"\nrequirements = ["toylib"]\nshims = ["toy"]\n'
    )
    (root / "locks" / "cpu").mkdir(parents=True)
    (root / "locks" / "cpu" / "pylock.toml").write_text('lock-version = "1.0"\n')
    shimtree.write_shim(root / "shims", "toy")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a shop")


def test_culprit_since_an_option_never_makes_git_show_write(tmp_path, capsys):
    """`culprit --since=--output=DIR/x` (whose `git show DIR/x:locks/cpu/pylock.toml` had a
    folder to write into). Before: git show wrote the file. Now: one line naming --since, exit 2,
    nothing written."""
    root = tmp_path / "shop"
    _project_in_git(root)
    out = tmp_path / "out"
    (out / "x:locks" / "cpu").mkdir(parents=True)
    code, _out, err = run_cli(
        root, "culprit", "cpu", "toy", f"--since=--output={out}/x", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1 and "--since" in err, err
    assert "Traceback" not in err
    assert list((out / "x:locks" / "cpu").iterdir()) == []


def test_a_branch_named_like_an_option_is_read_as_a_branch(tmp_path):
    """A branch `--foo` (git branch refuses the name; a fetch or update-ref makes it): `culprit
    --since=--foo` reads the lock it holds, and a mirror follows it like any branch."""
    from retire.branches import breaks
    from retire.core.project import Project

    root = tmp_path / "shop"
    _project_in_git(root)
    git(root, "update-ref", "refs/heads/--foo", "HEAD")
    (root / "locks" / "cpu" / "pylock.toml").write_text('lock-version = "1.0"\n# moved\n')
    git(root, "commit", "-q", "-am", "a move")
    text, rev = breaks.old_lock_at(Project(root), "cpu", "--foo")
    assert (text, rev) == (b'lock-version = "1.0"\n', "--foo")
    assert Git(root).rev_parse("--foo") == git(root, "rev-parse", "HEAD~1")
    assert Git(root).is_ancestor("--foo", "HEAD")

    repo = make_window_repo(tmp_path / "upstream")
    git(repo.path, "update-ref", "refs/heads/--foo", repo.tags["1.4"])
    folder = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder, branches=("--foo",)))
    assert isinstance(mirror, MirrorRepo)
    ancestry = mirror.probe_ancestry("--foo")
    assert ancestry.branch == "--foo" and ancestry.contains == ("v1.4", "1.4")
    assert mirror.probe_tip(repo.tags["1.4"]).branches == ("--foo",)
