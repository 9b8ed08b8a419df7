"""What people expect of a CLI: --version, -q/-v in one place, --json as one document on stdout
with every other line on stderr, a heartbeat for long reproducers, uv's progress on a terminal
and plain lines elsewhere, and the exit codes documented in one table that matches the code."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time

import pytest

from retire import commands
from retire.commands import base
from retire.commands.base import ExitCode
from tests.conftest import PYTHON, ROOT, run_cli, subprocess_env
from tests.support import shimtree
from tests.test_locking import lane_text
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401 - fixtures

ANSI = re.compile(r"\x1b\[")


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(["--version"])
    assert done.value.code == 0 and re.fullmatch(r"patchlane \S+\n", capsys.readouterr().out)


@pytest.mark.slow
def test_quiet_drops_progress_and_verbose_is_accepted_before_or_after_the_command(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    code, out, err = run_cli(project.root, "-q", "lock", capsys=capsys)
    # progress: gone
    assert code == 0 and "locking 1 of 1" not in out + err
    # results: kept
    assert "locked      a:" in out and "done in" in out
    code, out, _ = run_cli(project.root, "lock", "--quiet", capsys=capsys)
    assert code == 0 and "up-to-date  a:" not in out and "done in 0.0s: 1 up-to-date" in out
    code, out, _ = run_cli(project.root, "lock", "-v", capsys=capsys)
    assert code == 0 and "up-to-date  a:" in out
    code, _, err = run_cli(project.root, "-q", "lock", "nope", capsys=capsys)
    # errors: never suppressed
    assert code == 2 and "unknown lane 'nope'" in err
    with pytest.raises(SystemExit):
        # one or the other
        commands.main(["-q", "-v", "lanes"])


def test_say_levels_and_json_mode(capsys):
    try:
        base.configure(verbosity=-1)
        base.say("progress", level=base.Level.PROGRESS)
        base.say("result")
        base.say("problem", level=base.Level.ERROR)
        assert capsys.readouterr() == ("result\n", "problem\n")
        base.configure(verbosity=1, json=True)
        base.say("detail", level=base.Level.DETAIL)
        base.emit_json({"a": 1})
        out, err = capsys.readouterr()
        assert json.loads(out) == {"a": 1} and err == "detail\n"
    finally:
        base.configure()


def json_and_notes(capsys, root, *args) -> tuple[int, object, str]:
    code, out, err = run_cli(root, *args, "--json", capsys=capsys)
    # json.loads fails if anything else reached stdout
    return code, json.loads(out), err


@pytest.mark.slow
def test_lock_and_lock_check_print_one_json_document(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    # cannot resolve
    project.write("b", lane_text('"torchlike==9.9"'))
    code, document, err = json_and_notes(capsys, project.root, "lock")
    assert (
        code == 1 and document["ok"] is False and document["counts"] == {"locked": 1, "failed": 1}
    )
    by_lane = {row["lane"]: row for row in document["lanes"]}
    assert by_lane["a"]["status"] == "locked" and by_lane["a"]["packages"] == 1
    assert by_lane["b"]["status"] == "failed" and "torchlike" in by_lane["b"]["detail"]
    # the lines a person reads went to stderr
    assert "failed      b:" in err
    code, document, err = json_and_notes(capsys, project.root, "lock", "--check")
    assert code == 1 and document["ok"] is False
    assert {r["lane"]: r["state"] for r in document["lanes"]} == {"a": "current", "b": "missing"}
    assert "missing b: no lock" in err


@pytest.mark.slow
def test_run_and_summary_print_one_json_document(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    p.write("fixed", lane(reqs='"toylib==1.1"'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    code, document, err = json_and_notes(
        capsys, p.root, "run", "-v", "--no-record", "--run-id", "j1"
    )
    assert (
        code == 0
        and document["ok"] is True
        and document["run_id"] == "j1"
        and document["recorded"] == 0
    )
    outcomes = {
        (lane["lane"], s["shim"]): s["outcome"] for lane in document["lanes"] for s in lane["shims"]
    }
    assert outcomes == {("old", "toy"): "needed", ("fixed", "toy"): "upstream-fixed"}
    # the pytest view, on stderr
    assert "lane[old]::toy::with-shim PASSED" in err
    code, summary, _ = json_and_notes(capsys, p.root, "summary", "--run-id", "j1")
    assert code == 0 and summary["lanes"] == document["lanes"] and summary["failed"] == []


def test_catalogue_json_lists_every_shim_with_its_proofs(capsys):
    code, document, _ = json_and_notes(capsys, ROOT, "catalogue")
    assert code == 0
    ids = {row["id"] for row in document}
    assert "dsa_indexer_memory" in ids and len(ids) == len(
        list((ROOT / "shims").glob("*/manifest.toml"))
    )
    row = next(r for r in document if r["id"] == "dsa_indexer_memory")
    assert row["target"]["distribution"] == "megatron-core" and isinstance(row["proofs"], list)


SLOW_REPRODUCER = """
import time
from shims import reproducer

