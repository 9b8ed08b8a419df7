"""Lanes pinned to upstream revisions, for real: a git repository holding a tiny package, its mirror
declared in patchlane.toml, uv locking the lane from the mirror at the tag's commit (the PEP 751
lock
records the VCS entry under the upstream URL), the tag moving, the lane env installed from the
mirror,
and the host stamp naming the commit."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pytest

from retire.core import uv
from retire.core.errors import InputError
from retire.lanes import lanefile
from tests.conftest import ROOT, run_cli
from tests.support import shimtree
from tests.support.gitrepos import git, make_package_repo

UPSTREAM = "https://git.example/acme/toyrev"
LANE = f"""
[lane]
python = "3.11"
platform = "linux"
requirements = ["toyrev"]
shims = @SHIMS@

[lane.revisions]
toyrev = {{ mirror = "{UPSTREAM}", rev = "@REV@" }}
"""
REPRODUCER = """
from shims import reproducer


def check(with_shim):
    import toyrev

    return reproducer.FIX_VALIDATED if with_shim else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toyrev"])
"""

PATCH = """
def check_shape(module):
    return None


def probe(module):
    return "toyrev is not patched" if not getattr(module, "PATCHED", False) else None


def apply(module):
    module.PATCHED = True
"""


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    return make_package_repo(tmp_path_factory.mktemp("upstream") / "toyrev")


@pytest.fixture
def revproject(tmp_path, upstream):
    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    (root / "patchlane.toml").write_text(f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\n')
    mirror = root / ".patchlane" / "mirrors" / "acme" / "toyrev.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    return root, mirror


def write_lane(root, rev="v1.0", shims="[]"):
    (root / "lanes" / "dev.toml").write_text(LANE.replace("@REV@", rev).replace("@SHIMS@", shims))


def locked_vcs(root) -> tuple[dict, dict]:
    lock = tomllib.loads((root / "locks" / "dev" / "pylock.toml").read_text())
    [package] = [p for p in lock["packages"] if p["name"] == "toyrev"]
    return package["vcs"], lock["tool"]["patchlane"]


@pytest.mark.slow
def test_a_lane_pinned_to_a_tag_locks_the_commit_and_follows_the_tag(revproject, upstream, capsys):
    root, mirror = revproject
    write_lane(root)
    code, out, err = run_cli(root, "lock", capsys=capsys)
    assert code == 0, out + err
    vcs, provenance = locked_vcs(root)
    # The lock names the upstream repository and the commit, never this host's mirror path.
    assert (
        vcs["type"] == "git"
        and vcs["url"] == UPSTREAM + ".git"
        and vcs["commit-id"] == upstream.first
    )
    assert str(mirror) not in (root / "locks" / "dev" / "pylock.toml").read_text()
    assert provenance["revisions"] == {"toyrev": {"rev": "v1.0", "commit": upstream.first}}
    # current: untouched
    assert run_cli(root, "lock", capsys=capsys)[0] == 0 and locked_vcs(root)[0] == vcs
    code, out, _ = run_cli(root, "lanes", "--json", capsys=capsys)
    assert json.loads(out)[0]["revisions"] == {
        "toyrev": {"repository": UPSTREAM, "rev": "v1.0", "commit": upstream.first}
    }
    code, out, err = run_cli(root, "lanes", capsys=capsys)
    assert f"toyrev@v1.0 → {upstream.first[:12]}" in out + err

    # Bumping the lane's tag re-locks at the new tag's commit.
    write_lane(root, rev="v1.1")
    # the lane changed: the lock is stale
    assert run_cli(root, "lock", "--check", capsys=capsys)[0] == 1
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    assert locked_vcs(root)[0]["commit-id"] == upstream.second

    # A tag moved in the mirror is taken when the package is re-resolved, as a cooldown is.
    git(mirror, "tag", "-f", "v1.1", upstream.first)
    assert (
        run_cli(root, "lock", capsys=capsys)[0] == 0
        and locked_vcs(root)[0]["commit-id"] == upstream.second
    )
    code, out, err = run_cli(root, "lock", "--upgrade-package", "toyrev", capsys=capsys)
    assert code == 0, out + err
    assert locked_vcs(root)[0]["commit-id"] == upstream.first


@pytest.mark.slow
def test_a_missing_mirror_or_revision_is_one_line_naming_the_lane_file_key_and_fix(
    revproject, capsys
):
    root, mirror = revproject
    write_lane(root, rev="v9.9")
    code, out, err = run_cli(root, "lock", capsys=capsys)
    [line] = [each for each in (out + err).splitlines() if "dev:" in each]
    assert (
        code == 1 and "lanes/dev.toml: lane.revisions.toyrev: 'v9.9' is not in the mirror" in line
    )
    assert "patchlane mirrors sync" in line and not (root / "locks" / "dev").exists()

    write_lane(root)
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    before = (root / "locks" / "dev" / "pylock.toml").read_text()
    subprocess.run(["rm", "-rf", str(mirror)], check=True)
    write_lane(root, rev="v1.1")
    code, out, err = run_cli(root, "lock", capsys=capsys)
    lines = [each for each in (out + err).splitlines() if "toyrev" in each]
    assert code == 1 and len(lines) == 1, out + err
    assert (
        "lanes/dev.toml: lane.revisions.toyrev: the mirror of " + UPSTREAM + " is missing"
        in lines[0]
    )
    assert "run `patchlane mirrors sync`" in lines[0]
    # the previous lock is kept
    assert (root / "locks" / "dev" / "pylock.toml").read_text() == before

    # not declared, not in the mirrors folder
    (root / "patchlane.toml").write_text("")
    code, out, err = run_cli(root, "lock", capsys=capsys)
    assert code == 1 and "lane.revisions.toyrev: no mirror of " + UPSTREAM in out + err
    assert "[[mirrors.repository]]" in out + err and "patchlane mirrors sync" in out + err


@pytest.mark.parametrize(
    "entry, key, problem",
    [
        ('toyrev = "v1.0"', "lane.revisions.toyrev", "expected an inline table"),
        (
            'toyrev = { mirror = "git.example/acme/toyrev", rev = "v1" }',
            "lane.revisions.toyrev.mirror",
            "repository URL",
        ),
        (
            'toyrev = { mirror = "https://git.example/a/b", rev = "../x" }',
            "lane.revisions.toyrev.rev",
            "tag, branch or commit",
        ),
        (
            'toyrev = { mirror = "https://git.example/a/b", rev = "v1", tag = "v1" }',
            "lane.revisions.toyrev.tag",
            "unknown key",
        ),
        (
            'toyrev = { mirror = "https://git.example/a/b", rev = "v1", build = "make wheel" }',
            "lane.revisions.toyrev.build",
            "expected an argument list, got a string",
        ),
        (
            'toyrev = { mirror = "https://git.example/a/b", rev = "v1", build = ["{here}/../b"] }',
            "lane.revisions.toyrev.build[0]",
            "leaves the folder of the file that names the build",
        ),
    ],
)
def test_a_bad_revision_entry_is_one_line(tmp_path, entry, key, problem):
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "dev.toml").write_text(
        f'[lane]\npython = "3.11"\nrequirements = ["toyrev"]\n[lane.revisions]\n{entry}\n'
    )
    with pytest.raises(InputError) as caught:
        lanefile.load_lanes(tmp_path / "lanes", root=tmp_path)
    assert str(caught.value).startswith(f"lanes/dev.toml: {key}: ") and problem in str(caught.value)


@pytest.mark.slow
def test_the_host_stamp_names_the_commit_a_package_was_installed_from(
    revproject, upstream, tmp_path
):
    _, mirror = revproject
    venv = tmp_path / "venv"
    assert uv.run(["venv", "--quiet", "--python", "3.11", str(venv)]).returncode == 0
    proc = uv.run(
        ["pip", "install", "--python", str(venv / "bin" / "python"), f"git+{mirror.as_uri()}@v1.1"]
    )
    assert proc.returncode == 0, proc.stderr
    stamp = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            (
                "import json, sys; sys.path.insert(0, sys.argv[1]); from shims.reproducer import "
                "host_stamp; "
                "print(json.dumps(host_stamp(['toyrev'])))"
            ),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(stamp)["revisions"] == {"toyrev": f"{mirror.as_uri()}@{upstream.second}"}


@pytest.mark.slow
def test_a_revision_lane_runs_from_the_mirror_and_records_the_commit(revproject, upstream, capsys):
    root, _ = revproject
    shimtree.write_shim(
        root / "shims",
        "toyrev_fix",
        reproducer=REPRODUCER,
        patch=PATCH,
        distribution="toyrev",
        module="toyrev",
    )
    write_lane(root, rev="v1.1", shims='["toyrev_fix"]')
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(root, "run", "--run-id", "rev", capsys=capsys)
    assert code == 0, out + err
    records = [
        json.loads(line)
        for line in (root / "validation" / "manifest.jsonl").read_text().splitlines()
    ]
    assert {r["mode"] for r in records} == {"without", "with"}
    for record in records:
        assert record["host"]["revisions"]["toyrev"].endswith("@" + upstream.second)


@pytest.mark.slow
def test_a_revision_lane_runs_offline_from_a_wheelhouse_and_the_mirror(
    revproject, upstream, capsys, tmp_path, monkeypatch
):
    root, _ = revproject
    shimtree.write_shim(
        root / "shims",
        "toyrev_fix",
        reproducer=REPRODUCER,
        patch=PATCH,
        distribution="toyrev",
        module="toyrev",
    )
    write_lane(root, rev="v1.0", shims='["toyrev_fix"]')
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(
        root, "wheelhouse", "gather", "dev", "--out", str(tmp_path / "wh"), capsys=capsys
    )
    assert code == 0 and "toyrev: from a git revision, not gathered" in out + err
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    # The mirror was carried somewhere else on the GPU host: --mirrors says where.
    carried = tmp_path / "scratch" / "mirrors"
    carried.mkdir(parents=True)
    (root / ".patchlane" / "mirrors").rename(carried)
    code, out, err = run_cli(
        root, "run", "--wheelhouse", str(tmp_path / "wh"), "--run-id", "off", capsys=capsys
    )
    assert code == 1 and "lanes/dev.toml: lane.revisions.toyrev: the mirror of" in out + err
    code, out, err = run_cli(
        root,
        "run",
        "--wheelhouse",
        str(tmp_path / "wh"),
        "--run-id",
        "off",
        "--mirrors",
        str(carried),
        capsys=capsys,
    )
    assert code == 0, out + err
    records = [
        json.loads(line)
        for line in (root / "validation" / "manifest.jsonl").read_text().splitlines()
    ]
    assert records and all(
        r["host"]["revisions"]["toyrev"].endswith("@" + upstream.first) for r in records
    )


@pytest.mark.slow
def test_a_wheelhouse_carries_the_wheels_that_build_a_revision(
    tmp_path, universe, capsys, monkeypatch
):
    from retire.locks.wheelhouse import Wheelhouse

    upstream = make_package_repo(tmp_path / "upstream" / "toyrev", build_requires=("helper>=1",))
    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    (root / "patchlane.toml").write_text(f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\n')
    git(
        tmp_path,
        "clone",
        "-q",
        "--mirror",
        str(upstream.path),
        str(root / ".patchlane/mirrors/acme/toyrev.git"),
    )
    (root / "lanes" / "dev.toml").write_text(
        LANE.replace("@REV@", "v1.1").replace("@SHIMS@", "[]")
        + f'[lane.indexes.main]\nurl = "{universe["main"].url}"\ndefault = true\n'
    )
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(
        root, "wheelhouse", "gather", "dev", "--out", str(tmp_path / "wh"), capsys=capsys
    )
    assert code == 0, out + err
    house = Wheelhouse.load(tmp_path / "wh")
    [build] = house.artifacts
    assert build.package == "helper" and build.kind == "build" and house.from_mirrors == ("toyrev",)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    code, out, err = run_cli(
        root, "run", "--wheelhouse", str(tmp_path / "wh"), "--no-record", capsys=capsys
    )
    assert code == 0, out + err
    # Without that wheel the revision cannot be built offline: uv cannot find helper anywhere.
    (tmp_path / "wh" / build.filename).unlink()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache-2"))
    code, out, err = run_cli(
        root,
        "run",
        "--wheelhouse",
        str(tmp_path / "wh"),
        "--envs-dir",
        str(tmp_path / "envs2"),
        "--no-record",
        capsys=capsys,
    )
    assert code == 1 and "helper" in out + err
