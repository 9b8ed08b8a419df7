"""`patchlane init` and `patchlane shim new` end to end, offline: the scaffolded project locks
against a loopback index, nox runs its lane, and the scaffolded shim's reproducer runs there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retire.evidence import validation
from retire.scaffold.merge import import_lines
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
    # The lane passed, but it proved nothing: the summary says so, and --strict fails on it.
    assert "unproven: my_fix — cpu: skipped — my_fix: the reproducer is not written yet" in out
    code, out = _nox(shop, "-s", "lane", "--", "--strict")
    assert code != 0 and "FAILED (--strict): 1 shim(s) that no lane proves: my_fix" in out, out


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
    # every file in the way, at once
    assert err.strip() == (
        f"patchlane: error: {tmp_path}: 9 files in the way of patchlane init, which writes only "
        "new files: patchlane.toml (exists), lanes/cpu.toml (exists), shims/README.md (exists), "
        "locks/README.md (exists), validation/manifest.jsonl (exists), "
        ".github/workflows/patchlane-lanes.yml (exists), .github/workflows/patchlane-report.yml "
        "(exists), .github/workflows/patchlane-bump.yml (exists), reports/README.md (exists) — "
        "move them aside, or run it in a folder without them"
    )
    assert (
        not (tmp_path / "noxfile.py").exists()
        and (tmp_path / "lanes" / "cpu.toml").read_text() == "# ours\n"
    )


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------------------
# init in the repository a shop already has, and where patchlane comes from

SHOP_NOXFILE = '''"""Our sessions."""
import nox

nox.options.sessions = ["tests"]


@nox.session
def tests(session):
    session.run("pytest")
'''
SHOP_PRECOMMIT = """# our hooks
repos:
- repo: https://github.com/pre-commit/pre-commit-hooks
  rev: v5.0.0   # pinned
  hooks:
  - id: trailing-whitespace
    args: ['--markdown-linebreak-ext=md']
