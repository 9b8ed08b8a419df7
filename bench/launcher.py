"""Issue 14: import the stack once per lane, not once per reproducer run.

Launcher isolation (a fork server per lane, :mod:`retire.runs.launcher`) against one interpreter
per run (``--isolation process``), measured side by side, interleaved:

- ``launcher.cpu-lane-14-runs``: the committed ``cpu`` lane (torch + Megatron-Core, 7 shims,
  14 runs) both ways through ``retire.runs.lanerun.run_lane``. Needs the lane's env: one already
  built in ``.patchlane/envs/cpu``, or one uv can build *offline* from its cache (the lock pulls a
  multi-GB CUDA torch; the benchmark never downloads it). Otherwise the row says why it is SKIP.
  The whole lane's ratio is reported; ``launcher.cpu-lane-without-dominant`` holds the goal: the
  same measurement less the runs of the one reproducer whose own work dominates the lane (one
  that starts fresh interpreters of its own pays them alike both ways, issue 37).
  ``launcher.cpu-lane-marginal-run``: one more run's cost beyond its own work there.
- ``launcher.torch-14-runs``: 14 runs of a reproducer that imports real torch, in the interpreter
  ``PATCHLANE_BENCH_TORCH_PYTHON`` names (e.g. a venv with the CPU wheel), else the cpu lane's
  env when it was available above; otherwise SKIP.
- ``launcher.synthetic-14-runs`` (always): 7 shims x 2 modes whose reproducers import a synthetic
  heavy package (a few dozen standard-library modules plus 0.3 s of sleep, the cost of a heavy
  import) in this interpreter; ``launcher.synthetic-marginal-run``: the launcher's cost of one more
  run; ``launcher.synthetic-same-outcomes``: records whose outcome, sentinel, exit code, detail or
  host stamp differ between the two isolations (goal 0).
- ``launcher.bisect-16-candidates``: a bisection over 16 releases of a pure-Python package (uv
  overlay venvs, loopback index) on a torch base (the interpreter of the row above), or on one
  whose heavy import is the synthetic one: launcher vs one interpreter per candidate.
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench import interleaved, median, not_measured, quick, row
from bench._universe import ROOT, isolated_uv, uv_cache
from retire.runs.launcher import Launcher
from retire.runs.reproduce import run_reproducer

SHIMS = 7
CANDIDATES = 16
TORCH_ENV = "PATCHLANE_BENCH_TORCH_PYTHON"
#: The cost of a heavy import, simulated: many standard-library modules and a pause.
SYNTHETIC_HEAVY = """
import asyncio, concurrent.futures, csv, dataclasses, decimal, email.mime.multipart, fractions
import ftplib, http.client, http.server, imaplib, json, logging.handlers, mailbox
import multiprocessing.pool, pickletools, pydoc, smtplib, sqlite3, statistics, tarfile
import unittest.mock, urllib.request, uuid, xml.dom.minidom, xml.etree.ElementTree, xmlrpc.client
import zipfile
import time
time.sleep(0.3)
"""
REPRODUCER = """
from shims import reproducer

def check(with_shim):
    import {heavy}
    import toylib
    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


def _key(record) -> tuple:
    return (
        record.shim,
        record.mode,
        record.outcome,
        record.sentinel,
        record.exit_code,
        record.detail,
        tuple(sorted(record.host.items())) if isinstance(record.host, dict) else record.host,
    )


def _tree(work: Path, heavy: str) -> tuple[list, dict[str, str]]:
    from shims.manifest import load_manifest
    from tests.support import shimtree

    root, site = work / "shims", work / "site"
    shimtree.write_target(site)
    (site / "heavysynth.py").write_text(textwrap.dedent(SYNTHETIC_HEAVY))
    manifests = []
    for number in range(SHIMS):
        shim_id = f"bench_shim_{number}"
        text = shimtree.manifest_text(shim_id) + f'\npreload = ["{heavy}", "toylib"]\n'
        folder = shimtree.write_shim(
            root, shim_id, manifest=text, reproducer=REPRODUCER.replace("{heavy}", heavy)
        )
        manifests.append(load_manifest(folder / "manifest.toml"))
    env = shimtree.subprocess_env(work, root, site)
    return manifests, env


