"""Issue 37: a bug's history at the cost of its physics — fewer commit runs, cheaper ones.

- ``commits.informed-runs``: runs to pin a commit edge with the informed search
  (:mod:`retire.bisect.informed`: the commits that touch the target first, the edge confirmed by
  its predecessor) on toy histories of ``M`` commits of which ``k`` touch the target, for every
  edge at a touching commit and many touching sets; counted, not timed (a run's cost does not
  change the count). Goal per history: ``⌈log2 k⌉ + 2``. The touching set of one history is read
  with real git (:func:`retire.mirrors.touching.touching` over ``tests/support/touchrepo.py``).
- ``commits.informed-same-answers``: histories where the informed search and the full binary
  search (:func:`retire.bisect.window.locate_edge`) answer differently, over every edge —
  touching or not (goal 0); the detail says what an edge that touches nothing costs.
- ``commits.shared-vs-fresh-candidate``: one commit candidate's install, timed, real uv and git
  over the toy upstream of ``tests/support/historyrepo.py``: a fresh one as the commit runner made
  it before the shared clone (an overlay venv and ``uv pip install "toylib @
  git+file://<mirror>@<sha>"``: uv fetches the mirror and builds in its own checkout) vs the
  range's shared clone
  (:class:`retire.runs.sharedclone.SharedClone`: checkout, ``uv build``, the wheel kept, installed)
  — side by side, interleaved, each sample a commit never built before.
- ``commits.rerun-named-builds``: those candidates again with a named build (the command a
  compiled target's shim names; a rerun, or another shim over the same range): how many builds
  run again (goal 0: the kept wheels), and the time beside a clone of the candidate's own and the
  build, as the commit runner did it before the shared clone.
"""

from __future__ import annotations

import math
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import interleaved, median, quick, row
from bench._universe import isolated_uv, uv_cache
from retire.bisect.informed import TouchedSpan, informed_edge
from retire.bisect.prober import OneAtATime
from retire.bisect.search import CandidateRun, State
from retire.bisect.window import locate_edge
from retire.history.edge import CommitSearch, EdgeKind

#: commits in a range (Liger-Kernel's v0.8.1..v0.8.2 has 37) and how many touch the target
COMMITS = 37
TOUCHING = (1, 3, 5, 8, 12)


class _Toy(OneAtATime):
    """A range of ``m`` commits whose commit ``edge`` is the first fixed one; counts runs."""

    def __init__(self, m: int, edge: int) -> None:
        self.items = tuple(f"c{i:03d}" for i in range(m))
        self.edge = edge
        self.runs = 0

    def run(self, item: str, /) -> CandidateRun:
        self.runs += 1
        state = State.FIXED if self.items.index(item) >= self.edge else State.BROKEN
        return CandidateRun(item, state, str(state))


def _span(toy: _Toy, touching: set[int]) -> TouchedSpan:
    named = frozenset(toy.items[i] if i < len(toy.items) else "new" for i in touching)
    return TouchedSpan(EdgeKind.FIXED, "old", toy.items, "new", named)


def _searches(m: int, edge: int, touching: set[int]) -> tuple[int, int, bool, CommitSearch]:
    """(informed runs, full runs, same answer, how) for one history."""
    informed_toy, full_toy = _Toy(m, edge), _Toy(m, edge)
    informed = informed_edge(_span(informed_toy, touching), informed_toy)
    full = locate_edge(full_toy.items, full_toy, kind=EdgeKind.FIXED, before="old", after="new")
    return informed_toy.runs, full_toy.runs, informed.edge == full.edge, informed.how


def _counted(samples: int) -> dict:
    """Every edge position of ``samples`` random touching sets per ``k``: the worst informed runs
    when the edge touches, against the bound; answers compared over every edge."""
    rng = random.Random(37)
    worst: dict[int, int] = {}
    full_worst, differing, histories = 0, 0, 0
    miss_runs: list[float] = []
    miss_full: list[float] = []
    for k in TOUCHING:
        for _ in range(samples):
            # the newer tag's commit (index COMMITS - 1 of the range's COMMITS + 1) may touch too
            touching = set(rng.sample(range(COMMITS + 1), k))
            for edge in range(COMMITS + 1):
                runs, full, same, how = _searches(COMMITS, edge, touching)
                histories += 1
                differing += 0 if same else 1
                full_worst = max(full_worst, full)
                if edge in touching:
                    assert how == CommitSearch.TOUCHING, (k, touching, edge)
                    worst[k] = max(worst.get(k, 0), runs)
                else:
                    miss_runs.append(runs)
                    miss_full.append(full)
    return {
        "worst": worst,
        "full_worst": full_worst,
        "differing": differing,
        "histories": histories,
        "miss": (median(miss_runs), median(miss_full)),
    }