"""


def _git_repository(path):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.mark.slow
def test_init_appends_to_an_existing_noxfile_and_pre_commit_config(tmp_path, capsys):
    import yaml

    shop = _git_repository(tmp_path / "shop")
    (shop / "noxfile.py").write_text(SHOP_NOXFILE)
    (shop / ".pre-commit-config.yaml").write_text(SHOP_PRECOMMIT)
    code, out, err = run_cli(
        shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0", "--json", capsys=capsys
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["edited"] == [".pre-commit-config.yaml", "noxfile.py"]
    assert document["notes"] == [] and document["from"] == "patchlane[engine]==0.1.0"
    noxfile = (shop / "noxfile.py").read_text()
    # where the imports are, sorted as isort sorts them
    assert noxfile == SHOP_NOXFILE.replace(
        "import nox\n",
        "import nox\n" + "".join(f"{line}\n" for line in import_lines()),
    )
    config = (shop / ".pre-commit-config.yaml").read_text()
    # the shop's text stays as written (comments, quoting, its zero-indent list), one entry after it
    assert config.startswith(SHOP_PRECOMMIT)
    repos = yaml.safe_load(config)["repos"]
    assert repos[0] == yaml.safe_load(SHOP_PRECOMMIT)["repos"][0]
    assert repos[1]["repo"] == "local"
    assert [h["id"] for h in repos[1]["hooks"]] == [
        "patchlane-lock-check",
        "patchlane-manifest-check",
    ]
    assert repos[1]["hooks"][0]["additional_dependencies"] == ["patchlane[engine]==0.1.0"]
    assert repos[1]["hooks"][1]["additional_dependencies"] == ["patchlane==0.1.0"]
    # The shop's nox runs its own default sessions and sees patchlane's.
    listed = _nox(shop, "--list")[1]
    assert "* tests" in listed and "- lock" in listed and "lane(name='cpu')" in listed, listed
    # A second init: patchlane.toml exists; nothing is appended twice.
    code, _out, err = run_cli(shop, "init", "--no-lock", capsys=capsys)
    assert code == 2 and "patchlane.toml (exists)" in err
    assert (shop / "noxfile.py").read_text() == noxfile


@pytest.mark.parametrize(
    ("noxfile", "note"),
    [
        ("def lane(:\n", "noxfile.py does not parse"),
        ("from retire.sessions import lane\n", "noxfile.py already imports patchlane's sessions"),
    ],
)
def test_a_noxfile_that_cannot_take_the_line_is_left_alone_with_a_note(
    tmp_path, capsys, noxfile, note
):
    shop = _git_repository(tmp_path / "shop")
    (shop / "noxfile.py").write_text(noxfile)
    code, out, err = run_cli(shop, "init", "--no-lock", capsys=capsys)
    assert code == 0, err
    assert (shop / "noxfile.py").read_text() == noxfile
    assert f"note: {note}" in out
    if "already" not in note:
        # the exact lines to add
        assert "from retire.sessions import " in out.split(f"note: {note}")[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [
        "repos: [\n",
        "repos: []\n",
        "repos:\n  - repo: local\n    hooks: []\nci:\n  autofix_prs: false\n",
        (
            "repos:\n  - repo: https://host/patchlane\n    rev: v1\n    hooks:\n"
            "      - id: patchlane-lock-check\n"
        ),
    ],
    ids=["not-yaml", "inline-list", "repos-not-last", "already-there"],
)
def test_a_pre_commit_config_that_cannot_be_appended_to_is_left_alone(tmp_path, capsys, config):
    shop = _git_repository(tmp_path / "shop")
    (shop / ".pre-commit-config.yaml").write_text(config)
    code, out, err = run_cli(shop, "init", "--no-lock", capsys=capsys)
    assert code == 0, err
    assert (shop / ".pre-commit-config.yaml").read_text() == config
    assert "note: .pre-commit-config.yaml " in out
    if "patchlane-lock-check" not in config:
        assert "- id: patchlane-lock-check" in out.split("note: .pre-commit-config.yaml")[1]


def test_init_outside_a_git_repository_says_how_to_make_one(tmp_path, capsys):
    # a folder with no repository above it (tmp_path may sit in one)
    env = os.environ.get("GIT_CEILING_DIRECTORIES")
    os.environ["GIT_CEILING_DIRECTORIES"] = str(tmp_path)
    try:
        code, out, err = run_cli(tmp_path / "shop", "init", "--no-lock", capsys=capsys)
    finally:
        if env is None:
            os.environ.pop("GIT_CEILING_DIRECTORIES")
        else:
            os.environ["GIT_CEILING_DIRECTORIES"] = env
    assert code == 0, err
    assert "is not a git repository" in out and "git init && git add -A && git commit" in out
    shop = _git_repository(tmp_path / "other")
    code, out, _err = run_cli(shop, "init", "--no-lock", capsys=capsys)
    assert code == 0 and "not a git repository" not in out


def _written(tmp_path, capsys, *options):
    import yaml

    shop = tmp_path / "shop"
    code, _out, err = run_cli(tmp_path, "init", "--no-lock", *options, str(shop), capsys=capsys)
    assert code == 0, err
    workflows = shop / ".github" / "workflows"
    lanes = yaml.safe_load((workflows / "patchlane-lanes.yml").read_text())
    report = yaml.safe_load((workflows / "patchlane-report.yml").read_text())
    bump = yaml.safe_load((workflows / "patchlane-bump.yml").read_text())
    steps = [
        *lanes["jobs"]["lane"]["steps"],
        *report["jobs"]["report"]["steps"],
        *bump["jobs"]["bump"]["steps"],
    ]
    return {
        "hooks": yaml.safe_load((shop / ".pre-commit-config.yaml").read_text())["repos"],
        "installs": sorted(
            {
                s["run"]
                for job in lanes["jobs"].values()
                for s in job["steps"]
                if s.get("run", "").startswith("python -m pip install")
            }
            | {s["run"] for s in steps if s.get("run", "").startswith("python -m pip install")}
        ),
        "uses": [s["uses"] for s in steps if "patchlane" in s.get("uses", "")],
        "with": [s.get("with", {}) for s in steps if "patchlane" in s.get("uses", "")],
        "runs": [s["run"] for s in steps if s.get("run", "").startswith("patchlane ")],
        "readme": (shop / "README.md").read_text(),
    }


def test_from_a_github_git_url_the_hooks_are_its_repository_and_the_action_its_own(
    tmp_path, capsys
):
    written = _written(tmp_path, capsys, "--from", "git+https://github.com/acme/patchlane@v0.1.0")
    assert written["hooks"] == [
        {
            "repo": "https://github.com/acme/patchlane",
            "rev": "v0.1.0",
            "hooks": [{"id": "patchlane-lock-check"}, {"id": "patchlane-manifest-check"}],
        }
    ]
    assert written["uses"] == ["acme/patchlane@v0.1.0"] * 2
    # the lane job is strict; the Action installs its own source (the same)
    assert written["with"][0] == {"lanes": "${{ matrix.lane }}", "strict": "true"}
    assert written["installs"] == [
        'python -m pip install "patchlane[engine] @ git+https://github.com/acme/patchlane@v0.1.0"'
    ]
    assert "[patchlane](https://github.com/acme/patchlane)" in written["readme"]


def test_from_another_git_host_or_an_index_the_workflows_run_the_commands(tmp_path, capsys):
    written = _written(
        tmp_path, capsys, "--from", "git+https://git.example.org/tools/patchlane@abc123"
    )
    assert written["hooks"][0]["repo"] == "https://git.example.org/tools/patchlane"
    assert written["hooks"][0]["rev"] == "abc123" and written["uses"] == []
    assert written["runs"] == [
        "patchlane lock --check --skip-unreachable",
        'patchlane run --strict -- "$LANE"',
        'patchlane report --week "$WEEK"',
    ]
    (tmp_path / "shop").rename(tmp_path / "first")
    written = _written(tmp_path, capsys, "--from", "patchlane[engine]>=0.1,<0.2")
    assert written["installs"] == ['python -m pip install "patchlane[engine]<0.2,>=0.1"']
    assert written["hooks"][0]["repo"] == "local" and written["uses"] == []
    assert 'python -m pip install "patchlane[engine]<0.2,>=0.1"' in written["readme"]


def test_action_alone_still_names_a_github_repository_and_with_from_it_gets_the_engine(
    tmp_path, capsys
):
    pinned = "acme/patchlane@3d3c42e5aac5ba805825da76410c181273ba90b1"
    written = _written(tmp_path, capsys, "--action", pinned)
    assert written["uses"] == [pinned] * 2 and written["hooks"][0]["rev"] == pinned.split("@")[1]
    (tmp_path / "shop").rename(tmp_path / "first")
    written = _written(
        tmp_path,
        capsys,
        "--action",
        pinned,
        "--from",
        "git+https://github.com/acme/patchlane@v0.1.0",
    )
    # the Action pinned by commit installs the engine --from names (the tag)
    assert written["uses"] == [pinned] * 2 and written["hooks"][0]["rev"] == "v0.1.0"
    engine = "patchlane[engine] @ git+https://github.com/acme/patchlane@v0.1.0"
    assert [w.get("engine") for w in written["with"]] == [engine, engine]


def test_from_a_wheel_inside_the_repository_ci_installs_it_from_the_workspace(tmp_path, capsys):
    shop = tmp_path / "shop"
    wheel = shop / "vendor" / "patchlane-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"PK")
    written = _written(tmp_path, capsys, "--from", str(wheel))
    assert written["installs"] == [
        (
            'python -m pip install "patchlane[engine] @ '
            'file://${GITHUB_WORKSPACE}/vendor/patchlane-0.1.0-py3-none-any.whl"'
        )
    ]
    # the hooks run the patchlane installed here: no path of this machine in a committed file
    assert {hook["language"] for hook in written["hooks"][0]["hooks"]} == {"system"}
    assert 'pip install "./vendor/patchlane-0.1.0-py3-none-any.whl[engine]"' in written["readme"]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("git+https://github.com/acme/patchlane", "names no ref"),
        ("https://example.org/patchlane.whl", "is a URL but not a git URL"),
        ("requests==2.0", "is not a requirement on patchlane"),
        ("patchlane[engine] >", "is not a requirement"),
        ("./no-such-wheel/patchlane-0.1.0-py3-none-any.whl", "is no wheel, sdist or checkout"),
    ],
)
def test_a_from_that_names_no_patchlane_is_one_line_and_nothing_is_written(
    tmp_path, capsys, source, problem
):
    code, _out, err = run_cli(tmp_path, "init", "--no-lock", "--from", source, capsys=capsys)
    assert code == 2 and problem in err and err.count("\n") == 1 and "--from" in err, err
    assert not (tmp_path / "patchlane.toml").exists()
