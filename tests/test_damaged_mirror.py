"""Mirrors as they come: a snapshot of a real repository that lacks some files' contents (an
archive that leaves out files of 4 MiB or more: test data, a docs image) still holds every commit
and tree, but git will not clone it nor check a commit out. The commit candidates are checked out
without the files the package's build never reads, and say so; a missing file the build reads
makes the commit a clear unknown. Real git repositories whose object store lost a blob (written,
then its loose file removed); real uv building the package from the checkouts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from retire.core.git import Git
from retire.mirrors.config import Mirror
from retire.mirrors.packagetree import missing_files
from retire.mirrors.repo import MirrorRepo, open_mirror
from retire.runs.wheelbuild import WheelBuildError, checkout
from tests.support.gitrepos import git

UPSTREAM = "https://git.example/acme/toylib"


def damage(mirror: Path, commit: str, path: str) -> str:
    """Remove the blob of ``path`` at ``commit`` from ``mirror``'s object store (a loose object:
    a local clone keeps them loose); its sha."""
    sha = git(mirror, "rev-parse", f"{commit}:{path}")
    loose = mirror / "objects" / sha[:2] / sha[2:]
    assert loose.is_file(), f"{path} is not a loose object in {mirror}"
    loose.unlink()
    assert not Git(mirror).test("cat-file", "-e", sha)
    return sha


def _package(path: Path) -> str:
    """An upstream with its package at the root, a test data file, a docs image and a separate
    project; its one commit."""
    for folder in ("toylib", "tests/data", "docs", "cute"):
        (path / folder).mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pyproject.toml").write_text("[project]\nname = 'toylib'\n")
    (path / "toylib" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "tests" / "data" / "big.bin").write_bytes(b"\x00" * 4096)
    (path / "docs" / "banner.gif").write_bytes(b"GIF89a" + b"\x01" * 512)
    (path / "cute" / "setup.py").write_text("# a project of its own\n")
    (path / "cute" / "weights.bin").write_bytes(b"\x02" * 1024)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "toylib")
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, str]:
    commit = _package(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(tmp_path / "upstream"), str(mirror))
    for path in ("tests/data/big.bin", "docs/banner.gif", "cute/weights.bin"):
        damage(mirror, commit, path)
    return mirror, commit


def test_the_files_a_mirror_lacks_are_told_apart_by_whether_the_build_reads_them(damaged):
    mirror, commit = damaged
    missing = missing_files(Git(mirror), commit)
    assert missing.left_out == ("cute/weights.bin", "docs/banner.gif", "tests/data/big.bin")
    assert missing.needed == ()
    assert missing.says == (
        "3 files missing from the mirror were left out: cute/weights.bin, docs/banner.gif, "
        "tests/data/big.bin"
    )
    # git itself will not fetch from it (as uv does, to build from git+file://)
    proc = subprocess.run(
        ["git", "clone", "-q", "--no-local", str(mirror), str(mirror.parent / "plain")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "unable to read" in proc.stderr


def test_a_checkout_leaves_them_out_and_is_clean_at_the_upstream_commit(damaged, tmp_path):
    mirror, commit = damaged
    made = checkout(mirror, commit, tmp_path / "candidate" / "checkout")
    root = made.package
    assert (root / "toylib" / "__init__.py").read_text().startswith("def add")
    assert (root / "pyproject.toml").is_file() and (root / "cute" / "setup.py").is_file()
    assert not (root / "tests" / "data" / "big.bin").exists()
    assert not (root / "docs" / "banner.gif").exists()
    assert "3 files missing from the mirror were left out" in made.says
    # HEAD is the upstream commit, and a version tool reading `git status` sees a clean tree
    assert git(root, "rev-parse", "HEAD") == commit
    assert git(root, "status", "--porcelain") == ""


def test_a_file_the_build_reads_missing_is_a_build_failure_naming_it(tmp_path):
    commit = _package(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(tmp_path / "upstream"), str(mirror))
    damage(mirror, commit, "toylib/__init__.py")
    damage(mirror, commit, "docs/banner.gif")
    with pytest.raises(WheelBuildError) as caught:
        checkout(mirror, commit, tmp_path / "c")
    message = str(caught.value)
    assert "1 file the package's build reads is missing from the mirror" in message
    assert "toylib/__init__.py" in message and "banner" not in message
    assert "patchlane mirrors sync" in message and not (tmp_path / "c").exists()


def test_a_subdirectory_package_reads_only_its_own_folder(tmp_path):
    upstream = tmp_path / "upstream"
    (upstream / "python" / "toylib").mkdir(parents=True)
    (upstream / "assets").mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "python" / "pyproject.toml").write_text("[project]\nname = 'toylib'\n")
    (upstream / "python" / "toylib" / "__init__.py").write_text("x = 1\n")
    (upstream / "assets" / "model.bin").write_bytes(b"\x03" * 2048)
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "one")
    commit = git(upstream, "rev-parse", "HEAD")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream), str(mirror))
    damage(mirror, commit, "assets/model.bin")
    made = checkout(mirror, commit, tmp_path / "c", "python")
    assert made.package.name == "python" and (made.package / "toylib" / "__init__.py").is_file()
    assert made.missing.left_out == ("assets/model.bin",)


# ---------------------------------------------------------------------------------------------
# The commit search on a damaged mirror, with real uv


@pytest.mark.slow
def test_commits_are_still_searched_and_built_on_a_mirror_missing_a_test_blob(tmp_path):
    from retire.bisect.prober import Progress
    from retire.bisect.transitions import Source
    from retire.evidence import validation
    from shims.manifest import load_manifest
    from tests.support.historyrepo import FIXED, bisect_releases, make_window_repo
    from tests.support.shimtree import write_shim

    class Notes(Progress):
        def __init__(self) -> None:
            super().__init__()
            self.said: list[str] = []

        def note(self, text: str) -> None:
            self.said.append(text)

    upstream = tmp_path / "upstream"
    (upstream / "tests").mkdir(parents=True)
    # in every commit: the first commit adds it
    (upstream / "tests" / "corpus.bin").write_bytes(b"\x04" * 8192)
    repo = make_window_repo(upstream)
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream), str(mirror))
    damage(mirror, repo.fixed, "tests/corpus.bin")
    opened = open_mirror(Mirror(UPSTREAM, mirror))
    assert isinstance(opened, MirrorRepo)
    manifest = load_manifest(write_shim(tmp_path / "shims", "toylib_add") / "manifest.toml")
    notes = Notes()
    result = bisect_releases(manifest, repo, Source(opened), tmp_path, progress=notes)
    assert result.window.fixed.after == FIXED, result.summary()
    fixed = result.window.fix_commit
    assert fixed is not None and fixed.sha == repo.fixed, result.stops
    assert result.window.introduced.commits is not None
    left_out = "1 file missing from the mirror was left out: tests/corpus.bin"
    assert any(left_out in n for n in notes.said), notes.said
    # the records name the upstream commits
    built = {r.revisions.get("toylib") for r in validation.load(tmp_path / "validation.jsonl")}
    assert repo.fixed in built and repo.introduced in built
