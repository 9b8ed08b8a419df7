"""Issue 21's acceptance, end to end as a shop adopts patchlane today: the built wheel installed
into a bare venv, `patchlane init --from` that wheel inside the repository the shop already has (its
noxfile, its pre-commit config, its README), a shim, its lock, `--strict` failing while the
scaffolded reproducer proves nothing, a real reproducer of a toy bug, `--strict` passing, the
hooks under pre-commit (`try-repo` of a patchlane clone, and `run` of the config init appended
to), `verdicts` and `report` — and every file the shop had is still there, byte for byte, with
lines appended. Everything installs from a loopback index; nothing reaches a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from retire.scaffold import kept
from tests.support.index import IndexServer, PackageIndex
from tests.support.installed import closure, repack
from tests.support.wheels import build_wheel
from tests.test_distribution import (
    PYPROJECT,
    VERSION,
    _bare_venv,
    _clean_env,
    _clone_of_the_checkout,
    _ok,
    _pip,
    _run,
    built,  # noqa: F401 - the module's fixture: `uv build` of this checkout
)

pytestmark = pytest.mark.slow

SHOP_NOXFILE = b'''"""The shop's own sessions."""
import nox

nox.options.sessions = ["tests"]


@nox.session(venv_backend="none")
def tests(session):
    session.log("the shop's tests")


if __name__ == "__main__":
    nox.main()
'''
SHOP_PRECOMMIT = b"""# the shop's hooks
repos:
- repo: local
  hooks:
  - id: no-tabs
    name: no tab characters
    language: pygrep
    entry: "\\t"
    types: [python]
"""
SHOP_README = b"# forecasting\n\nThe shop's training code.\n"
# issue 29: a shop's .gitignore that would keep the lock out of every commit
SHOP_GITIGNORE = b"__pycache__/\n*pylock.toml\n"

# The toy bug: toybug.add subtracts. The shim fixes it; the reproducer shows both.
TOYBUG = "def add(a, b):\n    return a - b\n"
PATCH = '''"""Shim my_fix: toybug.add subtracts; the patch makes it add."""


def check_shape(module):
    return None if callable(getattr(module, "add", None)) else "toybug.add is gone"


def probe(module):
    return "toybug.add(2, 2) is not 4" if module.add(2, 2) != 4 else None


def apply(module):
    module.add = lambda a, b: a + b
'''
REPRODUCER = '''"""Reproducer of shim my_fix: toybug.add(2, 2) must be 4."""

from shims import reproducer


def check(with_shim: bool) -> str:
    target = reproducer.require("toybug", dist="toybug")
    return reproducer.BUG_REPRODUCED if target.add(2, 2) != 4 else reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run("my_fix", check, packages=["toybug"])
