"""Warm launchers, one per slot, lent to candidates run side by side and kept across rounds."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retire.runs.launcher import Launcher
from retire.runs.launcherpool import LauncherPool
from shims.manifest import load_manifest
from tests.support import shimtree


class Fake:
    made = 0

    def __init__(self) -> None:
        Fake.made += 1
        self.number = Fake.made
        self.closed = False
        self.busy = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _count():
    Fake.made = 0


def test_a_slot_is_started_on_first_need_and_lent_again_afterwards():
    pool = LauncherPool(Fake, 2)
    with pool.borrow() as first:
        assert pool.started == 1
    with pool.borrow() as again:
        assert again is first
    with pool.borrow() as one, pool.borrow() as two:
        assert {one.number, two.number} == {1, 2}
    assert pool.started == 2
    pool.close()
    assert one.closed and two.closed


def test_never_more_launchers_than_slots_and_none_lent_twice_at_once():
    pool = LauncherPool(Fake, 3)
    lent = threading.Lock()
    clash = []

    def candidate(_: int) -> int:
        with pool.borrow() as launcher:
            with lent:
                clash.append(launcher.busy)
                launcher.busy = True
            time.sleep(0.01)
            with lent:
                launcher.busy = False
            return launcher.number

    # five rounds of six candidates over three slots
    with ThreadPoolExecutor(6) as threads:
        for _ in range(5):
            used = set(threads.map(candidate, range(6)))
            assert used <= {1, 2, 3}
    assert pool.started == 3 and not any(clash)


def test_warm_starts_every_slot_side_by_side_and_close_waits_for_the_borrowed():
    def slow() -> Fake:
        time.sleep(0.2)
        return Fake()

    pool = LauncherPool(slow, 4)
    began = time.monotonic()
    pool.warm()
    # four starts of 0.2 s, together
    assert pool.started == 4 and time.monotonic() - began < 0.6
    pool.warm()
    assert pool.started == 4
    with pool.borrow() as kept:
        pool.close()
        assert not kept.closed
    assert kept.closed
    with pytest.raises(RuntimeError, match="closed"), pool.borrow():
        pass


def test_a_launcher_that_fails_to_start_frees_its_slot():
    attempts = []

    def flaky() -> Fake:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("no interpreter")
        return Fake()

    pool = LauncherPool(flaky, 1)
    with pytest.raises(OSError), pool.borrow():
        pass
    with pool.borrow() as launcher:
        assert launcher.number == 1
    with pytest.raises(ValueError, match="at least one slot"):
        LauncherPool(Fake, 0)


def test_a_failed_start_while_warming_loses_none_of_the_others():
    """One of three slots cannot start while the pool warms: the two that did are lent (none is
    lost to a borrower waiting forever), the failure is raised, and the free slot starts on the
    next borrow."""
    attempts = []

    def second_fails() -> Fake:
        attempts.append(1)
        if len(attempts) == 2:
            raise OSError("no interpreter")
        time.sleep(0.05)
        return Fake()

    pool = LauncherPool(second_fails, 3)
    with pytest.raises(OSError):
        pool.warm()
    assert pool.started == 2
    with pool.borrow() as one, pool.borrow() as two, pool.borrow() as three:
        assert len({one.number, two.number, three.number}) == 3
    assert pool.started == 3


def test_warm_soon_starts_the_slots_in_the_background_and_close_waits_for_them():
    started = threading.Event()
    release = threading.Event()

    def slow() -> Fake:
        started.set()
        release.wait(5)
        return Fake()

    pool = LauncherPool(slow, 2)
    began = time.monotonic()
    pool.warm_soon()
    pool.warm_soon()
    # the caller goes on at once
    assert time.monotonic() - began < 0.5 and started.wait(5)
    release.set()
    with pool.borrow() as launcher:
        assert not launcher.closed
    pool.close()
    assert pool.started == 2 and all(made.closed for made in pool.made)
    # closed while still warming: what starts afterwards is closed too
    release.clear()
    late = LauncherPool(slow, 2)
    late.warm_soon()
    threading.Timer(0.2, release.set).start()
    late.close()
    assert late.started == 2 and all(made.closed for made in late.made)


HEAVY = """
import os
with open(os.environ["HEAVY_LOG"], "a") as handle:
    handle.write(f"{os.getpid()}\\n")
"""


@pytest.mark.slow
def test_real_launchers_import_the_stack_once_per_slot_for_every_round(tmp_path):
    root, site = tmp_path / "shims", tmp_path / "site"
    shimtree.write_target(site)
    (site / "heavypkg.py").write_text(textwrap.dedent(HEAVY))
    log = tmp_path / "heavy.log"
    env = shimtree.subprocess_env(tmp_path, root, site, HEAVY_LOG=str(log))
    text = shimtree.manifest_text("toy") + '\npreload = ["heavypkg"]\n'
    manifest = load_manifest(shimtree.write_shim(root, "toy", manifest=text) / "manifest.toml")
    pool = LauncherPool(lambda: Launcher(sys.executable, ["heavypkg"], env), 2)

    def candidate(_: int) -> str:
        with pool.borrow() as launcher:
            assert launcher.alive, launcher.fallback
            return launcher.run(manifest, "without", env=env).outcome

    with pool, ThreadPoolExecutor(2) as threads:
        pool.warm()
        # three rounds of two candidates: releases, then commits, on the same launchers
        outcomes = [outcome for _ in range(3) for outcome in threads.map(candidate, range(2))]
    assert outcomes == ["bug-reproduced"] * 6
    # heavypkg imported by the two launchers only, never by a run
    assert len(log.read_text().split()) == 2
