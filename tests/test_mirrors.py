"""Git mirrors against real repositories built here, in the styles real upstreams use: squash
merges ``(#N)`` (Liger-Kernel, TileLang, TransformerEngine), merge commits ``Merge pull request #N``
(mamba), release branches with cherry-picks and ``core_v`` tags beside non-PEP 440 container tags
(Megatron-LM), unprefixed tags (TileLang 0.1.6) — plus config, sync and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retire.commands import main as cli
from retire.core.errors import InputError
from retire.evidence.values import BranchTip, MirrorPull, ProbeFailure, TagContainment
from retire.mirrors.config import Mirror, MirrorSet, load_mirrors
from retire.mirrors.repo import open_mirror
from retire.mirrors.sync import sync
from tests.support.gitrepos import commit, git, make_upstream


def bare(source: Path, into: Path) -> Path:
    into.parent.mkdir(parents=True, exist_ok=True)
    git(into.parent, "clone", "-q", "--mirror", str(source), str(into))
    return into


@pytest.fixture(scope="module")
def megatron(tmp_path_factory) -> Path:
    """main with squash PRs; a core_r0.19.0 release branch with a cherry-pick and core_v tags;
    a dev branch tagged 26.04-alpha.rc1 (a container tag, not a release)."""
    repo = tmp_path_factory.mktemp("megatron") / "Megatron-LM"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "a.py", "1\n", "Initial (#1)")
    git(repo, "tag", "core_v0.18.0")
    git(repo, "checkout", "-q", "-b", "core_r0.19.0")
    git(repo, "checkout", "-q", "main")
    fix = commit(repo, "dsa.py", "fixed\n", "Remove host syncs from the DSA index mask (#4711)")
    # GitLab era: no GitHub number
    commit(repo, "b.py", "2\n", "Merge branch 'x' into 'main'")
    git(repo, "checkout", "-q", "core_r0.19.0")
    commit(
        repo,
        "dsa.py",
        "fixed\n",
        "cp: `Remove host syncs from the DSA index mask (#4711)` into `core_r0.19.0` (#4790)",
    )
    git(repo, "tag", "core_v0.19.0")
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "dev")
    commit(repo, "c.py", "3\n", "Hopper FLCE entry (#3345)")
    git(repo, "tag", "26.04-alpha.rc1")
    git(repo, "checkout", "-q", "main")
    commit(repo, "d.py", "4\n", 'Revert "Hopper FLCE entry (#3345)" (#3400)')
    return repo, fix


@pytest.fixture(scope="module")
def megatron_mirror(megatron, tmp_path_factory) -> Mirror:
    repo, _ = megatron
    path = bare(repo, tmp_path_factory.mktemp("m") / "NVIDIA" / "Megatron-LM.git")
    return Mirror(
        "https://github.com/NVIDIA/Megatron-LM",
        path,
        tags=r"core_v(?P<version>\d+\.\d+\.\d+(?:rc\d+)?)",
    )


@pytest.mark.slow
def test_a_cherry_picked_pull_request_is_released_by_the_release_branch_tag(
    megatron, megatron_mirror
):
    _, fix = megatron
    repo = open_mirror(megatron_mirror)
    found = repo.probe_pull(4711)
    assert isinstance(found, MirrorPull) and found.landed and found.how == "squash"
    # the first landing, on main
    assert found.commit == fix
    # through the pick on core_r0.19.0
    assert found.containment.release_tags == ("core_v0.19.0",)
    assert [str(v) for v in found.containment.released_versions()] == ["0.19.0"]


def test_only_declared_release_tags_count_and_versions_are_pep_440(megatron_mirror):
    tags = dict(open_mirror(megatron_mirror).tag_versions())
    # not 26.04-alpha.rc1
    assert tags == {"core_v0.18.0": "0.18.0", "core_v0.19.0": "0.19.0"}


def test_a_pull_request_on_dev_only_is_landed_but_in_no_release(megatron_mirror):
    found = open_mirror(megatron_mirror).probe_pull(3345)
    assert (
        found.landed
        and found.containment.tags == ("26.04-alpha.rc1",)
        and not found.containment.release_tags
    )


def test_reverts_do_not_land_a_pull_request_and_unknown_numbers_are_not_landed(megatron_mirror):
    repo = open_mirror(megatron_mirror)
    assert [landing.subject for landing in repo.landings(3345)] == ["Hopper FLCE entry (#3345)"]
    missing = repo.probe_pull(9999)
    assert (
        isinstance(missing, MirrorPull)
        and not missing.landed
        and missing.newest_commit_at is not None
    )


def test_followed_branches_limit_where_a_pull_request_may_land(megatron, tmp_path):
    repo, _ = megatron
    path = bare(repo, tmp_path / "NVIDIA" / "Megatron-LM.git")
    mirror = Mirror("https://github.com/NVIDIA/Megatron-LM", path, branches=("main", "core_r*"))
    repo = open_mirror(mirror)
    # only on dev
    assert not repo.probe_pull(3345).landed
    # on main (a plain name is that branch, not main/*)
    assert repo.probe_pull(4711).landed
    assert [landing.subject.startswith("cp:") for landing in repo.landings(4711)] == [False, True]
    nothing = open_mirror(
        Mirror("https://github.com/NVIDIA/Megatron-LM", path, branches=("gone",))
    ).probe_pull(4711)
    assert not nothing.landed


def test_merge_commit_style_and_default_tags(tmp_path):
    # "Merge pull request #2 from fix-add", tags v1.0, v1.1
    upstream = make_upstream(tmp_path / "toylib")
    path = bare(upstream.path, tmp_path / "mirrors" / "org" / "toylib.git")
    found = open_mirror(Mirror("https://github.com/org/toylib", path)).probe_pull(2)
    assert found.how == "merge" and found.commit == upstream.merge
    assert found.containment.release_tags == ("v1.1",)
    # contains it, but is not a release tag
    assert "nightly-2026-03-01" in found.containment.tags


def test_unprefixed_release_tags(tmp_path):
    repo = tmp_path / "tilelang"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "a", "1\n", "Start (#1)")
    commit(repo, "b", "2\n", "[Bugfix] LowerBulkCopy with rank-3 shared buffers (#746)")
    git(repo, "tag", "0.1.6")
    git(repo, "tag", "v0.1.5rc-broken-name")
    found = open_mirror(Mirror("https://github.com/tile-ai/tilelang", repo)).probe_pull(746)
    assert found.containment.release_tags == ("0.1.6",)


def test_commits_and_missing_pieces_are_failures_with_the_fix(megatron, megatron_mirror, tmp_path):
    _, fix = megatron
    repo = open_mirror(megatron_mirror)
    assert isinstance(repo.probe_commit(fix[:10]), TagContainment)
    missing = repo.probe_commit("0123456789abcdef0123456789abcdef01234567")
    assert (
        isinstance(missing, ProbeFailure) and missing.retryable and "mirrors sync" in missing.reason
    )
    assert "not a commit sha" in repo.probe_commit("HEAD; rm -rf /").reason
    absent = open_mirror(Mirror("https://github.com/o/r", tmp_path / "nowhere.git"))
    assert (
        isinstance(absent, ProbeFailure) and "no mirror of https://github.com/o/r" in absent.reason
    )
    (tmp_path / "plain").mkdir()
    assert (
        "is not a git repository"
        in open_mirror(Mirror("https://github.com/o/r", tmp_path / "plain")).reason
    )


def test_a_revision_is_the_tip_of_the_followed_branches_that_end_there(megatron, megatron_mirror):
    repo_dir, fix = megatron
    repo = open_mirror(megatron_mirror)
    dev_tip = git(repo_dir, "rev-parse", "dev").strip()
    tip = repo.probe_tip(dev_tip[:10])
    assert (
        isinstance(tip, BranchTip)
        and tip.is_tip
        and tip.branches == ("dev",)
        and tip.commit == dev_tip
    )
    # landed on main long ago: main has moved on
    assert not repo.probe_tip(fix).is_tip
    only_main = open_mirror(
        Mirror(megatron_mirror.repository, megatron_mirror.path, branches=("main",))
    )
    # dev is not followed there
    assert not only_main.probe_tip(dev_tip).is_tip
    missing = repo.probe_tip("0123456789abcdef0123456789abcdef01234567")
    assert isinstance(missing, ProbeFailure) and missing.retryable


# ---------------------------------------------------------------------------------------------
# configuration


def write_config(root: Path, text: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "patchlane.toml").write_text(text)


def test_config_declares_tags_branches_and_paths(tmp_path):
    write_config(
        tmp_path,
        """
