"""The named build's runner (retire/runs/wheelbuild.py) on its own, with real processes and a real
git mirror: the checkout, the environment it is given, its one wheel, and how it fails — a
timeout, no wheel, an argument never read by a shell, no secret-named variable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from retire.runs.wheelbuild import WheelBuildError, build_wheel, checkout
from shims.wheelbuild import WheelBuild
from tests.support.gitrepos import git

WRITE_WHEEL = """
import os, sys
print("args", sys.argv[1:])
print("commit", os.environ["PATCHLANE_BUILD_COMMIT"], "cwd", os.getcwd())
print("token", os.environ.get("ACME_API_TOKEN", "absent"))
for name in sys.argv[1:]:
    open(os.path.join(os.environ["PATCHLANE_WHEEL_DIR"], name), "w").close()
"""


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, str]:
    upstream = tmp_path / "upstream"
    (upstream / "python" / "toylib").mkdir(parents=True)
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "python" / "pyproject.toml").write_text("[project]\nname = 'toylib'\n")
    (upstream / "python" / "toylib" / "_ext.cu").write_text("// a kernel\n")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "one")
    commit = git(upstream, "rev-parse", "HEAD")
    git(tmp_path, "clone", "-q", "--mirror", str(upstream), str(tmp_path / "mirror.git"))
    return tmp_path / "mirror.git", commit


def _build(tmp_path: Path, script: str, *args: str, timeout: float = 60) -> WheelBuild:
    here = tmp_path / "shim"
    here.mkdir(exist_ok=True)
    (here / "build.py").write_text(script)
    return WheelBuild((sys.executable, "{here}/build.py", *args), timeout, here, "test")


@pytest.mark.slow
def test_the_build_runs_in_the_checkout_and_gives_its_one_wheel(
    tmp_path: Path, mirror, monkeypatch: pytest.MonkeyPatch
):
    path, commit = mirror
    monkeypatch.setenv("ACME_API_TOKEN", "s3cr3t-value-never-passed")
    source = checkout(path, commit, tmp_path / "candidate" / "checkout", "python").package
    assert (source / "toylib" / "_ext.cu").is_file()
    build = _build(tmp_path, WRITE_WHEEL, "toylib-1.0-py3-none-any.whl", "$(touch pwned)")
    log = tmp_path / "build.log"
    built = build_wheel(
        build,
        source,
        tmp_path / "candidate" / "wheel",
        log,
        python=Path(sys.executable),
        commit=commit,
        distribution="toylib",
    )
    assert built.wheel.name == "toylib-1.0-py3-none-any.whl"
    text = log.read_text()
    assert f"commit {commit}" in text and f"cwd {source}" in text
    # an argument list, never a shell line; no secret-named variable reaches it
    assert "'$(touch pwned)'" in text and not (source / "pwned").exists()
    assert "token absent" in text


@pytest.mark.slow
def test_a_build_that_writes_no_wheel_of_the_target_or_times_out_fails_with_its_log(
    tmp_path: Path, mirror, monkeypatch: pytest.MonkeyPatch
):
    path, commit = mirror
    monkeypatch.setenv("ACME_API_TOKEN", "s3cr3t-value-in-a-log")
    source = checkout(path, commit, tmp_path / "c" / "checkout").package

    def run(build: WheelBuild, name: str) -> str:
        with pytest.raises(WheelBuildError) as caught:
            build_wheel(
                build,
                source,
                tmp_path / name,
                tmp_path / f"{name}.log",
                python=Path(sys.executable),
                commit=commit,
                distribution="toylib",
            )
        return str(caught.value)

    other = run(_build(tmp_path, WRITE_WHEEL, "other-1.0-py3-none-any.whl"), "other")
    assert "wrote no wheel of toylib into $PATCHLANE_WHEEL_DIR" in other
    assert "args ['other-1.0-py3-none-any.whl']" in other
    # a secret the build printed (it had it from a file, say) is scrubbed from the tail
    leaky = run(_build(tmp_path, "print('s3cr3t-value-in-a-log')\nraise SystemExit(3)\n"), "leak")
    assert "failed (exit 3)" in leaky and "<redacted>" in leaky and "s3cr3t" not in leaky
    slow = _build(tmp_path, "import time\nprint('compiling', flush=True)\ntime.sleep(60)\n")
    message = run(WheelBuild(slow.command, 1.0, slow.here), "slow")
    assert "timed out after 1 s" in message and "compiling" in message
    assert "\n" not in message


def test_a_checkout_of_a_commit_the_mirror_lacks_is_a_build_failure(tmp_path: Path, mirror):
    path, _ = mirror
    with pytest.raises(WheelBuildError, match="cannot check out 000000000000"):
        checkout(path, "0" * 40, tmp_path / "x")
    assert os.path.isdir(path)
