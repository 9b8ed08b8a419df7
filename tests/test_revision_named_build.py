"""A revision lane whose target names its build, for real: uv locks the lane from the mirror at the
tag's commit as ever, and `patchlane run` installs the wheel the lane's own build script (beside
the lane file, ``build = ["python", "{here}/…"]``) makes from a checkout at the locked commit —
not uv's build of the git source; the host stamp still names the commit, the wheel is kept for
the next run, and a build that fails is the lane's env failure with the log's tail."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git, make_package_repo
from tests.test_revisions import PATCH, REPRODUCER, UPSTREAM

pytestmark = pytest.mark.slow

LANE = f"""
[lane]
python = "3.11"
platform = "linux"
requirements = ["toyrev"]
shims = ["toyrev_fix"]

[lane.revisions]
toyrev = {{ mirror = "{UPSTREAM}", rev = "v1.1", build = ["python", "{{here}}/@SCRIPT@"] }}
"""
#: The lane's build: the checkout's own backend, after marking the source it builds.
BUILD = """
import os, sys
sys.path.insert(0, "_build")
import backend
with open(os.path.join("toyrev", "__init__.py"), "a") as source:
    source.write('BUILT_BY = "the named build"\\n')
print("wrote", backend.build_wheel(os.environ["PATCHLANE_WHEEL_DIR"]))
"""
FAILING = """
print("building the CUDA extension")
print("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 2")
raise SystemExit(1)
"""


@pytest.fixture
def project(tmp_path):
    upstream = make_package_repo(tmp_path / "upstream" / "toyrev")
    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    (root / "patchlane.toml").write_text(f'[[mirrors.repository]]\nurl = "{UPSTREAM}"\n')
    mirror = root / ".patchlane" / "mirrors" / "acme" / "toyrev.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    shimtree.write_shim(
        root / "shims",
        "toyrev_fix",
        reproducer=REPRODUCER,
        patch=PATCH,
        distribution="toyrev",
        module="toyrev",
    )
    return root, upstream


def _lane(root, script: str, text: str) -> None:
    (root / "lanes" / script).write_text(text)
    (root / "lanes" / "dev.toml").write_text(LANE.replace("@SCRIPT@", script))


def test_a_revision_lane_installs_the_wheel_its_named_build_makes(project, capsys):
    root, upstream = project
    _lane(root, "build_toyrev.py", BUILD)
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(root, "run", "--run-id", "one", capsys=capsys)
    assert code == 0, out + err
    installed = [
        p
        for p in (root / ".patchlane").rglob("site-packages/toyrev/__init__.py")
        if "named-builds" not in str(p)
    ]
    assert installed and all('BUILT_BY = "the named build"' in p.read_text() for p in installed)
    records = [
        json.loads(line)
        for line in (root / "validation" / "manifest.jsonl").read_text().splitlines()
    ]
    assert {r["mode"] for r in records} == {"without", "with"}
    for record in records:
        assert record["host"]["revisions"]["toyrev"].endswith("@" + upstream.second)
    # the wheel is kept: a second run builds nothing (a script that fails now is never run)
    (root / "lanes" / "build_toyrev.py").write_text(FAILING)
    code, out, err = run_cli(root, "run", "--run-id", "two", capsys=capsys)
    assert code == 0, out + err


def test_a_revision_lane_whose_named_build_fails_says_why(project, capsys):
    root, _ = project
    _lane(root, "build_toyrev.py", FAILING)
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(root, "run", "--run-id", "one", capsys=capsys)
    assert code != 0
    said = out + err
    assert "the named build failed (exit 1)" in said, said
    assert "nvcc' failed with exit code 2" in said
