"""`patchlane init` and `patchlane shim new` end to end, offline: the scaffolded project locks
against a loopback index, nox runs its lane, and the scaffolded shim's reproducer runs there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retire.evidence import validation
from tests.conftest import ROOT, run_cli


def _nox(root, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "nox", *args],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.returncode, proc.stdout


@pytest.mark.slow
def test_init_then_shim_new_then_nox_lock_and_lane(tmp_path, einops_index, monkeypatch, capsys):
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    shop = tmp_path / "shop"
    code, out, err = run_cli(tmp_path, "init", str(shop), capsys=capsys)
    assert code == 0, err
    for path in (
        "patchlane.toml",
        "lanes/cpu.toml",
        "shims/README.md",
        "locks/README.md",
        "validation/manifest.jsonl",
        "noxfile.py",
        ".github/workflows/patchlane-lanes.yml",
        ".github/workflows/patchlane-report.yml",
        ".pre-commit-config.yaml",
        "README.md",
        ".gitignore",
    ):
        assert (shop / path).is_file(), path
    # data, never a package that shadows the runtime
    assert not (shop / "shims" / "__init__.py").exists()
    assert "## Patch lane" in (shop / "README.md").read_text()
    # Right away: locked (from the lane's index), the lock check and the lane pass.
    assert (shop / "locks" / "cpu" / "pylock.toml").is_file()
    code, out = _nox(shop, "-s", "lock", "--", "--check")
    assert code == 0 and "1 of 1 locks match" in out, out
    code, out = _nox(shop, "-s", "lane")
    assert code == 0 and "Session lane(name='cpu') was successful" in out, out

    code, out, err = run_cli(
        shop, "shim", "new", "my_fix", "--owner", "kernels@example.org", capsys=capsys
    )
    assert code == 0, err
    assert sorted(p.name for p in (shop / "shims" / "my_fix").iterdir()) == [
        "manifest.toml",
        "patch.py",
        "reproduce.py",
    ]
    assert 'shims = ["my_fix"]' in (shop / "lanes" / "cpu.toml").read_text()
    assert run_cli(shop, "shim", "list", "--check", capsys=capsys)[0] == 0

    code, out = _nox(shop, "-s", "lock")
    assert code == 0, out
    code, out = _nox(shop, "-s", "lock", "--", "--check")
    assert code == 0 and "1 of 1 locks match" in out, out
    code, out = _nox(shop, "-s", "lane")
    assert code == 0, out
    records = validation.load(shop / "validation" / "manifest.jsonl")
    assert {(r.shim, r.mode, r.outcome) for r in records} == {
        ("my_fix", "without", "skipped"),
        ("my_fix", "with", "skipped"),
    }
    assert all(
        "my_fix: the reproducer is not written yet (einops imports)" in r.detail for r in records
    )
    assert records[0].versions.get("einops") == "0.8.1"


def test_init_refuses_to_overwrite_and_appends_to_a_readme(tmp_path, capsys):
    (tmp_path / "README.md").write_text("# our models\n\nTraining code.\n")
    (tmp_path / ".gitignore").write_text("*.pyc\n")
    assert run_cli(tmp_path, "init", "--no-lock", capsys=capsys)[0] == 0
    readme = (tmp_path / "README.md").read_text()
    assert (
        readme.startswith("# our models\n\nTraining code.\n") and readme.count("## Patch lane") == 1
    )
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n.patchlane/\n.nox/\n"
    (tmp_path / "lanes" / "cpu.toml").write_text("# ours\n")
    (tmp_path / "noxfile.py").unlink()
    code, _out, err = run_cli(tmp_path, "init", "--no-lock", capsys=capsys)
    assert code == 2
    assert err.strip() == (
        f"patchlane: error: {tmp_path / 'patchlane.toml'}: exists; patchlane init writes only new "
        "files — move it aside, or run it in a folder without it"
    )
    assert (
        not (tmp_path / "noxfile.py").exists()
        and (tmp_path / "lanes" / "cpu.toml").read_text() == "# ours\n"
    )


@pytest.mark.parametrize(
    ("shim_id", "problem"),
    [
        ("manifest", "'manifest' would shadow the runtime's module shims.manifest"),
        ("catalogue", "'catalogue' would shadow the runtime's module shims.catalogue"),
        ("My-fix", "'My-fix' is not a shim id"),
        ("9lives", "'9lives' is not a shim id"),
        ("import", "'import' is not a shim id"),
        ("../escape", "'../escape' is not a shim id"),
    ],
)
def test_shim_new_rejects_ids_that_are_not_identifiers_or_shadow_the_runtime(
    tmp_path, capsys, shim_id, problem
):
    assert run_cli(tmp_path, "init", "--no-lock", capsys=capsys)[0] == 0
    code, _out, err = run_cli(tmp_path, "shim", "new", shim_id, capsys=capsys)
    assert (
        code == 2 and err.startswith(f"patchlane: error: ID: {problem} — ") and err.count("\n") == 1
    )
    assert sorted(p.name for p in (tmp_path / "shims").iterdir()) == ["README.md"]


def test_shim_new_needs_a_target_when_no_lane_names_one(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    code, _out, err = run_cli(tmp_path, "shim", "new", "my_fix", capsys=capsys)
    assert code == 2 and "--distribution: no target distribution" in err
    code, _out, err = run_cli(
        tmp_path,
        "shim",
        "new",
        "my_fix",
        "--distribution",
        "megatron-core",
        "--module",
        "megatron.core",
        capsys=capsys,
    )
    assert code == 0, err
    # both named: nothing chosen for the user
    assert "chose" not in _out
    assert run_cli(tmp_path, "shim", "list", "--check", capsys=capsys)[0] == 0
    assert (
        'module = "megatron.core"' in (tmp_path / "shims" / "my_fix" / "manifest.toml").read_text()
    )


def test_shim_new_says_which_distribution_and_module_it_chose(tmp_path, capsys):
    assert run_cli(tmp_path, "init", "--no-lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(tmp_path, "shim", "new", "my_fix", capsys=capsys)
    assert code == 0, err
    distribution, module = out.splitlines()[:2]
    assert distribution == (
        "chose distribution einops: the first requirement of lane cpu (--distribution to name "
        "another)"
    )
    assert module == (
        "chose module einops: the import name einops usually has (--module to name another, e.g. "
        "a submodule)"
    )
    code, out, err = run_cli(
        tmp_path, "shim", "new", "other_fix", "--module", "einops.layers", "--json", capsys=capsys
    )
    assert code == 0, err
    assert json.loads(out)["chosen"] == [
        "distribution einops: the first requirement of lane cpu (--distribution to name another)"
    ]


def test_a_catalogue_with_init_py_is_refused_by_the_check(tmp_path, capsys):
    assert run_cli(tmp_path, "init", "--no-lock", capsys=capsys)[0] == 0
    (tmp_path / "shims" / "__init__.py").write_text("")
    code, _out, err = run_cli(tmp_path, "shim", "list", "--check", capsys=capsys)
    assert code == 2
    assert err.strip() == (
        f"patchlane: error: {tmp_path / 'shims' / '__init__.py'}: the catalogue is a package and "
        f"shadows "
        "the installed `shims` runtime — delete it (a catalogue is a plain folder)"
    )


def test_init_without_a_reachable_index_writes_the_project_and_says_to_lock_later(
    tmp_path, capsys, monkeypatch
):
    # a closed port answers at once; uv need not retry it
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    # the default index is a closed port here
    code, out, err = run_cli(tmp_path, "init", capsys=capsys)
    assert code == 0, err
    assert "note: cpu is not locked yet" in out + err and "run `nox -s lock`" in out + err
    assert (tmp_path / "lanes" / "cpu.toml").is_file() and not (tmp_path / "locks" / "cpu").exists()
