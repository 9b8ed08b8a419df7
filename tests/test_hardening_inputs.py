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


# ---------------------------------------------------------------------------------------------
# Scaffolding and lane input edge cases (class 8)


def _patchlane(root: Path, *args: str, timeout: float = 30) -> tuple[int, str]:
    """``python -m retire`` in a child: a hang fails the test instead of hanging it."""
    import subprocess
    import sys

    from tests.conftest import subprocess_env

    done = subprocess.run(
        [sys.executable, "-m", "retire", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=subprocess_env(),
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", [".gitignore", "README.md"])
def test_init_refuses_a_fifo_instead_of_hanging(tmp_path, name):
    import os

    os.mkfifo(tmp_path / name)
    code, text = _patchlane(tmp_path, "init")
    _one_line(code, text, f"{tmp_path / name}: not a regular file (a FIFO)")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize("python", ["3.99", "3.7", "3.20", "3." + "1" * 400])
def test_init_writes_no_lane_the_lane_reader_refuses(tmp_path, capsys, python):
    code, out, err = run_cli(tmp_path, "init", "--python", python, capsys=capsys)
    _one_line(code, out + err, "--python", "3.8 to 3.19")
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_every_python_init_accepts_is_a_lane(tmp_path, capsys):
    for python in ("3.8", "3.19"):
        root = tmp_path / python
        assert run_cli(root, "init", "--python", python, capsys=capsys)[0] == 0
        code, out, err = run_cli(root, "lanes", capsys=capsys)
        assert code == 0, out + err


@pytest.fixture
def scaffolded(tmp_path):
    """A project with the lane ``init`` writes (no workflows: ``init`` fsyncs a dozen files)."""
    from retire.scaffold import template

    (tmp_path / "lanes").mkdir()
    (tmp_path / "shims").mkdir()
    (tmp_path / "shims" / "README.md").write_text("the catalogue\n")
    (tmp_path / "lanes" / "cpu.toml").write_text(
        template(
            "project/lanes-cpu.toml",
            python="3.12",
            action="patchlane/patchlane@main",
            repository="https://github.com/patchlane/patchlane",
            rev="main",
        )
    )
    return tmp_path


LONG_ID = "a" * 300


@pytest.mark.parametrize(
    "args",
    [
        ("shim", "new", LONG_ID),
        ("shim", "new", "a" * 65),
        ("pack", "show", LONG_ID),
        ("pack", "check", LONG_ID),
        ("pack", "export", LONG_ID, "--to", "out"),
    ],
)
def test_a_long_shim_id_on_the_command_line_is_one_line(scaffolded, capsys, args):
    code, out, err = run_cli(scaffolded, *args, capsys=capsys)
    _one_line(code, out + err, "not a shim id")
    assert "File name too long" not in err and LONG_ID not in err
    assert sorted(p.name for p in (scaffolded / "shims").iterdir()) == ["README.md"]


def test_the_longest_shim_id_is_still_one(scaffolded, capsys):
    code, out, err = run_cli(scaffolded, "shim", "new", "a" * 64, capsys=capsys)
    assert code == 0, out + err
    assert (scaffolded / "shims" / ("a" * 64) / "manifest.toml").is_file()
    assert run_cli(scaffolded, "shim", "list", "--check", capsys=capsys)[0] == 0


def test_a_long_shim_id_in_a_lane_or_a_manifest_is_caught_where_it_is_read(scaffolded, capsys):
    lane = scaffolded / "lanes" / "cpu.toml"
    lane.write_text(lane.read_text().replace("shims = []", f'shims = ["{LONG_ID}"]'))
    code, out, err = run_cli(scaffolded, "lanes", capsys=capsys)
    _one_line(code, out + err, "lanes/cpu.toml: lane.shims[0]: invalid shim id", "at most 64")
    from shims.errors import InputError
    from shims.manifest import load_manifest
    from tests.support.shimtree import write_shim

    folder = write_shim(scaffolded / "other", "toy")
    manifest = folder / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('id = "toy"', f'id = "{"t" * 65}"'))
    with pytest.raises(InputError, match=r"id: invalid shim id .* at most 64"):
        load_manifest(manifest)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["not a specifier", "3.9", "=>3.9", "~=3"])
def test_static_requires_python_is_a_specifier_when_the_lane_is_read(scaffolded, capsys, spec):
    lane = scaffolded / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text()
        + '[[lane.static-metadata]]\nname = "cudaext"\nversion = "1.0"\n'
        + f"requires-python = {json.dumps(spec)}\n"
    )
    code, out, err = run_cli(scaffolded, "lanes", capsys=capsys)
    _one_line(
        code,
        out + err,
        "lanes/cpu.toml: lane.static-metadata[0].requires-python: bad version specifier",
    )
    code, out, err = run_cli(scaffolded, "lock", capsys=capsys)
    _one_line(code, out + err, "lane.static-metadata[0].requires-python")


def test_a_static_requires_python_is_kept_as_written(scaffolded):
    from retire.lanes.lanefile import load_lanes

    lane = scaffolded / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text()
        + '[[lane.static-metadata]]\nname = "cudaext"\nversion = "1.0"\n'
        + 'requires-python = ">= 3.9"\n'
    )
    (loaded,) = load_lanes(scaffolded / "lanes", root=scaffolded)
    assert loaded.static_metadata[0].requires_python == ">= 3.9"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[mirrors]\nfolder = " + "1" * 5000 + "\n", "integer too long"),
        ('[[mirrors.repository]]\nurl = "https://[x/o/r"\n', "mirrors.repository[0].url"),
        (f'[mirrors]\nfolder = "{"x" * 5000}"\n', "mirrors.folder"),
        ("[mirrors]\nfolder = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ],
)
def test_the_mirrors_section_is_one_line_whatever_it_holds(tmp_path, capsys, text, says):
    """Found by fuzzing [mirrors]: a long integer, an unclosed IPv6 host, a folder name longer
    than the file system takes."""
    from retire.mirrors.config import load_mirrors
    from shims.errors import InputError

    (tmp_path / "patchlane.toml").write_text(text)
    with pytest.raises(InputError) as caught:
        load_mirrors(tmp_path)
    message = str(caught.value)
    assert "patchlane.toml" in message and says in message and "\n" not in message
    assert len(message) < 1000
