"""Commit candidates from the runner's one clone, for real: the toy upstream of
tests/support/historyrepo.py mirrored, its releases on a loopback index, real uv building each
commit's wheel in one clone and one warm build environment, the wheels kept in the project's
wheel cache. Each build says its place in the search; every record names the upstream commit; a
second bisection over the same range (another result cache: its runs happen again) builds
nothing. (The damaged mirror: tests/test_damaged_mirror.py; named builds:
tests/test_bisect_named_build.py.)"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from retire.bisect.bisection import list_releases
from retire.bisect.budget import Budget
from retire.bisect.job import BisectJob
from retire.bisect.prober import Progress
from retire.bisect.transitions import Source, bisect_window
from retire.bisect.windowresult import WindowResult
from retire.evidence import validation
from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror
from retire.runs.wheelcache import WheelCache
from shims.manifest import load_manifest
from tests.support.gitrepos import git
from tests.support.historyrepo import FIXED, make_window_repo, release_index
from tests.support.index import IndexServer
from tests.support.shimtree import write_shim

pytestmark = pytest.mark.slow

UPSTREAM = "https://git.example/acme/toylib"


class Notes(Progress):
    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []

    def note(self, text: str) -> None:
        self.said.append(text)


def test_a_second_bisection_over_the_same_range_builds_nothing(tmp_path: Path):
    repo = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    opened = open_mirror(Mirror(UPSTREAM, mirror))
    assert isinstance(opened, MirrorRepo)
    manifest = load_manifest(write_shim(tmp_path / "shims", "toylib_add") / "manifest.toml")
    wheels = tmp_path / "wheels"
    with IndexServer(release_index(repo, tmp_path / "released")) as server:
        versions, yanked = list_releases(server.url, "toylib")

        def bisection(cache: str, records: str) -> tuple[list[str], WindowResult]:
            notes = Notes()
            job = BisectJob(
                manifest.id,
                yanked=frozenset(yanked),
                index=server.url,
                cache=tmp_path / cache,
                work_dir=tmp_path / "work",
                records=tmp_path / records,
                wheels=wheels,
            )
            result = bisect_window(manifest, versions, job, source=Source(opened), progress=notes)
            return notes.said, result

        first, result = bisection("cache-1", "first.jsonl")
        again, second = bisection("cache-2", "second.jsonl")
    for found in (result, second):
        fixed = found.window.fix_commit
        assert fixed is not None and fixed.sha == repo.fixed
        assert found.window.fixed.after == FIXED
    # each build says its place of about as many as the search needs (5 commits: ~3)
    started = [line for line in first if line.startswith("building toylib at ")]
    places = [re.search(r"\((\d+) of ~(\d+)\)…$", line) for line in started]
    assert started and all(places), started
    assert [int(m.group(1)) for m in places if m][:2] == [1, 2]
    assert {m.group(2) for m in places if m} <= {"3", "4"}
    assert any(line.startswith("built toylib at ") for line in first)
    # the second bisection ran every commit candidate again, and built none of them
    assert not any(line.startswith(("building ", "built ")) for line in again), again
    kept = [line for line in again if line.endswith(": the wheel built before")]
    assert len(kept) == len(started)
    assert len(WheelCache(wheels).entries()) == len(started)
    # both bisections' records name the upstream commit each candidate was built from
    for records in ("first.jsonl", "second.jsonl"):
        built = {r.revisions.get("toylib") for r in validation.load(tmp_path / records)}
        assert repo.fixed in built and repo.introduced in built
    # nothing of the clones is left behind: only the kept wheels stay
    assert not list((tmp_path / "work").glob("commits-*"))


HEAVY = """
import os
with open(os.environ["HEAVY_LOG"], "a") as handle:
    handle.write(f"{os.getpid()}\\n")
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_release_and_commit_searches_share_one_warm_launcher_per_slot(tmp_path, jobs):
    """A reproducer that preloads a heavy module: the window on the releases, then both edges
    in the commits, every candidate a fork of the bisection's launchers — the module imported
    once per slot (``-j``) for the whole bisection, never once per runner or per search."""
    repo = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    opened = open_mirror(Mirror(UPSTREAM, mirror))
    assert isinstance(opened, MirrorRepo)
    site = tmp_path / "site"
    site.mkdir()
    (site / "heavypkg.py").write_text(HEAVY)
    log = tmp_path / "heavy.log"
    shim = write_shim(tmp_path / "shims", "toylib_add")
    manifest_file = shim / "manifest.toml"
    text = manifest_file.read_text().replace(
        "needs-cuda = false", 'needs-cuda = false\npreload = ["heavypkg"]'
    )
    manifest_file.write_text(text)
    manifest = load_manifest(manifest_file)
    assert manifest.reproducer.preload == ("heavypkg",)
    env = {**os.environ, "PYTHONPATH": str(site), "HEAVY_LOG": str(log)}
    notes = Notes()
    with IndexServer(release_index(repo, tmp_path / "released")) as server:
        versions, yanked = list_releases(server.url, "toylib")
        job = BisectJob(
            manifest.id,
            yanked=frozenset(yanked),
            index=server.url,
            work_dir=tmp_path / "work",
            env=env,
            budget=Budget(jobs=jobs),
        )
        result = bisect_window(manifest, versions, job, source=Source(opened), progress=notes)
    fixed, introduced = result.window.fix_commit, result.window.introduced.commit
    assert fixed is not None and fixed.sha == repo.fixed, result.stops
    assert introduced is not None and introduced.sha == repo.introduced
    commit_runs = sum(len(searched.runs) for searched in result.searched())
    assert len(result.release_runs) >= 3 and commit_runs >= 4
    # imported by the launchers alone: one per slot, for releases and commits alike
    assert len(log.read_text().split()) == jobs, notes.said
    assert sum("launcher: imported heavypkg once" in line for line in notes.said) == jobs
