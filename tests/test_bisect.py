"""Release bisection for real: toylib 1.0 … 1.9 on a loopback index, one overlay env per candidate
built by uv, the toy shim's reproducer run ``--mode without`` in each."""

from __future__ import annotations

import json
import math
import sys

import pytest

import retire.bisect as bisect
from retire.commands import main as cli
from shims.manifest import load_manifest
from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import write_shim
from tests.support.wheels import build_wheel

VERSIONS = [f"1.{i}" for i in range(10)]
FIRST_FIXED = "1.6"
YANKED = "1.4"

BROKEN_SOURCE = '__version__ = "{v}"\n\ndef add(a, b):\n    return a - b\n'
FIXED_SOURCE = '__version__ = "{v}"\n\ndef add(a, b):\n    return a + b\n'
CRASHING_SOURCE = 'raise ImportError("toylib {v}: a broken wheel")\n'
HANGING_SOURCE = 'import time\ntime.sleep(120)\n'
HANGS = "1.4"


def _series(tmp_path_factory, name: str, *, crash: str | None = None) -> IndexServer:
    """toylib releases where add() is fixed from 1.6; with ``crash``, that release cannot be
    imported and 1.4 hangs on import."""
    folder = tmp_path_factory.mktemp(name)
    index = PackageIndex()
    for i, version in enumerate(VERSIONS):
        fixed = [int(p) for p in version.split(".")] >= [1, 6]
        source = FIXED_SOURCE if fixed else BROKEN_SOURCE
        if crash:
            source = {crash: CRASHING_SOURCE, HANGS: HANGING_SOURCE}.get(version, source)
        wheel = build_wheel(folder, "toylib", version, files={"toylib/__init__.py": source.format(v=version)})
        index.add(wheel, f"2026-0{1 + i // 3}-{10 + i:02d}", yanked="wrong sums" if version == YANKED and not crash else False)
    return IndexServer(index)


@pytest.fixture(scope="module")
def clean_series(tmp_path_factory):
    with _series(tmp_path_factory, "clean") as server:
        yield server


@pytest.fixture(scope="module")
def crash_series(tmp_path_factory):
    with _series(tmp_path_factory, "crash", crash=FIRST_FIXED) as server:
        yield server


@pytest.fixture
def shim(tmp_path):
    root = tmp_path / "project" / "shims"
    folder = write_shim(root, "toylib_add")
    return load_manifest(folder / "manifest.toml")


def test_candidates_are_ordered_and_skip_yanked_and_prereleases():
    c = bisect.select_candidates(["1.10", "1.2", "1.9", "2.0rc1", "1.3.dev20260701", "1.4", "junk"], {"1.4"})
    assert c.versions == ("1.2", "1.9", "1.10")
    assert c.yanked == ("1.4",) and c.prereleases == ("1.3.dev20260701", "2.0rc1") and c.invalid == ("junk",)
    c = bisect.select_candidates(["1.2", "2.0rc1", "1.3.dev20260701"], include_prereleases=True, since="1.3.dev0")
    assert c.versions == ("1.3.dev20260701", "2.0rc1") and c.out_of_range == ("1.2",)


