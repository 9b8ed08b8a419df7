"""Hardening, third round (issue 20): carried files and lane input are input.

``wheelhouse.json`` names only files ``gather`` writes (never a path), and a deep or huge one is
one line naming it; scaffolding and lane input edge cases are one line with exit 2, caught
where the input is read. Every case goes through ``patchlane``'s entry point: exit code, one
error line, no traceback, nothing written outside ``--out`` or the project.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from retire.locks import wheelhouse
from tests.conftest import run_cli

WHEEL = "escaped-1.0-py3-none-any.whl"


def _house(folder: Path, *artifacts: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "lane": "cpu",
        "lock_sha256": "0" * 64,
        "artifacts": list(artifacts),
        "skipped": [],
        "parts": 1,
        "version": 1,
        "from_mirrors": [],
    }
    (folder / wheelhouse.MANIFEST_NAME).write_text(json.dumps(document))
    return folder


def _artifact(filename: str, data: bytes, **extra: object) -> dict:
    return {
        "package": "escaped",
        "version": "1.0",
        "filename": filename,
        "url": "http://127.0.0.1/x",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "kind": "wheel",
        "part": 1,
        "chunks": 0,
        **extra,
    }


def _join(tmp_path: Path, capsys, *parts: Path) -> tuple[int, str]:
    code, out, err = run_cli(
        tmp_path,
        "wheelhouse",
        "join",
        *map(str, parts),
        "--out",
        str(tmp_path / "out"),
        capsys=capsys,
    )
    return code, out + err


def _one_line(code: int, text: str, *needles: str) -> None:
    assert code == 2, text
    assert text.count("\n") == 1 and "Traceback" not in text, text
    for needle in needles:
        assert needle in text, text


@pytest.mark.parametrize("depth", ["../", "../../"])
def test_a_carried_name_with_dots_is_refused_never_written_outside_out(
    tmp_path, capsys, monkeypatch, depth
):
    monkeypatch.chdir(tmp_path)
    data = b"not really a wheel"
    part = tmp_path / "carried" / "part-001"
    # the piece sits where the hostile name points from the part folder
    (part / depth / f"{WHEEL}.part000").parent.mkdir(parents=True, exist_ok=True)
    (part / depth / f"{WHEEL}.part000").write_bytes(data)
    _house(part, _artifact(f"{depth}{WHEEL}", data, chunks=1))
    code, text = _join(tmp_path, capsys, part)
    _one_line(code, text, "wheelhouse.json", "artifacts[0].filename", "not a wheel or sdist")
    assert not list(tmp_path.rglob(WHEEL))


def test_an_absolute_carried_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = b"payload"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{WHEEL}.part000").write_bytes(data)
    part = _house(tmp_path / "part-001", _artifact(str(elsewhere / WHEEL), data, chunks=1))
    code, text = _join(tmp_path, capsys, part)
    _one_line(code, text, "part-001/wheelhouse.json: artifacts[0].filename")
    assert not (elsewhere / WHEEL).exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    "name",
    [
        ".hidden-1.0-py3-none-any.whl",
        "a/b-1.0-py3-none-any.whl",
        "x-1.0-py3-none-a/b.whl",
        "escaped-1.0.exe",
        "escaped.whl",
        "nul\x00-1.0-py3-none-any.whl",
        "x" * 250 + "-1.0.tar.gz",
        "",
    ],
)
def test_only_wheel_and_sdist_names_are_carried(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    part = _house(tmp_path / "part-001", _artifact(name, b"x"))
    _one_line(*_join(tmp_path, capsys, part), "artifacts[0].filename")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sha256", "../../etc"),
        ("chunks", -1),
        ("chunks", 10**12),
        ("part", "1"),
        ("size", 1.5),
        ("kind", "script"),
        ("extra", 1),
    ],
)
def test_every_field_of_an_entry_is_checked(tmp_path, capsys, monkeypatch, field, value):
    monkeypatch.chdir(tmp_path)
    part = _house(tmp_path / "part-001", {**_artifact(WHEEL, b"x"), field: value})
    _one_line(*_join(tmp_path, capsys, part), f"artifacts[0].{field}")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, '{"artifacts": ' * 5000, "[]", "nul\x00", '{"lane": 1}'],
)
def test_a_deep_or_odd_manifest_is_one_line_naming_it(tmp_path, capsys, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    part = tmp_path / "part-001"
    part.mkdir()
    (part / "wheelhouse.json").write_text(text)
    _one_line(*_join(tmp_path, capsys, part), "part-001/wheelhouse.json")


def test_a_huge_manifest_is_refused_unparsed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    part = tmp_path / "part-001"
    part.mkdir()
    with (part / "wheelhouse.json").open("w") as handle:
        handle.write('{"lane": "')
        handle.truncate(wheelhouse.MAX_MANIFEST_BYTES + 10)
    _one_line(*_join(tmp_path, capsys, part), "part-001/wheelhouse.json", "larger than")


def test_a_good_carried_name_still_joins(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = b"fine"
    part = _house(tmp_path / "part-001", _artifact(WHEEL, data))
    (part / WHEEL).write_bytes(data)
    code, text = _join(tmp_path, capsys, part)
    assert code == 0, text
    assert (tmp_path / "out" / WHEEL).read_bytes() == data
    assert wheelhouse.Wheelhouse.load(tmp_path / "out").artifacts[0].filename == WHEEL
