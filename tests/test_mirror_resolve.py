"""The repository of a distribution, resolved once (retire/mirrors/resolve.py): a lane's revision,
else a shim's link, else a declared mirror its metadata URLs match (Project-URL, Home-page,
Download-URL — of an installed copy or as the index serves it beside a wheel), else the one
declared mirror named as the package whose release tags hold its releases; said in words. Then
`patchlane bisect` and `patchlane culprit` with a declared mirror and no link and no lane revision
at all: both commits pinned and their pull requests named (real git, real uv, loopback index)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from retire.evidence.coremetadata import MetadataUrl, installed_metadata, metadata_urls
from retire.lanes.revisions import Revision
from retire.mirrors.config import Mirror, MirrorSet
from retire.mirrors.resolve import Found, Resolved, Unresolved, mirror_containing, resolve
from tests.support.gitrepos import git
from tests.support.historyrepo import RELEASES, WindowRepo, make_window_repo
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

UPSTREAM = "https://github.com/acme/toy-upstream"


def _set(tmp_path: Path, *urls: str) -> MirrorSet:
    return MirrorSet(tuple(Mirror(url, tmp_path / url.rsplit("/", 1)[1]) for url in urls))


@pytest.mark.parametrize(
    "url",
    [
        UPSTREAM,
        "https://GitHub.com/Acme/Toy-Upstream.git/",
        "http://www.github.com/acme/toy-upstream/tree/main",
        "git+https://github.com/acme/toy-upstream.git@v1.8",
        "git@github.com:acme/toy-upstream.git",
        "https://github.com/acme/toy-upstream/pull/63",
        # a repository is known by owner and name, as MirrorSet.for_repository knows it (a
        # declared URL may be an internal server's)
        "https://git.internal.example/acme/toy-upstream",
    ],
)
def test_every_spelling_of_the_repository_finds_its_mirror(tmp_path, url):
    mirrors = _set(tmp_path, UPSTREAM, "https://github.com/acme/toy-upstream-docs")
    found = mirror_containing(mirrors, url)
    assert found is not None and found.repository == UPSTREAM


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/toy-upstream-docs",
        "https://github.com/other/toy-upstream",
        "https://github.com/acme",
        "mailto:acme@example.org",
        "https://[::1",
        "",
    ],
)
def test_another_repository_host_or_no_url_finds_none(tmp_path, url):
    assert mirror_containing(_set(tmp_path, UPSTREAM), url) is None


def test_an_undeclared_clone_is_found_by_owner_and_name_under_the_folder(tmp_path):
    clone = tmp_path / "mirrors" / "Acme" / "Toy-Upstream.git"
    clone.mkdir(parents=True)
    mirrors = MirrorSet(folder=tmp_path / "mirrors")
    found = mirror_containing(mirrors, "https://github.com/Acme/Toy-Upstream/issues/4")
    assert found is not None and found.path == clone
    said = resolve("toylib", mirrors, links=["https://github.com/Acme/Toy-Upstream/issues/4"])
    assert isinstance(said, Resolved) and not said.declared
    assert said.says.startswith(f"mirror of toylib: found at {clone}, named by the link")


def _never() -> tuple[MetadataUrl, ...]:
    raise AssertionError("the metadata is asked for only when no revision or link names a mirror")


def test_the_rules_in_their_order_and_the_metadata_asked_only_when_needed(tmp_path):
    mirrors = _set(tmp_path, UPSTREAM, "https://github.com/acme/other")
    revision = Revision("toylib", UPSTREAM, "main", "python", "lane.revisions.toylib")
    by_lane = resolve(
        "toylib",
        mirrors,
        revisions=[revision],
        links=["https://github.com/acme/other/pull/1"],
        metadata=_never,
    )
    assert isinstance(by_lane, Resolved) and by_lane.found == Found.LANE
    assert by_lane.subdirectory == "python"
    assert by_lane.says == (
        "mirror of toylib: declared in patchlane.toml, named by the lane revision "
        "lane.revisions.toylib"
    )
    by_link = resolve("toylib", mirrors, links=["https://github.com/acme/other/pull/1"])
    assert isinstance(by_link, Resolved) and by_link.found == Found.LINK
    assert by_link.mirror.repository == "https://github.com/acme/other"
    urls = metadata_urls(
        "Metadata-Version: 2.1\nName: toylib\nHome-page: https://toylib.example.org\n"
        "Project-URL: Documentation, https://toylib.example.org/docs\n"
        f"Project-URL: Source, {UPSTREAM}/tree/main\n",
        "the toylib 1.8 wheel",
    )
    by_metadata = resolve("toylib", mirrors, metadata=lambda: urls)
    assert isinstance(by_metadata, Resolved) and by_metadata.found == Found.METADATA
    assert by_metadata.says == (
        "mirror of toylib: declared in patchlane.toml, matched by the toylib 1.8 wheel's "
        f"Project-URL Source ({UPSTREAM}/tree/main)"
    )
    # a lane revision of a repository this host does not mirror: the next rule decides
    elsewhere = Revision("toylib", "https://github.com/acme/gone", "main")
    fallen = resolve("toylib", mirrors, revisions=[elsewhere], metadata=lambda: urls)
    assert isinstance(fallen, Resolved) and fallen.found == Found.METADATA
    nothing = resolve("toylib", mirrors, revisions=[elsewhere])
    assert isinstance(nothing, Unresolved)
    assert "https://github.com/acme/gone is not mirrored on this host" in nothing.why


def test_metadata_urls_put_the_code_first(tmp_path):
    text = (
        "Metadata-Version: 2.1\nName: x\nHome-page: https://x.example.org\n"
        "Download-URL: https://x.example.org/dl\n"
        "Project-URL: Changelog, https://x.example.org/changes\n"
        "Project-URL: Homepage, https://x.example.org/home\n"
        "Project-URL: Source Code, https://github.com/x/x\n"
        "Project-URL: Broken\n"
    )
    found = metadata_urls(text)
    assert [(u.field, u.label) for u in found] == [
        ("Project-URL", "Source Code"),
        ("Project-URL", "Homepage"),
        ("Project-URL", "Changelog"),
        ("Home-page", ""),
        ("Download-URL", ""),
    ]
    assert found[0].named == "the wheel's Project-URL Source Code"
    site = tmp_path / "site"
    info = site / "toy_lib-1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(text)
    installed = installed_metadata([tmp_path / "nowhere", site], "Toy.Lib")
    assert installed and installed[0].named == "the installed toy-lib 1.2's Project-URL Source Code"
    assert installed_metadata([site], "other") == ()


def _tagged(path: Path, tags: list[str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "f").write_text("x\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "one")
    for tag in tags:
        git(path, "tag", tag)
    return path


def test_a_mirror_named_as_the_package_whose_tags_hold_its_releases(tmp_path):
    from retire.mirrors.resolve import release_versions

    named = Mirror("https://github.com/acme/Toy-Lib", _tagged(tmp_path / "a", ["v1.0", "v1.1"]))
    other = Mirror("https://github.com/acme/other", _tagged(tmp_path / "b", ["v1.0"]))
    mirrors = MirrorSet((named, other))
    found = resolve("toy_lib", mirrors, versions=["1.0", "1.1", "1.2"], tags_of=release_versions)
    assert isinstance(found, Resolved) and found.found == Found.TAGS
    assert found.mirror == named
    assert found.because == "matched by its name and release tags (2 of its 3 releases tagged)"
    # named so, but none of its tags is a release
    assert isinstance(
        resolve("toy_lib", mirrors, versions=["2.0"], tags_of=release_versions), Unresolved
    )
    # two mirrors named as the package: never a choice between them
    fork = Mirror("https://github.com/fork/toy-lib", _tagged(tmp_path / "c", ["v1.0"]))
    two = resolve("toy-lib", MirrorSet((named, fork)), versions=["1.0"], tags_of=release_versions)
    assert isinstance(two, Unresolved) and "are both named as toy-lib" in two.why


@pytest.mark.slow
def test_a_declared_mirrors_subdirectory_is_where_the_package_is_built_from(tmp_path):
    """A package outside the repository's root, with no lane revision: the mirror's entry names
    its folder once (``subdirectory``), and whatever rule found the mirror, the source built from
    it reads that folder (real git)."""
    from retire.bisect.sources import project_source
    from retire.core.project import Project
    from retire.mirrors.history import build_obstacle
    from shims.manifest import load_manifest
    from tests.support.shimtree import manifest_text, write_shim

    upstream = tmp_path / "toylib"
    (upstream / "python").mkdir(parents=True)
    (upstream / "python" / "pyproject.toml").write_text('[project]\nname = "toylib"\n')
    (upstream / "README.md").write_text("the package is in python/\n")
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "one")
    git(upstream, "tag", "v1.0")
    root = tmp_path / "shop"
    write_shim(root / "shims", "toylib_add", manifest=manifest_text("toylib_add"))
    manifest = load_manifest(root / "shims" / "toylib_add" / "manifest.toml")
    entry = f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\npath = "{upstream}"\n'
    (root / "patchlane.toml").write_text(entry)
    bare = project_source(Project(root), manifest)
    assert bare.repo is not None and bare.subdirectory is None
    # without it the root is read: no build file there
    assert "no pyproject.toml or setup.py at ." in (build_obstacle(bare.repo, "v1.0") or "")
    (root / "patchlane.toml").write_text(entry + 'subdirectory = "python"\n')
    source = project_source(Project(root), manifest)
    assert source.repo is not None and source.subdirectory == "python"
    assert source.says.startswith("mirror of toylib: declared in patchlane.toml, matched by")
    assert build_obstacle(source.repo, "v1.0", source.subdirectory) is None
    # a link finds the same mirror and the same folder
    linked = resolve(
        "toylib",
        MirrorSet((Mirror("https://github.com/acme/toylib", upstream, subdirectory="python"),)),
        links=["https://github.com/acme/toylib/pull/7"],
    )
    assert isinstance(linked, Resolved) and linked.subdirectory == "python"
    # a lane revision names its own
    revision = Revision("toylib", "https://github.com/acme/toylib", "main", "src")
    mirrors = MirrorSet(
        (Mirror("https://github.com/acme/toylib", upstream, subdirectory="python"),)
    )
    by_lane = resolve("toylib", mirrors, revisions=[revision])
    assert isinstance(by_lane, Resolved) and by_lane.subdirectory == "src"


def test_the_index_serves_the_metadata_beside_the_newest_wheel(tmp_path):
    from retire.bisect.sources import metadata_on_index

    index = PackageIndex()
    for version, url in (("1.0", "https://old.example.org"), ("1.1", UPSTREAM)):
        wheel = build_wheel(tmp_path, "toylib", version, project_urls={"Source": url})
        index.add(wheel, "2026-01-01")
    with IndexServer(index) as server:
        found = metadata_on_index(server.url, "toylib")
        assert [(u.url, u.named) for u in found] == [
            (UPSTREAM, "the toylib 1.1 wheel's Project-URL Source")
        ]
        assert metadata_on_index(server.url, "absent") == ()
    html = PackageIndex(api="html")
    html.add(build_wheel(tmp_path / "h", "toylib", "1.0", project_urls={"Source": UPSTREAM}), None)
    with IndexServer(html) as server:
        # a PEP 503 page names no metadata here: none, never an error
        assert metadata_on_index(server.url, "toylib") == ()


# ---------------------------------------------------------------------------------------------
# The commands, with a declared mirror and no link, no lane revision


def _index(repo: WindowRepo, wheels: Path, source: str) -> PackageIndex:
    """Every release of the toy upstream, its wheel's metadata naming ``source``."""
    index = PackageIndex()
    for i, version in enumerate(RELEASES):
        text = git(repo.path, "show", f"v{version}:toylib/__init__.py") + "\n"
        wheel = build_wheel(
            wheels,
            "toylib",
            version,
            files={"toylib/__init__.py": text},
            project_urls={"Documentation": "https://toylib.example.org", "Source": source},
        )
        index.add(wheel, f"2026-02-{i + 1:02d}")
    return index