def _real_touching() -> tuple[int, int, bool]:
    """(k read by git, informed runs, the answer right) over a real toy history of COMMITS commits
    of which five touch the target, the fix at one of them."""
    from retire.core.git import Git
    from retire.mirrors.touching import touching
    from tests.support.touchrepo import make_touch_repo

    wanted = {4, 11, 19, 26, 33}
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-commits-") as scratch:
        repo = make_touch_repo(Path(scratch) / "up", COMMITS + 1, wanted)
        found = touching(Git(repo.path), "v1.0", "v1.1", ("toypkg.ops.target",))
    toy = _Toy(COMMITS, 26)
    toy.items = repo.commits[:-1]
    span = TouchedSpan(EdgeKind.FIXED, "v1.0", toy.items, repo.commits[-1], found.commits)
    result = informed_edge(span, toy)
    return len(found.commits), toy.runs, result.edge.after == repo.commits[26]


def _bound(k: int) -> int:
    return math.ceil(math.log2(k)) + 2


def _search_rows() -> list[dict]:
    facts = _counted(4 if quick() else 20)
    worst = facts["worst"]
    over = max(worst[k] - _bound(k) for k in worst)
    k_real, real_runs, right = _real_touching()
    per_k = ", ".join(f"k={k}: {worst[k]} (bound {_bound(k)})" for k in sorted(worst))
    headline = 5
    rows = [
        row(
            "commits.informed-runs",
            worst[headline],
            f"<= {_bound(headline)}",
            "runs",
            over <= 0 and right and real_runs <= _bound(k_real),
            f"worst runs to pin a commit edge at a touching commit, {COMMITS + 1} commits a range, "
            f"k touching ({per_k}); the full binary search takes up to {facts['full_worst']}; "
            f"a real git history (k={k_real} read by git log -- <paths>): {real_runs} runs, "
            f"{'right' if right else 'WRONG'} commit; goal ⌈log2 k⌉ + 2 (headline k={headline})",
        ),
        row(
            "commits.informed-same-answers",
            facts["differing"],
            "== 0",
            "histories",
            facts["differing"] == 0,
            f"histories (of {facts['histories']}: every edge, touching or not, random touching "
            f"sets) where the informed search and the full search name different commits; an edge "
            f"at a commit that touches nothing costs {facts['miss'][0]:g} runs (median, the "
            f"fall-back included) vs {facts['miss'][1]:g} for the full search",
        ),
    ]
    return rows


#: The shop's named build of the toy: the checkout's own backend, the wheel into
#: $PATCHLANE_WHEEL_DIR (the command a compiled target's shim names; minutes there, not seconds).
NAMED_BUILD = """
import os, sys
sys.path.insert(0, "_build")
import backend
backend.build_wheel(os.environ["PATCHLANE_WHEEL_DIR"])
"""


