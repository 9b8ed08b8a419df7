"""Workflows a security review passes — the repository's (.github/, action.yml) and the ones
`patchlane init` writes: zizmor (offline) and actionlint find nothing; every job has a timeout and
its own least permissions; no checkout keeps a credential; every action is pinned by commit to a
release on the node24 runtime; writes go through App tokens scoped to what they write. The scripts
the workflows run are run here: the plan job's matrix (one entry per lane), the Action's `lanes`
input, the App token's credential helper, the release's version check.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_cli

WORKFLOWS = ROOT / ".github" / "workflows"
TEMPLATES = ROOT / "retire" / "scaffold" / "templates" / "project"
SCRIPTS = Path(sysconfig.get_path("scripts"))
# A commit of patchlane's own repository, as `init --action OWNER/REPO@COMMIT` pins the Action.
PINNED_ACTION = "patchlane/patchlane@3d3c42e5aac5ba805825da76410c181273ba90b1"

#: The first major of each action that runs on node24 (node20 is past its removal date); a pin
#: below it fails, and an action not listed here fails until someone checks its runtime.
NODE24_SINCE = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/cache": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/github-script": 8,
    "actions/create-github-app-token": 3,
    # a container action: no node runtime
    "pypa/gh-action-pypi-publish": 1,
}
USES = re.compile(
    r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)(?:\s+#\s*(?P<comment>\S+))?", re.MULTILINE
)
PINNED = re.compile(r"(?P<action>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40})")
RELEASE = re.compile(r"v(?P<major>\d+)\.\d+\.\d+")


def _scaffold(tmp_path: Path, capsys, action: str = PINNED_ACTION, *options: str) -> Path:
    shop = tmp_path / "shop"
    chosen = list(options) or ["--action", action]
    code, _, err = run_cli(tmp_path, "init", "--no-lock", *chosen, str(shop), capsys=capsys)
    assert code == 0, err
    return shop


def _texts(shop: Path | None = None) -> dict[str, str]:
    """The workflow files by name: the repository's, action.yml, and a scaffolded shop's."""
    found = {f".github/workflows/{p.name}": p.read_text() for p in sorted(WORKFLOWS.glob("*.yml"))}
    found["action.yml"] = (ROOT / "action.yml").read_text()
    if shop is not None:
        found.update(
            {
                f"init:{p.name}": p.read_text()
                for p in (shop / ".github" / "workflows").glob("*.yml")
            }
        )
    return found


def _jobs(text: str) -> dict[str, dict]:
    return yaml.safe_load(text).get("jobs", {})


def _steps(text: str) -> list[dict]:
    document = yaml.safe_load(text)
    if "runs" in document:
        return document["runs"]["steps"]
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def _step(text: str, name: str) -> dict:
    return next(s for s in _steps(text) if name in (s.get("name"), s.get("id")))


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A `run:` script as the runner runs it (bash -e -o pipefail, the script from a file)."""
    path = cwd / ".step.sh"
    path.write_text(script)
    try:
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        path.unlink()