def _shop(tmp_path: Path, repo: WindowRepo) -> Path:
    from tests.support.shimtree import manifest_text, write_shim

    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    root = tmp_path / "shop"
    # the shim's links name a repository no mirror holds
    text = manifest_text("toylib_add").replace('affected = ">=1.0,<1.1"\n', "")
    write_shim(root / "shims", "toylib_add", manifest=text)
    (root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\npath = "{mirror}"\n'
    )
    (root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
    return root


@pytest.mark.slow
def test_bisect_finds_a_declared_mirror_by_the_wheels_metadata_and_pins_both_commits(
    tmp_path, capsys
):
    from retire.commands import main as cli
    from tests.test_json_schemas import check

    repo = make_window_repo(tmp_path / "upstream")
    root = _shop(tmp_path, repo)
    index = _index(repo, tmp_path / "wheels", f"{UPSTREAM.upper()}.git/tree/main")
    with IndexServer(index) as server:
        common = ["--root", str(root), "--index", server.url, "--python", sys.executable]
        code = cli(["bisect", "toylib_add", *common, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        code = cli(["bisect", "toylib_add", *common])
        words, _ = capsys.readouterr()
    document = json.loads(out)
    check("bisect", document)
    edges = {e["kind"]: e for e in document["commit_edges"]}
    assert edges["introduced"]["commit"]["sha"] == repo.introduced
    assert edges["introduced"]["commit"]["pull"] == 33
    assert edges["fixed"]["commit"]["sha"] == repo.fixed
    assert edges["fixed"]["commit"]["pull"] == 63
    said = (
        "mirror of toylib: declared in patchlane.toml, matched by the toylib 1.8 wheel's "
        "Project-URL Source"
    )
    assert said in err and said in words
    assert f'fixed by {repo.fixed[:12]} "Fix add() (#63)"' in words


@pytest.mark.slow
def test_culprit_finds_the_declared_mirror_by_the_installed_packages_metadata(tmp_path, capsys):
    from tests.conftest import run_cli
    from tests.test_culprits import moved_by_hand

    repo = make_window_repo(tmp_path / "upstream")
    root = _shop(tmp_path, repo)
    index = _index(repo, tmp_path / "wheels", f"{UPSTREAM}/")
    with IndexServer(index) as server:
        moved_by_hand(root, server.url, capsys)
        code, out, err = run_cli(root, "culprit", "cpu", "toylib_add", capsys=capsys)
    assert code == 0, out + err
    assert (
        "mirror of toylib: declared in patchlane.toml, matched by the installed toylib 1.2's "
        "Project-URL Source"
    ) in out + err
    assert out.rstrip().endswith(f"first broken commit {repo.introduced[:12]} (#33)")
