"""A bug's window, counted: reproducer runs to locate both edges over N releases and M commits.

The search alone (its runs do not depend on how long a run takes, so they are counted, not
timed): a history of N releases, each release range M commits long, a bug introduced by one
commit and fixed by a later one. For every pair of release edges (and a commit position inside
each range that moves with them), ``locate_window`` finds both release edges — from a broken
release on record, and from none (the newest end, then a spread-out sample) — and ``locate_edge``
the commit in each range. The goal per edge: ⌈log2 N⌉ + ⌈log2 M⌉ + 1; for the window, twice that
plus the newest end, plus the sample when no broken release is on record. Then the real thing,
once: the toy upstream of tests/support/historyrepo.py (9 releases, 5 commits a range), built by
uv from a git mirror per commit, from no evidence. And the rounds of a search that runs
``WIDTH`` candidates at once (``patchlane bisect -j 4``) beside one at a time, over the same
windows: what bounds its wall time when each candidate has a GPU of its own.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from bench import quick, row
from retire.bisect.prober import OneAtATime, Prober, prober_of
from retire.bisect.search import CandidateRun, State
from retire.bisect.window import DEFAULT_SAMPLE, locate_edge, locate_window
from retire.history.edge import EdgeKind, EdgeState

RELEASES, COMMITS = 35, 40
#: candidates at once in the side-by-side row, and the releases it searches
WIDTH, WIDE_RELEASES = 4, 100


def _run(broken: set[int], item: str) -> CandidateRun:
    state = State.BROKEN if int(item) in broken else State.FIXED
    return CandidateRun(item, state, str(state))


def _probe(broken: set[int]) -> Prober:
    return prober_of(lambda item: _run(broken, item))


class _Rounds(OneAtATime):
    """A prober of ``width`` over ``broken`` that counts rounds (a run alone, or a batch)."""

    def __init__(self, broken: set[int], width: int) -> None:
        self.broken, self.width = broken, width
        self.rounds = 0

    def run(self, item: str, /) -> CandidateRun:
        self.rounds += 1
        return _run(self.broken, item)

    def run_round(self, items, /) -> list[CandidateRun]:
        self.rounds += 1
        return [_run(self.broken, item) for item in items]


def _side_by_side(n: int, width: int, step: int) -> tuple[int, int, int, bool]:
    """(rounds at ``width``, rounds one at a time, windows, same answers) over the windows on
    ``n`` releases, a broken release on record."""
    wide = narrow = tried = 0
    same = True
    versions = [str(i) for i in range(n)]
    for a in range(1, n - 1, step):
        for b in range(a + 1, n, step):
            edges = []
            for w, total in ((width, "wide"), (1, "narrow")):
                rounds = _Rounds(set(range(a, b)), w)
                found = locate_window(versions, rounds, known_broken=str((a + b - 1) // 2))
                edges.append((found.window.introduced, found.window.fixed))
                if total == "wide":
                    wide += rounds.rounds
                else:
                    narrow += rounds.rounds
            same = same and edges[0] == edges[1]
            tried += 1
    return wide, narrow, tried, same


def _commit_runs(m: int, first: int, kind: EdgeKind) -> int:
    """Runs to find the commit ``first`` (the first of the new state) among ``m`` commits of a
    range whose older tag and newer tag are known."""
    items = [str(i) for i in range(m - 1)]
    new_state = set(range(first, m)) if kind is EdgeKind.INTRODUCED else set(range(first))
    found = locate_edge(items, _probe(new_state), kind=kind, before="old", after="new")
    expected = items[first] if first < m - 1 else "new"
    assert found.edge.state == EdgeState.FOUND and found.edge.after == expected, (first, found)
    return len(found.runs)


def _worst(n: int, m: int, *, evidence: bool, step: int) -> tuple[int, int, int]:
    """(most runs for the window, most for one edge, windows tried) over release edges ``a < b``
    (introduced by release a, fixed by release b), commits at a position moving with them."""
    worst_window = worst_edge = tried = 0
    for a in range(1, n - 1, step):
        for b in range(a + 1, n, step):
            broken = set(range(a, b))
            versions = [str(i) for i in range(n)]
            known = str((a + b - 1) // 2) if evidence else None
            found = locate_window(versions, _probe(broken), known_broken=known)
            w = found.window
            if not w.seen:
                continue
            assert (w.introduced.after, w.fixed.after) == (str(a), str(b)), (a, b, w)
            tried += 1
            commits = [_commit_runs(m, (a * 7 + b) % m, EdgeKind.INTRODUCED)]
            commits.append(_commit_runs(m, (a + b * 5) % m, EdgeKind.FIXED))
            worst_window = max(worst_window, len(found.runs) + sum(commits))
            worst_edge = max(worst_edge, *commits)
    return worst_window, worst_edge, tried


def _toy() -> tuple[int, int, int, bool]:
    """(runs over releases, runs over commits, releases + commits, both commits right) for the toy
    upstream, built for real."""
    from retire.bisect.bisection import list_releases
    from retire.bisect.job import BisectJob
    from retire.bisect.transitions import Source, bisect_window
    from retire.mirrors.config import Mirror
    from retire.mirrors.repo import MirrorRepo, open_mirror
    from shims.manifest import load_manifest
    from tests.support.gitrepos import git
    from tests.support.historyrepo import make_window_repo, release_index
    from tests.support.index import IndexServer
    from tests.support.shimtree import write_shim

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-windows-") as scratch:
        work = Path(scratch)
        repo = make_window_repo(work / "upstream")
        git(work, "clone", "-q", "--mirror", str(repo.path), str(work / "mirror.git"))
        mirror = open_mirror(Mirror("https://git.example/acme/toylib", work / "mirror.git"))
        assert isinstance(mirror, MirrorRepo)
        shim = load_manifest(write_shim(work / "shims", "toylib_add") / "manifest.toml")
        with IndexServer(release_index(repo, work / "wheels")) as server:
            versions, _ = list_releases(server.url, "toylib")
            options = BisectJob(shim.id, index=server.url, work_dir=work / "e")
            result = bisect_window(shim, versions, options, source=Source(mirror))
    searched = result.searched()
    commit_runs = sum(len(s.runs) for s in searched)
    fixed, introduced = result.window.fixed.commit, result.window.introduced.commit
    right = bool(
        fixed and introduced and (fixed.sha, introduced.sha) == (repo.fixed, repo.introduced)
    )
    counted = len(result.candidates.versions) + sum(s.span.count for s in searched)
    return result.runs - commit_runs, commit_runs, counted, right


def run() -> list[dict]:
    n, m = RELEASES, COMMITS
    per_edge = math.ceil(math.log2(n)) + math.ceil(math.log2(m)) + 1
    step = 3 if quick() else 1
    with_evidence = _worst(n, m, evidence=True, step=step)
    without = _worst(n, m, evidence=False, step=step)
    goal_with, goal_without = 2 * per_edge + 1, 2 * per_edge + 1 + DEFAULT_SAMPLE
    rows = [
        row(
            "windows.both-edges-from-evidence",
            with_evidence[0],
            f"<= {goal_with}",
            "runs",
            with_evidence[0] <= goal_with and with_evidence[1] <= math.ceil(math.log2(m)),
            f"worst over {with_evidence[2]} windows on {n} releases × {m} commits a range, a "
            f"broken release on record: both release edges and both commits; one commit edge "
            f"at most {with_evidence[1]} runs (⌈log2 {m}⌉ = {math.ceil(math.log2(m))}); goal "
            f"2 × (⌈log2 N⌉ + ⌈log2 M⌉ + 1) + 1",
        ),
        row(
            "windows.both-edges-no-evidence",
            without[0],
            f"<= {goal_without}",
            "runs",
            without[0] <= goal_without,
            f"worst over the {without[2]} windows the newest end and a sample of at most "
            f"{DEFAULT_SAMPLE} found (the others are reported not seen, with what ran); goal "
            f"as above + the sample",
        ),
    ]
    wide, narrow, windows, same = _side_by_side(WIDE_RELEASES, WIDTH, 3 if quick() else 2)
    rows.append(
        row(
            f"windows.rounds-width-{WIDTH}-vs-1",
            round(wide / narrow, 3),
            "<= 0.6",
            "ratio",
            same and wide / narrow <= 0.6,
            f"rounds of the search (what bounds its wall time, each candidate on a GPU of its "
            f"own) over {windows} windows on {WIDE_RELEASES} releases, a broken release on "
            f"record: {wide} at {WIDTH} at once vs {narrow} one at a time, side by side; "
            f"answers {'the same' if same else 'DIFFERENT'}",
        )
    )
    releases, commits, counted, right = _toy()
    toy_goal = 2 * (math.ceil(math.log2(9)) + math.ceil(math.log2(5)) + 1) + 1 + DEFAULT_SAMPLE
    rows.append(
        row(
            "windows.toy-upstream-real",
            releases + commits,
            f"<= {toy_goal}",
            "runs",
            right and releases + commits <= toy_goal,
            f"real uv + git: {releases} release runs, {commits} commit runs (each a package built "
            f"from the mirror) over {counted} releases and commits, no evidence; both commits "
            f"{'right' if right else 'WRONG'}",
        )
    )
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