def _fourteen(python: str, heavy: str, work: Path, repeats: int) -> tuple[dict, dict]:
    """(seconds per contender, details) of 7 shims x 2 modes, launcher vs one interpreter each."""
    manifests, env = _tree(work, heavy)
    seen: dict[str, list] = {"launcher": [], "process": []}
    marginal: list[float] = []

    def launcher() -> float:
        began = time.perf_counter()
        with Launcher(python, (heavy, "toylib"), env) as server:
            if not server.alive:
                raise RuntimeError(server.fallback)
            ready = time.perf_counter()
            seen["launcher"] = [
                server.run(m, mode, env=env) for m in manifests for mode in ("without", "with")
            ]
            done = time.perf_counter()
        marginal.append((done - ready) / len(seen["launcher"]))
        return time.perf_counter() - began

    def process() -> float:
        began = time.perf_counter()
        seen["process"] = [
            run_reproducer(m, mode, python=python, env=env)
            for m in manifests
            for mode in ("without", "with")
        ]
        return time.perf_counter() - began

    samples = interleaved({"launcher": launcher, "process": process}, repeats)
    # both ran every manifest in both modes
    pairs = zip(seen["launcher"], seen["process"], strict=True)
    differing = sum(1 for a, b in pairs if _key(a) != _key(b))
    own_work = median([r.duration_s for r in seen["process"]]) if heavy == "torch" else 0.0
    return samples, {
        "marginal": median(marginal),
        "differing": differing,
        "runs": len(seen["launcher"]),
        "outcomes": sorted({r.outcome for r in seen["launcher"]}),
        "own": own_work,
    }


def _ratio_rows(prefix: str, samples: dict, facts: dict, what: str) -> list[dict]:
    launcher_s, process_s = median(samples["launcher"]), median(samples["process"])
    ratio = process_s / launcher_s
    return [
        row(
            f"launcher.{prefix}-14-runs",
            ratio,
            ">= 5x",
            "x",
            ratio >= 5 and facts["differing"] == 0,
            f"{what}: {facts['runs']} runs, one interpreter each {process_s:.2f} s vs launcher "
            f"{launcher_s:.2f} s "
            f"(startup included; median of {len(samples['launcher'])}, interleaved); outcomes "
            f"{', '.join(facts['outcomes'])}, {facts['differing']} differing",
        ),
        row(
            f"launcher.{prefix}-marginal-run",
            facts["marginal"],
            "<= 1 s",
            "s",
            facts["marginal"] <= 1.0,
            f"{what}: one more run under the launcher (fork, stamp, the reproducer's own work, the "
            f"record); "
            f"one interpreter per run pays {process_s / facts['runs']:.2f} s each",
        ),
    ]