def check(with_shim):
    time.sleep(1.6)
    return reproducer.FIX_VALIDATED if with_shim else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.mark.slow
def test_a_long_reproducer_has_a_heartbeat(toy_project, capsys):
    p = toy_project
    shimtree.write_shim(p.root / "shims", "toy_slow", reproducer=SLOW_REPRODUCER)
    p.write("old", lane(shims='["toy_slow"]'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    code, out, _ = run_cli(p.root, "run", "--no-record", "--heartbeat", "0.5", capsys=capsys)
    assert code == 0, out
    beats = re.findall(r"\[old\] .*still running toy_slow (without|with) shim, (\d+) s", out)
    assert {mode for mode, _ in beats} == {"without", "with"}
    assert max(int(s) for _, s in beats) >= 1
    # -q drops the heartbeat with the other progress lines; --heartbeat 0 turns it off.
    code, out, _ = run_cli(p.root, "-q", "run", "--no-record", "--heartbeat", "0.5", capsys=capsys)
    assert code == 0 and "still running" not in out
    code, out, _ = run_cli(p.root, "run", "--no-record", "--heartbeat", "0", capsys=capsys)
    assert code == 0 and "still running" not in out


def on_a_terminal(args: list[str], env: dict[str, str], cwd) -> str:
    """Run ``patchlane ARGS`` with a pseudo-terminal as stdin, stdout and stderr; what it drew."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [PYTHON, "-m", "retire", *args],
        cwd=cwd,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    seen = bytearray()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    proc.wait(timeout=30)
    return seen.decode(errors="replace")


@pytest.mark.slow
def test_lane_builds_stream_uvs_output_on_a_terminal_and_plain_lines_in_ci(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    env = subprocess_env()
    for name in ("CI", "NO_COLOR"):
        env.pop(name, None)
    drawn = on_a_terminal(
        ["run", "--no-record", "--envs-dir", str(p.root / "term-envs")], env, p.root
    )
    # uv believed it was on a terminal: it drew in colour, and said what it installed.
    assert ANSI.search(drawn) and re.search(r"Installed \S*1 package", drawn), drawn[-3000:]
    assert "toy without shim: BUG_REPRODUCED" in drawn
    for plain_env in ({"CI": "true"}, {"NO_COLOR": "1"}):
        drawn = on_a_terminal(
            ["run", "--no-record", "--envs-dir", str(p.root / "ci-envs")],
            {**env, **plain_env},
            p.root,
        )
        assert "toy without shim: BUG_REPRODUCED" in drawn and "Installed" not in drawn
        # not one escape, the pytest view's included
        assert not ANSI.search(drawn), drawn[-2000:]


def test_live_output_only_on_a_terminal_outside_ci(monkeypatch):
    leader, follower = pty.openpty()
    terminal = os.fdopen(follower, "w")
    try:
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.delenv("NO_COLOR", raising=False)
        monkeypatch.setenv("TERM", "xterm")
        monkeypatch.setattr(sys, "stderr", terminal)
        assert base.live()
        monkeypatch.setenv("CI", "true")
        assert not base.live()
        monkeypatch.delenv("CI")
        monkeypatch.setenv("NO_COLOR", "")
        assert not base.live()
        monkeypatch.delenv("NO_COLOR")
        base.configure(verbosity=-1)
        assert not base.live()
        base.configure(json=True)
        assert not base.live()
        base.configure()
        with open(os.devnull, "w") as devnull:
            monkeypatch.setattr(sys, "stderr", devnull)
            assert not base.live()
    finally:
        base.configure()
        terminal.close()
        os.close(leader)


@pytest.mark.slow
def test_a_closed_pipe_is_no_traceback():
    proc = subprocess.Popen(
        [PYTHON, "-m", "retire", "--root", str(ROOT), "catalogue"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    proc.stdout.readline()
    # the reader leaves, as `| head -1` does
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err


def test_the_commands_page_documents_every_command_and_exit_code():
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    for command in commands.commands():
        assert re.search(rf"^## `patchlane {command.name}`", page, re.MULTILINE), command.name
    table = page[page.index("## Exit codes") :]
    for code in ExitCode:
        assert re.search(rf"^\| {int(code)} \| `{code.name}` \|", table, re.MULTILINE), code
    assert "`patchlane docs commands`" in commands.build_parser().epilog
    for name in (
        "lock",
        "run",
        "summary",
        "catalogue",
        "bump",
        "culprit",
        "pack",
        "retire",
        "lockdiff",
    ):
        section = page[page.index(f"## `patchlane {name}`") :]
        section = section[: section.find("\n## ", 1)]
        # each machine-read command says what its document holds
        assert "--json" in section, name
        assert "```json" in section or "same object as" in section, name


def test_the_old_command_names_still_work_for_one_release_and_say_so(tmp_path, capsys):
    from retire.evidence import validation
    from tests.test_validation import record

    listed = run_cli(ROOT, "shim", "list", "--json", capsys=capsys)
    old = run_cli(ROOT, "shims", "--json", capsys=capsys)
    # the same document on stdout; one line on stderr names the new spelling
    assert listed[0] == old[0] == 0 and json.loads(old[1]) == json.loads(listed[1])
    assert old[2] == (
        "patchlane: note: `patchlane shims` is deprecated and goes in the next release: "
        "use `patchlane shim list`\n"
    )
    records = tmp_path / "a.jsonl"
    validation.append(records, [record()])
    code, out, err = run_cli(
        tmp_path, "manifest", "merge", str(records), "-o", str(tmp_path / "m.jsonl"), capsys=capsys
    )
    assert code == 0 and "1 records (+1)" in out
    assert err == (
        "patchlane: note: `patchlane manifest` is deprecated and goes in the next release: "
        "use `patchlane validation`\n"
    )
    # hidden from the list of commands
    page = commands.build_parser().format_help()
    assert "validation" in page and not re.search(r"^\s+(manifest|shims)\s", page, re.MULTILINE)


# ---------------------------------------------------------------------------------------------
# Conventions (issue 21, item 5): the project found from here up, -V, completion, shipped docs


def test_dash_capital_v_is_the_version(capsys):
    with pytest.raises(SystemExit) as done:
        commands.main(["-V"])
    assert done.value.code == 0 and re.fullmatch(r"patchlane \S+\n", capsys.readouterr().out)


def _lanes_here(monkeypatch, capsys, folder, *args: str) -> list[str]:
    monkeypatch.chdir(folder)
    assert commands.main([*args, "lanes", "--json"]) == 0, capsys.readouterr().err
    return [row["name"] for row in json.loads(capsys.readouterr().out)]


def test_the_project_is_found_from_the_current_folder_up(tmp_path, monkeypatch, capsys):
    shop = tmp_path / "shop"
    (shop / "lanes").mkdir(parents=True)
    (shop / "lanes" / "cpu.toml").write_text(
        lane_text('"helper==1.0"').replace("@MAIN@", "http://127.0.0.1:9/simple")
    )
    deep = shop / "models" / "llm" / "configs"
    deep.mkdir(parents=True)
    # like git: from a folder deep inside, the lanes of the project around it
    assert _lanes_here(monkeypatch, capsys, deep) == ["cpu"]
    # patchlane.toml marks the project before any lanes/ folder does
    inner = shop / "models" / "llm"
    (inner / "lanes").mkdir()
    assert _lanes_here(monkeypatch, capsys, deep) == []
    (shop / "patchlane.toml").write_text("")
    assert _lanes_here(monkeypatch, capsys, deep) == ["cpu"]
    # --root still wins, before or after the command
    assert _lanes_here(monkeypatch, capsys, deep, "--root", str(inner)) == []


def test_init_works_where_it_is_asked_to_not_in_the_project_above(tmp_path, monkeypatch, capsys):
    outer = tmp_path / "outer"
    (outer / "lanes").mkdir(parents=True)
    (outer / "patchlane.toml").write_text("")
    inner = outer / "new-shop"
    inner.mkdir()
    monkeypatch.chdir(inner)
    assert commands.main(["init", "--no-lock", "--json"]) == 0, capsys.readouterr().err
    assert (inner / "lanes" / "cpu.toml").is_file()
    assert sorted(p.name for p in (outer / "lanes").iterdir()) == []


def test_bash_completion_is_generated_from_the_parser(tmp_path, capsys):
    code, out, _err = run_cli(tmp_path, "completion", "bash", capsys=capsys)
    assert code == 0
    script = tmp_path / "patchlane.bash"
    script.write_text(out)
    probe = f"""
source {script}
c() {{ COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMPREPLY=()
      _patchlane_complete; echo "${{COMPREPLY[*]}}"; }}
c patchlane lo
c patchlane --root /tmp shim n
c patchlane run --tag ""
c patchlane run --root ""
c patchlane shim new --d
c patchlane completion ""
"""
    result = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.splitlines() == [
        "lock lockdiff",
        "new",
        "cpu gpu",
        # a path: left to the shell's own file completion
        "",
        "--distribution",
        "bash zsh fish -h --help --root -q --quiet -v --verbose --values",
    ]
    # the deprecated spellings stay out, as in --help
    assert (
        "shims"
        not in script.read_text()
        .split("declare -A _patchlane_values")[0]
        .split("[patchlane]=")[1]
        .split("\n")[0]
        .split()
    )


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion_completes_commands_actions_and_choices(tmp_path, capsys):
    code, out, _err = run_cli(tmp_path, "completion", "fish", capsys=capsys)
    assert code == 0
    script = tmp_path / "patchlane.fish"
    script.write_text(out)
    # fish completes only commands it can find
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "patchlane").write_text("#!/bin/sh\n")
    (bin_ / "patchlane").chmod(0o755)
    probe = (
        f"source {script}; complete -C 'patchlane lo'; echo ==; complete -C 'patchlane shim '; "
        "echo ==; complete -C 'patchlane run --tag '"
    )
    result = subprocess.run(
        ["fish", "--no-config", "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stderr
    lock, shim, tag = (
        [line.split("\t")[0] for line in part.strip().splitlines()]
        for part in result.stdout.split("==\n")
    )
    assert lock == ["lock", "lockdiff"] and shim == ["list", "new"] and tag == ["cpu", "gpu"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_loads_and_offers_the_actions(tmp_path, capsys):
    code, out, _err = run_cli(tmp_path, "completion", "zsh", capsys=capsys)
    assert code == 0
    script = tmp_path / "_patchlane"
    script.write_text(out)
    # zsh filters by the prefix itself (compadd): the function offers the words of the position
    probe = f"""
autoload -U compinit && compinit -u -d {tmp_path}/zcompdump
source {script}
setopt ksharrays
COMP_WORDS=(patchlane shim ""); COMP_CWORD=2; COMPREPLY=(); _patchlane_complete
print -r -- "${{COMPREPLY[*]}}"
"""
    result = subprocess.run(
        ["zsh", "-f", "-c", probe], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.split()[:2] == ["list", "new"]


def test_the_docs_ship_and_print(tmp_path, capsys):
    from retire.commands.docs import folder

    code, out, _err = run_cli(tmp_path, "docs", capsys=capsys)
    assert code == 0
    assert "commands      Commands" in out and f"(in {folder()};" in out
    code, out, _err = run_cli(tmp_path, "docs", "commands", capsys=capsys)
    assert code == 0 and out == (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    code, out, err = run_cli(tmp_path, "docs", "nope", capsys=capsys)
    assert code == 2 and out == "" and "TOPIC: no page 'nope' — pick one of: architecture" in err
    assert str(folder()) in commands.build_parser().epilog


@pytest.mark.slow
def test_summary_defaults_to_the_latest_run_and_run_can_leave_the_table_to_it(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(p.root, "run", "--no-record", "--run-id", "first", capsys=capsys)
    assert code == 0 and "needed" in out, err
    # nox's lane sessions: the table is the summary session's, printed once
    code, out, err = run_cli(
        p.root, "run", "--no-record", "--run-id", "second", "--no-summary", capsys=capsys
    )
    assert code == 0 and "needed" not in out, out
    code, summary, _ = json_and_notes(capsys, p.root, "summary")
    assert code == 0 and summary["run_id"] == "second"
    # the latest is the run whose lanes finished last, whatever its name
    first = p.root / ".patchlane" / "runs" / "first" / "old.json"
    os.utime(first, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    code, summary, _ = json_and_notes(capsys, p.root, "summary")
    assert summary["run_id"] == "first"


def test_summary_without_any_run_says_how_to_make_one(tmp_path, capsys):
    code, out, err = run_cli(tmp_path, "summary", capsys=capsys)
    assert code == 2 and out == ""
    assert err == (
        "patchlane: error: --run-id: no lane run is recorded here — run `nox -s lane` first\n"
    )
