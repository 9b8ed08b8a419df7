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
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from retire.scaffold import kept
from tests.support.index import IndexServer, PackageIndex
from tests.support.installed import closure, repack
from tests.support.shimtree import REPO_ROOT
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
    # what init's CPU lane asks for; and a package whose next release fixes its bug (the bump's)
    served.add(build_wheel(wheels, "einops", "0.8.1"), "2026-01-01")
    served.add(build_wheel(wheels, "toyfix", "1.0", files={"toyfix.py": TOYBUG}), "2026-01-02")
    fixed = TOYBUG.replace("a - b", "a + b")
    served.add(build_wheel(wheels, "toyfix", "1.1", files={"toyfix.py": fixed}), "2026-02-02")
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


def _person_env(tmp_path: Path, index, python: Path, **extra: str) -> dict[str, str]:
    """A person's environment on a host that reaches only the loopback index: no user
    configuration, caches and home under ``tmp_path / "home"``, the venv of ``python`` first on
    PATH, uv and pip pointed at ``index``."""
    return _clean_env(
        tmp_path / "home",
        **IDENTITY,
        PATH=f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        UV_DEFAULT_INDEX=index.url,
        PIP_INDEX_URL=index.url,
        **extra,
    )


def test_a_shop_adopts_patchlane_from_the_built_wheel_in_the_repository_it_has(
    built,
    index,
    tmp_path,
):
    python = _bare_venv(tmp_path / "venv")
    env = _person_env(tmp_path, index, python, PRE_COMMIT_HOME=str(tmp_path / "pre-commit"))
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


# ---------------------------------------------------------------------------------------------
# issue 36: the README's adoption section as it is, and a realistic repository end to end


def _venv_with_its_pip(path: Path) -> Path:
    """`python -m venv`: the pip this Python bundles (3.11.7's is 23.2.1), as a person has it."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True)
    return path / "bin" / "python"


def _readme_lines() -> list[str]:
    """The shell lines of the README's adoption section, as written."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Adopting patchlane in another repository") :]
    start = section.index("```sh\n") + len("```sh\n")
    return [line for line in section[start : section.index("\n```", start)].splitlines() if line]


def _shell(lines: list[str], env: dict[str, str], cwd: Path) -> tuple[list[int], str]:
    """``lines`` run one after the other in one bash, as pasted into a terminal: each line's exit
    status, and everything printed."""
    script = "".join(f'{line}\necho "@@status {n} $?"\n' for n, line in enumerate(lines))
    done = _run("bash", "--noprofile", "--norc", "-c", script, env=env, cwd=cwd, timeout=900)
    out = done.stdout + done.stderr
    statuses = [int(line.split()[2]) for line in done.stdout.splitlines() if line.startswith("@@")]
    return statuses, out


def test_the_readmes_adoption_section_runs_as_written_in_a_fresh_repository(
    built,
    index,
    tmp_path,
):
    home = tmp_path / "home"
    # where the section says the patchlane checkout is, with what `uv build` made there
    dist = home / "src" / "patchlane" / "dist"
    dist.mkdir(parents=True)
    shutil.copy2(built.wheel, dist / built.wheel.name)
    python = _venv_with_its_pip(tmp_path / "venv")
    env = _person_env(tmp_path, index, python)
    pip = _ok(_run(python, "-m", "pip", "--version", env=env)).stdout
    if sys.version_info[:2] == (3, 11):
        # the pip that rejected the README's former git+file form
        assert pip.split()[1].startswith("23."), pip
    shop = tmp_path / "shop"
    shop.mkdir()
    _ok(_run("git", "init", "-q", env=env, cwd=shop))

    lines = _readme_lines()
    assert "$PWD" not in "\n".join(lines) and lines[0].startswith("PATCHLANE=$HOME/src/patchlane")
    statuses, out = _shell(lines, env, shop)
    assert len(statuses) == len(lines), out
    # every line works; the last fails as its comment says, until my_fix proves something
    assert statuses[:-1] == [0] * (len(lines) - 1), out
    assert statuses[-1] != 0 and "unproven: my_fix" in out, out
    assert "dry run: no branch, no pull request, nothing written" in out
    assert _ok(_run("git", "branch", "--list", "patchlane/*", env=env, cwd=shop)).stdout == ""
    assert _ok(_run("git", "log", "--format=%s", env=env, cwd=shop)).stdout == "Adopt patchlane\n"


