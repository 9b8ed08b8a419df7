"""Wheelhouses for offline hosts, with real uv locks against the loopback index: gather (hash-checked,
in bounded parts, chunks for large files), join on the other side, an overlay base left out, and
refusals for files the index tampered with."""

from __future__ import annotations

import json

import pytest

from retire.core.errors import ConfigError, PatchlaneError
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
    assert gather(locked, capsys, "--out", str(tmp_path / "wh"))[0] == 0
    assert wheelhouse.Wheelhouse.load(tmp_path / "wh") == house


def test_parts_of_a_bounded_size_and_chunks_join_back(locked, capsys, tmp_path):
    sizes = sorted(a.size or 0 for a in wheelhouse.Wheelhouse.load(_gathered(locked, capsys, tmp_path)).artifacts)
    part = sizes[-1] // 2 + 1  # the larger file must be chunked
    code, out = gather(locked, capsys, "--out", str(tmp_path / "parts"), "--part-size", str(part))
    assert code == 0, out
    parts = sorted((tmp_path / "parts").glob("part-*"))
    assert len(parts) >= 3 and all(p.joinpath("wheelhouse.json").is_file() for p in parts)
    assert all(sum(f.stat().st_size for f in p.iterdir() if f.name != "wheelhouse.json") <= part for p in parts)
    code, out, _ = run_cli(locked.root, "wheelhouse", "join", *map(str, parts), "--out", str(tmp_path / "joined"),
                           capsys=capsys)
    assert code == 0, out
    joined = wheelhouse.Wheelhouse.load(tmp_path / "joined")
    assert all((tmp_path / "joined" / a.filename).is_file() for a in joined.artifacts)
    # A part left behind is named, never silently skipped.
    code, _, err = run_cli(locked.root, "wheelhouse", "join", *map(str, parts[:-1]), "--out", str(tmp_path / "short"),
                           capsys=capsys)
    assert code == 2 and "missing from every given folder" in err and err.count("\n") == 1


def _gathered(project, capsys, tmp_path):
    assert gather(project, capsys, "--out", str(tmp_path / "whole"))[0] == 0
    return tmp_path / "whole"


def test_an_overlay_base_is_left_out(locked, capsys, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps([{"name": "Torchlike", "version": "2.1.0+cu130"}]))  # the image's own build
    code, out = gather(locked, capsys, "--out", str(tmp_path / "wh"), "--base", str(base))
    assert code == 0, out
    house = wheelhouse.Wheelhouse.load(tmp_path / "wh")
    assert [a.package for a in house.artifacts] == ["helper"] and house.skipped == ("torchlike",)
    base.write_text("not json")
    code, out = gather(locked, capsys, "--base", str(base))
    assert code == 2 and "pip list --format json" in out


def test_a_file_that_does_not_match_the_lock_is_refused(locked, tmp_path):
    from retire.locks.locking import read_lock
    from retire.probes.http import make_client

    lock = read_lock(locked.lock_file("cpu"))
    house = wheelhouse.plan("cpu", lock, "x")
    tampered = wheelhouse.Wheelhouse("cpu", "x", tuple(
        wheelhouse.Artifact(**{**a.__dict__, "sha256": "0" * 64}) for a in house.artifacts[:1]))
    with make_client() as client, pytest.raises(PatchlaneError, match="is not the lock's"):
        wheelhouse.gather(tampered, tmp_path / "bad", client=client)
    assert not any((tmp_path / "bad").glob("*.whl"))  # nothing half-written is left


def test_a_stale_lock_or_a_lock_without_files_is_one_line(locked, capsys, tmp_path):
    locked.write("cpu", LANE.replace("2.1.0", "2.0.0"))
    code, out = gather(locked, capsys)
    assert code == 2 and "stale" in out and "nox -s lock -- cpu" in out
    with pytest.raises(ConfigError, match="packages.megatron-core: the lock gives a local path"):
        wheelhouse.plan("x", {"packages": [{"name": "megatron-core", "version": "0.18.0",
                                            "directory": {"path": "/src/megatron"}}]}, "x")
    # A lane revision is not a file to carry: it installs from the host's copy of the mirror.
    house = wheelhouse.plan("x", {"packages": [{"name": "megatron-core", "version": "0.18.0",
                                                "vcs": {"type": "git", "url": "file:///m", "commit-id": "a" * 40}}]}, "x")
    assert house.artifacts == () and house.from_mirrors == ("megatron-core",)
