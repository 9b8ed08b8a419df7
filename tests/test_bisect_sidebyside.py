"""``patchlane bisect -j N`` for real: toylib releases on a loopback index, one overlay env per
candidate built by uv, candidates of one round running at once, each on a GPU of its own from a
declared device list (no real GPU), its children seeing only that one; the answer is -j 1's.
(The search's rounds alone: tests/test_bisect_rounds.py.)"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

from retire.bisect.prober import OneAtATime
from retire.bisect.search import CandidateRun
from retire.bisect.sidebyside import SideBySide, width_for
from retire.commands import main as cli
from retire.core import childenv
from retire.evidence import validation
from retire.runs.gpus import Gpu
from retire.runs.packing import GpuPool
from retire.runs.reaper import REAPER, Stopped
from shims.gpuneeds import GpuNeeds
from tests.conftest import run_cli
from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import manifest_text, write_shim
from tests.support.wheels import build_wheel
from tests.test_bisect import clean_series  # noqa: F401 - fixture
from tests.test_report_bisect import WEEK, shop  # noqa: F401 - fixture

VERSIONS = [f"1.{i}" for i in range(10)]

#: Prints the GPUs it was given, takes a while, and leaves when it ran and on what in a file of its
#: own: what proves two candidates ran at once, on different GPUs.
SEES_AND_WAITS = """
import json
import os
import time
from pathlib import Path

from shims import reproducer


def check(with_shim):
    import toylib

    began = time.time()
    seen = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
    print(f"saw {seen}")
    time.sleep(1.5)
    folder = Path(os.environ["PATCHLANE_TEST_MEET"])
    (folder / f"{toylib.__version__}-{os.getpid()}.json").write_text(
        json.dumps({"version": toylib.__version__, "devices": seen, "began": began,
                    "ended": time.time()})
    )
    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """toylib 1.0 … 1.9, add() fixed from 1.6."""
    folder = tmp_path_factory.mktemp("sidebyside")
    index = PackageIndex()
    for i, version in enumerate(VERSIONS):
        op = "+" if i >= 6 else "-"
        source = f'__version__ = "{version}"\n\ndef add(a, b):\n    return a {op} b\n'
        wheel = build_wheel(folder, "toylib", version, files={"toylib/__init__.py": source})
        index.add(wheel, f"2026-01-{10 + i:02d}")
    with IndexServer(index) as server:
        yield server


