"""`patchlane init` in repositories as shops have them (issue 29, issue 30 class 6): a `.gitignore`
that keeps the lock out of every commit, a noxfile run as a script, files with CRLF line endings,
links, hostile YAML and Python — each either merged the way the shop writes its files or one line
naming the file, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from retire.scaffold.merge import import_lines
from tests.conftest import ROOT, run_cli

FROM = ("--from", "patchlane[engine]==0.1.0")


def _git(path, *args):
    return subprocess.run(
        ["git", "-C", str(path), *args], check=True, capture_output=True, text=True
    ).stdout


def _repository(path):
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    return path


# ---------------------------------------------------------------------------------------------
# 29.1: what git would not commit


def test_init_lets_git_commit_a_lock_the_shops_gitignore_ignores(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    (shop / ".gitignore").write_text("*.pyc\n*pylock.toml\n")
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, "--json", capsys=capsys)
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert notes == [
        (
            "locks/cpu/pylock.toml is ignored by git (.gitignore:2: *pylock.toml) and would never "
            "be committed: .gitignore gets `!/locks/*/pylock.toml`"
        )
    ]
    assert (shop / ".gitignore").read_text() == (
        "*.pyc\n*pylock.toml\n.patchlane/\n.nox/\n!/locks/*/pylock.toml\n"
    )
    # git's own answer: the lock (of this lane and any later one) is committed
    for lane in ("cpu", "gpu"):
        (shop / "locks" / lane).mkdir()
        (shop / "locks" / lane / "pylock.toml").write_text("")
    _git(shop, "add", "-A")
    staged = _git(shop, "diff", "--cached", "--name-only").split()
    assert "locks/cpu/pylock.toml" in staged and "locks/gpu/pylock.toml" in staged


def test_what_a_negation_cannot_fix_is_a_note_naming_the_rule(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    (shop / ".gitignore").write_text(".github/\n")
    (shop / "locks").mkdir()
    (shop / "locks" / ".gitignore").write_text("pylock.toml\n")
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert [n.split(" is ")[0] for n in notes[:4]] == [
        "note: .github/workflows/patchlane-bump.yml",
        "note: .github/workflows/patchlane-lanes.yml",
        "note: .github/workflows/patchlane-report.yml",
        "note: locks/cpu/pylock.toml",
    ]
    assert "(locks/.gitignore:1: pylock.toml)" in notes[3] and "git add locks/cpu" in notes[3]
    # no negation that would not work
    assert "!" not in (shop / ".gitignore").read_text()


def test_lock_check_tells_an_ignored_lock_from_a_missing_one(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    assert run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    code, out, _err = run_cli(shop, "lock", "--check", "--json", capsys=capsys)
    assert code == 1 and json.loads(out)["lanes"][0]["state"] == "missing"
    # the lock git never took: a fresh clone of a shop whose .gitignore has *pylock.toml
    (shop / ".gitignore").write_text("*pylock.toml\n")
    code, out, _err = run_cli(shop, "lock", "--check", "--json", capsys=capsys)
    row = json.loads(out)["lanes"][0]
    assert code == 1 and row["state"] == "ignored", row
    assert row["why"] == (
        "locks/cpu/pylock.toml is ignored by git (.gitignore:1: *pylock.toml), so it is in no "
        "commit and no clone — add `!/locks/*/pylock.toml` at the end of .gitignore"
    )
    # the same lock, there and committed: a tracked file is never ignored
    (shop / "locks" / "cpu").mkdir()
    (shop / "locks" / "cpu" / "pylock.toml").write_text("")
    _git(shop, "add", "-f", "locks/cpu/pylock.toml")
    code, out, _err = run_cli(shop, "lock", "--check", "--json", capsys=capsys)
    assert json.loads(out)["lanes"][0]["state"] == "foreign"


# ---------------------------------------------------------------------------------------------
# 29.3: the noxfile line where imports go

SCRIPT_NOXFILE = '''#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["nox"]
# ///
"""The shop's sessions, run as ./noxfile.py."""

import os

import nox

import shoplib


@nox.session(venv_backend="none")
def tests(session):
    session.log(shoplib.NAME, os.sep)


if __name__ == "__main__":
    nox.main()
