"""What the file system refuses is one line naming the file, and a damaged cache is a miss.

The CLI's last resort turns an ``OSError`` into ``patchlane: error: <file>: <reason>`` (exit 1)
and ``atomic_write`` names its target, not its temporary file; caches that cannot be parsed —
even nested too deeply — are read as missing, never a traceback (docs/guarantees.md, "Errors").
"""

from __future__ import annotations

import json

from retire.bisect.cache import ResultCache
from retire.commands import main
from retire.core.atomic import atomic_write
from retire.probes.cache import CacheEntry, HttpCache
from retire.runs.envs import _read_state
from tests.support import shimtree

DEEP = "[" * 100_000


def cli(capsys, root, *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_writing_over_a_folder_names_the_folder_in_one_line(tmp_path, capsys):
    shimtree.write_shim(tmp_path / "shims", "toy_add")
    (tmp_path / "out.md").mkdir()
    code, _out, err = cli(capsys, tmp_path, "catalogue", "-o", str(tmp_path / "out.md"))
    assert code == 1 and "Traceback" not in err
    assert err == f"patchlane: error: {tmp_path / 'out.md'}: is a folder, not a file\n"
    try:
        atomic_write(tmp_path / "out.md", "x", within=tmp_path)
    except IsADirectoryError as exc:
        assert exc.filename == str(tmp_path / "out.md")
    else:
        raise AssertionError("wrote over a folder")
    # no temporary file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.md", "shims"]


def test_a_stray_file_where_a_folder_goes_is_one_line(tmp_path, capsys):
    shimtree.write_shim(tmp_path / "shims", "toy_add")
    (tmp_path / "docs").write_text("a file, not a folder\n")
    code, _out, err = cli(
        capsys, tmp_path, "catalogue", "-o", str(tmp_path / "docs" / "catalogue.md")
    )
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("patchlane: error: ") and "docs" in err


def test_damaged_caches_are_misses(tmp_path):
    http = HttpCache(tmp_path / "http")
    http.put(
        CacheEntry("https://example.org/x", b"{}", None, None, 0.0, 60, "application/json"),
        "application/json",
    )
    assert http.get("https://example.org/x", "application/json") is not None
    for entry in (tmp_path / "http").rglob("*.json"):
        entry.write_text(DEEP)
    assert http.get("https://example.org/x", "application/json") is None

    bisect = ResultCache(tmp_path / "bisect")
    path = bisect._path("ab" * 32)
    path.parent.mkdir(parents=True)
    path.write_text(DEEP)
    assert bisect.get("ab" * 32) is None

    state = tmp_path / "state.json"
    state.write_text(DEEP)
    assert _read_state(state) == {}
    state.write_text(json.dumps({"made_from": ["full", "3.12"]}))
    assert _read_state(state) == {"made_from": ["full", "3.12"]}
