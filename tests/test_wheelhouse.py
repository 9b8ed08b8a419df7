"""Wheelhouses for offline hosts, with real uv locks against the loopback index: gather
(hash-checked,
in bounded parts, chunks for large files), join on the other side, an overlay base left out, and
refusals for files the index tampered with."""

from __future__ import annotations

import json

import pytest

from retire.core.errors import InputError, PatchlaneError
from retire.locks import wheelhouse
from tests.conftest import run_cli

LANE = """
[lane]
python = "3.12"
platform = "linux"
requirements = ["torchlike==2.1.0"]
[lane.indexes.main]
url = "@MAIN@"
default = true
"""


@pytest.fixture
def locked(project, capsys):
    project.write("cpu", LANE)
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    return project


def gather(project, capsys, *args: str) -> tuple[int, str]:
    code, out, err = run_cli(project.root, "wheelhouse", "gather", "cpu", *args, capsys=capsys)
    return code, out + err


@pytest.mark.slow
def test_gather_takes_every_locked_file_checked_against_the_lock(locked, capsys, tmp_path):
    code, out = gather(locked, capsys, "--out", str(tmp_path / "wh"))
    assert code == 0, out
    house = wheelhouse.Wheelhouse.load(tmp_path / "wh")
    assert sorted(a.package for a in house.artifacts) == ["helper", "torchlike"]
    for artifact in house.artifacts:
        assert (tmp_path / "wh" / artifact.filename).is_file()
    assert "helper==2.0 --hash=sha256:" in wheelhouse.requirements(house)
    assert "2 file(s)" in out
    # Gathering again downloads nothing new and leaves the same files.
    files = locked.universe["main"].index.requests
    asked = len(files)
    assert gather(locked, capsys, "--out", str(tmp_path / "wh"))[0] == 0
    assert wheelhouse.Wheelhouse.load(tmp_path / "wh") == house
    assert not [r for r in files[asked:] if r.endswith(".whl")]


@pytest.mark.slow
def test_parts_of_a_bounded_size_and_chunks_join_back(locked, capsys, tmp_path):
    sizes = sorted(
        a.size or 0
        for a in wheelhouse.Wheelhouse.load(_gathered(locked, capsys, tmp_path)).artifacts
    )
    # the larger file must be chunked
    part = sizes[-1] // 2 + 1
    code, out = gather(locked, capsys, "--out", str(tmp_path / "parts"), "--part-size", str(part))
    assert code == 0, out
    parts = sorted((tmp_path / "parts").glob("part-*"))
    assert len(parts) >= 3 and all(p.joinpath("wheelhouse.json").is_file() for p in parts)
    assert all(
        sum(f.stat().st_size for f in p.iterdir() if f.name != "wheelhouse.json") <= part
        for p in parts
    )
    code, out, _ = run_cli(
        locked.root,
        "wheelhouse",
        "join",
        *map(str, parts),
        "--out",
        str(tmp_path / "joined"),
        capsys=capsys,
    )
    assert code == 0, out
    joined = wheelhouse.Wheelhouse.load(tmp_path / "joined")
    assert all((tmp_path / "joined" / a.filename).is_file() for a in joined.artifacts)
    # A part left behind is named, never silently skipped.
    code, _, err = run_cli(
        locked.root,
        "wheelhouse",
        "join",
        *map(str, parts[:-1]),
        "--out",
        str(tmp_path / "short"),
        capsys=capsys,
    )
    assert code == 2 and "missing from every given folder" in err and err.count("\n") == 1


def _gathered(project, capsys, tmp_path):
    assert gather(project, capsys, "--out", str(tmp_path / "whole"))[0] == 0
    return tmp_path / "whole"


@pytest.mark.slow
def test_an_overlay_base_is_left_out(locked, capsys, tmp_path):
    base = tmp_path / "base.json"
    # the image's own build
    base.write_text(json.dumps([{"name": "Torchlike", "version": "2.1.0+cu130"}]))
    code, out = gather(locked, capsys, "--out", str(tmp_path / "wh"), "--base", str(base))
    assert code == 0, out
    house = wheelhouse.Wheelhouse.load(tmp_path / "wh")
    assert [a.package for a in house.artifacts] == ["helper"] and house.skipped == ("torchlike",)
    base.write_text("not json")
    code, out = gather(locked, capsys, "--base", str(base))
    assert code == 2 and "pip list --format json" in out


