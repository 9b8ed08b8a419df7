"""The shim runtime, exercised in fresh interpreters so the import hooks are the real ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.shimtree import (
    FIXED_TARGET,
    RESHAPED_TARGET,
    manifest_text,
    run_python,
    subprocess_env,
    write_shim,
    write_target,
)

# Printed by every script below: the toy target's state and the runtime's view of each shim.
REPORT = """
import json, sys
toylib = sys.modules.get("toylib")
print("REPORT " + json.dumps({
    "applied": getattr(toylib, "APPLIED", 0) if toylib else None,
    "add": toylib.add(2, 2) if toylib else None,
    "status": {key: [value.state, value.reason] for key, value in shims.status().items()},
    "finders": [type(finder).__name__ for finder in sys.meta_path],
    "loader": type(getattr(toylib, "__loader__", None)).__name__,
}))
"""


@pytest.fixture
def tree(tmp_path: Path):
    root, site = tmp_path / "shims", tmp_path / "site"
    write_target(site)
    write_shim(root, "toy_add")
    return tmp_path, root, site


def run_report(tmp_path: Path, root: Path, site: Path, code: str, **env: str) -> tuple[dict, str]:
    result = run_python(
        "import shims\n" + code + REPORT, subprocess_env(tmp_path, root, site, **env)
    )
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT ") :]), result.stderr


@pytest.mark.slow
def test_applies_once_when_target_is_first_imported(tree):
    tmp_path, root, site = tree
    report, stderr = run_report(
        tmp_path,
        root,
        site,
        """
import importlib, sys
shims.activate()
assert "toylib" not in sys.modules
assert shims.status()["toy_add"].state == "pending-import"
import toylib
import toylib
importlib.import_module("toylib")
shims.activate()  # a second activation is a no-op
""",
    )
    assert report["applied"] == 1
    assert report["add"] == 4
    assert report["status"]["toy_add"][0] == "applied"
    assert (
        "returns -0" in report["status"]["toy_add"][1]
        or "returns 0" in report["status"]["toy_add"][1]
    )
    # The module looks untouched to introspection and the hook is gone once nothing waits.
    assert report["loader"] == "SourceFileLoader"
    assert "_ShimFinder" not in report["finders"]
    assert stderr == ""


@pytest.mark.slow
def test_applies_at_once_when_target_already_imported(tree):
    tmp_path, root, site = tree
    report, _ = run_report(
        tmp_path, root, site, "import toylib\nshims.activate()\nshims.activate()\n"
    )
    assert report["applied"] == 1
    assert report["add"] == 4
    assert report["status"]["toy_add"][0] == "applied"


@pytest.mark.slow
def test_probe_finding_upstream_fixed_means_not_applied(tree):
    tmp_path, root, site = tree
    write_target(site, FIXED_TARGET, version="1.1")
    report, _ = run_report(tmp_path, root, site, "shims.activate()\nimport toylib\n")
    assert report["applied"] == 0
    assert report["status"]["toy_add"][0] == "not-needed"


def test_shape_mismatch_is_loud_and_not_applied(tree):
    tmp_path, root, site = tree
    write_target(site, RESHAPED_TARGET, version="2.0")
    report, stderr = run_report(
        tmp_path,
        root,
        site,
        """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    shims.activate()
    import toylib
