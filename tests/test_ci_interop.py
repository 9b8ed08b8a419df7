"""CI the way people expect: the composite Action, the pre-commit hooks and the workflows, parsed as
YAML and run — the Action's steps as the runner would run them, the hooks' entries in a shop."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from retire.core.git import Git
from retire.evidence import validation
from tests.conftest import ROOT, run_cli

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _load(path: Path) -> object:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _scaffolded_workflows(tmp_path: Path) -> dict[str, object]:
    from retire.scaffold.project import plan_init
    from retire.scaffold.source import parse_source

    plan = plan_init(
        tmp_path, parse_source("git+https://github.com/acme/patchlane@v0.1.0", tmp_path)
    )
    return {
        name: yaml.safe_load(text)
        for name, text in plan.create.items()
        if name.endswith((".yml", ".yaml"))
    }


def _workflows(tmp_path: Path) -> dict[str, object]:
    found = {
        str(p.relative_to(ROOT)): _load(p)
        for p in sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    }
    found["action.yml"] = _load(ROOT / "action.yml")
    found.update({f"init:{name}": doc for name, doc in _scaffolded_workflows(tmp_path).items()})
    return found


def _steps(document: dict) -> list[dict]:
    # an action
    if "runs" in document:
        return document["runs"]["steps"]
    return [step for job in document.get("jobs", {}).values() for step in job.get("steps", [])]


def test_no_expression_inside_any_run_script(tmp_path):
    """Every input reaches a script through env: — `${{ }}` inside run: is shell injection."""
    checked = 0
    for name, document in _workflows(tmp_path).items():
        if not isinstance(document, dict) or name.endswith("pre-commit-config.yaml"):
            continue
        for step in _steps(document):
            if "run" in step:
                checked += 1
                assert "${{" not in step["run"], (
                    f"{name}: step {step.get('name', step['run'][:40])!r} has ${{{{ }}}} in run:"
                )
    assert checked >= 10


def test_the_repositorys_workflows_use_the_action_and_the_hooks(tmp_path):
    workflows = {p.name: p.read_text() for p in (ROOT / ".github" / "workflows").glob("*.yml")}
    assert "uses: ./" in workflows["lanes.yml"] and "uses: ./" in workflows["weekly-report.yml"]
    # every hook of .pre-commit-hooks.yaml
    assert "pre-commit try-repo . --all-files" in workflows["lanes.yml"]
    bump = _load(ROOT / ".github" / "workflows" / "bump.yml")
    steps = bump["jobs"]["bump"]["steps"]
    app = next(step for step in steps if step.get("id") == "app-token")
    assert app["uses"].startswith("actions/create-github-app-token@")
    assert (
        "steps.app-token.outputs.token"
        in next(s for s in steps if s.get("name") == "bump")["env"]["GITHUB_TOKEN"]
    )
    scaffolded = _scaffolded_workflows(tmp_path)
    uses = [
        step.get("uses", "")
        for doc in scaffolded.values()
        if isinstance(doc, dict)
        for step in _steps(doc)
    ]
    # --from a github.com repository: the Action is that repository's at the same ref
    assert sum(u == "acme/patchlane@v0.1.0" for u in uses) == 2
    config = scaffolded[".pre-commit-config.yaml"]
    assert [hook["id"] for hook in config["repos"][0]["hooks"]] == [
        "patchlane-lock-check",
        "patchlane-manifest-check",
    ]


def test_the_action_is_composite_and_every_input_is_documented_and_used():
    action = _load(ROOT / "action.yml")
    assert action["runs"]["using"] == "composite"
    assert {"lane-tag", "report"} <= set(action["inputs"])
    used = {
        m.group(1)
        for step in action["runs"]["steps"]
        for value in step.get("env", {}).values()
        for m in EXPRESSION.finditer(str(value))
    }
    for name, spec in action["inputs"].items():
        assert spec["description"] and "default" in spec
        assert f"inputs.{name}" in used, f"input {name} is never passed to a step"
    assert all(step["shell"] == "bash" for step in action["runs"]["steps"])


def test_the_lock_hook_installs_exactly_the_engine_extra():
    hooks = {hook["id"]: hook for hook in _load(ROOT / ".pre-commit-hooks.yaml")}
    engine = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["engine"]
    assert hooks["patchlane-lock-check"]["additional_dependencies"] == engine
    # the runtime alone
    assert "additional_dependencies" not in hooks["patchlane-manifest-check"]
    files = {hook_id: re.compile(hook["files"]) for hook_id, hook in hooks.items()}
    assert files["patchlane-lock-check"].search("lanes/cpu.toml") and files[
        "patchlane-lock-check"
    ].search("patchlane.toml")
    assert files["patchlane-manifest-check"].search("shims/my_fix/manifest.toml")
    assert not files["patchlane-manifest-check"].search("README.md")


# ---------------------------------------------------------------------------------------------
# A scaffolded shop, locked against a loopback index, for the Action and the hooks to run in.


@pytest.fixture
def shop(tmp_path, einops_index, monkeypatch, capsys):
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    root = tmp_path / "shop"
    assert run_cli(tmp_path, "init", str(root), capsys=capsys)[0] == 0
    assert (
        run_cli(root, "shim", "new", "my_fix", "--owner", "kernels@example.org", capsys=capsys)[0]
        == 0
    )
    code, _out, err = run_cli(root, "lock", capsys=capsys)
    assert code == 0, err
    return root


def _runner_env(tmp_path: Path, venv: Path) -> dict[str, str]:
    """A runner's environment: the venv's python first on PATH, pip offline, no PYTHONPATH to this
    checkout."""
    pip_conf = tmp_path / "pip.conf"
    # no-build-isolation = false is pip's spelling of --no-build-isolation (hatchling: test extra).
    pip_conf.write_text("[global]\nno-index = true\n[install]\nno-build-isolation = false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHLANE_", "PYTHON"))}
    hatchling = importlib.util.find_spec("hatchling")
    if hatchling is not None and hatchling.origin:
        env["PYTHONPATH"] = str(Path(hatchling.origin).parents[1])
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        PIP_CONFIG_FILE=str(pip_conf),
        GITHUB_ACTIONS="true",
        CI="true",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    return env


def _render(value: object, inputs: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression.startswith("inputs."):
            return inputs[expression.removeprefix("inputs.")]
        if expression == "github.action_path":
            return str(ROOT)
        raise AssertionError(f"the Action uses an expression this test does not know: {expression}")

    return EXPRESSION.sub(one, str(value))


def run_action(
    with_: dict[str, str], env: dict[str, str], cwd: Path
) -> list[subprocess.CompletedProcess[str]]:
    """Each step of action.yml as the runner runs a `shell: bash` step: its env: rendered, its
    script as a file."""
    action = _load(ROOT / "action.yml")
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()} | with_
    results = []
    for step in action["runs"]["steps"]:
        step_env = env | {
            name: _render(value, inputs) for name, value in step.get("env", {}).items()
        }
        script = cwd.parent / "step.sh"
        script.write_text(step["run"])
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        results.append(result)
        if result.returncode != 0:
            break
    return results


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("hatchling") is None,
    reason="hatchling (test extra) builds the Action's install offline",
)
def test_the_actions_steps_run_as_a_script_on_a_scaffolded_shop(shop, tmp_path):
    venv = tmp_path / "runner"
    # The runner's Python: the engine's dependencies are there (as setup-python + a cache would
    # have them), patchlane is not, until the Action's first step installs it from the Action's
    # source.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    env = _runner_env(tmp_path, venv)
    results = run_action({"lane-tag": "cpu", "report": "true", "no-probe": "true"}, env, cwd=shop)
    assert [r.returncode for r in results] == [0, 0, 0, 0], results[-1].stdout + results[-1].stderr
    install, check, _lanes, _report = results
    assert install.stdout.startswith("patchlane ")
    site = next((venv / "lib").glob("python*/site-packages"))
    # the Action installed its own source
    assert (site / "retire" / "__init__.py").is_file()
    assert "1 of 1 locks match" in check.stdout + check.stderr
    records = validation.load(shop / "validation" / "manifest.jsonl")
    assert {(r.shim, r.mode, r.outcome) for r in records} == {
        ("my_fix", "without", "skipped"),
        ("my_fix", "with", "skipped"),
    }
    assert list((shop / "reports").glob("*-W*.md")) and list((shop / "reports").glob("*-W*.html"))

    # The installed engine (not this checkout) carries its templates: init works from the wheel.
    fresh = subprocess.run(
        [str(venv / "bin" / "patchlane"), "init", "--no-lock", str(tmp_path / "fresh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fresh.returncode == 0 and (tmp_path / "fresh" / "shims" / "README.md").is_file(), (
        fresh.stderr
    )

    # A bad input stops the step with an annotation that does not echo the value.
    bad = run_action({"lane-tag": "cpu; touch pwned", "report": "false"}, env, cwd=shop)
    assert bad[-1].returncode == 2 and "::error::lane-tag must be" in bad[-1].stdout
    assert "pwned" not in bad[-1].stdout and not (shop / "pwned").exists()


@pytest.mark.slow
def test_the_hooks_entries_pass_on_a_scaffolded_shop_and_fail_in_one_line(shop):
    """What `pre-commit try-repo` would run: each hook's entry, in the shop, with the engine
    installed."""
    hooks = {hook["id"]: hook for hook in _load(ROOT / ".pre-commit-hooks.yaml")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(ROOT)

    def hook(hook_id: str) -> subprocess.CompletedProcess[str]:
        command = shlex.split(hooks[hook_id]["entry"])
        command = (
            [sys.executable, "-m", "retire", *command[1:]]
            if command[0] == "patchlane"
            else [sys.executable, *command[1:]]
        )
        return subprocess.run(
            command, cwd=shop, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    assert hook("patchlane-lock-check").returncode == 0
    assert hook("patchlane-manifest-check").returncode == 0
    lane = shop / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text().replace('requirements = ["einops"]', 'requirements = ["einops>=0.8"]')
    )
    stale = hook("patchlane-lock-check")
    assert stale.returncode == 1 and "cpu" in stale.stdout + stale.stderr
    manifest = shop / "shims" / "my_fix" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('status = "pending"', 'status = "filed"'))
    broken = hook("patchlane-manifest-check")
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1
    assert broken.stderr.startswith("shims: error: ") and "upstream.status" in broken.stderr
    assert json.loads(json.dumps(hooks["patchlane-manifest-check"]))["pass_filenames"] is False


def _index_reachable(tmp_path: Path) -> bool:
    """Whether pip can install from its configured index here (CI can; an air-gapped host
    cannot)."""
    probe = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--dest",
            str(tmp_path / "probe"),
            "packaging==26.3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pre_commit") is None, reason="pre-commit (test extra) runs the hooks"
)
def test_the_hooks_pass_and_fail_under_pre_commit_try_repo(shop, tmp_path):
    """The real thing: pre-commit installs this repository as a hook repository (the runtime, the
    engine's pinned dependencies from the hook's additional_dependencies) and runs both hooks."""
    if not _index_reachable(tmp_path):
        pytest.skip(
            "pip reaches no package index here: pre-commit installs the hooks' environments from "
            "one"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHLANE_", "PYTHONPATH"))}
    # try-repo commits the hook repository's uncommitted changes into a shadow copy: it needs an
    # identity.
    identity = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    env.update(identity, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    git = Git(shop, env=identity)
    git.run("init", "-q")
    git.run("add", "-A")

    def try_repo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "--all-files"],
            cwd=shop,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    passed = try_repo()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "patchlane locks match their lanes" in passed.stdout and "Passed" in passed.stdout
    manifest = shop / "shims" / "my_fix" / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('status = "pending"', 'status = "filed"'))
    git.run("add", "-A")
    failed = try_repo()
    assert failed.returncode == 1 and "upstream.status" in failed.stdout, failed.stdout
