"""``shim new`` writes only what it can read back, all at once or not at all; ``lock`` on a full
disk names the lock it kept.

Option values that TOML must escape (a backslash, a quote, a newline) load back as given or are
refused in one line; Hypothesis fuzzes ``--owner``, ``--distribution`` and ``--module``. The full
disk is a real one: a small tmpfs mounted for the test (root only; skipped elsewhere).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retire.core.errors import InputError
from retire.core.project import Project
from retire.scaffold.shim import plan_shim, write_shim
from shims.manifest import load_manifest
from tests.conftest import run_cli

FUZZ = settings(
    max_examples=int(os.environ.get("PATCHLANE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _project(root: Path) -> Project:
    (root / "lanes").mkdir(parents=True, exist_ok=True)
    return Project(root)


def _new(root: Path, shim_id: str, **options: str):
    """plan and write, as ``shim new`` does; the loaded manifest."""
    project = _project(root)
    options.setdefault("distribution", "megatron-core")
    options.setdefault("module", "megatron.core")
    plan = plan_shim(project, shim_id, lanes=[], **options)
    write_shim(plan, shim_id)
    return load_manifest(project.shims_dir / shim_id / "manifest.toml")


@pytest.mark.parametrize(
    "owner", ["CORP\\jdoe", 'Jane "JD" Doe', "it's me", "ünïcödé <x@example.org>", "a\\u0041"]
)
def test_an_owner_toml_must_escape_loads_back_as_given(tmp_path, owner):
    assert _new(tmp_path, "my_fix", owner=owner).owner == owner


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--owner", "jane\ndoe", "holds the control character '\\n'"),
        ("--owner", "   ", "is blank"),
        ("--distribution", 'mega"core\n', "is not a distribution name"),
        ("--distribution", "megatron-core\n", "is not a distribution name"),
        # a Kelvin sign: [A-Z] with re.IGNORECASE would take it
        ("--distribution", "\u212aernels", "is not a distribution name"),
        ("--module", "megatron.core\n", "is not a module name"),
    ],
)
def test_a_value_the_manifest_cannot_hold_is_one_line_and_nothing_is_written(
    tmp_path, capsys, option, value, problem
):
    (tmp_path / "lanes").mkdir()
    args = {"--distribution": "megatron-core", "--module": "megatron.core", option: value}
    flat = [word for pair in args.items() for word in pair]
    code, _out, err = run_cli(tmp_path, "shim", "new", "my_fix", *flat, capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"patchlane: error: {option}: ") and problem in err, err
    assert not (tmp_path / "shims").exists() or not list((tmp_path / "shims").iterdir())


TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("\\\"'\n\r\t #=[]{},.-_@<>\x00\x7f\u2028\u212a\udcff")),
        st.characters(),
    ),
    max_size=40,
)


@pytest.mark.slow
@FUZZ
@given(owner=TEXT, distribution=TEXT, module=TEXT)
def test_fuzz_every_accepted_value_loads_back_and_every_refused_one_is_one_line(
    tmp_path_factory, owner, distribution, module
):
    root = tmp_path_factory.mktemp("fuzz")
    try:
        manifest = _new(root, "my_fix", owner=owner, distribution=distribution, module=module)
    except InputError as exc:
        assert "\n" not in str(exc) and "\r" not in str(exc)
        assert not (root / "shims" / "my_fix").exists()
        return
    # an empty value is one not given: the default stands (the git user, the distribution's module)
    given = (manifest.owner, manifest.target.distribution, manifest.target.module)
    for loaded, typed in zip(given, (owner, distribution, module), strict=True):
        assert loaded == typed or not typed, (loaded, typed)


# ---------------------------------------------------------------------------------------------
# A full disk: a real one


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs at ``tmp_path/disk``; ``fill()`` takes the rest of its space."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk``: the filler file's path (remove it to free them)."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    with contextlib.suppress(OSError), open(disk / "filler2", "wb") as handle:
        # the last partial block
        while True:
            handle.write(b"\0")
            handle.flush()
    return filler


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith("filler")
    }


@pytest.mark.slow
def test_shim_new_on_a_full_disk_writes_nothing_and_the_retry_works(small_disk, capsys):
    project = small_disk / "shop"
    project.mkdir()
    assert run_cli(project, "init", "--no-lock", capsys=capsys)[0] == 0
    before = _tree(project)
    filler = fill(small_disk)
    code, _out, err = run_cli(project, "shim", "new", "my_fix", capsys=capsys)
    assert code == 1 and err.count("\n") == 1, err
    assert "No space left on device" in err and "shims/my_fix" in err, err
    # nothing half-made: no empty folder that would block the retry, no lane edited
    assert _tree(project) == before
    assert sorted(p.name for p in (project / "shims").iterdir()) == ["README.md"]
    filler.unlink()
    (small_disk / "filler2").unlink()
    code, _out, err = run_cli(project, "shim", "new", "my_fix", capsys=capsys)
    assert code == 0, err
    assert run_cli(project, "shim", "list", "--check", capsys=capsys)[0] == 0


@pytest.mark.slow
def test_lock_on_a_full_disk_names_the_lock_it_kept(small_disk, einops_index, monkeypatch, capsys):
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    project = small_disk / "shop"
    code, _out, err = run_cli(small_disk, "init", str(project), capsys=capsys)
    assert code == 0, err
    lock = project / "locks" / "cpu" / "pylock.toml"
    kept = lock.read_bytes()
    fill(small_disk)
    code, out, err = run_cli(project, "lock", "--force", capsys=capsys)
    assert code == 1
    said = out + err
    assert "locks/cpu/pylock.toml: No space left on device — the previous lock is kept" in said
    assert lock.read_bytes() == kept