assert [w.category.__name__ for w in caught] == ["ShimNotAppliedWarning"], caught
""",
    )
    assert report["applied"] == 0
    # still the upstream behaviour: the patch did not touch it
    assert report["add"] == 0
    assert report["status"]["toy_add"] == [
        "shape-mismatch",
        "toylib changed shape: add() signature changed",
    ]
    assert (
        "patchlane: shim 'toy_add' NOT applied to toylib: toylib changed shape: add() signature "
        "changed" in stderr
    )


def test_strict_mode_turns_a_mismatch_into_an_error(tree):
    tmp_path, root, site = tree
    write_target(site, RESHAPED_TARGET, version="2.0")
    result = run_python(
        "import shims\nshims.activate()\nimport toylib\n",
        subprocess_env(tmp_path, root, site, PATCHLANE_SHIMS_STRICT="1"),
    )
    assert result.returncode != 0
    assert "shims.ShimError: patchlane: shim 'toy_add' NOT applied to toylib" in result.stderr


def test_disable_by_id(tree):
    tmp_path, root, site = tree
    report, _ = run_report(
        tmp_path,
        root,
        site,
        "shims.activate()\nimport toylib\n",
        PATCHLANE_SHIMS_DISABLE=" other , toy_add",
    )
    assert report["applied"] == 0
    assert report["status"]["toy_add"][0] == "disabled"
    assert "PATCHLANE_SHIMS_DISABLE" in report["status"]["toy_add"][1]


def test_only_selects_and_rejects_unknown_ids(tree):
    tmp_path, root, site = tree
    write_shim(root, "toy_second")
    report, _ = run_report(
        tmp_path, root, site, "shims.activate(only={'toy_second'})\nimport toylib\n"
    )
    assert report["applied"] == 1
    assert report["status"]["toy_add"][0] == "disabled"
    assert report["status"]["toy_second"][0] == "applied"

    result = run_python(
        "import shims\nshims.activate(only={'nope'})\n", subprocess_env(tmp_path, root, site)
    )
    assert result.returncode != 0 and "unknown shim id(s): nope" in result.stderr


def test_a_broken_shim_never_stops_the_others(tree):
    tmp_path, root, site = tree
    write_shim(
        root,
        "toy_aa_raises",
        patch="""
def check_shape(module):
    return None
def probe(module):
    return "always"
def apply(module):
    raise RuntimeError("boom in apply")
""",
    )
    write_shim(
        root,
        "toy_ab_bad_manifest",
        manifest=manifest_text("toy_ab_bad_manifest").replace("source-patch", "monkey-patch"),
    )
    write_shim(root, "toy_ac_no_hooks", patch="x = 1\n")
    write_shim(root, "toy_ad_bad_import", patch="import does_not_exist_anywhere\n")
    report, stderr = run_report(tmp_path, root, site, "shims.activate()\nimport toylib\n")
    status = report["status"]
    assert status["toy_add"][0] == "applied"
    assert report["applied"] == 1 and report["add"] == 4
    assert status["toy_aa_raises"] == ["error", "RuntimeError: boom in apply"]
    assert status["toy_ab_bad_manifest"][0] == "error"
    assert "unknown fix class 'monkey-patch'" in status["toy_ab_bad_manifest"][1]
    assert status["toy_ac_no_hooks"] == [
        "error",
        "AttributeError: patch.py defines no check_shape()",
    ]
    assert status["toy_ad_bad_import"][0] == "error"
    assert "Traceback" not in stderr
    assert "NOT applied to toylib: RuntimeError: boom in apply" in stderr


def test_strict_mode_raises_for_a_failing_patch(tree):
    tmp_path, root, site = tree
    write_shim(
        root,
        "toy_raises",
        patch="""
def check_shape(module): return None
def probe(module): return "always"
def apply(module): raise RuntimeError("boom")
""",
    )
    result = run_python(
        "import shims\nshims.activate()\nimport toylib\n",
        subprocess_env(tmp_path, root, site, PATCHLANE_SHIMS_STRICT="1"),
    )
    assert result.returncode != 0
    assert "ShimError" in result.stderr and "RuntimeError: boom" in result.stderr


@pytest.mark.slow
def test_env_constraints_use_setdefault_and_report_overrides(tmp_path):
    root, site = tmp_path / "shims", tmp_path / "site"
    write_target(site)
    write_shim(
        root,
        "toy_env",
        patch=None,
        fix_class="env-constraint",
        env={"TOY_FLAG": "1", "TOY_OTHER": "x"},
    )
    code = """