@pytest.mark.slow
def test_a_file_that_does_not_match_the_lock_is_refused(locked, tmp_path):
    from retire.locks.locking import read_lock
    from retire.probes.http import make_client

    lock = read_lock(locked.lock_file("cpu"))
    house = wheelhouse.plan("cpu", lock, "x")
    tampered = wheelhouse.Wheelhouse(
        "cpu",
        "x",
        tuple(
            wheelhouse.Artifact(**{**a.__dict__, "sha256": "0" * 64}) for a in house.artifacts[:1]
        ),
    )
    with make_client() as client, pytest.raises(PatchlaneError, match="is not the lock's"):
        wheelhouse.gather(tampered, tmp_path / "bad", client=client)
    # nothing half-written is left
    assert not any((tmp_path / "bad").glob("*.whl"))


@pytest.mark.slow
def test_a_stale_lock_or_a_lock_without_files_is_one_line(locked, capsys, tmp_path):
    locked.write("cpu", LANE.replace("2.1.0", "2.0.0"))
    code, out = gather(locked, capsys)
    assert code == 2 and "stale" in out and "nox -s lock -- cpu" in out
    with pytest.raises(InputError, match=r"packages\.megatron-core: the lock gives a local path"):
        wheelhouse.plan(
            "x",
            {
                "packages": [
                    {
                        "name": "megatron-core",
                        "version": "0.18.0",
                        "directory": {"path": "/src/megatron"},
                    }
                ]
            },
            "x",
        )
    # A lane revision is not a file to carry: it installs from the host's copy of the mirror.
    house = wheelhouse.plan(
        "x",
        {
            "packages": [
                {
                    "name": "megatron-core",
                    "version": "0.18.0",
                    "vcs": {"type": "git", "url": "file:///m", "commit-id": "a" * 40},
                }
            ]
        },
        "x",
    )
    assert house.artifacts == () and house.from_mirrors == ("megatron-core",)


OFFLINE_LANE = """
[lane]
python = "3.11"
platform = "linux"
requirements = ["toylib==1.0"]
shims = ["toy"]
[lane.indexes.main]
url = "{url}"
default = true
"""


@pytest.fixture
def carried(tmp_path, capsys, monkeypatch):
    """A lane locked and gathered in parts from its own loopback index, joined — and the index
    gone."""
    from tests.support import shimtree
    from tests.support.index import IndexServer, PackageIndex
    from tests.support.wheels import build_wheel

    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    shimtree.write_shim(root / "shims", "toy")
    index = PackageIndex()
    index.add(
        build_wheel(
            tmp_path / "files",
            "toylib",
            "1.0",
            requires=["helper>=1"],
            files={"toylib.py": shimtree.BUGGY_TARGET},
        ),
        "2026-01-05",
    )
    index.add(build_wheel(tmp_path / "files", "helper", "1.5"), "2026-01-05")
    with IndexServer(index) as server:
        (root / "lanes" / "cpu.toml").write_text(OFFLINE_LANE.format(url=server.url))
        assert run_cli(root, "lock", capsys=capsys)[0] == 0
        code, out, err = run_cli(
            root,
            "wheelhouse",
            "gather",
            "cpu",
            "--out",
            str(tmp_path / "parts"),
            "--part-size",
            "1K",
            capsys=capsys,
        )
        assert code == 0, out + err
    asked = len(index.requests)
    parts = sorted((tmp_path / "parts").glob("part-*"))
    assert len(parts) >= 2
    code, out, err = run_cli(
        root, "wheelhouse", "join", *map(str, parts), "--out", str(tmp_path / "wh"), capsys=capsys
    )
    assert code == 0, out + err
    # nothing may come from a warm cache either
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    # the index is gone: say so at once
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    yield root, tmp_path / "wh"
    # no index was asked anything after the gather
    assert len(index.requests) == asked


