"""Issue 4: building lane environments from their locks.

- ``lanes.resync-vs-bare-uv``: ``retire.envs.build()`` re-run on an existing lane env (warm uv
  cache) against the bare ``uv pip sync`` of the same lock into an equivalent venv. Goal: ≤ 1.2×.
- ``lanes.fresh-build-vs-bare-uv``: the env deleted first, so ``build()`` makes a new venv, against
  ``uv venv`` + ``uv pip sync`` into a new venv (warm cache). Same goal.
- ``lanes.concurrent-vs-sequential``: 4 built lanes run (re-sync + the toy shim's reproducer in
  both modes) 4 at a time against one at a time, through ``retire.runs.run_lanes``: the speed-up.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from bench import interleaved, median, not_measured, quick, row, timed
from bench._universe import LANE_PYTHON, closure, lane_toml, package_name, serving, uv_cache
from retire.core import uv
from retire.lanes import lanefile
from retire.locks import locking
from retire.runs import envs

#: top-level packages of the benchmark lane: 20 packages once resolved.
LANE_TOP = [package_name(0, 0), package_name(0, 7)]
RUN_LANES = 4


def _uv(*args: str) -> None:
    proc = uv.run(args)
    if proc.returncode != 0:
        raise RuntimeError(f"uv {' '.join(args[:2])} failed: {proc.stderr.strip()[-400:]}")


def run() -> list[dict]:
    # a re-sync is ~25 ms each way: many samples, so that the machine's load evens out
    repeats = 3 if quick() else 31
    fresh_repeats = 2 if quick() else 5
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-lanes-") as scratch:
        work = Path(scratch)
        with serving(work) as server, uv_cache(work / "warm-uv-cache"):
            (work / "lanes").mkdir()
            (work / "lanes" / "bench-env.toml").write_text(lane_toml(LANE_TOP, server.url))
            [lane] = lanefile.load_lanes(work / "lanes")
            result = locking.lock_lane(lane, work / "locks")
            if not result.ok:
                raise RuntimeError(f"cannot lock the benchmark lane: {result.message}")
            lock_file = locking.lock_path(work / "locks", lane.name)
            envs_dir, bare_env = work / "envs", work / "bare-env"
            bare_python = bare_env / "bin" / "python"
            sync = [
                "pip",
                "sync",
                "--preview-features",
                "pylock",
                "--python",
                str(bare_python),
                str(lock_file),
            ]

            # warms the cache; later builds re-sync
            env = envs.build(lane, lock_file, envs_dir)
            assert len(env.synced) == len(closure(LANE_TOP)), env.synced
            _uv("venv", "--quiet", "--python", LANE_PYTHON, str(bare_env))
            _uv(*sync)

            samples = interleaved(
                {
                    "build": lambda: envs.build(lane, lock_file, envs_dir),
                    "uv": lambda: _uv(*sync),
                },
                repeats,
            )
            describe = [timed(lambda: envs.describe(env.python)) for _ in range(repeats)]
            ratio = median(samples["build"]) / median(samples["uv"])
            rows = [
                row(
                    "lanes.resync-vs-bare-uv",
                    ratio,
                    "<= 1.2x",
                    "x",
                    ratio <= 1.2,
                    f"envs.build() of an existing {len(env.synced)}-package lane env "
                    f"{median(samples['build']):.3f} s vs bare "
                    f"`uv pip sync` of the same lock into an equivalent venv "
                    f"{median(samples['uv']):.3f} s (warm cache; "
                    f"medians of {repeats}, interleaved); of build(), inspecting the env "
                    f"(envs.describe, one interpreter "
                    f"start) takes {median(describe):.3f} s",
                ),
            ]

            def fresh_build() -> float:
                shutil.rmtree(envs_dir / lane.name)
                return timed(lambda: envs.build(lane, lock_file, envs_dir))

            def bare() -> None:
                _uv("venv", "--quiet", "--python", LANE_PYTHON, str(bare_env))
                _uv(*sync)

            def fresh_bare() -> float:
                shutil.rmtree(bare_env)
                return timed(bare)

            fresh = interleaved({"build": fresh_build, "uv": fresh_bare}, fresh_repeats)
            fresh_ratio = median(fresh["build"]) / median(fresh["uv"])
            rows.append(
                row(
                    "lanes.fresh-build-vs-bare-uv",
                    fresh_ratio,
                    "<= 1.2x",
                    "x",
                    fresh_ratio <= 1.2,
                    f"envs.build() into a new venv {median(fresh['build']):.3f} s vs bare `uv "
                    f"venv` + `uv pip sync` "
                    f"{median(fresh['uv']):.3f} s (warm cache; medians of {fresh_repeats}, "
                    f"interleaved)",
                )
            )
            rows.append(concurrent_runs(work, server.url, 1 if quick() else 3))
        return rows


def concurrent_runs(work: Path, server_url: str, repeats: int) -> dict:
    """4 lanes, each with the toy shim (bug reproduced without, fixed with): run_lanes() 4 at a
    time against one at a time, envs already built (so both re-sync and run reproducers)."""
    name, goal = "lanes.concurrent-vs-sequential", "> 1x speed-up (report)"
    if importlib.util.find_spec("retire.runs") is None:
        return not_measured(name, goal, "x", "retire/runs.py (the lane runner) does not exist yet")
    from retire.runs import lanerun as runs
    from shims.manifest import load_manifest
    from tests.support.shimtree import write_shim

    project = work / "run-project"
    write_shim(project / "shims", "toy")
    manifests = {"toy": load_manifest(project / "shims" / "toy" / "manifest.toml")}
    (project / "lanes").mkdir(parents=True)
    for number in range(RUN_LANES):
        requirements = ["toylib==1.0", package_name(0, number * 3)]
        (project / "lanes" / f"run-{number}.toml").write_text(
            lane_toml(requirements, server_url, shims=("toy",))
        )
    lanes = lanefile.load_lanes(project / "lanes")
    failed = [r for r in locking.lock_lanes(lanes, project / "locks") if not r.ok]
    if failed:
        raise RuntimeError(f"cannot lock the run lanes: {failed[0].message}")
    options = runs.RunOptions(
        project / "locks", project / "envs", host=runs.Host(False, "benchmark: no GPU wanted")
    )

    def run_all(jobs: int) -> None:
        results = runs.run_lanes(lanes, manifests, options, jobs=jobs)
        outcomes = {(r.lane, s.shim): s.outcome for r in results for s in r.shims}
        if set(outcomes.values()) != {"needed"} or len(outcomes) != RUN_LANES:
            raise RuntimeError(
                f"lane runs did not all end 'needed': {outcomes or [r.why for r in results]}"
            )

    # builds the envs once: both sides then re-sync and run the reproducers
    run_all(RUN_LANES)
    samples = interleaved(
        {"sequential": lambda: run_all(1), "concurrent": lambda: run_all(RUN_LANES)}, repeats
    )
    speedup = median(samples["sequential"]) / median(samples["concurrent"])
    return row(
        name,
        speedup,
        goal,
        "x",
        speedup > 1.0,
        f"runs.run_lanes() of {RUN_LANES} built lanes (toy shim, reproducer without + with each): "
        f"one at a time {median(samples['sequential']):.2f} s, {RUN_LANES} at a time "
        f"{median(samples['concurrent']):.2f} s ({os.cpu_count()} CPUs; medians of {repeats}, "
        f"interleaved)",
    )
