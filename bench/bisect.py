"""Release bisection from an evidence-derived range: reproducer runs used against releases in range.

A toy library with 48 releases on a loopback index: 1.0 … 1.11 lack the API the reproducer tests
(it prints SKIPPED there), add() is broken in 1.12 … 1.33 and fixed from 1.34; 1.25 and 1.40 were
yanked, and 1.47, the newest, ships a wheel for no Python that exists (not applicable here). The
project's validation manifest holds a run merged from a GPU host that reproduced the bug on 1.20,
so the range is 1.20 … 1.47: the toy shim's reproducer is run for real, one uv overlay env per
candidate. The goal: conclusive runs ≤ ceil(log2 n) + 1 for n releases in the range (the newest
end, then n possible boundaries halved); not-applicable runs are reported apart. Then the same
over every release (``--all``, the old releases without the API in range), a second bisection
with the same cache (nothing run, nothing recorded again), and the worst case over every fix
position with the search alone (the runs it asks for do not depend on how long a run takes).
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench import row
from bench._universe import isolated_uv, uv_cache
from retire.bisect import CandidateRun, find_boundary, prober_of
from retire.core.project import Project
from retire.evidence import validation

RELEASES = 48
# 1.12 has the API, 1.34 is the first fixed release
API_FROM, FIXED_FROM = 12, 34
YANKED = {"1.25", "1.40"}
NO_WHEEL_HERE = "1.47"
RECORDED_BROKEN = "1.20"
SHIM = "toylib_arith"


def _index(folder: Path):
    from tests.support.index import PackageIndex
    from tests.support.wheels import build_wheel

    index = PackageIndex()
    for i in range(RELEASES):
        version = f"1.{i}"
        files = {"toylib/__init__.py": f'__version__ = "{version}"\n'}
        if i >= API_FROM:
            files["toylib/arith.py"] = (
                f"def add(a, b):\n    return a {'+' if i >= FIXED_FROM else '-'} b\n"
            )
        needs = ">=3.99" if version == NO_WHEEL_HERE else None
        index.add(
            build_wheel(folder, "toylib", version, files=files, requires_python=needs),
            f"2026-01-01T00:{i:02d}:00",
            yanked="bad upload" if version in YANKED else False,
            requires_python=needs,
        )
    return index


def _project(root: Path) -> Project:
    """A project holding the toy shim and one run merged from a GPU host (the evidence)."""
    from tests.support.reportshop import record
    from tests.support.shimtree import ARITH_REPRODUCER, write_shim

    write_shim(root / "shims", SHIM, reproducer=ARITH_REPRODUCER)
    project = Project(root)
    merged = record(
        SHIM,
        "gpu",
        "without",
        "bug-reproduced",
        "2026-06-01T10:00:00.000000+00:00",
        host="h100-1",
        gpu="NVIDIA H100",
        version=RECORDED_BROKEN,
    )
    validation.append(project.validation, [merged])
    return project


def _worst_case(n: int, *, not_applicable: int = 0, known_broken: bool = True) -> tuple[int, int]:
    """The most conclusive and not-applicable runs the search asks for over every fix position among
    ``n`` candidates whose first ``not_applicable`` ones the reproducer cannot run against."""
    worst = (0, 0)
    versions = [str(i) for i in range(n)]
    for boundary in range(not_applicable + 1, n):

        def probe(version: str, boundary: int = boundary) -> CandidateRun:
            i = int(version)
            state = (
                "not-applicable" if i < not_applicable else "fixed" if i >= boundary else "broken"
            )
            return CandidateRun(version, state, state)

        out = find_boundary(versions, prober_of(probe), known_broken="0" if known_broken else None)
        assert out.status == "found" and out.first_fixed == str(boundary), (boundary, out)
        skipped = sum(1 for r in out.runs if not r.conclusive)
        worst = (max(worst[0], len(out.runs) - skipped), max(worst[1], skipped))
    return worst


def _bound(n: int) -> int:
    return math.ceil(math.log2(n)) + 1


def run() -> list[dict]:
    from retire.bisect import BisectJob, bisect, list_releases, project_bounds
    from tests.support.index import IndexServer

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-bisect-") as scratch:
        work = Path(scratch)
        with isolated_uv(work), uv_cache(), IndexServer(_index(work / "wheels")) as server:
            project = _project(work / "project")
            manifest = project.manifests()[SHIM]
            versions, yanked = list_releases(server.url, "toylib")
            bounds = project_bounds(project, manifest, versions)
            options = BisectJob(
                SHIM,
                bounds,
                yanked=frozenset(yanked),
                index=server.url,
                cache=work / "cache",
                work_dir=work / "envs",
                records=project.validation,
            )
            started = time.perf_counter()
            cold = bisect(manifest, versions, options)
            cold_s = time.perf_counter() - started
            started = time.perf_counter()
            warm_bounds = project_bounds(project, manifest, versions)
            warm = bisect(manifest, versions, replace(options, bounds=warm_bounds))
            warm_s = time.perf_counter() - started
            every = bisect(
                manifest,
                versions,
                replace(
                    options,
                    bounds=project_bounds(project, manifest, versions, every=True),
                    cache=work / "cache-all",
                    records=None,
                ),
            )
    n, n_all = cold.releases_available, every.releases_available
    correct = cold.status == "found" and cold.first_fixed == f"1.{FIXED_FROM}"
    na = [p for p in cold.not_applicable if not p.cached]
    worst, _ = _worst_case(n)
    worst_all, worst_all_na = _worst_case(n_all, not_applicable=API_FROM, known_broken=False)
    per_run = cold_s / max(cold.runs, 1)
    return [
        row(
            "bisect.evidence-range-runs",
            cold.conclusive_runs,
            f"<= {_bound(n)} for {n}",
            "runs",
            correct and cold.conclusive_runs <= _bound(n),
            f"range {cold.range_note} ({n} releases in range, {len(cold.candidates.out_of_range)} "
            f"older out of it, "
            f"{len(yanked)} yanked skipped); {cold.conclusive_runs} conclusive runs, not "
            f"applicable apart: "
            f"{len(na)} ({', '.join(f'{p.version} {p.outcome}' for p in na) or 'none'}); found "
            f"{cold.last_broken} → "
            f"{cold.first_fixed}: {'correct' if correct else 'WRONG'}; {cold_s:.1f} s, "
            f"~{per_run:.2f} s per overlay env + run",
        ),
        row(
            "bisect.evidence-range-worst-case",
            worst,
            f"<= {_bound(n)}",
            "runs",
            worst <= _bound(n),
            f"most conclusive runs over all {n - 1} fix positions in the range (search alone, "
            f"lower end from the "
            f"evidence); log2({n}) = {math.log2(n):.1f}",
        ),
        row(
            "bisect.all-releases-runs",
            every.conclusive_runs,
            f"<= {_bound(n_all)} for {n_all}",
            "runs",
            every.status == "found"
            and every.first_fixed == cold.first_fixed
            and every.conclusive_runs <= _bound(n_all),
            f"--all: {n_all} releases, the oldest {API_FROM} without the API; "
            f"{every.conclusive_runs} conclusive, "
            f"{len([p for p in every.not_applicable if not p.cached])} not applicable (apart), "
            f"{len(every.unknown)} unknown; "
            f"worst case over every fix position: {worst_all} conclusive + {worst_all_na} not "
            f"applicable",
        ),
        row(
            "bisect.linear-vs-bisect",
            n / max(cold.conclusive_runs, 1),
            ">= 4x",
            "x",
            n / max(cold.conclusive_runs, 1) >= 4,
            f"a linear scan of the range runs the reproducer up to {n} times, the bisection "
            f"{cold.conclusive_runs}",
        ),
        row(
            "bisect.recorded-runs",
            cold.records_added,
            f"== {cold.runs}",
            "records",
            cold.records_added == cold.runs,
            "every fresh reproducer run lands in the validation manifest (lane bisect), skips "
            "included",
        ),
        row(
            "bisect.cached-rerun-runs",
            warm.runs + warm.records_added,
            "== 0",
            "runs",
            warm.runs == 0 and warm.records_added == 0 and warm.first_fixed == cold.first_fixed,
            f"second bisection (range now {warm.range_note}) answered from the result cache in "
            f"{warm_s:.2f} s, "
            f"{warm.records_added} records added",
        ),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