[mirrors]
folder = "cache/mirrors"

[[mirrors.repository]]
url = "https://github.com/NVIDIA/Megatron-LM"
tags = 'core_v(?P<version>\\d+\\.\\d+\\.\\d+)'
branches = ["main", "core_r*"]

[[mirrors.repository]]
url = "https://github.com/linkedin/Liger-Kernel/"
path = "elsewhere/liger.git"
fetch = "file:///srv/liger.git"
""",
    )
    found = load_mirrors(tmp_path)
    megatron = found.for_repository(["https://github.com/nvidia/megatron-lm", "/4711"][0])
    assert megatron.path == tmp_path / "cache" / "mirrors" / "NVIDIA" / "Megatron-LM.git"
    assert (
        megatron.branches == ("main", "core_r*")
        and megatron.tag_version("core_v0.19.0") == "0.19.0"
    )
    assert megatron.fetch_url == "https://github.com/NVIDIA/Megatron-LM.git"
    liger = found.for_repository("https://github.com/linkedin/Liger-Kernel")
    assert (
        liger.path == tmp_path / "elsewhere" / "liger.git"
        and liger.fetch_url == "file:///srv/liger.git"
    )
    assert (
        load_mirrors(tmp_path, folder=tmp_path / "x")
        .for_repository("https://github.com/NVIDIA/Megatron-LM")
        .path
        == tmp_path / "x" / "NVIDIA" / "Megatron-LM.git"
    )


@pytest.mark.parametrize(
    "text, key, words",
    [
        ('[mirrors]\nfoldr = "x"\n', "mirrors.foldr", "unknown key"),
        (
            '[[mirrors.repository]]\nurl = "not a url"\n',
            "mirrors.repository[0].url",
            "not a repository URL",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/.."\n',
            "mirrors.repository[0].url",
            "not a repository URL",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\ntags = "v(("\n',
            "mirrors.repository[0].tags",
            "not a regular expression",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\ntags = "v.*"\n',
            "mirrors.repository[0].tags",
            "captures no version",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nbranches = "main"\n',
            "mirrors.repository[0].branches",
            "expected a list",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nsubdirectory = "../x"\n',
            "mirrors.repository[0].subdirectory",
            "expected a relative folder",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nsubdirectory = "/srv/x"\n',
            "mirrors.repository[0].subdirectory",
            "expected a relative folder",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nsubdirectory = "a/../b"\n',
            "mirrors.repository[0].subdirectory",
            "expected a relative folder",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nsubdirectory = 3\n',
            "mirrors.repository[0].subdirectory",
            "expected a relative folder",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\nsubdir = "python"\n',
            "mirrors.repository[0].subdir",
            "unknown key",
        ),
        (
            '[[mirrors.repository]]\nurl = "https://github.com/o/r"\n[[mirrors.repository]]\nurl = "https://github.com/O/R.git"\n',
            "mirrors.repository",
            "declared twice",
        ),
        ("[mirrors\n", None, "invalid TOML"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, text, key, words):
    write_config(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_mirrors(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "patchlane.toml" in message and words in message
    if key:
        assert key in message


def test_a_folder_finds_undeclared_mirrors_by_name_and_never_outside_it(tmp_path):
    (tmp_path / "org" / "toylib.git").mkdir(parents=True)
    found = MirrorSet(folder=tmp_path)
    assert (
        found.for_repository("https://github.com/org/toylib").path
        == tmp_path / "org" / "toylib.git"
    )
    assert found.for_repository("https://github.com/../etc") is None
    assert found.for_repository("https://github.com/org/other") is None


# ---------------------------------------------------------------------------------------------
# sync and the CLI


@pytest.mark.slow
def test_sync_clones_updates_and_leaves_an_unreachable_mirror_alone(tmp_path):
    upstream = make_upstream(tmp_path / "upstream")
    mirror = Mirror(
        "https://github.com/org/toylib",
        tmp_path / "mirrors" / "org" / "toylib.git",
        fetch=upstream.path.as_uri(),
    )
    first = sync(mirror)
    assert first.status == "cloned" and open_mirror(mirror).probe_pull(2).landed
    assert sync(mirror).status == "unchanged"
    commit(upstream.path, "fix.py", "x\n", "Another fix (#7)")
    assert sync(mirror).status == "updated" and open_mirror(mirror).probe_pull(7).landed
    away = Mirror(mirror.repository, mirror.path, fetch="http://127.0.0.1:9/org/toylib.git")
    result = sync(away)
    assert (
        result.status == "unreachable" and result.ok and "the mirror is unchanged" in result.detail
    )
    # nothing lost
    assert open_mirror(away).probe_pull(7).landed


@pytest.mark.slow
def test_mirrors_cli_lists_and_syncs(tmp_path, capsys):
    upstream = make_upstream(tmp_path / "upstream")
    root = tmp_path / "project"
    write_config(
        root,
        f'[[mirrors.repository]]\nurl = "https://github.com/org/toylib"\nfetch = '
        f'"{upstream.path.as_uri()}"\n'
        '[[mirrors.repository]]\nurl = "https://github.com/org/gone"\nfetch = "http://127.0.0.1:9/gone.git"\n',
    )
    assert cli(["--root", str(root), "mirrors"]) == 0
    assert capsys.readouterr().out.count("missing   ") == 2
    # an unreachable mirror is a note, not a failure
    assert cli(["--root", str(root), "mirrors", "sync"]) == 0
    out = capsys.readouterr().out
    assert (
        "cloned      https://github.com/org/toylib" in out
        and "unreachable https://github.com/org/gone" in out
    )
    assert "could not be reached from this host" in out
    assert (
        cli(["--root", str(root), "mirrors", "sync", "--strict", "https://github.com/org/gone"])
        == 1
    )
    capsys.readouterr()
    assert cli(["--root", str(root), "mirrors", "list", "--json"]) == 0
    rows = {r["repository"]: r for r in json.loads(capsys.readouterr().out)}
    assert (
        rows["https://github.com/org/toylib"]["present"]
        and rows["https://github.com/org/toylib"]["release_tags"] == 2
    )
    assert rows["https://github.com/org/gone"]["problem"]
    assert cli(["--root", str(root), "mirrors", "sync", "https://github.com/org/undeclared"]) == 2