'''


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_the_noxfile_line_goes_where_imports_go_and_the_script_still_runs(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    (shop / "noxfile.py").write_text(SCRIPT_NOXFILE)
    (shop / "shoplib.py").write_text('NAME = "shop"\n')
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, "--json", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["notes"] == [
        "noxfile.py: its script block (# /// script) lists patchlane in its dependencies"
    ]
    noxfile = (shop / "noxfile.py").read_text()
    assert noxfile == SCRIPT_NOXFILE.replace(
        '["nox"]', '["nox", "patchlane[engine]==0.1.0"]'
    ).replace(
        "import nox\n",
        "import nox\n" + "".join(f"{line}\n" for line in import_lines()),
    )
    # the shop's linter: its imports stay sorted (I001), nothing flagged in what init added
    lint = subprocess.run(
        ["ruff", "check", "--isolated", "--select", "I,E,F,W", "noxfile.py"],
        cwd=shop,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout
    # run as a script, nox lists the shop's sessions and patchlane's
    listed = subprocess.run(
        [sys.executable, "noxfile.py", "-l"],
        cwd=shop,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "tests" in listed.stdout and "lane(name='cpu')" in listed.stdout, listed.stdout


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_a_shop_session_named_lock_keeps_its_name(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    noxfile = (
        "import nox\n\n\n"
        '@nox.session(venv_backend="none", name="lock")\n'
        "def pin(session):\n"
        '    session.log("the shop\'s lock")\n'
    )
    (shop / "noxfile.py").write_text(noxfile)
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, "--json", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["notes"] == [
        (
            "noxfile.py: it defines lock already: patchlane's lock not imported, yours keep the "
            "name (`patchlane lock` does what patchlane's session would)"
        )
    ]
    imported = "".join(
        f"{line}\n" for line in import_lines(("bump", "lane", "lanes", "retire", "summary"))
    )
    assert imported in (shop / "noxfile.py").read_text()
    # nox: no "already registered", and `lock` is the shop's
    ran = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-m", "nox", "-s", "lock"],
        cwd=shop,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert ran.returncode == 0 and "the shop's lock" in ran.stderr, ran.stderr
    assert "already been registered" not in ran.stderr


# ---------------------------------------------------------------------------------------------
# 29.2: a lane name that is none, a shim id that is none: one line, no wrong summary after it


def _nox(root, *args):
    return subprocess.run(
        [sys.executable, "-m", "nox", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


# a second or more: nox, bash or python run as real processes
@pytest.mark.slow
def test_nox_lane_with_an_unknown_lane_or_shim_says_it_once(tmp_path, capsys):
    shop = tmp_path / "shop"
    assert run_cli(tmp_path, "init", "--no-lock", *FROM, str(shop), capsys=capsys)[0] == 0
    lane = (shop / "lanes" / "cpu.toml").read_text()
    (shop / "lanes" / "gpu.toml").write_text(lane)
    ran = _nox(shop, "-s", "lane", "--", "--strict", "nosuchlane")
    out = ran.stdout + ran.stderr
    assert ran.returncode != 0
    assert out.count("unknown lane 'nosuchlane' — known lanes: cpu, gpu") == 1, out
    assert "unrecognized arguments" not in out and "no lane results" not in out, out
    (shop / "lanes" / "gpu.toml").unlink()
    (shop / "lanes" / "cpu.toml").write_text(lane.replace("shims = []", 'shims = ["my_fixx"]'))
    ran = _nox(shop, "-s", "lane")
    out = ran.stdout + ran.stderr
    assert ran.returncode != 0
    assert out.count("cpu.shims: unknown shim 'my_fixx'") == 1, out
    assert "no lane results" not in out and "summary" not in out, out


# ---------------------------------------------------------------------------------------------
# 30.6: init against real-world files

BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "repos:\n- repo: local\n  hooks: *i\n"
)


def test_a_yaml_alias_bomb_is_a_note_not_a_hang(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    (shop / ".pre-commit-config.yaml").write_text(BOMB)
    assert len(BOMB.encode()) < 1024
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0, err
    assert "note: .pre-commit-config.yaml uses 73 YAML aliases (*name), more than the 32" in out
    assert (shop / ".pre-commit-config.yaml").read_text() == BOMB


def test_a_link_to_a_file_outside_stops_init_before_anything_is_written(tmp_path, capsys):
    outside = tmp_path / "outside.yaml"
    outside.write_text("repos:\n- repo: local\n  hooks: []\n")
    for name in (".pre-commit-config.yaml", "README.md"):
        shop = _repository(tmp_path / name.strip("."))
        (shop / name).symlink_to(outside)
        code, _out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
        assert code == 2 and err.count("\n") == 1 and name in err and "link" in err, err
        assert sorted(p.name for p in shop.iterdir()) == [".git", name]
    assert outside.read_text() == "repos:\n- repo: local\n  hooks: []\n"


def test_crlf_files_are_appended_to_in_crlf_and_trailing_blank_lines_are_kept(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    readme = b"# ours\r\n\r\nTraining code.\r\n\r\n\r\n"
    ignore = b"*.pyc\r\n"
    config = b"repos:\r\n- repo: local\r\n  hooks: []\r\n"
    (shop / "README.md").write_bytes(readme)
    (shop / ".gitignore").write_bytes(ignore)
    (shop / ".pre-commit-config.yaml").write_bytes(config)
    (shop / "noxfile.py").write_bytes(b"import nox\r\n")
    code, _out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0, err
    for name, before in (
        ("README.md", readme),
        (".gitignore", ignore),
        (".pre-commit-config.yaml", config),
        ("noxfile.py", b"import nox\r\n"),
    ):
        after = (shop / name).read_bytes()
        assert after.startswith(before) and after.count(b"\n") == after.count(b"\r\n"), name
    assert (shop / ".gitignore").read_bytes() == b"*.pyc\r\n.patchlane/\r\n.nox/\r\n"
    # three newlines at the end: kept, and no more blank lines before the section
    assert b"Training code.\r\n\r\n\r\n## Patch lane\r\n" in (shop / "README.md").read_bytes()


def test_a_github_file_where_the_folder_goes_stops_init_listing_every_conflict(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    (shop / ".github").write_text("not a folder\n")
    (shop / "lanes").mkdir()
    (shop / "lanes" / "cpu.toml").write_text("# ours\n")
    code, _out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.strip() == (
        f"patchlane: error: {shop}: 2 files in the way of patchlane init, which writes only new "
        "files: lanes/cpu.toml (exists), .github (a file where a folder goes) — move them aside, "
        "or run it in a folder without them"
    )
    # nothing written
    assert sorted(p.name for p in shop.iterdir()) == [".git", ".github", "lanes"]
    assert sorted(p.name for p in (shop / "lanes").iterdir()) == ["cpu.toml"]


def test_a_noxfile_python_cannot_parse_is_one_line_naming_it(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    noxfile = "x = " + "-" * 200_000 + "1\n"
    (shop / "noxfile.py").write_text(noxfile)
    code, out, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0 and "Traceback" not in err, err
    assert "note: noxfile.py does not parse (nested too deeply for Python's parser)" in out
    assert (shop / "noxfile.py").read_text() == noxfile


# ---------------------------------------------------------------------------------------------
# 29.5: --from a wheel inside the repository, whatever its path holds


def test_a_wheel_in_the_repository_is_named_relative_and_quoted_for_yaml_shell_and_urls(
    tmp_path, capsys
):
    import shlex

    import yaml
    from packaging.requirements import Requirement

    from tests.test_workflows import _summary, _zizmor_findings

    shop = _repository(tmp_path / "shop")
    folder = 'wheels dir "q" ${{ github.token }}'
    wheel = shop / folder / "patchlane-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    code, out, err = run_cli(
        shop, "init", "--no-lock", "--from", str(wheel), "--json", capsys=capsys
    )
    assert code == 0, err
    # nothing names this machine's path: every clone and CI runner has what the files name
    assert json.loads(out)["notes"] == []
    written = [
        p for p in shop.rglob("*") if p.is_file() and ".git" not in p.parts[len(shop.parts) :]
    ]
    for path in written:
        assert str(tmp_path) not in path.read_text(errors="replace"), path
    # CI: one shell word, one requirement, whose URL is the wheel under the workspace
    workspace = "/home/runner/work/shop/shop"
    lanes = yaml.safe_load((shop / ".github" / "workflows" / "patchlane-lanes.yml").read_text())
    installs = {
        step["run"]
        for job in lanes["jobs"].values()
        for step in job["steps"]
        if step.get("run", "").startswith("python -m pip install")
    }
    assert len(installs) == 1
    words = shlex.split(installs.pop().replace("${GITHUB_WORKSPACE}", workspace))
    requirement = Requirement(words[-1])
    assert len(words) == 5 and requirement.url is not None
    from urllib.parse import unquote, urlsplit

    assert unquote(urlsplit(requirement.url).path) == f"{workspace}/{folder}/{wheel.name}"
    findings = _zizmor_findings("--no-config", "--collect=all", shop / ".github", cwd=tmp_path)
    assert findings == [], _summary(findings)
    # the README: one shell word, relative to the repository
    readme = (shop / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("python -m pip install"))
    assert shlex.split(line)[-1] == f"./{folder}/{wheel.name}[engine]"
    # the noxfile's hint is a Python string that holds it
    assert f"./{folder}/{wheel.name}[engine]" in (shop / "noxfile.py").read_text().replace(
        '\\"', '"'
    )
    hooks = yaml.safe_load((shop / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"]
    assert {hook["language"] for hook in hooks} == {"system"}


def test_a_git_url_with_what_a_shell_would_expand_is_one_line(tmp_path, capsys):
    code, _out, err = run_cli(
        tmp_path, "init", "--no-lock", "--from", "git+https://h/x$(id)@v1", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1 and "characters a URL does not ('$')" in err, err
    assert not (tmp_path / "patchlane.toml").exists()


# ---------------------------------------------------------------------------------------------
# 29.4: re-pointing an adopted repository


def _files(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_repoint_changes_only_what_names_the_source(tmp_path, capsys):
    import yaml

    outside = tmp_path / "wheels" / "patchlane-0.1.0-py3-none-any.whl"
    outside.parent.mkdir()
    outside.write_bytes(b"PK")
    shop = _repository(tmp_path / "shop")
    (shop / "noxfile.py").write_text("import nox\n")
    (shop / ".pre-commit-config.yaml").write_text("repos:\n- repo: local\n  hooks: []\n")
    (shop / "README.md").write_text("# shop\n")
    assert run_cli(shop, "init", "--no-lock", "--from", str(outside), capsys=capsys)[0] == 0
    inside = shop / "vendor" / outside.name
    inside.parent.mkdir()
    inside.write_bytes(b"PK")
    before = _files(shop)

    code, out, err = run_cli(
        shop, "init", "--repoint", "--from", str(inside), "--json", capsys=capsys
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["edited"] == [
        ".github/workflows/patchlane-bump.yml",
        ".github/workflows/patchlane-lanes.yml",
        ".github/workflows/patchlane-report.yml",
        ".pre-commit-config.yaml",
        "README.md",
    ]
    assert document["created"] == [] and document["locked"] == [] and document["notes"] == []
    after = _files(shop)
    assert after.keys() == before.keys()
    for name in after.keys() - set(document["edited"]):
        assert after[name] == before[name], name
    for name in document["edited"]:
        old, new = before[name].decode(), after[name].decode()
        # every line that changed named the old source, or is the hooks' install of it
        removed = set(old.splitlines()) - set(new.splitlines())
        assert all(
            str(outside.parent) in line or line.strip().startswith("language: python")
            for line in removed
        ), (name, removed)
        assert str(outside.parent) not in new, name
    hooks = yaml.safe_load(after[".pre-commit-config.yaml"])["repos"]
    assert hooks[0] == {"repo": "local", "hooks": []}
    assert {hook["language"] for hook in hooks[1]["hooks"]} == {"system"}

    # and on to a release on github.com: its hooks, its Action, nothing else
    code, out, err = run_cli(
        shop,
        "init",
        "--repoint",
        "--from",
        "git+https://github.com/acme/patchlane@v0.2.0",
        capsys=capsys,
    )
    assert code == 0, err
    hooks = yaml.safe_load((shop / ".pre-commit-config.yaml").read_text())["repos"]
    assert hooks[1]["repo"] == "https://github.com/acme/patchlane" and hooks[1]["rev"] == "v0.2.0"
    lanes = (shop / ".github" / "workflows" / "patchlane-lanes.yml").read_text()
    assert "uses: acme/patchlane@v0.2.0" in lanes and "vendor" not in lanes
    readme = (shop / "README.md").read_text()
    assert (
        'pip install "patchlane[engine] @ git+https://github.com/acme/patchlane@v0.2.0"' in readme
    )
    assert readme.count("## Patch lane") == 1 and readme.startswith("# shop\n")
    assert (shop / "noxfile.py").read_bytes() == before["noxfile.py"]


def test_repoint_where_init_never_ran_is_one_line(tmp_path, capsys):
    code, _out, err = run_cli(tmp_path, "init", "--repoint", *FROM, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "patchlane-lanes.yml" in err, err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# issue 36: a lane whose Python uv cannot find


PYENV_SHIM = """#!/bin/sh
# what pyenv's shim does for a version pyenv has but has not activated
echo "pyenv: $(basename "$0"): command not found" >&2
echo >&2
echo "The \\`$(basename "$0")' command exists in these Python versions:" >&2
echo "  3.19.1" >&2
echo >&2
echo "Note: See 'pyenv help global' for tips on allowing multiple" >&2
exit 127
"""


@pytest.mark.slow
def test_a_lane_whose_python_uv_cannot_find_says_which_and_how_to_provide_it(
    tmp_path, einops_index, monkeypatch, capsys
):
    # uv's own words were "Failed to inspect Python interpreter … exit status 127", nothing more
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    shop = tmp_path / "shop"
    code, _, err = run_cli(tmp_path, "init", *FROM, "--python", "3.19", str(shop), capsys=capsys)
    assert code == 0 and (shop / "locks" / "cpu" / "pylock.toml").is_file(), err
    shims = tmp_path / "pyenv-shims"
    shims.mkdir()
    (shims / "python3.19").write_text(PYENV_SHIM)
    (shims / "python3.19").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    code, out, err = run_cli(shop, "run", "--run-id", "no-python", capsys=capsys)
    assert code == 1
    said = " ".join((out + err).split())
    assert (
        "lane cpu needs Python 3.19, which uv cannot find here (Failed to inspect Python "
        "interpreter from"
    ) in said, said
    assert (
        "is Python 3.19 installed? Provide it: `export PYENV_VERSION=$(pyenv version-name):3.19.1` "
        '(pyenv has 3.19.1), or `uv python install 3.19`, or write `python = "X.Y"` in '
        "lanes/cpu.toml for a Python this host has"
    ) in said, said


# ---------------------------------------------------------------------------------------------
# issue 36: every source only this machine has is a note, with the command that re-points it


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "local"),
    [
        ("git+file:///srv/clones/patchlane@0123abcd", "/srv/clones/patchlane"),
        ("git+file:///srv/my%20clones/patchlane@v0.1.0", "/srv/my clones/patchlane"),
        ("{wheel}", "{wheel}"),
        ("{checkout}", "{checkout}"),
    ],
)
def test_init_says_a_source_only_this_machine_has_and_how_to_repoint(
    source, local, tmp_path, capsys
):
    wheel = tmp_path / "dist" / "patchlane-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    checkout = tmp_path / "patchlane"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    paths = {"wheel": wheel, "checkout": checkout}
    source, local = source.format(**paths), local.format(**paths)
    shop = _repository(tmp_path / "shop")
    code, out, err = run_cli(shop, "init", "--no-lock", "--from", source, "--json", capsys=capsys)
    assert code == 0, err
    (note,) = [n for n in json.loads(out)["notes"] if "only this machine has" in n]
    assert note.startswith(f"patchlane comes from {local}, which only this machine has"), note
    assert "`patchlane init --repoint --from NEW`" in note
    # re-pointed to a git URL: no note; back to this machine's clone: the note again
    code, out, err = run_cli(
        shop,
        "init",
        "--repoint",
        "--from",
        "git+https://github.com/OWNER/patchlane@v0.1.0",
        "--json",
        capsys=capsys,
    )
    assert code == 0 and not json.loads(out)["notes"], out
    code, out, err = run_cli(shop, "init", "--repoint", "--from", source, "--json", capsys=capsys)
    assert code == 0 and any("only this machine has" in n for n in json.loads(out)["notes"]), out


def test_init_says_nothing_of_a_source_every_runner_can_install(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    for source in ("patchlane[engine]==0.1.0", "git+https://git.example.org/o/patchlane@v0.1.0"):
        code, out, _ = run_cli(shop, "init", "--no-lock", "--from", source, "--json", capsys=capsys)
        assert code == 0 and json.loads(out)["notes"] == [], out
        # the next source in a fresh repository
        shop = _repository(tmp_path / "shop2")


# ---------------------------------------------------------------------------------------------
# issue 36: what init and shim new write passes the shop's formatters as the shop configures them

BLACK_NOXFILE = '''"""Our sessions."""