def _synthetic(repeats: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-launcher-") as scratch:
        samples, facts = _fourteen(sys.executable, "heavysynth", Path(scratch), repeats)
    rows = _ratio_rows(
        "synthetic", samples, facts, "synthetic heavy import (30 stdlib modules + 0.3 s)"
    )
    rows.append(
        row(
            "launcher.synthetic-same-outcomes",
            facts["differing"],
            "== 0",
            "records",
            facts["differing"] == 0,
            "records (outcome, sentinel, exit code, detail, host stamp) that differ between the "
            "isolations",
        )
    )
    return rows


def _torch(repeats: int, python: str | None) -> list[dict]:
    if not python:
        return [
            not_measured(
                "launcher.torch-14-runs",
                ">= 5x",
                "x",
                f"set {TORCH_ENV} to an interpreter with torch (e.g. a venv with the CPU wheel)",
            )
        ]
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-launcher-torch-") as scratch:
        samples, facts = _fourteen(python, "torch", Path(scratch), repeats)
    return _ratio_rows("torch", samples, facts, f"reproducers importing torch ({python})")


def _cpu_lane(repeats: int) -> tuple[list[dict], str | None]:
    """The committed cpu lane both ways, when its env exists or uv can build it from its cache;
    and the lane env's interpreter (it has torch), or None."""
    from dataclasses import replace

    from retire.core.project import Project
    from retire.lanes import lanefile
    from retire.locks import locking
    from retire.runs import envs, lanerun

    goal = ">= 5x"
    project = Project(ROOT)
    try:
        [lane] = lanefile.select(lanefile.project_lanes(project), ["cpu"])
    except Exception as exc:  # noqa: BLE001 - a benchmark that cannot start says why
        return [
            not_measured("launcher.cpu-lane-14-runs", "report", "x", f"no cpu lane here ({exc})")
        ], None
    before = os.environ.get("UV_OFFLINE")
    # never download the multi-GB CUDA torch for a benchmark
    os.environ["UV_OFFLINE"] = "1"
    try:
        env = envs.build(lane, locking.lock_path(project.locks_dir, "cpu"), project.envs_dir)
    except envs.BuildError as exc:
        reason = (
            f"the cpu lane env could not be built offline from uv's cache ({exc}); its lock pulls "
            f"a "
            f"multi-GB CUDA torch: build it once with `patchlane run cpu`, then re-run this "
            f"benchmark"
        )
        return [
            not_measured("launcher.cpu-lane-14-runs", "report", "x", reason),
            not_measured(
                "launcher.cpu-lane-without-dominant", goal, "x", "no cpu lane env (above)"
            ),
            not_measured(
                "launcher.cpu-lane-marginal-run", "<= 1 s", "s", "no cpu lane env (above)"
            ),
        ], None
    finally:
        if before is None:
            os.environ.pop("UV_OFFLINE", None)
        else:
            os.environ["UV_OFFLINE"] = before
    manifests = project.manifests()
    options = lanerun.RunOptions(
        locks_dir=project.locks_dir,
        envs_dir=project.envs_dir,
        heartbeat_s=0,
        host=lanerun.Host.detect(),
    )
    runs: dict[str, lanerun.LaneRun] = {}

    def contender(isolation: str):
        def go() -> float:
            began = time.perf_counter()
            runs[isolation] = lanerun.run_lane(
                lane, manifests, replace(options, isolation=isolation)
            )
            return time.perf_counter() - began

        return go

    samples = interleaved(
        {"launcher": contender("launcher"), "process": contender("process")}, repeats
    )
    records = {iso: [r for s in run.shims for r in s.records] for iso, run in runs.items()}
    # a lane run may record fewer runs under one isolation: the extra ones count as differing
    pairs = zip(records["launcher"], records["process"], strict=False)
    differing = sum(1 for a, b in pairs if _key(a) != _key(b))
    differing += abs(len(records["launcher"]) - len(records["process"]))
    own = median([r.duration_s for r in records["launcher"]]) if records["launcher"] else 0.0
    facts = {
        "marginal": own,
        "differing": differing,
        "runs": len(records["launcher"]),
        "outcomes": sorted({s.outcome for s in runs["launcher"].shims}),
    }
    rows = _ratio_rows(
        "cpu-lane", samples, facts, f"cpu lane ({env.python_version}, {len(env.synced)} packages)"
    )
    # the whole lane is reported; the goal is the launcher's, without the one reproducer whose
    # own work (children of its own, paid alike both ways) dominates the lane
    rows[0].update(goal="report", ok=facts["differing"] == 0)
    rows[1]["detail"] += " (here: the median launcher run, its own work included)"
    if runs["launcher"].note:
        rows[0]["detail"] += f"; note: {runs['launcher'].note}"
    rows.insert(1, _without_dominant(samples, records))
    return rows, str(env.python)


def dominant_split(
    samples: dict[str, list[float]], records: dict[str, list]
) -> tuple[str, float, float, float, float]:
    """(the shim whose runs take the most of their own time under the launcher, that time, the
    lane's seconds under the launcher and one interpreter per run without that shim's runs, the
    ratio of those) from one side-by-side measurement of a lane both ways."""
    own: dict[str, float] = {}
    for record in records["launcher"]:
        own[record.shim] = own.get(record.shim, 0.0) + record.duration_s

    def without(isolation: str, shim: str) -> float:
        spent = sum(r.duration_s for r in records[isolation] if r.shim == shim)
        return median(samples[isolation]) - spent

    shim = max(own, key=lambda name: own[name])
    launcher_s, process_s = without("launcher", shim), without("process", shim)
    return shim, own[shim], launcher_s, process_s, process_s / launcher_s


def _without_dominant(samples: dict[str, list[float]], records: dict[str, list]) -> dict:
    name, goal = "launcher.cpu-lane-without-dominant", ">= 5x"
    if not records["launcher"]:
        return not_measured(name, goal, "x", "no run was recorded")
    shim, own, launcher_s, process_s, ratio = dominant_split(samples, records)
    runs = sum(1 for r in records["launcher"] if r.shim != shim)
    return row(
        name,
        ratio,
        goal,
        "x",
        ratio >= 5,
        f"the cpu lane's other {runs} runs: one interpreter each {process_s:.2f} s vs launcher "
        f"{launcher_s:.2f} s (the same measurement less {shim}'s runs, both modes, whose own "
        f"work is {own:.1f} s under the launcher and paid alike both ways)",
    )


def _bisect(repeats: int, torch_python: str | None) -> list[dict]:
    from retire import bisect
    from retire.runs.isolation import Isolation
    from tests.support import shimtree
    from tests.support.index import IndexServer, PackageIndex
    from tests.support.wheels import build_wheel

    python = torch_python or sys.executable
    heavy = "torch" if torch_python else "heavysynth"
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-launcher-bisect-") as scratch:
        work = Path(scratch)
        index = PackageIndex()
        # add() fixed from 1.11
        for i in range(CANDIDATES):
            source = (
                f'__version__ = "1.{i}"\n\ndef add(a, b):\n    return a '
                f"{'+' if i >= 11 else '-'} b\n"
            )
            index.add(
                build_wheel(
                    work / "wheels", "toylib", f"1.{i}", files={"toylib/__init__.py": source}
                ),
                f"2026-01-{10 + i}",
            )
        site = work / "base-site"
        site.mkdir()
        (site / "heavysynth.py").write_text(textwrap.dedent(SYNTHETIC_HEAVY))
        text = shimtree.manifest_text("bench_bisect") + f'\npreload = ["{heavy}"]\n'
        from shims.manifest import load_manifest

        folder = shimtree.write_shim(
            work / "shims",
            "bench_bisect",
            manifest=text,
            reproducer=REPRODUCER.replace("{heavy}", heavy),
        )
        manifest = load_manifest(folder / "manifest.toml")
        env = {**shimtree.subprocess_env(work, work / "shims", site)}
        versions = [f"1.{i}" for i in range(CANDIDATES)]
        results = {}
        with isolated_uv(work), uv_cache(), IndexServer(index) as server:

            def contender(isolation: str):
                def go() -> float:
                    began = time.perf_counter()
                    results[isolation] = bisect.bisect(
                        manifest,
                        versions,
                        bisect.BisectJob(
                            manifest.id,
                            python=python,
                            index=server.url,
                            env=env,
                            work_dir=work / "envs",
                            isolation=Isolation(isolation),
                        ),
                    )
                    return time.perf_counter() - began

                return go

            samples = interleaved(
                {"launcher": contender("launcher"), "process": contender("process")}, repeats
            )
    launcher_s, process_s = median(samples["launcher"]), median(samples["process"])
    same = [(p.version, p.state) for p in results["launcher"].probes] == [
        (p.version, p.state) for p in results["process"].probes
    ]
    found = results["launcher"].first_fixed == "1.11" and same
    runs = results["launcher"].runs
    return [
        row(
            "launcher.bisect-16-candidates",
            process_s / launcher_s,
            "> 1x",
            "x",
            found and process_s > launcher_s,
            f"{CANDIDATES} releases, {runs} reproducer runs (one uv overlay venv each, in both); "
            f"base import "
            f"{heavy}: one interpreter per run {process_s:.2f} s vs launcher {launcher_s:.2f} s "
            f"(median of {repeats}); same probes both ways: {same}; first fixed "
            f"{results['launcher'].first_fixed}",
        )
    ]


def run() -> list[dict]:
    repeats = 1 if quick() else 3
    # 14 real runs each way: minutes, once is enough
    cpu_rows, lane_python = _cpu_lane(1)
    torch_python = os.environ.get(TORCH_ENV) or lane_python
    return [
        *cpu_rows,
        *_torch(1, torch_python),
        *_synthetic(repeats),
        *_bisect(1 if torch_python else repeats, torch_python),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