class _Candidates:
    """Commit candidates of the toy upstream installed into overlay venvs, fresh or from the
    range's shared clone; each call takes the next commit never built before."""

    def __init__(self, work: Path) -> None:
        from retire.runs.sharedclone import SharedClone
        from retire.runs.wheelcache import WheelCache
        from shims.wheelbuild import WheelBuild
        from tests.support.gitrepos import git
        from tests.support.historyrepo import make_window_repo

        self.work = work
        repo = make_window_repo(work / "upstream")
        self.mirror = work / "mirror.git"
        git(work, "clone", "-q", "--mirror", str(repo.path), str(self.mirror))
        self.commits = git(self.mirror, "log", "--first-parent", "--format=%H", "main").split()
        self.shared = SharedClone(
            self.mirror,
            work / "range" / "clone",
            repository="https://git.example/acme/toylib",
            python=Path(sys.executable),
            distribution="toylib",
            cache=WheelCache(work / "wheels"),
        )
        (work / "build-wheel.py").write_text(NAMED_BUILD)
        self.named = WheelBuild((sys.executable, str(work / "build-wheel.py")))
        self.venvs = 0

    def _venv(self) -> Path:
        from retire.runs import envs

        self.venvs += 1
        folder = self.work / "venvs" / str(self.venvs)
        envs.run_uv(["venv", "--quiet", "--python", sys.executable, str(folder)], "venv")
        return folder / "bin" / "python"

    def _install(self, python: Path, requirement: str) -> None:
        from retire.runs import envs

        args = ["pip", "install", "--quiet", "--no-deps", "--python", str(python), requirement]
        envs.run_uv(args, f"install {requirement}")

    def fresh(self, sha: str) -> None:
        """As the commit runner did before the shared clone: uv installs the commit from the
        mirror."""
        self._install(self._venv(), f"toylib @ git+file://{self.mirror}@{sha}")

    def from_clone(self, sha: str, named: bool = False) -> None:
        """The wheel from the range's clone: kept, or built there and kept."""
        wheel = self.shared.wheel_for(sha, self.named if named else None)
        self._install(self._venv(), str(wheel))

    def fresh_named(self, sha: str) -> None:
        """As the commit runner did a named build before the shared clone: a clone of its own,
        the build."""
        from retire.runs.wheelbuild import build_wheel, checkout

        self.venvs += 1
        folder = self.work / "named" / str(self.venvs)
        source = checkout(self.mirror, sha, folder / "checkout").package
        python = self._venv()
        built = build_wheel(
            self.named,
            source,
            folder / "wheel",
            folder / "build.log",
            python=python,
            commit=sha,
            distribution="toylib",
        )
        self._install(python, str(built.wheel))

    def each(self, action: Callable[[str], None], shas: list[str]) -> Callable[[], None]:
        """A contender that runs ``action`` on the next of ``shas`` each time."""
        queue = list(shas)

        def go() -> None:
            action(queue.pop(0))

        return go


def _candidate_rows() -> list[dict]:
    repeats = 3 if quick() else 10
    with tempfile.TemporaryDirectory(prefix="patchlane-bench-commits-") as scratch:
        work = Path(scratch)
        with isolated_uv(work), uv_cache():
            toy = _Candidates(work)
            # warm both: uv's git database and build environments, the clone itself
            toy.fresh(toy.commits.pop())
            toy.from_clone(toy.commits.pop())
            fresh_shas = [toy.commits.pop() for _ in range(repeats)]
            shared_shas = [toy.commits.pop() for _ in range(repeats)]
            first = interleaved(
                {
                    "fresh": toy.each(toy.fresh, fresh_shas),
                    "shared": toy.each(toy.from_clone, shared_shas),
                },
                repeats,
            )
            builds = toy.shared.builds
            # a rerun of named builds (another shim over the same range, a rerun after a crash)
            named = shared_shas[:repeats]
            for sha in named:
                toy.from_clone(sha, named=True)
            before_rerun = toy.shared.builds
            again = interleaved(
                {
                    "fresh": toy.each(toy.fresh_named, named),
                    "kept": toy.each(lambda sha: toy.from_clone(sha, named=True), named),
                },
                repeats,
            )
            rebuilt = toy.shared.builds - before_rerun
    fresh, shared = median(first["fresh"]), median(first["shared"])
    fresh_named, kept = median(again["fresh"]), median(again["kept"])
    return [
        row(
            "commits.shared-vs-fresh-candidate",
            round(shared / fresh, 3),
            "<= 0.5",
            "ratio",
            shared / fresh <= 0.5 and builds == repeats + 1,
            f"one commit candidate's overlay venv and install, each a commit never built before: "
            f"the range's shared clone (checkout, uv build in its warm build environment, the "
            f"wheel kept) {shared:.3f} s vs uv's install from the git mirror {fresh:.3f} s "
            f"(median of {repeats}, interleaved; {builds} builds in the clone); the floor, the "
            f"overlay venv and an install of a kept wheel, {kept:.3f} s = "
            f"{kept / fresh:.2f}x",
        ),
        row(
            "commits.rerun-named-builds",
            rebuilt,
            "== 0",
            "builds",
            rebuilt == 0,
            f"named builds (a compiled target's command, minutes each there; here the toy's "
            f"backend) run again when {repeats} candidates built before run again: the kept "
            f"wheel {kept:.3f} s vs a clone of its own and the build {fresh_named:.3f} s, as the "
            f"commit runner did it before (median of {repeats}, interleaved); uv's own builds "
            f"from git are cached by uv, so a rerun without a named build costs about the same "
            f"both ways",
        ),
    ]


def run() -> list[dict]:
    return [*_search_rows(), *_candidate_rows()]


if __name__ == "__main__":
    for r in run():
        print(r)
