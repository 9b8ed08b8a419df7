"""Issue 19: ``retire --apply`` over a 100-shim × 20-lane synthetic catalogue, lane by lane.

A project in a real git repository, 20 lanes locked by uv against a loopback index of 10 small
libraries (1.0, 1.5, 2.0 each); 100 shims, each on one library with a floor of 1.5 or 2.0 and
carried by 6 lanes; 4 lanes hold their pins (``policy = "hold"``). Each shim's verdict is built
per lane as the rules give it (locked at the floor: drop; a hold lane below it: hold; a follow
lane below it: raise) and ``autodrop.apply`` makes one branch per shim with real uv and git.

- ``retire.relocks-vs-naive``: the re-locks uv ran (every ``lock_lane`` call counted, the work
  real) against the naive count — one re-lock after every lane edit (the id dropped, a pin
  raised). A drop edits only the ``shims`` list, which is no lock input: it re-locks nothing.
  Goal: exactly one re-lock per raised lane per branch and at most one ``lock_lanes`` call per
  branch; the value is how many times fewer than naive.
- ``retire.apply-wall``: the wall time of the whole run, for the record.
"""

from __future__ import annotations

import contextlib
import math
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import bench
from bench._universe import isolated_uv, uv_cache
from retire.branches import autodrop
from retire.branches.dropplan import DropPlan
from retire.branches.options import ApplyOptions
from retire.core.git import Git
from retire.evidence.floor import Floor
from retire.lanes import lanefile
from retire.lanes.model import Lane, LanePolicy
from retire.locks import locking
from retire.verdicts.model import LaneStep, LaneVerdict
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

SHIMS, LANES, LIBRARIES, CARRIERS, HOLDS = 100, 20, 10, 6, 4
VERSIONS = ("1.0", "1.5", "2.0")

_SHIM = """id = "{id}"
title = "synthetic bug {n}"
fix-class = "source-patch"
explanation = "synthetic"
numerics = "exact"
owner = "bench@example.org"
created = 2026-01-01

[target]
distribution = "{lib}"
module = "{lib}"

[upstream]
status = "pending"

[retirement]
mode = "any"

[[retirement.conditions]]
kind = "reproducer-clean"

[reproducer]
packages = ["{lib}"]
"""


def _lane_text(number: int, url: str, shims: list[str], rng: random.Random) -> str:
    libs = rng.sample(range(LIBRARIES), 4)
    # pins below, at and above the floors; some lanes take whatever is newest
    pins = [f'"lib{lib}{rng.choice(["==1.0", "==1.0", "==1.5", ">=1.0"])}"' for lib in libs]
    policy = 'policy = "hold"\n' if number < HOLDS else ""
    listed = ", ".join(f'"{s}"' for s in shims)
    return (
        f'[lane]\npython = "3.11"\nplatform = "linux"\n{policy}'
        f"requirements = [{', '.join(pins)}]\nshims = [{listed}]\n\n"
        f'[lane.indexes.loopback]\nurl = "{url}"\ndefault = true\n'
    )


def _write_project(root: Path, url: str, shims: int) -> dict[str, tuple[str, str]]:
    """The catalogue; {shim: (library, floor)}."""
    rng = random.Random(19)
    targets = {
        f"fix_{n:03d}": (f"lib{n % LIBRARIES}", rng.choice(("1.5", "2.0"))) for n in range(shims)
    }
    lanes_of: dict[int, list[str]] = {k: [] for k in range(LANES)}
    for shim in targets:
        for lane in rng.sample(range(LANES), CARRIERS):
            lanes_of[lane].append(shim)
    for n, (shim, (lib, _)) in enumerate(targets.items()):
        folder = root / "shims" / shim
        folder.mkdir(parents=True)
        (folder / "manifest.toml").write_text(_SHIM.format(id=shim, n=n, lib=lib))
        (folder / "reproduce.py").write_text("raise SystemExit(0)\n")
    (root / "lanes").mkdir(parents=True)
    for k in range(LANES):
        text = _lane_text(k, url, sorted(lanes_of[k]), rng)
        (root / "lanes" / f"lane{k:02d}.toml").write_text(text)
    (root / ".gitignore").write_text(".patchlane/\n")
    return targets


