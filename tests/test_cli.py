"""What people expect of a CLI: --version, -q/-v in one place, --json as one document on stdout
with every other line on stderr, a heartbeat for long reproducers, uv's progress on a terminal
and plain lines elsewhere, and the exit codes documented in one table that matches the code."""

from __future__ import annotations

import json
import os
import pty
import re
import select
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
    code, document, err = json_and_notes(capsys, p.root, "run", "--no-record", "--run-id", "j1")
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
    assert "docs/commands.md" in commands.build_parser().epilog
    for name in ("lock", "run", "summary", "catalogue", "bump", "pack", "retire", "lockdiff"):
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
