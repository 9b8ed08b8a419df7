"""The lock diff keyed by name and marker, and locks made by other tools (``pip lock``,
``uv export --format pylock.toml``): readable, diffable, and reported as foreign, never as
"lane changed". Real uv and real pip against the loopback index."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from retire.core import uv
from retire.locks import lockdiff
from tests.conftest import run_cli
from tests.test_locking import lane_text, packages


def entry(name: str, version: str, marker: str | None = None) -> dict:
    return {"name": name, "version": version, **({"marker": marker} if marker else {})}


def lock(*entries: dict) -> dict:
    return {"lock-version": "1.0", "created-by": "test", "packages": list(entries)}


OLD_PY, NEW_PY = "python_full_version < '3.12'", "python_full_version >= '3.12'"


def test_two_entries_of_one_package_for_different_pythons_are_two_rows():
    before = lock(
        entry("numpy", "1.26.4", OLD_PY), entry("numpy", "2.0.0", NEW_PY), entry("six", "1.16")
    )
    after = lock(
        entry("numpy", "1.26.4", OLD_PY), entry("numpy", "2.2.1", NEW_PY), entry("six", "1.17")
    )
    changes = lockdiff.diff(before, after)
    assert [(c.name, c.marker, c.old, c.new, c.kind) for c in changes] == [
        # the 3.11 entry did not change: no row for it
        ("numpy", NEW_PY, "2.0.0", "2.2.1", "minor"),
        ("six", None, "1.16", "1.17", "minor"),
    ]
    # A package that splits in two is one removal and two additions, each with its marker.
    split = lockdiff.diff(lock(entry("numpy", "1.26.4")), before)
    assert [(c.marker, c.kind) for c in split if c.name == "numpy"] == [
        (None, "removed"),
        (OLD_PY, "added"),
        (NEW_PY, "added"),
    ]
    # The only entry of a name whose marker was rewritten stays one row.
    moved = lockdiff.diff(
        lock(entry("six", "1.16", "python_version >= '3'")), lock(entry("six", "1.17"))
    )
    assert [(c.name, c.old, c.new) for c in moved] == [("six", "1.16", "1.17")]
    table = lockdiff.markdown_table(changes)
    assert "| package | marker | old | new | kind | uploaded |" in table and f"`{NEW_PY}`" in table


def test_a_lock_with_no_markers_keeps_the_old_table():
    table = lockdiff.markdown_table(
        lockdiff.diff(lock(entry("six", "1.16")), lock(entry("six", "1.17")))
    )
    assert table.splitlines()[0] == "| package | old | new | kind | uploaded |"


def uv_export(project_dir, universe, *, exclude_newer: str) -> str:
    """A universal lock (requires-python >= 3.11) whose helper forks by Python version."""
    project_dir.mkdir(exist_ok=True)
    (project_dir / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.11"\n'
        'dependencies = ["torchlike>=2", "helper<1.5; python_version < \'3.12\'", "helper>=1.5; '
        "python_version >= '3.12'\"]\n"
        f'[[tool.uv.index]]\nname = "main"\nurl = "{universe["main"].url}"\ndefault = true\n'
    )
    for args in (
        ["lock", "--exclude-newer", exclude_newer, "--upgrade"],
        [
            "export",
            "--format",
            "pylock.toml",
            "--no-header",
            "--output-file",
            "pylock.toml",
            "--frozen",
        ],
    ):
        proc = subprocess.run(
            [uv.binary(), *args],
            cwd=project_dir,
            capture_output=True,
            text=True,
            env=uv.base_env(without_indexes=True),
        )
        assert proc.returncode == 0, proc.stderr
    return (project_dir / "pylock.toml").read_text()


@pytest.mark.slow
def test_uv_export_locks_are_readable_and_diffable(project, tmp_path, capsys):
    old = tmp_path / "old.toml"
    old.write_text(
        uv_export(tmp_path / "app", project.universe, exclude_newer="2026-05-15T00:00:00Z")
    )
    new = tmp_path / "new.toml"
    new.write_text(
        uv_export(tmp_path / "app", project.universe, exclude_newer="2026-11-01T00:00:00Z")
    )
    helpers = [p for p in tomllib.loads(new.read_text())["packages"] if p["name"] == "helper"]
    # one per Python range
    assert len(helpers) == 2 and all("marker" in p for p in helpers)

    code, out, _ = run_cli(project.root, "lockdiff", str(old), str(new), "--json", capsys=capsys)
    assert code == 0
    document = json.loads(out)
    assert document["old"]["origin"] == "foreign lock, created by uv"
    rows = {(c["name"], c["marker"]): (c["old"], c["new"], c["kind"]) for c in document["changes"]}
    # helper for Python ≥ 3.12 moved 1.5 → 2.0; helper for 3.11 stayed 1.0 and is no row; torchlike
    # moved.
    assert rows == {
        ("helper", "python_full_version >= '3.12'"): ("1.5", "2.0", "major"),
        ("torchlike", None): ("2.1.0", "2.2.0", "minor"),
    }
    # the exported project itself is not a package change
    assert "app" not in {name for name, _ in rows}
    code, out, _ = run_cli(project.root, "lockdiff", str(old), str(new), capsys=capsys)
    assert code == 0 and "helper" in out and "; python_full_version >= '3.12'" in out


def test_lockdiff_refuses_what_is_not_a_lock_in_one_line(tmp_path, capsys):
    (tmp_path / "a.toml").write_text('name = "x"\n')
    (tmp_path / "b.toml").write_text("[[packages]\n")
    for bad in ("a.toml", "b.toml", "missing.toml"):
        code, _, err = run_cli(
            tmp_path, "lockdiff", str(tmp_path / bad), str(tmp_path / "a.toml"), capsys=capsys
        )
        assert code == 2 and err.count("\n") == 1 and bad in err, err


def _pip_lock_works() -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "lock", "--help"], capture_output=True, text=True
    )
    return proc.returncode == 0


needs_pip_lock = pytest.mark.skipif(
    not _pip_lock_works(), reason="pip lock needs pip >= 25.1 (the test extra installs it)"
)


def pip_lock(universe, tmp_path, *requirements: str):
    out = tmp_path / "pylock.toml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "lock",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--index-url",
            universe["main"].url,
            "-o",
            str(out),
            *requirements,
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
@needs_pip_lock
def test_a_pip_lock_is_foreign_readable_and_replaced(project, tmp_path, capsys):
    made_by_pip = pip_lock(project.universe, tmp_path, "torchlike==2.1.0")
    project.write("a", lane_text('"torchlike>=2"'))
    project.lock_file("a").parent.mkdir(parents=True)
    project.lock_file("a").write_bytes(made_by_pip.read_bytes())
    # Reported as what it is, not as "lane changed" …
    code, out, _ = run_cli(project.root, "lock", "--check", capsys=capsys)
    assert code == 1 and "foreign a: not made by patchlane: no [tool.patchlane] table" in out
    assert "lane changed" not in out
    code, out, _ = run_cli(project.root, "lanes", capsys=capsys)
    assert "foreign" in out and "the lock is foreign" in out
    code, out, _ = run_cli(project.root, "run", "--no-record", capsys=capsys)
    assert code == 1 and "the lock is foreign (not made by patchlane" in out
    # … diffable as it is …
    code, out, _ = run_cli(
        project.root, "lockdiff", str(made_by_pip), str(project.lock_file("a")), capsys=capsys
    )
    assert code == 0 and "foreign lock, created by pip" in out
    # … and replaced by a patchlane lock that keeps its pins (uv reads it as preferences).
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0 and "replaced a foreign lock (not made by patchlane" in out, out
    assert packages(project.lock_file("a")) == {"torchlike": "2.1.0", "helper": "2.0"}
    assert run_cli(project.root, "lock", "--check", capsys=capsys)[0] == 0
