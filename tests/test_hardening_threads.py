"""Threads and processes (issue 30, class 4): the uv binary is looked up safely from many lane
threads at once, and a reproducer that answers and exits is recorded by its answer at once, even
when a grandchild that left its session still holds its stdout."""

from __future__ import annotations

import sys
import sysconfig
import threading
import time

import pytest

from retire.core import uv
from retire.runs.reproduce import run_reproducer
from shims.manifest import load_manifest
from tests.support import shimtree
from tests.test_interruptions import carrying


def _fresh_sysconfig() -> None:
    """This interpreter as it starts: sysconfig's table not filled, its data module not imported
    (what ``run --jobs 8`` over fresh lanes meets in its first uv lookups)."""
    sysconfig._CONFIG_VARS = None  # type: ignore[attr-defined]
    for name in [m for m in sys.modules if m.startswith("_sysconfigdata")]:
        del sys.modules[name]
    uv._binary.cache_clear()


@pytest.mark.slow
def test_the_uv_binary_is_looked_up_safely_from_many_threads():
    """Sixteen lane threads ask for uv at the same moment, twenty times over. Before: most rounds
    had a thread fail with TypeError: can only concatenate str (not "NoneType") to str, inside
    uv's find_uv_bin reading a half-filled sysconfig table. Now: one lookup, one answer."""
    expected = uv.binary()
    failures: list[str] = []
    for _round in range(20):
        _fresh_sysconfig()
        barrier = threading.Barrier(16)
        answers: list[str] = []

        def ask(answers=answers, barrier=barrier) -> None:
            barrier.wait()
            try:
                answers.append(uv.binary())
            # whatever the lookup raises is the failure this test is about
            except Exception as exc:  # noqa: BLE001
                failures.append(repr(exc))

        threads = [threading.Thread(target=ask) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[0]
        assert answers == [expected] * 16


LINGERING = """from shims import reproducer
import subprocess, sys
def check(with_shim):
    # a helper in a session of its own that keeps this process's stdout and stderr open
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                     start_new_session=True)
    return reproducer.FIX_VALIDATED
reproducer.run("toy_linger", check)
"""


@pytest.mark.slow
def test_an_answer_is_taken_when_the_reproducer_exits_not_when_its_pipes_close(tmp_path):
    """The reproducer prints its sentinel and exits; a setsid grandchild holds its stdout for 600
    s. Before: the run waited for the pipes, and after the manifest's 20 s timeout recorded a
    timeout. Now: the answer (fix-validated) within seconds, and the grandchild is ended."""
    root, site = tmp_path / "shims", tmp_path / "site"
    shimtree.write_target(site)
    manifest = load_manifest(
        shimtree.write_shim(root, "toy_linger", reproducer=LINGERING) / "manifest.toml"
    )
    marker = str(tmp_path / "marker")
    env = shimtree.subprocess_env(tmp_path, root, site, PATCHLANE_TEST_MARK=marker)
    began = time.monotonic()
    record = run_reproducer(manifest, "without", env=env, timeout=20)
    took = time.monotonic() - began
    assert record.outcome == "fix-validated", (record.outcome, record.detail, record.output_tail)
    assert record.sentinel == "FIX_VALIDATED" and record.exit_code == 0
    assert took < 10, f"took {took:.1f} s: waited for the grandchild"
    deadline = time.monotonic() + 5
    while carrying(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert carrying(marker) == [], "the grandchild outlived the run"


@pytest.mark.slow
def test_a_reproducer_that_hangs_is_still_a_timeout(tmp_path):
    """The timeout still holds for a reproducer that never exits (its whole tree is killed)."""
    body = """from shims import reproducer
import time
def check(with_shim):
    time.sleep(600)
reproducer.run("toy_hang", check)
"""
    root, site = tmp_path / "shims", tmp_path / "site"
    shimtree.write_target(site)
    manifest = load_manifest(
        shimtree.write_shim(root, "toy_hang", reproducer=body) / "manifest.toml"
    )
    env = shimtree.subprocess_env(tmp_path, root, site)
    record = run_reproducer(manifest, "without", env=env, timeout=2)
    assert record.outcome == "timeout"