SHOP_GITIGNORE_TOML = b"__pycache__/\n*.toml\n!pyproject.toml\n*.json\n*.html\n.venv/\n"
SHOP_MAKEFILE = (
    b".PHONY: train lint\ntrain:\n\tpython train.py\nlint:\n\tpre-commit run --all-files\n"
)
SHOP_PYPROJECT = b"""[project]
name = "forecasting"
version = "0.1.0"

[tool.black]
line-length = 100

[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F", "I", "W"]
"""
SHOP_TRAIN = b'''"""The shop's trainer."""

import sys


def main() -> int:
    print("training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
# the toy bug of toyfix 1.0, which its 1.1 fixes: the patch, the reproducer (black- and ruff-clean)
TOYFIX_PATCH = PATCH.replace("toybug", "toyfix")
TOYFIX_REPRODUCER = REPRODUCER.replace("toybug", "toyfix")


def _black_and_ruff_config() -> bytes:
    """The shop's pre-commit config: black and ruff (format and check) on its Python files, as
    local hooks of this interpreter's black and ruff (the test extra)."""
    hooks = [
        ("black", f"{sys.executable} -m black"),
        ("ruff-format", f"{sys.executable} -m ruff format"),
        ("ruff-check", f"{sys.executable} -m ruff check"),
    ]
    lines = ["# the shop's hooks", "repos:", "- repo: local", "  hooks:"]
    for name, entry in hooks:
        lines += [
            f"  - id: {name}",
            f"    name: {name}",
            f"    entry: {entry}",
            "    language: system",
            "    types: [python]",
        ]
    return ("\n".join(lines) + "\n").encode()


def test_a_realistic_repository_adopts_patchlane_end_to_end(built, index, tmp_path):
    """A shop's repository with pre-commit (black, ruff), a Makefile, a `.gitignore` of `*.toml`
    and `*.json` rules, and no noxfile: install as the README says, `init`, the shop's own hooks
    pass on what init wrote, commit, lock, run, `bump --dry-run`, `bump --no-pr`, `report`."""
    pytest.importorskip("black")
    pytest.importorskip("ruff")
    python = _venv_with_its_pip(tmp_path / "venv")
    env = _person_env(tmp_path, index, python, PRE_COMMIT_HOME=str(tmp_path / "pre-commit"))
    shop = tmp_path / "shop"
    shop.mkdir()
    files = {
        ".pre-commit-config.yaml": _black_and_ruff_config(),
        "Makefile": SHOP_MAKEFILE,
        ".gitignore": SHOP_GITIGNORE_TOML,
        "pyproject.toml": SHOP_PYPROJECT,
        "train.py": SHOP_TRAIN,
        "README.md": SHOP_README,
    }
    for name, body in files.items():
        (shop / name).write_bytes(body)

    def run(*args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return _run(*args, env=env, cwd=shop, timeout=timeout)

    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the shop"]):
        _ok(run("git", *args))
    _ok(run(sys.executable, "-m", "pre_commit", "install"))

    # install as the README says: the wheel, with this Python's own pip
    wheel = built.wheel.as_uri()
    _ok(run(python, "-m", "pip", "install", "-q", f"patchlane[engine] @ {wheel}"))
    # init from a clone on this machine (a git+file:/// URL): said, with how to re-point, and
    # with this pip (23.2 on Python 3.11) too old for that URL's spelling
    tag = f"v{VERSION}"
    _clone_of_the_checkout(tmp_path / "patchlane", tag)
    source = f"git+file://{tmp_path / 'patchlane'}@{tag}"
    init = _ok(run("patchlane", "init", "--from", source, "--json"))
    document = json.loads(init.stdout)
    notes = " ".join(document["notes"])
    assert f"patchlane comes from {tmp_path / 'patchlane'}, which only this machine has" in notes
    assert "`patchlane init --repoint --from NEW`" in notes
    if sys.version_info[:2] == (3, 11):
        assert "this Python's pip 23." in notes and "git+file://localhost/" in notes
    # the shop's *.toml and *.json would keep the lane, the settings and the reports out
    gitignore = (shop / ".gitignore").read_text()
    for negation in ("!/patchlane.toml", "!/lanes/*.toml", "!/shims/*/manifest.toml"):
        assert negation in gitignore, gitignore
    assert "!/reports/*.json" in gitignore and "!/reports/*.html" in gitignore
    assert document["locked"] == ["cpu"] and "noxfile.py" in document["created"]

    # a shim on a package whose next release fixes the bug, proved on this lane
    lane = shop / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text()
        .replace('requirements = ["einops"]', 'requirements = ["toyfix"]')
        .replace('exclude-newer = "7 days"', "exclude-newer = 2026-01-10")
    )
    _ok(run("patchlane", "shim", "new", "my_fix", "--owner", "kernels@example.org"))
    (shop / "shims" / "my_fix" / "patch.py").write_text(TOYFIX_PATCH)
    (shop / "shims" / "my_fix" / "reproduce.py").write_text(TOYFIX_REPRODUCER)
    _ok(run("nox", "-s", "lock"))

    # the shop's own hooks (black, ruff) and patchlane's pass on everything init wrote: the
    # hooked commit goes through as it is
    _ok(run("git", "add", "-A"))
    hooked = run(sys.executable, "-m", "pre_commit", "run", "--all-files")
    assert hooked.returncode == 0, hooked.stdout + hooked.stderr
    for hook in ("black", "ruff-format", "ruff-check"):
        assert re.search(rf"^{hook}\.+Passed$", hooked.stdout, re.MULTILINE), hooked.stdout
    committed = run("git", "commit", "-q", "-m", "Adopt patchlane")
    assert committed.returncode == 0, committed.stdout + committed.stderr
    assert run("git", "status", "--porcelain").stdout == ""

    # run: the lane proves the shim
    proven = run("nox", "-s", "lane", "--", "--strict")
    assert proven.returncode == 0, proven.stdout + proven.stderr
    assert "my_fix  needed" in proven.stdout + proven.stderr
    _ok(run("git", "add", "-A"))
    _ok(run("git", "commit", "-q", "-m", "my_fix proven"))

    # the weekly bump: first what it would do, nothing written; then the branch
    dry = _ok(run("patchlane", "bump", "--dry-run"))
    assert "would bump cpu: 1 package(s) would change" in dry.stdout, dry.stdout
    assert "toyfix 1.0 → 1.1 (minor)" in dry.stdout and "would run  cpu: my_fix" in dry.stdout
    assert run("git", "branch", "--list", "patchlane/*").stdout == ""
    bumped = _ok(run("patchlane", "bump", "--no-pr", "--json"))
    result = json.loads(bumped.stdout)
    assert result["status"] == "proposed", result
    [cpu] = result["lanes"]
    assert cpu["outcomes"] == [{"shim": "my_fix", "now": "upstream-fixed", "before": "needed"}]
    assert run("git", "branch", "--list", "patchlane/*").stdout.strip()

    # the report, which git commits whatever the shop's *.json and *.html say
    reported = _ok(run("patchlane", "report", "--no-probe"))
    assert "wrote reports/" in reported.stdout, reported.stdout
    _ok(run("git", "add", "-A"))
    staged = run("git", "diff", "--cached", "--name-only").stdout.split()
    assert {path.rsplit(".", 1)[-1] for path in staged if path.startswith("reports/")} >= {
        "md",
        "html",
        "json",
    }, staged
