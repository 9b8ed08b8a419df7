"""Interrupting ``patchlane run`` (SIGTERM as a CI cancel sends, SIGINT as Ctrl-C does, SIGKILL of
the controller itself) stops the whole reproducer tree at once — a grandchild that left the
process group with ``setsid`` included — and keeps the records that had finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from retire.evidence import validation
from retire.runs.reaper import TOKEN_ENV, marked_pids
from tests.conftest import ROOT, run_cli
from tests.support import shimtree
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401  (fixtures)

ESCAPING_REPRODUCER = """
import os, subprocess, sys, time
from pathlib import Path
from shims import reproducer

def check(with_shim):
    # A grandchild in a session of its own: out of the reproducer's process group.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    Path(os.environ["PATCHLANE_TEST_READY"]).write_text("ready")
    time.sleep(600)

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


def carrying(text: str) -> list[int]:
    """Processes whose environment contains ``text`` (this test's own marker)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if text.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
@pytest.mark.parametrize(
    ("sig", "isolation"),
    [
        (signal.SIGTERM, "process"),
        (signal.SIGINT, "process"),
        (signal.SIGKILL, "process"),
        # Under the launcher the reproducer is a fork and its escaped grandchild a fresh interpreter
        # it started: both must carry the run's marker as well.
        (signal.SIGTERM, "launcher"),
        (signal.SIGKILL, "launcher"),
    ],
    ids=["sigterm", "sigint", "sigkill", "sigterm-launcher", "sigkill-launcher"],
)
def test_an_interrupted_run_leaves_nothing_running_and_keeps_what_finished(
    toy_project, capsys, sig, isolation
):
    p = toy_project
    shimtree.write_shim(p.root / "shims", "toy_escape", reproducer=ESCAPING_REPRODUCER)
    p.write("old", lane(shims='["toy", "toy_escape"]'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    ready = p.root / "ready"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHLANE_TEST_READY": str(ready)}
    # Ctrl-C as a terminal delivers it: SIGINT at its default, even where this test process
    # inherited it ignored (a shell's background job), which the controller would inherit too.
    command = [
        sys.executable,
        "-m",
        "retire",
        "--root",
        str(p.root),
        "run",
        "--run-id",
        "i1",
        "-q",
        "--isolation",
        isolation,
    ]
    default_sigint = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    controller = subprocess.Popen(
        [sys.executable, "-c", default_sigint, *command],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert controller.poll() is None, controller.communicate()
            assert time.monotonic() < deadline, "the escaping reproducer never started"
            time.sleep(0.05)
        # the grandchild is running and the reproducer sleeps
        time.sleep(0.2)
        started = time.monotonic()
        tree = carrying(str(ready))
        # the reproducer and its escaped grandchild carry the lane's environment
        assert len(tree) >= 2
        os.kill(controller.pid, sig)
        code = controller.wait(timeout=10)
        while carrying(str(ready)) and time.monotonic() - started < 5:
            time.sleep(0.05)
        assert carrying(str(ready)) == [], (
            "a reproducer or its grandchild outlived the interrupted run"
        )
        assert time.monotonic() - started < 5
    finally:
        if controller.poll() is None:
            controller.kill()
        for pid in carrying(str(ready)):
            os.kill(pid, signal.SIGKILL)
    _, err = controller.communicate()
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        # 130 for Ctrl-C, 143 for SIGTERM; "interrupted" once
        assert code == (143 if sig == signal.SIGTERM else 130), err
        assert b"Traceback" not in err and err.count(b"patchlane: interrupted") == 1, err
    # no summary of a partial run reads as whole (a SIGKILL leaves no chance to mark it)
    code, _out, err = run_cli(p.root, "summary", "--run-id", "i1", capsys=capsys)
    if sig != signal.SIGKILL:
        assert code == 2 and "run i1 was interrupted" in err, err
    records = validation.load(p.root / "validation" / "manifest.jsonl")
    # finished: kept
    assert {(r.shim, r.mode) for r in records} == {("toy", "without"), ("toy", "with")}
    assert all(r.run == "i1" for r in records)
    assert not any(TOKEN_ENV in r.output_tail for r in records)


@pytest.mark.slow
def test_an_escaped_grandchild_of_a_finished_reproducer_is_killed(tmp_path):
    """A reproducer that daemonises a helper and exits leaves nothing behind either."""
    from retire.runs.reproduce import run_reproducer
    from shims.manifest import load_manifest

    root, site = tmp_path / "shims", tmp_path / "site"
    shimtree.write_target(site)
    body = """from shims import reproducer
import subprocess, sys
def check(with_shim):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return reproducer.BUG_REPRODUCED
reproducer.run("toy_daemon", check)
"""
    manifest = load_manifest(
        shimtree.write_shim(root, "toy_daemon", reproducer=body) / "manifest.toml"
    )
    marker = str(tmp_path / "marker")
    env = shimtree.subprocess_env(tmp_path, root, site, PATCHLANE_TEST_MARK=marker)
    record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "bug-reproduced", record.output_tail
    time.sleep(0.05)
    assert carrying(marker) == []
    assert marked_pids("no-such-token", prefix=True) == []


def syncing(mark: str) -> bool:
    """Whether a ``uv pip sync`` carrying ``mark`` is running."""
    for pid in carrying(mark):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"\0sync\0" in handle.read():
                    return True
        except OSError:
            pass
    return False


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_an_interrupt_during_a_lane_build_does_not_wait_for_uv(toy_project, capsys, tmp_path, sig):
    """uv is downloading a wheel the index never finishes sending: SIGTERM (or the controller's
    death) ends the run at once, uv included (it carries the run's marker too), instead of
    waiting out uv's own timeouts."""
    from tests.support.faults import Fault, FaultyIndexServer
    from tests.support.index import PackageIndex
    from tests.support.wheels import build_wheel

    p = toy_project
    index = PackageIndex()
    index.add(build_wheel(tmp_path / "wheels", "slowlib", "1.0"), "2026-01-05")
    with FaultyIndexServer(index) as server:
        p.write(
            "slow",
            f'''
[lane]
python = "3.11"
requirements = ["slowlib==1.0"]
shims = ["toy"]
[lane.indexes.main]
url = "{server.url}"
default = true
''',
        )
        code, out, err = run_cli(p.root, "lock", "slow", capsys=capsys)
        assert code == 0, out + err
        server.faults.add("/files/slowlib", Fault(latency=60))

        mark = str(tmp_path / "mark")
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PATCHLANE_TEST_MARK": mark,
            # nothing cached: uv must download
            "UV_CACHE_DIR": str(tmp_path / "cold-cache"),
        }
        controller = subprocess.Popen(
            [sys.executable, "-m", "retire", "--root", str(p.root), "run", "slow", "-q"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not syncing(mark):
                assert controller.poll() is None, controller.communicate()
                assert time.monotonic() < deadline, "uv never started syncing"
                time.sleep(0.05)
            # uv is waiting for the wheel that does not come
            time.sleep(0.5)
            started = time.monotonic()
            os.kill(controller.pid, sig)
            code = controller.wait(timeout=10)
            assert time.monotonic() - started < 5
            while carrying(mark) and time.monotonic() - started < 5:
                time.sleep(0.05)
            assert carrying(mark) == []
        finally:
            if controller.poll() is None:
                controller.kill()
            for pid in carrying(mark):
                os.kill(pid, signal.SIGKILL)
        _, err = controller.communicate()
    assert (
        code == (143 if sig == signal.SIGTERM else -signal.SIGKILL) and b"Traceback" not in err
    ), err