def test_bisect_finds_the_first_fixed_release_in_log_runs_and_caches(shim, clean_series, tmp_path, capsys):
    versions, yanked = bisect.list_releases(clean_series.url, "toylib")  # through the index probe
    assert sorted(versions, key=lambda v: [int(p) for p in v.split(".")]) == VERSIONS and yanked == {YANKED}
    steps = []
    result = bisect.bisect(shim, versions, yanked=yanked, index_url=clean_series.url,
                           cache_dir=tmp_path / "cache", work_dir=tmp_path / "work",
                           on_step=lambda i, run: steps.append((i, run.version, run.state)))
    assert result.status == "found", result.summary()
    assert (result.last_broken, result.first_fixed) == ("1.5", FIRST_FIXED)
    assert result.floor == "toylib>=1.6"
    n = result.releases_available
    assert n == 9 and result.candidates.yanked == (YANKED,)
    assert 0 < result.runs <= math.ceil(math.log2(n)) + 2
    assert YANKED not in {p.version for p in result.probes}  # a yanked release is never installed
    # Endpoints first: the oldest reproduces, the newest does not.
    assert [(p.version, p.state) for p in result.probes[:2]] == [("1.0", "broken"), ("1.9", "fixed")]
    assert all(p.outcome in ("bug-reproduced", "fix-validated") for p in result.probes)
    assert len(steps) == len(result.probes) and steps[0][0] == 1
    # The before/after output is the evidence a PR body carries.
    md = result.markdown()
    assert "BUG_REPRODUCED" in md and "FIX_VALIDATED" in md and "toylib>=1.6" in md
    assert not list((tmp_path / "work").iterdir())  # overlay envs are thrown away

    # The same question again, through the CLI: every answer comes from the cache.
    code = cli(["bisect", "toylib_add", "--root", str(tmp_path / "project"), "--index", clean_series.url,
                        "--cache", str(tmp_path / "cache"), "--python", sys.executable, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    again = json.loads(out)
    assert again["runs"] == 0 and all(p["cached"] for p in again["probes"])
    assert (again["first_fixed"], again["last_broken"], again["floor"]) == ("1.6", "1.5", "toylib>=1.6")
    assert "[1] toylib 1.0: broken (bug-reproduced) (cached)" in err  # progress, one line per step


def test_cache_key_changes_with_the_reproducer(shim, clean_series, tmp_path):
    common = dict(index_url=clean_series.url, cache_dir=tmp_path / "cache", work_dir=tmp_path / "work",
                  since="1.5", until="1.6")
    first = bisect.bisect(shim, VERSIONS, **common)
    assert first.status == "found" and first.runs == 2
    assert bisect.bisect(shim, VERSIONS, **common).runs == 0
    shim.reproducer_path.write_text(shim.reproducer_path.read_text() + "\n# edited\n")
    assert bisect.bisect(shim, VERSIONS, **common).runs == 2  # a changed reproducer is asked again


def test_no_transition_is_reported_not_invented(shim, clean_series, tmp_path):
    common = dict(index_url=clean_series.url, cache_dir=tmp_path / "cache", work_dir=tmp_path / "work")
    still = bisect.bisect(shim, VERSIONS, until="1.5", **common)
    assert still.status == "no-transition" and "newest candidate 1.5 still reproduces" in still.reason
    assert still.floor is None and still.first_fixed is None
    assert [p.version for p in still.probes] == ["1.0", "1.5"]  # two endpoint runs, no search
    already = bisect.bisect(shim, VERSIONS, since="1.7", **common)
    assert already.status == "no-transition" and "already fixed" in already.reason and already.floor is None
    assert [p.version for p in already.probes] == ["1.7"]


def test_a_crashing_candidate_is_reported_never_guessed(tmp_path, crash_series):
    folder = write_shim(tmp_path / "shims", "toylib_crash")
    shim = load_manifest(folder / "manifest.toml")
    versions, yanked = bisect.list_releases(crash_series.url, "toylib")
    options = dict(index_url=crash_series.url, cache_dir=tmp_path / "cache", work_dir=tmp_path / "work", timeout=3)
    result = bisect.bisect(shim, versions, yanked=yanked, **options)
    unknown = {p.version: p.outcome for p in result.probes if p.state == "unknown"}
    # 1.4 hangs (killed at the timeout), 1.6 crashes: both unknown, neither read as broken or fixed.
    assert unknown == {HANGS: "timeout", FIRST_FIXED: "crashed"}
    # 1.5 broken, 1.6 unknown, 1.7 fixed: the boundary cannot be pinned and the result says so.
    assert result.status == "unpinned"
    assert (result.last_broken, result.first_fixed, result.unknown_between) == ("1.5", "1.7", (FIRST_FIXED,))
    assert result.floor == "toylib>=1.7"  # the conservative floor: the first release proven fixed
    assert "not pinned" in result.summary() and "1.6" in result.summary()
    assert "| 1.4 | unknown | timeout |" in result.markdown()
    # Unknown results are not cached: the crash is asked again next time, the rest are not.
    again = bisect.bisect(shim, versions, yanked=yanked, since="1.5", **options)
    assert again.runs == 1 and [p.version for p in again.probes if not p.cached] == [FIRST_FIXED]


def test_overlay_on_a_lane_env_shadows_the_lane_version(tmp_path, clean_series, capsys):
    """``--lane``: the base is the lane's venv (which locks the fixed 1.9); each overlay sees the
    lane's packages but its own toylib, and the index comes from the lane."""
    from retire.lanes import lanefile
    from retire.locks import locking

    project = tmp_path / "project"
    write_shim(project / "shims", "toylib_add")
    (project / "lanes").mkdir()
    (project / "lanes" / "base.toml").write_text(
        f'[lane]\npython = "{sys.version_info[0]}.{sys.version_info[1]}"\nplatform = "linux"\n'
        f'requirements = ["toylib==1.9"]\nshims = ["toylib_add"]\n\n'
        f'[lane.indexes.main]\nurl = "{clean_series.url}"\ndefault = true\n')
    [locked] = locking.lock_lanes(lanefile.load_lanes(project / "lanes"), project / "locks")
    assert locked.ok, locked.message
    code = cli(["bisect", "toylib_add", "--root", str(project), "--lane", "base", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    # Had the lane's fixed 1.9 leaked into the overlays, 1.0 would read fixed: no transition.
    assert (result["status"], result["first_fixed"]) == ("found", FIRST_FIXED)
    assert all(p["outcome"] in ("bug-reproduced", "fix-validated") for p in result["probes"])
    assert result["base"] != bisect.inspect_base(sys.executable, "toylib").fingerprint  # other base, other keys


def test_an_uninstallable_candidate_is_unknown(tmp_path, clean_series):
    folder = write_shim(tmp_path / "shims", "toylib_gone")
    shim = load_manifest(folder / "manifest.toml")
    # 1.5.5 is listed but has no file on the index: its overlay cannot be built.
    result = bisect.bisect(shim, ["1.0", "1.5", "1.5.5", "1.6"], index_url=clean_series.url,
                           cache_dir=tmp_path / "cache", work_dir=tmp_path / "work")
    gone = result.run_of("1.5.5")
    assert gone is not None and gone.state == "unknown" and gone.outcome == "env-failed"
    assert "toylib==1.5.5" in gone.detail
    assert result.status == "unpinned" and result.unknown_between == ("1.5.5",) and result.first_fixed == "1.6"


def test_search_alone_steps_around_unknowns():
    truth = {f"v{i}": ("broken" if i < 70 else "fixed") for i in range(100)}
    truth["v50"] = truth["v49"] = "unknown"
    asked = []

    def probe(version):
        asked.append(version)
        return bisect.CandidateRun(version, truth[version], truth[version])

    versions = [f"v{i}" for i in range(100)]
    status, _, lo, hi, runs = bisect.search(versions, probe)
    assert status == "found" and (versions[lo], versions[hi]) == ("v69", "v70")
    assert len(asked) <= math.ceil(math.log2(100)) + 2 + 2  # two unknowns cost one extra run each


def test_releases_come_from_the_index_the_lane_pins_the_package_to(tmp_path, monkeypatch):
    from retire.commands.bisect import _default_index
    from retire.core.project import Project
    from retire.core.errors import ConfigError
    from retire.lanes.model import IndexSpec, Lane

    lane = Lane("nightly", "3.12", "linux", ("torch",), indexes=(IndexSpec("pytorch-nightly"),),
                sources=(("torch", "pytorch-nightly"),))
    monkeypatch.setenv("UV_INDEX", "pytorch-nightly=http://127.0.0.1:10/whl/nightly")
    assert _default_index(Project(tmp_path), "s", "torch", lane) == "http://127.0.0.1:10/whl/nightly"
    assert _default_index(Project(tmp_path), "s", "numpy", lane) == "http://127.0.0.1:9/simple"  # the host default
    monkeypatch.delenv("UV_INDEX")
    with pytest.raises(ConfigError, match="has no URL on this host"):
        _default_index(Project(tmp_path), "s", "torch", lane)
