"""`patchlane init` in repositories as shops have them (issue 29, issue 30 class 6): a `.gitignore`
that keeps the lock out of every commit, a noxfile run as a script, files with CRLF line endings,
links, hostile YAML and Python — each either merged the way the shop writes its files or one line
naming the file, with nothing written."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import run_cli

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
    assert [n.split(" is ")[0] for n in notes[:3]] == [
        "note: .github/workflows/patchlane-lanes.yml",
        "note: .github/workflows/patchlane-report.yml",
        "note: locks/cpu/pylock.toml",
    ]
    assert "(locks/.gitignore:1: pylock.toml)" in notes[2] and "git add locks/cpu" in notes[2]
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
