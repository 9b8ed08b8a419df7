"""Which commits of a range touch what a shim patches, read with real git."""

from __future__ import annotations

import pytest

from retire.core.git import Git, GitError
from retire.mirrors.touching import (
    imported_modules,
    module_paths,
    shim_modules,
    touching,
    touching_commits,
)
from shims.manifest import load_manifest
from tests.support.gitrepos import git as gitrepo
from tests.support.shimtree import write_shim
from tests.support.touchrepo import HELPER, TARGET, make_touch_repo

MODULES = ("toypkg.ops.target",)


def test_the_touching_commits_are_the_first_parent_ones_that_change_the_module(tmp_path):
    repo = make_touch_repo(tmp_path / "up", 12, {2, 5, 11})
    found = touching(Git(repo.path), "v1.0", "v1.1", MODULES)
    assert found.paths == (TARGET,)
    assert found.commits == {repo.commits[i] for i in (2, 5, 11)}


def test_a_merge_that_brings_a_change_to_the_target_counts(tmp_path):
    repo = make_touch_repo(tmp_path / "up", 8, {1}, merge_at=4)
    found = touching(Git(repo.path), "v1.0", "v1.1", MODULES)
    # the merge, on the first-parent chain, not the branch's own commit
    assert found.commits == {repo.commits[1], repo.commits[4]}


def test_a_package_module_is_its_folder_and_a_missing_one_adds_nothing(tmp_path):
    repo = make_touch_repo(tmp_path / "up", 3, {0})
    git = Git(repo.path)
    paths = module_paths(git, ("v1.0", "v1.1"), ("toypkg.ops.helpers", "toypkg.gone", "a b"))
    assert paths == (HELPER.rsplit("/", 1)[0],)
    assert touching_commits(git, "v1.0", "v1.1", ()) == frozenset()


def test_paths_are_literal_and_revisions_are_never_options(tmp_path):
    repo = make_touch_repo(tmp_path / "up", 4, {1, 3})
    git = Git(repo.path)
    # a glob is a file name, not a pattern
    assert touching_commits(git, "v1.0", "v1.1", ("src/*",)) == frozenset()
    # a tag named like an option is the tag it is, and git writes no file
    out = tmp_path / "out"
    out.mkdir()
    hostile = f"--output={out}/x"
    gitrepo(repo.path, "update-ref", f"refs/tags/{hostile}", "v1.0")
    found = touching(git, hostile, "v1.1", MODULES)
    assert found.commits == {repo.commits[1], repo.commits[3]}
    assert list(out.iterdir()) == []
    for bad in ("", "v1.0\nv1.1"):
        with pytest.raises(GitError):
            touching_commits(git, bad, "v1.1", (TARGET,))
        with pytest.raises(GitError):
            module_paths(git, (bad,), MODULES)
    with pytest.raises(GitError):
        touching(git, "v9.9", "v1.1", MODULES)


def test_a_shim_touches_its_module_and_what_its_patch_imports_of_the_same_package(tmp_path):
    patch = (
        "import os\nimport toypkg.ops.helpers\nfrom toypkg.ops import kernels\n"
        "def apply(module):\n    from toypkg import other\n    import numpy\n"
    )
    assert imported_modules("toypkg.ops.target", patch) == (
        "toypkg.ops.target",
        "toypkg.ops.helpers",
        "toypkg.ops",
        "toypkg.ops.kernels",
        "toypkg",
        "toypkg.other",
    )
    # a patch that does not parse adds nothing
    assert imported_modules("toypkg.ops.target", "def (:") == ("toypkg.ops.target",)
    folder = write_shim(tmp_path / "shims", "toy_touch", patch="from toylib import extra\n")
    manifest = load_manifest(folder / "manifest.toml")
    assert manifest.target.module == "toylib"
    assert shim_modules(manifest) == ("toylib", "toylib.extra")
    (folder / "patch.py").write_bytes(b"\xff\xfe not text")
    assert shim_modules(manifest) == ("toylib",)