import os
before = shims.env_constraints()
shims.activate()
after = shims.env_constraints()
print("ENV " + json.dumps([before, after, os.environ.get("TOY_FLAG"), os.environ.get("TOY_OTHER")]))
"""
    result = run_python("import json, shims\n" + code, subprocess_env(tmp_path, root, site))
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("ENV "))
    before, after, flag, other = json.loads(line[4:])
    assert before == after == {"TOY_FLAG": "1", "TOY_OTHER": "x"}
    assert (flag, other) == ("1", "x")

    report, _ = run_report(tmp_path, root, site, "shims.activate()\n")
    assert report["status"]["toy_env"][0] == "applied"

    # A value chosen by the launcher or the user wins over the shim, and the shim says so.
    report, _ = run_report(
        tmp_path,
        root,
        site,
        "import os\nshims.activate()\nassert os.environ['TOY_FLAG'] == '0'\n",
        TOY_FLAG="0",
    )
    assert report["status"]["toy_env"][0] == "overridden"
    assert "TOY_FLAG='0' set by the environment" in report["status"]["toy_env"][1]
    # … and launchers copying env_constraints() to their ranks get what is in effect.
    report, _ = run_report(
        tmp_path,
        root,
        site,
        "shims.activate()\nassert shims.env_constraints()['TOY_FLAG'] == '0'\n",
        TOY_FLAG="0",
    )


def test_a_strict_error_then_a_retry_never_applies_a_shim_twice(tree):
    tmp_path, root, site = tree
    write_shim(
        root, "zz_bad", manifest=manifest_text("zz_bad").replace("source-patch", "monkey-patch")
    )
    report, _ = run_report(
        tmp_path,
        root,
        site,
        """
try:
    shims.activate()
except shims.ShimError:
    pass
shims.activate()
import toylib
""",
        PATCHLANE_SHIMS_STRICT="1",
    )
    assert report["applied"] == 1 and report["status"]["toy_add"][0] == "applied"


def test_a_broken_shim_nobody_selected_does_not_stop_the_selected_one(tree):
    tmp_path, root, site = tree
    write_shim(
        root, "zz_bad", manifest=manifest_text("zz_bad").replace("source-patch", "monkey-patch")
    )
    # What `reproduce.py --mode with` does, in strict mode (as CI runs it).
    report, stderr = run_report(
        tmp_path,
        root,
        site,
        "shims.activate(only={'toy_add'})\nimport toylib\n",
        PATCHLANE_SHIMS_STRICT="1",
    )
    assert report["status"]["toy_add"][0] == "applied"
    assert report["status"]["zz_bad"][0] == "disabled"
    assert "zz_bad" not in stderr


def test_submodule_target(tmp_path):
    root, site = tmp_path / "shims", tmp_path / "site"
    package = site / "toypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text("def add(a, b):\n    return a - b\n")
    write_shim(root, "toy_sub", module="toypkg.ops")
    result = run_python(
        "import shims; shims.activate()\nfrom toypkg import ops\nprint(ops.add(2, 2), ops.APPLIED, "
        "shims.status()['toy_sub'].state)\n",
        subprocess_env(tmp_path, root, site),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "1", "applied"]


@pytest.mark.slow
def test_import_shims_is_cheap_and_the_index_is_cached(tree):
    tmp_path, root, site = tree
    env = subprocess_env(tmp_path, root, site)
    probe_code = """