def _zizmor() -> str:
    found = shutil.which("zizmor", path=f"{SCRIPTS}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip("zizmor (test extra) is not installed")
    return found


def _zizmor_findings(*args: str | Path, cwd: Path) -> list[dict]:
    proc = subprocess.run(
        [_zizmor(), "--offline", "--format", "json", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # zizmor exits non-zero when it reports findings; the JSON says which
    assert proc.stdout.strip().startswith("["), proc.stderr
    return json.loads(proc.stdout)


def _summary(findings: list[dict]) -> list[str]:
    return [
        f"{f['ident']} ({f['determinations']['severity']}) "
        f"{f['locations'][0]['symbolic']['key']['Local'].get('verbatim_path')}:"
        f"{f['locations'][0]['concrete']['location']['start_point']['row'] + 1}"
        for f in findings
    ]


# ---------------------------------------------------------------------------------------------
# zizmor and actionlint


def test_zizmor_finds_nothing_in_the_repositorys_workflows():
    """The regular persona's every audit; zizmor.yml says why an ignored finding does not apply."""
    findings = _zizmor_findings(
        ".github/workflows",
        "action.yml",
        ".github/dependabot.yml",
        ".pre-commit-hooks.yaml",
        cwd=ROOT,
    )
    assert findings == [], _summary(findings)


#: init's ways to name patchlane in the workflows: its Action pinned by commit; the same Action
#: installing the engine from a tag (--from); no Action (an index, or a git host that is not
#: github.com): the workflows run patchlane's commands themselves.
SOURCES = {
    "action": ("--action", PINNED_ACTION),
    "action+from": (
        "--action",
        PINNED_ACTION,
        "--from",
        "git+https://github.com/patchlane/patchlane@v0.1.0",
    ),
    "index": ("--from", "patchlane[engine]==0.1.0"),
    "other-git-host": ("--from", "git+https://git.example.org/tools/patchlane@v0.1.0"),
}


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_zizmor_finds_nothing_in_the_workflows_init_writes(tmp_path, capsys, source):
    shop = _scaffold(tmp_path, capsys, PINNED_ACTION, *SOURCES[source])
    findings = _zizmor_findings("--no-config", "--collect=all", shop, cwd=tmp_path)
    assert findings == [], _summary(findings)


def test_with_a_tag_for_the_action_only_its_own_reference_is_unpinned(tmp_path, capsys):
    """`init`'s default names the Action by tag (patchlane/patchlane@vX.Y.Z): zizmor's one finding
    is that reference, once per workflow — every other action is pinned by commit."""
    shop = _scaffold(tmp_path, capsys, action="patchlane/patchlane@v0.1.0")
    findings = _zizmor_findings("--no-config", shop, cwd=tmp_path)
    assert {f["ident"] for f in findings} == {"unpinned-uses"}
    assert len(findings) == 2, _summary(findings)


def _actionlint() -> str:
    found = os.environ.get("ACTIONLINT") or shutil.which("actionlint")
    if not found:
        pytest.skip("no actionlint on PATH or at $ACTIONLINT")
    return found


def test_actionlint_finds_nothing_in_the_repositorys_workflows():
    proc = subprocess.run(
        [_actionlint(), "-no-color", "-oneline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_actionlint_finds_nothing_in_the_workflows_init_writes(tmp_path, capsys, source):
    shop = _scaffold(tmp_path, capsys, PINNED_ACTION, *SOURCES[source])
    files = sorted(str(p) for p in (shop / ".github" / "workflows").glob("*.yml"))
    # the lanes, the weekly report, the weekly bump
    assert len(files) == 3
    proc = subprocess.run(
        [_actionlint(), "-no-color", "-oneline", *files],
        cwd=shop,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------
# What a reviewer checks by hand


def test_every_job_has_a_timeout_its_own_permissions_and_no_credential_in_its_checkout(
    tmp_path, capsys
):
    shop = _scaffold(tmp_path, capsys)
    checkouts = 0
    for name, text in _texts(shop).items():
        if name == "action.yml":
            continue
        document = yaml.safe_load(text)
        assert document["permissions"] == {}, f"{name}: top-level permissions must be {{}}"
        for job_id, job in document["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), f"{name}: {job_id} has no timeout"
            assert isinstance(job.get("permissions"), dict), f"{name}: {job_id} names none"
            for step in job.get("steps", []):
                if step.get("uses", "").startswith("actions/checkout@"):
                    checkouts += 1
                    kept = step.get("with", {}).get("persist-credentials", True)
                    assert kept is False, f"{name}: {job_id}: checkout keeps a credential"
    assert checkouts >= 10


def test_only_the_release_can_write_and_only_publish_asks_for_an_oidc_token():
    writes = {
        (name, job_id, scope)
        for name, text in _texts().items()
        if name != "action.yml"
        for job_id, job in _jobs(text).items()
        for scope, level in job["permissions"].items()
        if level == "write"
    }
    assert writes == {
        (".github/workflows/release.yml", "publish", "id-token"),
        (".github/workflows/release.yml", "github-release", "contents"),
    }


def test_app_tokens_carry_only_the_permissions_their_job_writes_with():
    scopes = {}
    for name, text in _texts().items():
        for step in _steps(text):
            if step.get("uses", "").startswith("actions/create-github-app-token@"):
                given = step["with"]
                assert "client-id" in given and "owner" not in given, name
                scopes[name] = {
                    k.removeprefix("permission-"): v
                    for k, v in given.items()
                    if k.startswith("permission-")
                }
    assert scopes == {
        ".github/workflows/bump.yml": {"contents": "write", "pull-requests": "write"},
        ".github/workflows/weekly-report.yml": {"contents": "write", "issues": "write"},
    }
    bump = (WORKFLOWS / "bump.yml").read_text()
    assert _step(bump, "bump")["env"]["GITHUB_TOKEN"] == "${{ steps.app-token.outputs.token }}"
    assert "secrets.GITHUB_TOKEN" not in bump and "github.token" not in bump


def test_every_action_is_pinned_by_commit_to_a_node24_release_one_commit_per_release(
    tmp_path, capsys
):
    shop = _scaffold(tmp_path, capsys)
    commits: dict[tuple[str, str], set[str]] = {}
    for name, text in _texts(shop).items():
        for match in USES.finditer(text):
            ref, comment = match["ref"], match["comment"]
            if ref.startswith("./") or ref == PINNED_ACTION:
                continue
            pinned = PINNED.fullmatch(ref)
            assert pinned, f"{name}: {ref} is not pinned by a full commit"
            release = RELEASE.fullmatch(comment or "")
            assert release, f"{name}: {ref} has no `# vX.Y.Z` comment naming its release"
            action = pinned["action"]
            assert action in NODE24_SINCE, (
                f"{name}: {action}: check its runtime, add it to the table"
            )
            assert int(release["major"]) >= NODE24_SINCE[action], f"{name}: {ref} {comment}"
            commits.setdefault((action, comment), set()).add(pinned["sha"])
    assert {key: shas for key, shas in commits.items() if len(shas) > 1} == {}
    # The templates carry the repository's pins: a Dependabot bump of the workflows fails here
    # until the templates are bumped alike.
    releases: dict[str, set[str]] = {}
    for action, comment in commits:
        releases.setdefault(action, set()).add(comment)
    assert {a: r for a, r in releases.items() if len(r) > 1} == {}


# ---------------------------------------------------------------------------------------------
# The lanes fan out: one job per lane


def _runner_defaults(step: dict) -> dict[str, str]:
    """The env of the plan step as GitHub renders it with no repository variable set: the
    fallback literal of `${{ vars.X || '...' }}`."""
    rendered = {}
    for key, value in step["env"].items():
        fallback = re.fullmatch(r"\$\{\{ vars\.\w+ \|\| '(.*)' \}\}", value)
        assert fallback, value
        rendered[key] = fallback[1]
    return rendered


def _plan(project: Path, step: dict, tmp_path: Path, **env: str):
    output = tmp_path / "github-output"
    output.write_text("")
    proc = _bash(
        step["run"],
        cwd=project,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")},
            "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output),
            "RUNNER_TEMP": str(tmp_path),
            **_runner_defaults(step),
            **env,
        },
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return proc, outputs


@pytest.mark.slow
def test_the_plan_job_gives_one_matrix_entry_per_lane_on_a_runner_for_its_tag(tmp_path):
    lanes = (WORKFLOWS / "lanes.yml").read_text()
    step = _jobs(lanes)["plan"]["steps"][-1]
    assert step["id"] == "lanes"
    proc, outputs = _plan(ROOT, step, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = json.loads(
        subprocess.run(
            [str(SCRIPTS / "patchlane"), "lanes", "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    gpu = ["self-hosted", "linux", "gpu"]
    assert json.loads(outputs["matrix"]) == {
        "include": [
            {
                "lane": lane["name"],
                "tag": "gpu" if lane["needs_cuda"] else "cpu",
                "gpus": lane["gpus"]["count"],
                "runner": gpu if lane["needs_cuda"] else "ubuntu-latest",
            }
            for lane in listed
        ]
    }
    assert int(outputs["count"]) == len(listed) >= 2
    # A lane asking for two GPUs (gpu-pair) goes to the runner named for the smallest count that
    # holds it; the one-GPU lanes stay on the GPU runner.
    pair, eight = ["self-hosted", "gpu-2"], "gpu-8x"
    proc, outputs = _plan(
        ROOT, step, tmp_path, MULTI_GPU_RUNNERS=json.dumps({"8": eight, "2": pair})
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runners = {e["lane"]: e["runner"] for e in json.loads(outputs["matrix"])["include"]}
    assert (
        runners["gpu-pair"] == pair and runners["gpu"] == gpu and runners["cpu"] == "ubuntu-latest"
    )
    proc, outputs = _plan(ROOT, step, tmp_path, MULTI_GPU_RUNNERS=json.dumps({"8": eight}))
    runners = {e["lane"]: e["runner"] for e in json.loads(outputs["matrix"])["include"]}
    assert runners["gpu-pair"] == eight
    bad, outputs = _plan(ROOT, step, tmp_path, MULTI_GPU_RUNNERS='{"two": "gpu-2"}')
    assert bad.returncode == 1 and outputs == {}
    assert "::error::PATCHLANE_MULTI_GPU_RUNNERS must be a JSON object" in bad.stdout
    # the lane job runs one matrix entry through the Action, on the entry's runner
    job = _jobs(lanes)["lane"]
    assert job["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert job["runs-on"] == "${{ matrix.runner }}"
    action = next(s for s in job["steps"] if s.get("uses") == "./")
    assert action["with"] == {"lanes": "${{ matrix.lane }}"}

    # Runner labels from a repository variable that is not JSON labels: one error, no matrix.
    bad, outputs = _plan(ROOT, step, tmp_path, GPU_RUNNER='{"gpu": true}')
    assert bad.returncode == 1 and outputs == {}
    assert "::error::PATCHLANE_GPU_RUNNER must be a JSON string or a list of strings" in bad.stdout


@pytest.mark.slow
def test_init_writes_the_same_plan_and_a_shop_gets_its_cpu_lane(tmp_path, capsys):
    shop = _scaffold(tmp_path, capsys)
    written = (shop / ".github" / "workflows" / "patchlane-lanes.yml").read_text()
    step = _jobs(written)["plan"]["steps"][-1]
    ours = _jobs((WORKFLOWS / "lanes.yml").read_text())["plan"]["steps"][-1]
    assert step["run"] == ours["run"] and step["env"] == ours["env"]
    proc, outputs = _plan(shop, step, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(outputs["matrix"]) == {
        "include": [{"lane": "cpu", "tag": "cpu", "gpus": 0, "runner": "ubuntu-latest"}]
    }
    # The plan and merge jobs install the engine from where the Action and the hooks come from.
    repository, ref = PINNED_ACTION.split("@")
    install = (
        f'python -m pip install "patchlane[engine] @ git+https://github.com/{repository}@{ref}"'
    )
    assert [s["run"] for s in _steps(written) if "pip install" in s.get("run", "")] == [install] * 2
    assert f"uses: {PINNED_ACTION}" in written


def _run_the_lanes_step() -> dict:
    return _step((ROOT / "action.yml").read_text(), "Run the lanes")


@pytest.mark.parametrize(
    "lanes", ["cpu; touch pwned", "cpu $(touch pwned)", "--tag gpu", "cpu `touch pwned`", "a|b"]
)
def test_the_actions_lanes_input_takes_lane_names_only(tmp_path, lanes):
    step = _run_the_lanes_step()
    env = {"PATH": os.environ["PATH"], "PATCHLANE_ROOT": ".", "LANE_TAG": "cpu", "LANES": lanes}
    proc = _bash(step["run"], cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert proc.stdout.strip() == "::error::lanes must be lane names separated by spaces"
    assert not (tmp_path / "pwned").exists()


@pytest.fixture
def locked_shop(tmp_path, einops_index, monkeypatch, capsys):
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    shop = tmp_path / "shop"
    code, _, err = run_cli(tmp_path, "init", str(shop), capsys=capsys)
    assert code == 0, err
    return shop


@pytest.mark.slow
def test_the_actions_lanes_input_runs_those_lanes_instead_of_the_tags(locked_shop, tmp_path):
    step = _run_the_lanes_step()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")},
        "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}",
        "PATCHLANE_ROOT": str(locked_shop),
        # the gpu tag has no lane in this shop: only `lanes` makes the cpu lane run
        "LANE_TAG": "gpu",
        "LANES": " cpu ",
    }
    proc = _bash(step["run"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cpu" in proc.stdout + proc.stderr
    assert (locked_shop / ".patchlane" / "envs" / "cpu").is_dir()


# ---------------------------------------------------------------------------------------------
# The App token reaches git through a helper in the step's environment


@pytest.mark.parametrize(
    ("workflow", "step_name"),
    [("bump.yml", "bump"), ("weekly-report.yml", "Commit the report files")],
)
def test_the_app_token_reaches_git_from_the_steps_environment_only(tmp_path, workflow, step_name):
    step = _step((WORKFLOWS / workflow).read_text(), step_name)
    git_config = {k: v for k, v in step["env"].items() if k.startswith("GIT_CONFIG_")}
    repo = tmp_path / "checkout"
    repo.mkdir()
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }
    subprocess.run(["git", "init", "-q"], cwd=repo, env=base, check=True)
    asked = "protocol=https\nhost=github.com\npath=owner/repo.git\n\n"

    def fill(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "credential", "fill"],
            cwd=repo,
            env=env,
            input=asked,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    given = fill({**base, **git_config, "GITHUB_TOKEN": "ghs_fromtheapp"})
    assert given.returncode == 0, given.stderr
    assert (
        "username=x-access-token\n" in given.stdout and "password=ghs_fromtheapp\n" in given.stdout
    )
    # nothing was written: the checkout's config holds no credential, and without the step's
    # environment git has none to give
    assert "ghs_" not in (repo / ".git" / "config").read_text()
    assert fill(base).returncode != 0


# ---------------------------------------------------------------------------------------------
# The release


def _release() -> str:
    return (WORKFLOWS / "release.yml").read_text()


def test_the_release_builds_once_checks_and_publishes_those_files_with_trusted_publishing():
    jobs = _jobs(_release())
    assert yaml.safe_load(_release())[True] == {"push": {"tags": ["v*"]}}
    assert list(jobs) == ["build", "publish", "github-release"]
    publish = jobs["publish"]
    assert publish["needs"] == "build" and publish["environment"] == {"name": "pypi"}
    assert publish["permissions"] == {"id-token": "write"}
    # the files the build job made, nothing built or checked out there, no stored token
    assert [s["uses"].split("@")[0] for s in publish["steps"]] == [
        "actions/download-artifact",
        "pypa/gh-action-pypi-publish",
    ]
    assert "with" not in publish["steps"][1]
    build = jobs["build"]["steps"]
    runs = "\n".join(s.get("run", "") for s in build)
    assert (
        "uv build" in runs
        and "twine check --strict dist/*" in runs
        and "check-wheel-contents" in runs
    )
    # no cache can reach the files
    assert "actions/cache" not in _release() and not any(
        "cache" in s.get("with", {}) for s in build
    )
    assert jobs["github-release"]["needs"] == "publish"


def test_the_release_tools_are_locked_with_hashes_and_uv_is_the_engines_pin():
    lock = (ROOT / ".github" / "release" / "requirements.txt").read_text()
    pins = re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+) \\$", lock, re.MULTILINE)
    assert {"uv", "hatchling", "twine", "check-wheel-contents"} <= {name for name, _ in pins}
    # every requirement carries its hashes (pip --require-hashes refuses the file otherwise)
    entries = re.split(r"\n(?=[a-z0-9])", lock.strip())
    assert all("--hash=sha256:" in entry for entry in entries if not entry.startswith("#"))
    engine = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["engine"]
    assert f"uv=={dict(pins)['uv']}" in engine


@pytest.fixture
def release_tree(tmp_path) -> tuple[Path, str]:
    """A folder like the build job's after `uv build`: pyproject.toml and dist/ with both files."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (tmp_path / "dist").mkdir()
    for name in (f"patchlane-{version}.tar.gz", f"patchlane-{version}-py3-none-any.whl"):
        (tmp_path / "dist" / name).write_bytes(b"")
    return tmp_path, version


def _check_version(tree: Path, tag: str) -> subprocess.CompletedProcess[str]:
    step = _step(_release(), "The tag names the version being built")
    assert step["env"] == {"TAG": "${{ github.ref_name }}"}
    return _bash(step["run"], cwd=tree, env={"PATH": os.environ["PATH"], "TAG": tag})


@pytest.mark.slow
def test_the_release_goes_on_only_for_the_tag_of_pyprojects_version(release_tree):
    tree, version = release_tree
    assert _check_version(tree, f"v{version}").returncode == 0
    for tag in (f"v{version}.post1", version, "v9.9.9", f"v{version}\n::warning::x"):
        refused = _check_version(tree, tag)
        assert refused.returncode == 1
        # one annotation, and the tag is never echoed into the log
        assert refused.stdout == (
            f"::error::the tag does not name pyproject.toml's version (expected v{version})\n"
        )
    (tree / "dist" / "stray.whl").write_bytes(b"")
    extra = _check_version(tree, f"v{version}")
    assert extra.returncode == 1 and "dist/ holds something other than" in extra.stdout


# ---------------------------------------------------------------------------------------------
# issue 36: an adopted repository gets the whole weekly loop, as this repository has it


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_init_writes_the_whole_weekly_loop_the_bump_and_the_tracking_issue(
    tmp_path, capsys, source
):
    shop = _scaffold(tmp_path, capsys, PINNED_ACTION, *SOURCES[source])
    texts = _texts(shop)
    bump, report = texts["init:patchlane-bump.yml"], texts["init:patchlane-report.yml"]
    # weekly, both (YAML 1.1 reads the key `on` as true)
    assert yaml.safe_load(bump)[True]["schedule"] and yaml.safe_load(report)[True]["schedule"]
    # the writes: App tokens scoped to what each job writes, nothing else
    scopes = {
        name: {k: v for k, v in step["with"].items() if k.startswith("permission-")}
        for name in ("init:patchlane-bump.yml", "init:patchlane-report.yml")
        for step in _steps(texts[name])
        if step.get("uses", "").startswith("actions/create-github-app-token@")
    }
    assert scopes == {
        "init:patchlane-bump.yml": {
            "permission-contents": "write",
            "permission-pull-requests": "write",
        },
        "init:patchlane-report.yml": {
            "permission-contents": "write",
            "permission-issues": "write",
        },
    }
    # the bump opens its pull request with the App's token, from --from's engine
    step = _step(bump, "bump")
    assert step["env"]["GITHUB_TOKEN"] == "${{ steps.app-token.outputs.token }}"
    assert 'patchlane bump "${lanes[@]}" --repo "$REPOSITORY"' in step["run"]
    assert "github.token" not in bump
    # the report: one tracking issue (label and marker), then the week's files committed
    issue = _step(report, "Post or update the tracking issue")
    assert "issues.create" in issue["with"]["script"] and "MARKER" in issue["with"]["script"]
    assert yaml.safe_load(report)["env"]["MARKER"] == "<!-- patchlane:weekly-retirement-report -->"
    commit = _step(report, "Commit the report files")["run"]
    assert 'git add -- "reports/$WEEK.md" "reports/$WEEK.html" "reports/$WEEK.json"' in commit
    # the week the issue and the commit name is the week the report was written for
    written = next(
        s
        for s in _steps(report)
        if "patchlane" in s.get("uses", "") or "report" in s.get("run", "")
    )
    assert "steps.week.outputs.week" in json.dumps(written), written


@pytest.mark.slow
def test_the_report_an_adopted_repository_writes_starts_with_the_tracking_marker_and_is_committed(
    tmp_path, capsys
):
    """What the tracking-issue step reads: the Markdown starts with the marker; and git commits
    every report file, even where the shop's .gitignore would keep them out (*.json, *.html)."""
    shop = tmp_path / "shop"
    shop.mkdir()
    subprocess.run(["git", "init", "-q", str(shop)], check=True)
    (shop / ".gitignore").write_text("*.json\n*.html\n")
    code, out, err = run_cli(
        shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0", capsys=capsys
    )
    assert code == 0, err
    assert "reports/<week>.json is ignored by git (.gitignore:1: *.json)" in out, out
    marker = yaml.safe_load((shop / ".github/workflows/patchlane-report.yml").read_text())["env"][
        "MARKER"
    ]
    code, _, err = run_cli(shop, "report", "--no-probe", "--week", "2026-W50", capsys=capsys)
    assert code == 0, err
    written = sorted(p.name for p in (shop / "reports").iterdir())
    assert written == ["2026-W50.html", "2026-W50.json", "2026-W50.md", "README.md"]
    assert (shop / "reports" / "2026-W50.md").read_text().startswith(marker)
    subprocess.run(["git", "-C", str(shop), "add", "-A"], check=True)
    staged = subprocess.run(
        ["git", "-C", str(shop), "diff", "--cached", "--name-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {f"reports/2026-W50.{kind}" for kind in ("md", "html", "json")} <= set(staged)
    assert "reports/README.md" in staged