def _lane_verdict(lane: Lane, lib: str, floor: str, locks_dir: Path) -> LaneVerdict:
    """The per-lane step the rules give: drop at the floor (or no target), hold, else raise."""
    version = locking.read_lock(locking.lock_path(locks_dir, lane.name)) or {}
    locked = {p["name"]: p.get("version") for p in version.get("packages", [])}.get(lib)
    if locked is None or tuple(map(int, locked.split("."))) >= tuple(map(int, floor.split("."))):
        return LaneVerdict(lane.name, LaneStep.DROP, "at the floor", lane.policy, lane.file)
    if lane.policy == LanePolicy.HOLD:
        return LaneVerdict(lane.name, LaneStep.HOLD, "holds", lane.policy, lane.file, until="x")
    raised = (Floor.parse(f"{lib}>={floor}"),)
    return LaneVerdict(lane.name, LaneStep.RAISE, "raise", lane.policy, lane.file, floors=raised)


def _plans(root: Path, targets: dict[str, tuple[str, str]]) -> list[DropPlan]:
    lanes = lanefile.load_lanes(root / "lanes", root=root)
    out = []
    for shim, (lib, floor) in targets.items():
        steps = tuple(
            _lane_verdict(lane, lib, floor, root / "locks") for lane in lanes if shim in lane.shims
        )
        out.append(
            DropPlan(
                shim, f"{lib} {floor} fixed it", (Floor.parse(f"{lib}>={floor}"),), lanes=steps
            )
        )
    return [p for p in out if p.lanes]


@contextlib.contextmanager
def _counting() -> Iterator[dict[str, int]]:
    """Count every uv re-lock (``lock_lane``) and every ``lock_lanes`` call; the work stays
    real."""
    counts = {"lock_lane": 0, "lock_lanes": 0}
    real_lane, real_lanes = locking.lock_lane, locking.lock_lanes

    def lane(*args, **kwargs):
        counts["lock_lane"] += 1
        return real_lane(*args, **kwargs)

    def lanes(*args, **kwargs):
        counts["lock_lanes"] += 1
        return real_lanes(*args, **kwargs)

    locking.lock_lane, locking.lock_lanes = lane, lanes
    try:
        yield counts
    finally:
        locking.lock_lane, locking.lock_lanes = real_lane, real_lanes


def _index(wheels: Path) -> PackageIndex:
    index = PackageIndex()
    for lib in range(LIBRARIES):
        for month, version in enumerate(VERSIONS, start=1):
            index.add(build_wheel(wheels, f"lib{lib}", version), f"2026-0{month}-01")
    return index


def run() -> list[dict]:
    shims = 20 if bench.quick() else SHIMS
    with (
        tempfile.TemporaryDirectory(prefix="patchlane-bench-retire-") as scratch,
        uv_cache(),
    ):
        work = Path(scratch)
        root = work / "project"
        with IndexServer(_index(work / "wheels")) as server, isolated_uv(work):
            targets = _write_project(root, server.url, shims)
            lanes = lanefile.load_lanes(root / "lanes", root=root)
            assert all(r.ok for r in locking.lock_lanes(lanes, root / "locks"))
            git = Git(root)
            git.run("init", "-q", "-b", "main")
            git.run("add", "-A")
            git.run("-c", "user.name=bench", "-c", "user.email=b@example.org", "commit", "-qm", "x")
            plans = _plans(root, targets)
            raises = sum(1 for p in plans for lane in p.lanes or () if lane.step == LaneStep.RAISE)
            drops = sum(1 for p in plans for lane in p.lanes or () if lane.step == LaneStep.DROP)
            started = time.perf_counter()
            with _counting() as counts:
                outcomes = autodrop.apply(root, plans, ApplyOptions(open_prs=False))
            seconds = time.perf_counter() - started
    return _rows(shims, plans, outcomes, counts, raises, drops, seconds)


def _rows(shims, plans, outcomes, counts, raises, drops, seconds) -> list[dict]:
    proposed = [o for o in outcomes if o.status == "proposed"]
    # the naive way: a re-lock after each lane edit (a raise edits two things, a drop one)
    naive = 2 * raises + drops
    ours = counts["lock_lane"]
    ok = ours == raises and counts["lock_lanes"] <= len(plans) and len(proposed) == len(plans)
    detail = (
        f"{shims} shims × {LANES} lanes: {len(proposed)} branches, {raises} lanes raised + "
        f"{drops} dropped; uv re-locked {ours} lanes in {counts['lock_lanes']} lock_lanes calls "
        f"(≤ 1 per branch) vs {naive} re-locks naively (one per lane edit; "
        f"{raises + drops} with one per edited lane)"
    )
    return [
        bench.row(
            "retire.relocks-vs-naive",
            naive / ours if ours else math.inf,
            "1 re-lock per raised lane per branch",
            "x",
            ok,
            detail,
        ),
        bench.row(
            "retire.apply-wall",
            seconds,
            "report",
            "s",
            True,
            f"autodrop.apply of {len(plans)} plans, real git and uv, warm uv cache",
        ),
    ]