def _bisect(project, series, cache, *more: str, capsys) -> dict:
    code = cli(
        [
            "bisect",
            "toylib_gpu",
            "--root",
            str(project),
            "--index",
            series.url,
            "--cache",
            str(cache),
            "--python",
            sys.executable,
            "--json",
            *more,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err
    return json.loads(out) | {"said": err}


@pytest.mark.slow
def test_two_candidates_run_at_once_each_on_a_gpu_of_its_own(tmp_path, series, capsys, monkeypatch):
    project = tmp_path / "project"
    manifest = manifest_text("toylib_gpu").replace(
        "needs-cuda = false", 'gpus = 1\npreload = ["json"]'
    )
    write_shim(project / "shims", "toylib_gpu", manifest=manifest, reproducer=SEES_AND_WAITS)
    monkeypatch.setenv("PATCHLANE_GPUS", "h100:9.0:80,h100:9.0:80")
    monkeypatch.setenv("PATCHLANE_GPU_LOCKS", str(tmp_path / "leases"))
    meet = tmp_path / "meet"
    meet.mkdir()
    monkeypatch.setenv("PATCHLANE_TEST_MEET", str(meet))
    wide = _bisect(project, series, tmp_path / "cache-2", "-j", "2", "--all", capsys=capsys)
    assert "candidates: up to 2 at once, each on 1 GPU of its own (2 on this host)" in wide["said"]
    ran = [json.loads(p.read_text()) for p in meet.iterdir()]
    assert {r["devices"] for r in ran} == {"0", "1"}
    overlapping = [
        (a, b)
        for a in ran
        for b in ran
        if a["version"] < b["version"] and a["began"] < b["ended"] and b["began"] < a["ended"]
    ]
    assert overlapping and all(a["devices"] != b["devices"] for a, b in overlapping)
    # each candidate's record says which GPU it ran on
    records = validation.load(project / "validation" / "manifest.jsonl")
    assert len(records) == len(ran) == wide["runs"]
    assert {r.host.get("visible_devices") for r in records} == {"0", "1"}
    # one at a time (no record, a cache of its own): the same window, in more rounds
    narrow = _bisect(project, series, tmp_path / "cache-1", "--all", "--no-record", capsys=capsys)
    assert wide["status"] == narrow["status"] == "found"
    assert (
        (wide["first_fixed"], wide["last_broken"])
        == (narrow["first_fixed"], "1.5")
        == (
            "1.6",
            "1.5",
        )
    )
    assert wide["window"]["introduced"] == narrow["window"]["introduced"]
    assert wide["window"]["fixed"] == narrow["window"]["fixed"]


def test_width_is_capped_by_the_sets_the_host_can_give(monkeypatch):
    # the host's GPUs as discovered (declared here): -j 4 for a one-GPU reproducer on two
    monkeypatch.setenv("PATCHLANE_GPUS", "h100:9.0:80,h100:9.0:80")
    side = SideBySide(lambda: _Seeing([]), 4, GpuNeeds(1))
    assert side.width == 2 and side.pool is not None and len(side.pool.gpus) == 2
    assert SideBySide(lambda: _Seeing([]), 4, GpuNeeds(0)).pool is None
    two = (Gpu("0", "h100", "9.0", 80), Gpu("1", "h100", "9.0", 80))
    assert width_for(GpuNeeds(1), 4, two) == 2
    assert width_for(GpuNeeds(2), 4, two) == 1
    # a CPU reproducer: as many as asked, no GPU
    assert width_for(GpuNeeds(0), 4, two) == 4
    # a host without GPUs: nothing to hold (the reproducer says what it lacks)
    assert width_for(GpuNeeds(1), 3, ()) == 3


class _Seeing(OneAtATime):
    """A runner that notes the GPUs its thread's children would see, and when it ran."""

    def __init__(self, log: list[tuple[str, str, float, float]]) -> None:
        self.log = log

    def run(self, item: str, /) -> CandidateRun:
        began = time.monotonic()
        time.sleep(0.3)
        devices = childenv.for_reproducer({"PATH": "/bin"}).get("CUDA_VISIBLE_DEVICES", "")
        self.log.append((item, devices, began, time.monotonic()))
        return CandidateRun(item, "fixed", "fix-validated")


@pytest.mark.slow
def test_a_round_holds_a_gpu_per_candidate_and_never_one_a_lane_holds(tmp_path):
    """Three GPUs, a lane holding GPU 0: a round of two candidates runs on GPUs 1 and 2, one each,
    on runners of their own; the thread that asked sees no GPU setting afterwards."""
    gpus = (Gpu("0", "h100"), Gpu("1", "h100"), Gpu("2", "h100"))
    log: list[tuple[str, str, float, float]] = []
    made: list[_Seeing] = []

    def make() -> _Seeing:
        made.append(_Seeing(log))
        return made[-1]

    lane = GpuPool(gpus, tmp_path)
    side = SideBySide(make, 3, GpuNeeds(1), gpus=gpus)
    # the host-wide leases of this test, not the user's
    side.pool = GpuPool(gpus, tmp_path)
    assert side.width == 3
    with lane.hold(GpuNeeds(1)) as held:
        assert [gpu.id for gpu in held] == ["0"]
        runs = side.run_round(["1.0", "1.1"])
    assert [r.version for r in runs] == ["1.0", "1.1"]
    assert sorted(devices for _, devices, _, _ in log) == ["1", "2"]
    (_, _, a_began, a_ended), (_, _, b_began, b_ended) = log
    assert len(made) == 2 and a_began < b_ended and b_began < a_ended
    assert "CUDA_VISIBLE_DEVICES" not in childenv.for_lane({})


@pytest.mark.slow
def test_the_weekly_bisections_run_candidates_side_by_side_within_the_budget(shop, capsys):
    """`report --bisect-budget 3 --bisect-jobs 4`: add_a's bisection runs its candidates four at
    a time, yet never starts more than the budget has left — the newest end, then a round of two,
    not four — and add_b's is left."""
    code, out, err = run_cli(
        shop.root,
        "report",
        "--week",
        WEEK,
        "--json",
        "--bisect-budget",
        "3",
        "--bisect-jobs",
        "4",
        capsys=capsys,
    )
    assert code == 0, err
    assert "candidates: up to 4 at once" in err
    done = json.loads(out)["bisections"]
    [ran] = done["ran"]
    assert ran["shim"] == "add_a" and ran["runs"] == done["runs"] == 3
    assert ran["stopped"] == "the budget of 3 reproducer runs is spent"
    assert [left["shim"] for left in done["left"]] == ["add_b"]
    assert len([r for r in validation.load(shop.validation) if r.lane == "bisect"]) == 3


class _Stopping(OneAtATime):
    """A runner whose first candidate is stopped (Ctrl-C seen by its thread) while the other's
    reproducer, a real process, would run for a minute."""

    def __init__(self, started: threading.Event, pids: list[int]) -> None:
        self.started, self.pids = started, pids

    def run(self, item: str, /) -> CandidateRun:
        if item == "stopped":
            self.started.wait(30)
            raise Stopped()
        process = REAPER.spawn([sys.executable, "-c", "import time; time.sleep(60)"], env={})
        self.pids.append(process.pid)
        self.started.set()
        try:
            process.wait(90)
        finally:
            REAPER.finish(process)
        return CandidateRun(item, "unknown", "crashed")


@pytest.mark.slow
def test_a_stopped_round_ends_the_other_candidates_reproducers_now():
    """Ctrl-C during a round: the round raises at once and the other candidate's reproducer is
    killed, not waited for to its end; the next round runs again."""
    started, pids = threading.Event(), []
    side = SideBySide(lambda: _Stopping(started, pids), 2)
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        side.run_round(["stopped", "sleeps"])
    assert time.monotonic() - began < 30 and len(pids) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    # stopped once is not stopped for good: a later round runs
    REAPER.check()
    assert SideBySide(lambda: _Seeing([]), 2).run_round(["1.0", "1.1"])[1].version == "1.1"