'''
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """patchlane's engine and build backend (as this interpreter has them), the setuptools that
    pre-commit's local hooks build their placeholder with, and the toy package with its bug."""
    backend = PYPROJECT["build-system"]["requires"]
    try:
        needed = closure([f"patchlane[engine]=={VERSION}", *backend, "virtualenv"])
    except metadata.PackageNotFoundError as missing:
        pytest.skip(f"this interpreter lacks {missing}, which the index would serve")
    wheels = tmp_path_factory.mktemp("wheelhouse")
    served = PackageIndex()
    for name, distribution in needed.items():
        if name != "patchlane":
            served.add(repack(distribution, wheels), "2026-01-01")
    embedded = Path(needed["virtualenv"].locate_file("virtualenv/seed/wheels/embed"))
    setuptools = sorted(embedded.glob("setuptools-*.whl"))
    if not setuptools:
        pytest.skip("virtualenv embeds no setuptools wheel here")
    served.add(setuptools[-1], "2026-01-01")
    toy = build_wheel(wheels, "toybug", "1.0.0", files={"toybug/__init__.py": TOYBUG})
    served.add(toy, "2026-01-01")
    with IndexServer(served) as server:
        yield server


def _shop(path: Path, env: dict[str, str]) -> dict[str, bytes]:
    """The repository a shop has: a noxfile, a pre-commit config and a README, committed."""
    path.mkdir()
    files = {"noxfile.py": SHOP_NOXFILE, ".pre-commit-config.yaml": SHOP_PRECOMMIT}
    files["README.md"] = SHOP_README
    files[".gitignore"] = SHOP_GITIGNORE
    for name, body in files.items():
        (path / name).write_bytes(body)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the shop"]):
        _ok(_run("git", *args, env=env, cwd=path))
    return files


def test_a_shop_adopts_patchlane_from_the_built_wheel_in_the_repository_it_has(
    built,
    index,
    tmp_path,
):
    venv = tmp_path / "venv"
    python = _bare_venv(venv)
    env = _clean_env(
        tmp_path / "home",
        **IDENTITY,
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        UV_DEFAULT_INDEX=index.url,
        PIP_INDEX_URL=index.url,
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit"),
    )
    _ok(_pip(python, index, f"patchlane[engine] @ {built.wheel.as_uri()}", env))
    shop = tmp_path / "shop"
    before = _shop(shop, env)

    def run(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return _run(*args, env=env, cwd=shop, timeout=timeout)

    # init from the wheel: the shop's files are appended to, never rewritten
    init = _ok(run("patchlane", "init", "--no-lock", "--from", built.wheel, "--json"))
    document = json.loads(init.stdout)
    assert document["from"] == f"patchlane[engine] @ {built.wheel.as_uri()}"
    assert document["edited"] == [
        ".gitignore",
        ".pre-commit-config.yaml",
        "README.md",
        "noxfile.py",
    ]
    # two notes: the lock the .gitignore would keep out of commits, the wheel on this machine only
    ignored = (
        "locks/cpu/pylock.toml is ignored by git (.gitignore:2: *pylock.toml) and would never be "
        "committed: .gitignore gets `!/locks/*/pylock.toml`"
    )
    assert [n.split(",")[0] for n in document["notes"]] == [
        ignored,
        f"patchlane comes from {built.wheel}",
    ]
    for name, body in before.items():
        # every line kept; the noxfile's import goes where its imports are
        assert kept(body.decode(), (shop / name).read_text()), name
    assert (shop / "noxfile.py").read_text().index("from retire.sessions import") < (
        shop / "noxfile.py"
    ).read_text().index('if __name__ == "__main__"')
    assert (shop / "README.md").read_text().count("## Patch lane") == 1

    lane = shop / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text().replace('requirements = ["einops"]', 'requirements = ["toybug"]')
    )
    shim = run("patchlane", "shim", "new", "my_fix", "--owner", "kernels@example.org")
    assert shim.returncode == 0 and 'shims = ["my_fix"]' in lane.read_text(), shim.stderr
    # the shop's noxfile now has patchlane's sessions beside its own
    _ok(run("nox", "-s", "lock"))
    _ok(run("nox", "-s", "tests"))

    # The scaffolded reproducer skips: the lane passes but proves nothing, and --strict fails.
    unproven = run("nox", "-s", "lane", "--", "--strict")
    assert unproven.returncode != 0
    out = unproven.stdout + unproven.stderr
    assert "unproven: my_fix — cpu: skipped — my_fix: the reproducer is not written yet" in out
    assert "FAILED (--strict): 1 shim(s) that no lane proves: my_fix" in out
    strict = run("patchlane", "run", "--strict", "--json")
    assert strict.returncode == 1 and json.loads(strict.stdout)["unproven"][0]["shim"] == "my_fix"

    # A real reproducer and patch: the lane proves the shim, and --strict passes.
    (shop / "shims" / "my_fix" / "patch.py").write_text(PATCH)
    (shop / "shims" / "my_fix" / "reproduce.py").write_text(REPRODUCER)
    proven = run("nox", "-s", "lane", "--", "--strict")
    out = proven.stdout + proven.stderr
    assert proven.returncode == 0, out
    assert "my_fix  needed" in out and "unproven" not in out

    # The hooks under pre-commit: a clone of patchlane at its tag (try-repo), then the config
    # init appended to (the shop's own hook and patchlane's local hooks, from the wheel).
    _ok(run("git", "add", "-A"))
    _ok(run("git", "commit", "-q", "-m", "patchlane"))
    tag = f"v{VERSION}"
    _clone_of_the_checkout(tmp_path / "patchlane", tag)
    hooks = run(
        sys.executable,
        "-m",
        "pre_commit",
        "try-repo",
        tmp_path / "patchlane",
        "--ref",
        tag,
        "--all-files",
    )
    assert hooks.returncode == 0, hooks.stdout + hooks.stderr
    assert hooks.stdout.count("Passed") == 2, hooks.stdout
    configured = run(sys.executable, "-m", "pre_commit", "run", "--all-files")
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert "no tab characters" in configured.stdout and configured.stdout.count("Passed") == 3

    # verdicts and the report, from the recorded proof
    verdicts = _ok(run("patchlane", "verdicts", "--json"))
    assert json.loads(verdicts.stdout)[0]["shim"] == "my_fix"
    _ok(run("patchlane", "report"))
    report = json.loads(next((shop / "reports").glob("*.json")).read_text())
    assert report["shims"][0]["unproven"] is None

    # a fresh clone has the lock the shop's .gitignore would have kept out, and its check passes
    clone = tmp_path / "clone"
    _ok(run("git", "clone", "-q", shop, clone))
    assert (clone / "locks" / "cpu" / "pylock.toml").is_file()
    _ok(_run("patchlane", "lock", "--check", env=env, cwd=clone))
    # the noxfile still runs as a script, with patchlane's sessions and the shop's
    listed = _ok(run(sys.executable, "noxfile.py", "-l"))
    assert "tests" in listed.stdout and "lane(name='cpu')" in listed.stdout, listed.stdout

    # Re-point to a copy of the wheel inside the repository: hooks, workflows and README name it
    # relative to the repository, and nothing of this machine's path is left
    (shop / "vendor").mkdir()
    (shop / "vendor" / built.wheel.name).write_bytes(built.wheel.read_bytes())
    untouched = {
        name: (shop / name).read_bytes() for name in ("noxfile.py", "lanes/cpu.toml", ".gitignore")
    }
    _ok(run("patchlane", "init", "--repoint", "--from", f"vendor/{built.wheel.name}"))
    for name in (".pre-commit-config.yaml", "README.md", ".github/workflows/patchlane-lanes.yml"):
        assert str(built.wheel.parent) not in (shop / name).read_text(), name
    assert {name: (shop / name).read_bytes() for name in untouched} == untouched
    # pre-commit runs only a staged config
    _ok(run("git", "add", "-A"))
    repointed = run(sys.executable, "-m", "pre_commit", "run", "--all-files")
    assert repointed.returncode == 0, repointed.stdout + repointed.stderr

    # nothing the shop had was overwritten, after all of it
    for name, body in before.items():
        assert kept(body.decode(), (shop / name).read_text()), name