import sys
import shims
watched = ("packaging", "tomllib", "dataclasses", "shims.manifest")
after_import = sorted(m for m in watched if m in sys.modules)
shims.activate()
after_activate = sorted(m for m in watched if m in sys.modules)
print(after_import, after_activate)
"""
    first = run_python(probe_code, env)
    assert first.returncode == 0, first.stderr
    # import alone loads nothing; the first activate parses
    assert first.stdout.startswith("[] [")
    second = run_python(probe_code, env)
    # the cached index: no TOML, no packaging
    assert second.stdout.strip() == "[] []"

    # Editing a manifest invalidates the cache: the shim now waits for another module.
    manifest = root / "toy_add" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('module = "toylib"', 'module = "toylib_two"'))
    third = run_python(
        "import shims; shims.activate(); print(shims.status()['toy_add'].target)", env
    )
    assert third.stdout.strip() == "toylib_two"


@pytest.mark.slow
def test_python_m_shims_lists_every_shim(tree):
    tmp_path, root, site = tree
    write_shim(root, "toy_bad", manifest="id = 'toy_bad'\n")
    write_target(site)
    env = subprocess_env(tmp_path, root, site)
    result = run_python("", env, args=["-m", "shims", "--json"])
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in json.loads(result.stdout)}
    assert rows["toy_add"]["fix_class"] == "source-patch"
    assert rows["toy_add"]["target"] == "toylib"
    assert rows["toy_add"]["installed"] == "1.0"
    assert rows["toy_add"]["state"] == "pending-import"
    assert rows["toy_bad"]["state"] == "error"

    table = run_python("", env, args=["-m", "shims"])
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["shim", "fix", "class", "target", "installed", "state", "why"]
    assert any(line.startswith("toy_add") for line in lines)

    check = run_python("", env, args=["-m", "shims", "--check"])
    assert check.returncode == 2
    assert "Traceback" not in check.stderr
    assert "toy_bad/manifest.toml: fix-class: missing" in check.stderr


# --- no catalogue is never silent (issue 21, item 4) -------------------------------------------

_ACTIVATE_TWICE = """
import shims
states = shims.activate()
shims.activate()
print("STATES", len(states))
"""


def _without_catalogue_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = subprocess_env(tmp_path, tmp_path / "unused", tmp_path / "site", **extra)
    del env["PATCHLANE_SHIMS_PATH"]
    return env


def test_no_catalogue_warns_once_naming_where_it_looked(tmp_path):
    # a training image: no $PATCHLANE_SHIMS_PATH, no patchlane.toml from here up
    work = tmp_path / "job"
    work.mkdir()
    result = run_python(_ACTIVATE_TWICE, _without_catalogue_env(tmp_path), cwd=work)
    assert result.returncode == 0, result.stderr
    assert "STATES 0" in result.stdout
    lines = [line for line in result.stderr.splitlines() if "CatalogueNotFoundWarning" in line]
    assert len(lines) == 1, result.stderr
    assert "PATCHLANE_SHIMS_PATH is unset" in lines[0]
    assert f"no patchlane.toml in {work} or above" in lines[0]


def test_no_catalogue_is_an_error_under_patchlane_strict(tmp_path):
    result = run_python(
        "import shims\nshims.activate()\n",
        _without_catalogue_env(tmp_path, PATCHLANE_STRICT="1"),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "shims.ShimError: patchlane: no shim catalogue" in result.stderr


def test_a_catalogue_path_that_is_no_folder_is_named(tmp_path):
    missing = tmp_path / "image" / "shims"
    env = subprocess_env(tmp_path, missing, tmp_path / "site")
    result = run_python(_ACTIVATE_TWICE, env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"$PATCHLANE_SHIMS_PATH names {missing}, which is no folder" in result.stderr


def test_an_empty_catalogue_is_a_catalogue(tmp_path):
    # a new project's shims/ folder: nothing to warn about
    empty = tmp_path / "shims"
    empty.mkdir()
    result = run_python(
        _ACTIVATE_TWICE,
        subprocess_env(tmp_path, empty, tmp_path / "site", PATCHLANE_STRICT="1"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_activation_imports_nothing_a_fresh_interpreter_lacks(tree):
    tmp_path, root, site = tree
    code = """
import sys
before = set(sys.modules)
import shims
shims.activate()
import toylib
new = sorted(set(sys.modules) - before)
print(" ".join(name for name in new if not name.startswith(("shims", "toylib"))))
"""
    env = subprocess_env(tmp_path, root, site)
    # the first run validates the manifests (a cache miss); every later one reads the index
    assert run_python(code, env).returncode == 0
    result = run_python(code, env)
    assert result.returncode == 0, result.stderr
    # importlib (+ warnings), __future__: what activation cost before, ~0.6 ms a process
    assert result.stdout.strip() == ""


def test_the_index_cache_lives_in_the_project_state_folder(tmp_path):
    shop = tmp_path / "shop"
    write_shim(shop / "shims", "toy_add")
    (shop / "patchlane.toml").write_text("")
    env = subprocess_env(tmp_path, shop / "shims", tmp_path / "site")
    del env["PATCHLANE_SHIMS_PATH"]
    for _ in range(2):
        result = run_python("import shims; print(sorted(shims.activate()))", env, cwd=shop)
        assert result.stdout.strip() == "['toy_add']", result.stderr
    # nothing the shop would commit: the catalogue holds only what it held
    assert sorted(p.name for p in (shop / "shims").rglob("*")) == sorted(
        ["toy_add", "manifest.toml", "patch.py", "reproduce.py"]
    )
    assert len(list((shop / ".patchlane" / "cache" / "shims-index").glob("*.marshal"))) == 1
    assert not (tmp_path / "xdg-cache").exists()