import nox

nox.options.sessions = ["tests"]


@nox.session
def tests(session):
    session.run("pytest")
'''


def _tools(shop):
    """The shop's formatters and linter in check mode, as its pre-commit hooks run them."""
    return [
        [sys.executable, "-m", "black", "--check", "--diff", "-q", "."],
        ["ruff", "format", "--check", "--diff", "."],
        ["ruff", "check", "."],
    ]


@pytest.mark.slow
@pytest.mark.parametrize("length", [79, 88, 120])
@pytest.mark.parametrize("noxfile", [None, BLACK_NOXFILE])
def test_what_init_and_shim_new_write_passes_black_and_ruff(noxfile, length, tmp_path, capsys):
    pytest.importorskip("black")
    shop = _repository(tmp_path / "shop")
    # black and ruff at the shop's line length, ruff's default rules with isort's (I) and
    # pycodestyle's (E, W) — black's profile for isort
    (shop / "pyproject.toml").write_text(
        f"[tool.black]\nline-length = {length}\n\n"
        f"[tool.ruff]\nline-length = {length}\n\n"
        '[tool.ruff.lint]\nselect = ["E4", "E7", "E9", "F", "I", "W"]\n'
    )
    if noxfile is not None:
        (shop / "noxfile.py").write_text(noxfile)
    assert run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    assert run_cli(shop, "shim", "new", "my_fix", capsys=capsys)[0] == 0
    written = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "*.py"],
        cwd=shop,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"noxfile.py", "shims/my_fix/patch.py", "shims/my_fix/reproduce.py"} <= set(written)
    for command in _tools(shop):
        done = subprocess.run(command, cwd=shop, capture_output=True, text=True, check=False)
        assert done.returncode == 0, (command, done.stdout + done.stderr)


@pytest.mark.parametrize(
    ("source", "pip", "said"),
    [
        # Python 3.11's and 3.12's bundled pip: "Invalid requirement" for this one
        ("git+file:///srv/patchlane@v0.1.0", "23.2.1", True),
        ("git+file:///srv/patchlane@v0.1.0", "24.0", True),
        ("git+file:///srv/patchlane@v0.1.0", "24.1", False),
        ("git+file:///srv/patchlane@v0.1.0", "26.3", False),
        # the spellings every pip reads
        ("git+file://localhost/srv/patchlane@v0.1.0", "23.2.1", False),
        ("git+https://github.com/OWNER/patchlane@v0.1.0", "23.2.1", False),
        ("patchlane[engine]==0.1.0", "22.3", False),
    ],
)
def test_a_pip_too_old_for_the_source_is_said_with_the_fix(tmp_path, source, pip, said):
    from retire.scaffold.source import parse_source, pip_note

    note = pip_note(parse_source(source, tmp_path), pip)
    assert bool(note) == said, note
    if said:
        assert f"this Python's pip {pip} cannot install" in note
        assert "`python -m pip install -U pip`" in note and "git+file://localhost/" in note


def test_a_toml_rule_keeps_no_lane_shim_or_report_out_of_the_commits(tmp_path, capsys):
    # issue 36: a shop's `*.toml` kept shim new's manifest (and every later lane) out of the
    # commit the bump's worktree is made from: "unknown shim 'my_fix'"
    shop = _repository(tmp_path / "shop")
    (shop / ".gitignore").write_text("*.toml\n!pyproject.toml\n*.json\n")
    code, _, err = run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)
    assert code == 0, err
    lines = (shop / ".gitignore").read_text().splitlines()
    for negation in ("!/lanes/*.toml", "!/shims/*/manifest.toml", "!/reports/*.json"):
        assert negation in lines, lines
    assert run_cli(shop, "shim", "new", "my_fix", capsys=capsys)[0] == 0
    (shop / "lanes" / "gpu.toml").write_text("")
    (shop / "reports").mkdir(exist_ok=True)
    (shop / "reports" / "2026-W50.json").write_text("{}")
    _git(shop, "add", "-A")
    staged = _git(shop, "diff", "--cached", "--name-only").split()
    for path in ("shims/my_fix/manifest.toml", "lanes/gpu.toml", "reports/2026-W50.json"):
        assert path in staged, staged


def test_shim_new_warns_when_git_would_not_commit_what_it_wrote(tmp_path, capsys):
    shop = _repository(tmp_path / "shop")
    assert run_cli(shop, "init", "--no-lock", *FROM, capsys=capsys)[0] == 0
    # a rule added after init, deeper than a negation reaches
    (shop / "shims" / ".gitignore").write_text("manifest.toml\n")
    code, out, err = run_cli(shop, "shim", "new", "my_fix", capsys=capsys)
    assert code == 0, err
    said = " ".join(out.split())
    assert (
        "warning: shims/my_fix/manifest.toml is still ignored by git "
        "(shims/.gitignore:1: manifest.toml)"
    ) in said, out
