"""Release bisection: reproducer runs used against releases available.

A toy library with 34 releases on a loopback index (2 of them yanked, so 32 candidates), its
add() fixed from one release on; the toy shim's reproducer is run for real, in one uv overlay
env per candidate. A linear scan would run it up to 32 times; the bisection's bound is
ceil(log2 32) + 2 = 7 (the search plus the two endpoint checks). A second bisection with the
same cache runs nothing. The worst case over every possible fix position is measured with the
search alone (the runs it asks for do not depend on how long a run takes).
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from bench import row
from bench._universe import isolated_uv, uv_cache
import retire.bisect as bisect
from shims.manifest import load_manifest
from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import write_shim
from tests.support.wheels import build_wheel

RELEASES = 34
YANKED = {"1.7", "1.19"}
FIXED_FROM = 23  # 1.23 is the first fixed release
SOURCE = '__version__ = "{v}"\n\ndef add(a, b):\n    return a {op} b\n'


def _index(folder: Path) -> PackageIndex:
    index = PackageIndex()
    for i in range(RELEASES):
        version = f"1.{i}"
        wheel = build_wheel(folder, "toylib", version,
                            files={"toylib/__init__.py": SOURCE.format(v=version, op="+" if i >= FIXED_FROM else "-")})
        index.add(wheel, f"2026-01-01T00:{i:02d}:00", yanked="bad upload" if version in YANKED else False)
    return index


def _worst_case(n: int) -> int:
    """The most runs the search asks for over every boundary position among ``n`` candidates."""
    worst = 0
    versions = [f"1.{i}" for i in range(n)]
    for boundary in range(1, n):
        asked = []

        def probe(version: str, boundary: int = boundary) -> bisect.CandidateRun:
            asked.append(version)
            state = bisect.FIXED if versions.index(version) >= boundary else bisect.BROKEN
            return bisect.CandidateRun(version, state, state)

        status, *_ = bisect.search(versions, probe)
        assert status == "found"
        worst = max(worst, len(asked))
    return worst


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-bisect-") as scratch:
        work = Path(scratch)
        with isolated_uv(work), uv_cache(), IndexServer(_index(work / "wheels")) as server:
            shim = load_manifest(write_shim(work / "shims", "toylib_add") / "manifest.toml")
            versions, yanked = bisect.list_releases(server.url, "toylib")
            options = dict(yanked=yanked, index_url=server.url, cache_dir=work / "cache", work_dir=work / "envs")
            started = time.perf_counter()
            cold = bisect.bisect(shim, versions, **options)
            cold_s = time.perf_counter() - started
            started = time.perf_counter()
            warm = bisect.bisect(shim, versions, **options)
            warm_s = time.perf_counter() - started
    n = cold.releases_available
    bound = cold.run_bound
    correct = cold.status == "found" and cold.first_fixed == f"1.{FIXED_FROM}"
    worst = _worst_case(n)
    per_run = cold_s / max(cold.runs, 1)
    return [
        row("bisect.runs-used", cold.runs, f"<= {bound} for {n}", "runs", correct and cold.runs <= bound,
            f"{cold.runs} reproducer runs for {n} releases ({len(versions)} listed, {len(yanked)} yanked skipped); "
            f"found {cold.last_broken} → {cold.first_fixed}: {'correct' if correct else 'WRONG'}; {cold_s:.1f} s, "
            f"~{per_run:.2f} s per overlay env + run"),
        row("bisect.runs-worst-case", worst, f"<= {bound}", "runs", worst <= bound,
            f"most runs over all {n - 1} fix positions (search alone); log2({n}) = {math.log2(n):.1f}"),
        row("bisect.linear-vs-bisect", n / max(cold.runs, 1), ">= 4x", "x", n / max(cold.runs, 1) >= 4,
            f"a linear scan runs the reproducer up to {n} times, the bisection {cold.runs}"),
        row("bisect.cached-rerun-runs", warm.runs, "== 0", "runs", warm.runs == 0 and warm.first_fixed == cold.first_fixed,
            f"second bisection answered from the result cache in {warm_s:.2f} s"),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