@pytest.mark.slow
def test_run_with_a_wheelhouse_builds_the_lane_offline_and_records(carried, capsys):
    from retire.evidence import validation

    root, house = carried
    # Without the wheelhouse the index is gone and the cache is empty: the lane cannot be built.
    code, out, err = run_cli(root, "run", "--no-record", capsys=capsys)
    assert code == 1 and "build-failed" in out + err
    # The lane a wheelhouse was gathered for is the one it builds.
    code, out, err = run_cli(
        root, "run", "--wheelhouse", str(house), "--run-id", "offline", capsys=capsys
    )
    assert code == 0, out + err
    records = [
        r for r in validation.load(root / "validation" / "manifest.jsonl") if r.run == "offline"
    ]
    assert {(r.mode, r.sentinel) for r in records} == {
        ("without", "BUG_REPRODUCED"),
        ("with", "FIX_VALIDATED"),
    }
    assert records[0].environment["installed"] == {"toylib": "1.0"}


@pytest.mark.slow
def test_a_wheelhouse_that_does_not_match_the_lock_is_refused(carried, capsys):
    root, house = carried
    name = next(house.glob("toylib-*.whl"))
    data = bytearray(name.read_bytes())
    data[-1] ^= 1
    # damaged in transit
    name.write_bytes(bytes(data))
    code, out, err = run_cli(
        root, "run", "cpu", "--wheelhouse", str(house), "--no-record", capsys=capsys
    )
    assert code == 1 and f"{name}: sha256 does not match the lock" in out + err
    name.unlink()
    code, out, err = run_cli(
        root, "run", "cpu", "--wheelhouse", str(house), "--no-record", capsys=capsys
    )
    assert (
        code == 1 and "missing from the wheelhouse" in out + err and "wheelhouse join" in out + err
    )
    lock = root / "locks" / "cpu" / "pylock.toml"
    # Another lock of the lane, as patchlane would have written it (its content digest re-made).
    from retire.locks.integrity import CONTENT_KEY, PROVENANCE_HEADER, content_digest

    text = lock.read_text().replace("Re-make it", "Re-make  it")
    body = text[: text.rfind(PROVENANCE_HEADER)]
    old_digest = next(line for line in text.splitlines() if line.startswith(f"{CONTENT_KEY} = "))
    lock.write_text(text.replace(old_digest, f'{CONTENT_KEY} = "{content_digest(body)}"'))
    code, out, err = run_cli(
        root, "run", "cpu", "--wheelhouse", str(house), "--no-record", capsys=capsys
    )
    assert code == 1 and "gathered from another lock of lane cpu" in out + err
    code, out, err = run_cli(root, "run", "other", "--wheelhouse", str(house), capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "unknown lane 'other'" in err
    code, out, err = run_cli(root, "run", "--wheelhouse", str(root), capsys=capsys)
    assert code == 2 and "no wheelhouse here" in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_wheelhouse_builds_only_its_own_lane(carried, capsys):
    root, house = carried
    (root / "lanes" / "second.toml").write_text((root / "lanes" / "cpu.toml").read_text())
    code, _out, err = run_cli(root, "run", "second", "--wheelhouse", str(house), capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "holds lane 'cpu' and builds it alone" in err


@pytest.mark.slow
def test_an_overlay_builds_from_a_wheelhouse_on_the_images_python(carried, capsys, tmp_path):
    from retire.core import uv

    root, house = carried
    base = tmp_path / "image"
    assert uv.run(["venv", "--quiet", "--python", "3.11", str(base)]).returncode == 0
    proc = uv.run(
        [
            "pip",
            "install",
            "--offline",
            "--no-index",
            "--find-links",
            str(house),
            "--python",
            str(base / "bin" / "python"),
            "helper==1.5",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    code, out, err = run_cli(
        root,
        "run",
        "--wheelhouse",
        str(house),
        "--overlay",
        str(base / "bin" / "python"),
        "--run-id",
        "ov",
        capsys=capsys,
    )
    assert code == 0, out + err
    # toylib from the wheelhouse; helper is the image's
    assert "1 packages from the lock" in out + err
