"""Signals keep the contract (issue 30, class 5; issue 29, item 6): Ctrl-C and SIGTERM, at any
moment of any command, end it with one "interrupted" line, the error document on ``--json``,
exit 130 (Ctrl-C) or 143 (SIGTERM), nothing half-written and nothing it started left running —
never a traceback, never a silent -15, never a failure reported for what the interrupt killed.

Real ``python -m retire`` subprocesses, real signals, real uv against loopback indexes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.support import shimtree
from tests.test_interruptions import carrying, syncing
from tests.test_json_schemas import check
from tests.test_probe_faults import upstream, world  # noqa: F401  (fixtures: a project, a code host)
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")

EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}

#: Ctrl-C as a terminal delivers it: SIGINT at its default even where this test inherited it
#: ignored (a background job), which the command would inherit too.
DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def start(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "retire", "--root", str(root), *args]
    return subprocess.Popen(
        [sys.executable, "-c", DEFAULT_SIGINT, *command],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (``SigCgt`` in its status): patchlane's
    code is running."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def compiling(mark: str) -> bool:
    """Whether a ``uv pip compile`` carrying ``mark`` runs (the command itself carries it too)."""
    for pid in carrying(mark):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"\0compile\0" in handle.read():
                    return True
        except OSError:
            pass
    return False


def wait_for(condition, process: subprocess.Popen, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def ended(process: subprocess.Popen, sig: int) -> tuple[int, str, str]:
    """Send ``sig``; the exit code, stdout and stderr (within 10 s)."""
    started = time.monotonic()
    os.kill(process.pid, sig)
    try:
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert time.monotonic() - started < 10
    return process.returncode, out.decode(), err.decode()


def said(text: str) -> int:
    """How many times the word "interrupted" is said (not inside a path or a test's name)."""
    return len(re.findall(r"(?<![\w/])interrupted\b", text))


def assert_interrupted(code: int, out: str, err: str, sig: int, *, json_mode: bool) -> None:
    assert "Traceback" not in err, err
    assert code == EXPECTED[sig], (code, err)
    assert err.rstrip().splitlines()[-1] == "patchlane: interrupted", err
    if json_mode:
        assert said(err) == 1, err
        document = json.loads(out)
        assert document["ok"] is False and document["exit_code"] == EXPECTED[sig]
        assert document["error"]["kind"] == "interrupted"
    else:
        # progress lines are on stdout: the word is said once in all
        assert said(out + err) == 1, out + err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.parametrize("after", [0.0, 0.1, 0.3])
def test_an_interrupt_while_a_command_starts_is_one_line_and_the_error_document(
    tmp_path, sig, after
):
    """`lanes --json` interrupted while the engine is still importing and parsing its arguments.
    Before: a KeyboardInterrupt traceback (Ctrl-C), a silent -15 (SIGTERM), no document. Now:
    "patchlane: interrupted", the error document, 130 or 143."""
    (tmp_path / "lanes").mkdir()
    process = start(tmp_path, "lanes", "--json")
    wait_for(lambda: catches_sigterm(process.pid), process, "SIGTERM is never handled", 30)
    time.sleep(after)
    code, out, err = ended(process, sig)
    if code == 0:
        # it finished first: its own document, whole — `lanes --json` of a project without lanes
        # is the empty list
        document = json.loads(out)
        check("lanes", document)
        assert document == []
        return
    assert_interrupted(code, out, err, sig, json_mode=True)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_an_interrupted_lock_writes_nothing_and_leaves_no_uv(toy_project, tmp_path, sig):
    """`lock --json` while uv waits for an index page that takes a minute. Before (SIGTERM): exit
    -15, no word, no document. Now: one line, the document, 130/143 at once; uv is gone and the
    lane has no lock, not half of one."""
    from tests.support.faults import Fault, FaultyIndexServer
    from tests.support.index import PackageIndex
    from tests.support.wheels import build_wheel

    p = toy_project
    index = PackageIndex()
    index.add(build_wheel(tmp_path / "wheels", "slowlib", "1.0"), "2026-01-05")
    with FaultyIndexServer(index) as server:
        server.faults.add("/simple/slowlib", Fault(latency=60))
        p.write("slow", lane(reqs='"slowlib==1.0"').replace("@MAIN@", server.url))
        mark = str(tmp_path / "mark")
        process = start(
            p.root,
            "lock",
            "slow",
            "--json",
            env={"PATCHLANE_TEST_MARK": mark, "UV_CACHE_DIR": str(tmp_path / "cold")},
        )
        try:
            wait_for(lambda: compiling(mark), process, "uv never started")
            time.sleep(0.5)
            code, out, err = ended(process, sig)
            deadline = time.monotonic() + 5
            while compiling(mark) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not compiling(mark), "uv outlived the interrupted lock"
        finally:
            for pid in carrying(mark):
                os.kill(pid, signal.SIGKILL)
    assert_interrupted(code, out, err, sig, json_mode=True)
    folder = p.root / "locks" / "slow"
    assert not folder.exists() or list(folder.iterdir()) == []


SLEEPING = """
import os, time
from pathlib import Path
from shims import reproducer

def check(with_shim):
    Path(os.environ["PATCHLANE_TEST_READY"]).write_text("ready")
    time.sleep(600)

if __name__ == "__main__":
    reproducer.run("toy_sleep", check, packages=["toylib"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["launcher", "process"])
def test_ctrl_c_during_a_reproducer_reads_as_an_interruption_not_a_failure(
    toy_project, capsys, isolation
):
    """Ctrl-C while a reproducer sleeps, with progress shown. Before (launcher): "the launcher
    died during toy_sleep without (it exited with -9) … the remaining runs use one interpreter
    each", then a fresh interpreter was started. Now: "interrupted" once, 130, what finished is
    kept — and `summary` says it shows the previous complete run."""
    p = toy_project
    shimtree.write_shim(p.root / "shims", "toy_sleep", reproducer=SLEEPING)
    p.write("old", lane(shims='["toy", "toy_sleep"]'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    p.write("old", lane(shims='["toy"]'))
    assert run_cli(p.root, "run", "--run-id", "whole", capsys=capsys)[0] == 0
    p.write("old", lane(shims='["toy", "toy_sleep"]'))
    ready = p.root / "ready"
    process = start(
        p.root,
        "run",
        "--run-id",
        "cut",
        "--isolation",
        isolation,
        env={"PATCHLANE_TEST_READY": str(ready)},
    )
    wait_for(ready.exists, process, "the reproducer never started")
    time.sleep(0.2)
    code, out, err = ended(process, signal.SIGINT)
    assert_interrupted(code, out, err, signal.SIGINT, json_mode=False)
    for failure in ("launcher died", "one interpreter each", "crashed", "build failed"):
        assert failure not in out + err, out + err
    assert "kept the 2 reproducer run(s)" in err
    code, out, err = run_cli(p.root, "summary", capsys=capsys)
    assert code == 0, err
    assert "run cut was interrupted: this is the previous complete run, whole" in err


@pytest.mark.slow
def test_ctrl_c_during_an_env_build_is_no_build_failure(toy_project, tmp_path, capsys):
    """Ctrl-C while uv waits for a wheel the index never finishes sending. Before: "[slow] build
    failed: cannot install locks/slow/pylock.toml into the lane" before the interruption. Now:
    only "interrupted"."""
    from tests.support.faults import Fault, FaultyIndexServer
    from tests.support.index import PackageIndex
    from tests.support.wheels import build_wheel

    p = toy_project
    index = PackageIndex()
    index.add(build_wheel(tmp_path / "wheels", "slowlib", "1.0"), "2026-01-05")
    with FaultyIndexServer(index) as server:
        p.write("slow", lane(reqs='"slowlib==1.0"').replace("@MAIN@", server.url))
        assert run_cli(p.root, "lock", "slow", capsys=capsys)[0] == 0
        server.faults.add("/files/slowlib", Fault(latency=60))
        mark = str(tmp_path / "mark")
        process = start(
            p.root,
            "run",
            "slow",
            env={"PATCHLANE_TEST_MARK": mark, "UV_CACHE_DIR": str(tmp_path / "cold")},
        )
        try:
            wait_for(lambda: syncing(mark), process, "uv never started syncing")
            time.sleep(0.5)
            code, out, err = ended(process, signal.SIGINT)
        finally:
            for pid in carrying(mark):
                os.kill(pid, signal.SIGKILL)
    assert_interrupted(code, out, err, signal.SIGINT, json_mode=False)
    assert "build failed" not in out + err and "cannot install" not in out + err, out + err


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [("verdicts", "--json", "--no-cache"), ("report", "--json")],
    ids=["verdicts", "report"],
)
def test_sigterm_while_probes_wait_for_a_slow_code_host(world, command):
    """`verdicts --json` / `report --json` while every code-host answer takes 25 s. Before: exit
    -15 with no word and no document. Now: one line, the error document, 143, at once."""
    p = world["project"]
    world["api"].host.latency = 25
    process = start(
        p.root, *command, "--api-url", world["api"].url, "--mirrors", str(world["mirrors"])
    )
    wait_for(lambda: catches_sigterm(process.pid), process, "SIGTERM is never handled", 30)
    # the probes are in flight
    time.sleep(2)
    started = time.monotonic()
    code, out, err = ended(process, signal.SIGTERM)
    assert time.monotonic() - started < 5
    assert_interrupted(code, out, err, signal.SIGTERM, json_mode=True)


@pytest.mark.slow
def test_sigterm_during_retire_apply_leaves_no_branch_worktree_or_change(tmp_path):
    """`retire --apply --json` SIGTERMed while uv re-locks a lane inside the proposal's worktree.
    Before: exit -15, no word, no document. Now: one line, the error document, 143; the shop's
    checkout is untouched, and no branch or worktree is left half-made."""
    from tests.support.gitrepos import git
    from tests.test_retire_lanes import LaneShop

    shop = LaneShop(tmp_path)
    try:
        shop.record_fix()
        head = git(shop.root, "rev-parse", "HEAD")
        # every index answer takes a second: the re-locks are slow
        shop.server.index.latency = 1.0
        mark = str(tmp_path / "mark")
        process = start(
            shop.root,
            "retire",
            "--apply",
            "--no-pr",
            "--json",
            env={"PATCHLANE_TEST_MARK": mark, "UV_CACHE_DIR": str(tmp_path / "cold")},
        )
        worktrees = shop.root / ".patchlane" / "worktrees"
        wait_for(
            lambda: worktrees.is_dir() and any(worktrees.iterdir()) and compiling(mark),
            process,
            "no re-lock inside a proposal's worktree",
        )
        code, out, err = ended(process, signal.SIGTERM)
        assert_interrupted(code, out, err, signal.SIGTERM, json_mode=True)
        assert git(shop.root, "status", "--porcelain") == ""
        assert git(shop.root, "rev-parse", "HEAD") == head
        assert git(shop.root, "branch", "--list", "patchlane/*") == ""
        assert len(git(shop.root, "worktree", "list").splitlines()) == 1
        assert not compiling(mark)
    finally:
        shop.server.index.latency = 0.0
        shop.close()


def test_no_uv_starts_once_the_command_is_interrupted():
    """After the signal's sweep ended every uv, a worker thread that goes on to its next step
    starts none (it would outlive the sweep)."""
    from retire.core import interrupts, uv

    interrupts._STOPPING.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            uv.run(["--version"])
    finally:
        interrupts.reset()
    assert uv.run(["--version"]).returncode == 0
