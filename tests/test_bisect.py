"""Release bisection for real: toylib releases on a loopback index, one overlay env per candidate
built by uv, the toy shim's reproducer run ``--mode without`` in each, its runs recorded in a
real validation manifest. (The search and the range alone: tests/test_bisect_search.py.)"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace

import pytest
from packaging.version import Version

from retire import bisect
from retire.bisect import Bounds
from retire.commands import main as cli
from retire.evidence import validation
from retire.probes import records
from retire.verdicts import execution
from shims.manifest import load_manifest
from tests.support.index import IndexServer, PackageIndex
from tests.support.reportshop import record
from tests.support.shimtree import ARITH_REPRODUCER, write_shim
from tests.support.wheels import build_wheel

VERSIONS = [f"1.{i}" for i in range(10)]
FIRST_FIXED = "1.6"
YANKED = "1.4"

BROKEN_SOURCE = '__version__ = "{v}"\n\ndef add(a, b):\n    return a - b\n'
FIXED_SOURCE = '__version__ = "{v}"\n\ndef add(a, b):\n    return a + b\n'
CRASHING_SOURCE = 'raise RuntimeError("toylib {v}: a broken wheel")\n'
HANGING_SOURCE = "import time\ntime.sleep(120)\n"
HANGS = "1.4"

#: The API the second series' reproducer tests, toylib.arith, appears in 1.6.
NEW_API_FROM, ARITH_FIXED_FROM = 6, 9
ARITH_VERSIONS = [f"1.{i}" for i in range(12)]

#: The arith test (shimtree.ARITH_REPRODUCER) written without require(): on an old release the
#: import itself fails.
BARE_IMPORT_REPRODUCER = """
from toylib.arith import add

from shims import reproducer


def check(with_shim):
    return reproducer.FIX_VALIDATED if add(2, 2) == 4 else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


def _series(tmp_path_factory, name: str, *, crash: str | None = None) -> IndexServer:
    """toylib releases where add() is fixed from 1.6; with ``crash``, that release crashes on
    import and 1.4 hangs on import."""
    folder = tmp_path_factory.mktemp(name)
    index = PackageIndex()
    for i, version in enumerate(VERSIONS):
        fixed = [int(p) for p in version.split(".")] >= [1, 6]
        source = FIXED_SOURCE if fixed else BROKEN_SOURCE
        if crash:
            source = {crash: CRASHING_SOURCE, HANGS: HANGING_SOURCE}.get(version, source)
        wheel = build_wheel(
            folder, "toylib", version, files={"toylib/__init__.py": source.format(v=version)}
        )
        index.add(
            wheel,
            f"2026-0{1 + i // 3}-{10 + i:02d}",
            yanked="wrong sums" if version == YANKED and not crash else False,
        )
    return IndexServer(index)


@pytest.fixture(scope="module")
def clean_series(tmp_path_factory):
    with _series(tmp_path_factory, "clean") as server:
        yield server


@pytest.fixture(scope="module")
def crash_series(tmp_path_factory):
    with _series(tmp_path_factory, "crash", crash=FIRST_FIXED) as server:
        yield server


@pytest.fixture(scope="module")
def arith_series(tmp_path_factory):
    """toylib 1.0 … 1.11: toylib.arith does not exist before 1.6 (the reproducer skips there), its
    add() is broken in 1.6 … 1.8 and fixed from 1.9; 1.12 has a wheel for no Python that exists."""
    folder = tmp_path_factory.mktemp("arith")
    index = PackageIndex()
    for i, version in enumerate(ARITH_VERSIONS):
        files = {"toylib/__init__.py": f'__version__ = "{version}"\n'}
        if i >= NEW_API_FROM:
            op = "+" if i >= ARITH_FIXED_FROM else "-"
            files["toylib/arith.py"] = f"def add(a, b):\n    return a {op} b\n"
        index.add(build_wheel(folder, "toylib", version, files=files), f"2026-01-{10 + i:02d}")
    index.add(
        build_wheel(folder, "toylib", "1.12", requires_python=">=3.99"),
        "2026-02-01",
        requires_python=">=3.99",
    )
    with IndexServer(index) as server:
        yield server


@pytest.fixture
def shim(tmp_path):
    root = tmp_path / "project" / "shims"
    folder = write_shim(root, "toylib_add")
    return load_manifest(folder / "manifest.toml")


class _Steps(bisect.Progress):
    """Keeps every run consulted, numbered."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, str, str]] = []

    def ran(self, step, run) -> None:
        self.seen.append((step, run.version, run.state))


def _bisect(manifest, server, tmp_path, **options):
    versions = options.pop("versions", VERSIONS)
    hooks = {name: options.pop(name) for name in ("progress", "prober") if name in options}
    return bisect.bisect(
        manifest,
        versions,
        bisect.BisectJob(
            manifest.id,
            index=server.url,
            cache=tmp_path / "cache",
            work_dir=tmp_path / "work",
            **options,
        ),
        **hooks,
    )


@pytest.mark.slow
def test_bisect_finds_the_first_fixed_release_in_log_runs_and_caches(
    shim, clean_series, tmp_path, capsys
):
    # through the index probe
    versions, yanked = bisect.list_releases(clean_series.url, "toylib")
    assert sorted(versions, key=Version) == VERSIONS and yanked == {YANKED}
    progress = _Steps()
    result = _bisect(
        shim, clean_series, tmp_path, versions=versions, yanked=yanked, progress=progress
    )
    steps = progress.seen
    assert result.status == "found", result.summary()
    assert (result.last_broken, result.first_fixed) == ("1.5", FIRST_FIXED)
    assert str(result.floor) == "toylib>=1.6"
    n = result.releases_available
    assert n == 9 and result.candidates.yanked == (YANKED,)
    assert (
        0 < result.conclusive_runs == result.runs <= math.ceil(math.log2(n)) + 1 == result.run_bound
    )
    # a yanked release is never installed
    assert YANKED not in {p.version for p in result.probes}
    # The newest end first: were it still broken, there would be no floor to find.
    assert (result.probes[0].version, result.probes[0].state) == ("1.9", "fixed")
    assert all(p.outcome in ("bug-reproduced", "fix-validated") for p in result.probes)
    assert len(steps) == len(result.probes) and steps[0][0] == 1
    # The before/after output is the evidence a PR body carries.
    md = result.markdown()
    assert "BUG_REPRODUCED" in md and "FIX_VALIDATED" in md and "toylib>=1.6" in md
    # overlay envs are thrown away
    assert not list((tmp_path / "work").iterdir())

    # The same question again, through the CLI: every answer comes from the cache, none is
    # recorded again. The range comes from the manifest's `affected = ">=1.0,<1.1"`.
    code = cli(
        [
            "bisect",
            "toylib_add",
            "--root",
            str(tmp_path / "project"),
            "--index",
            clean_series.url,
            "--cache",
            str(tmp_path / "cache"),
            "--python",
            sys.executable,
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    again = json.loads(out)
    assert (
        again["runs"] == 0
        and all(p["cached"] for p in again["probes"])
        and again["records_added"] == 0
    )
    assert (again["first_fixed"], again["last_broken"], again["floor"]) == (
        "1.6",
        "1.5",
        "toylib>=1.6",
    )
    assert (
        again["range_note"]
        == 'from [target] affected = "<1.1,>=1.0": its newest listed release toylib 1.0'
    )
    # progress, one line per step
    assert "[1] toylib 1.9: fixed (fix-validated) (cached)" in err
    assert "range from [target] affected" in err


@pytest.mark.slow
def test_cache_key_changes_with_the_reproducer(shim, clean_series, tmp_path):
    window = Bounds(since="1.5", until="1.6")
    first = _bisect(shim, clean_series, tmp_path, bounds=window)
    assert first.status == "found" and first.runs == 2
    assert _bisect(shim, clean_series, tmp_path, bounds=window).runs == 0
    shim.reproducer_path.write_text(shim.reproducer_path.read_text() + "\n# edited\n")
    # a changed reproducer is asked again
    assert _bisect(shim, clean_series, tmp_path, bounds=window).runs == 2


@pytest.mark.slow
def test_no_transition_is_reported_not_invented(shim, clean_series, tmp_path):
    still = _bisect(shim, clean_series, tmp_path, bounds=Bounds(until="1.5"))
    assert (
        still.status == "no-transition"
        and "newest applicable candidate 1.5 still reproduces" in still.reason
    )
    assert still.floor is None and still.first_fixed is None
    # one run: nothing to search
    assert [p.version for p in still.probes] == ["1.5"]
    already = _bisect(shim, clean_series, tmp_path, bounds=Bounds(since="1.7"))
    assert (
        already.status == "no-transition"
        and "1.7 is already fixed" in already.reason
        and already.floor is None
    )
    # Evidence says 1.7 is broken, and here it is not: the bug depends on the environment.
    recorded = _bisect(
        shim, clean_series, tmp_path, bounds=Bounds("1.7", None, "1.7", "lane gpu on h100-1")
    )
    assert (
        recorded.status == "no-transition"
        and "1.7 is recorded broken but does not reproduce here" in recorded.reason
    )


@pytest.mark.slow
def test_a_crashing_candidate_is_reported_never_guessed(tmp_path, crash_series):
    folder = write_shim(tmp_path / "shims", "toylib_crash")
    shim = load_manifest(folder / "manifest.toml")
    versions, yanked = bisect.list_releases(crash_series.url, "toylib")
    options = {"versions": versions, "yanked": yanked, "timeout": 3}
    result = _bisect(shim, crash_series, tmp_path, **options)
    unknown = {p.version: p.outcome for p in result.probes if p.state == "unknown"}
    # 1.4 hangs (killed at the timeout), 1.6 crashes: both unknown, neither read as broken or fixed.
    assert unknown == {HANGS: "timeout", FIRST_FIXED: "crashed"}
    # 1.5 broken, 1.6 unknown, 1.7 fixed: the boundary cannot be pinned and the result says so.
    assert result.status == "unpinned"
    assert (result.last_broken, result.first_fixed, result.unknown_between) == (
        "1.5",
        "1.7",
        (FIRST_FIXED,),
    )
    # the conservative floor: the first release proven fixed
    assert str(result.floor) == "toylib>=1.7"
    assert "not pinned" in result.summary() and "1.6" in result.summary()
    assert "| 1.4 | unknown | timeout |" in result.markdown()
    # Unknown results are not cached: the crash is asked again next time, the rest are not.
    again = _bisect(shim, crash_series, tmp_path, bounds=Bounds(since="1.5"), **options)
    assert again.runs == 1 and [p.version for p in again.probes if not p.cached] == [FIRST_FIXED]


@pytest.mark.slow
def test_old_releases_without_the_api_are_stepped_over_and_every_run_is_recorded(
    tmp_path, arith_series
):
    """--all over releases whose oldest lack the tested API: the reproducer prints SKIPPED there.
    The boundary is found anyway, the skips are reported apart, every fresh run lands in the
    validation manifest (lane `bisect`, with the host stamp), and a re-run costs and adds
    nothing."""
    shim = load_manifest(
        write_shim(tmp_path / "shims", "toylib_arith", reproducer=ARITH_REPRODUCER)
        / "manifest.toml"
    )
    manifest_path = tmp_path / "validation" / "manifest.jsonl"
    versions, yanked = bisect.list_releases(arith_series.url, "toylib")
    options = {"versions": versions, "yanked": yanked, "records": manifest_path}
    result = _bisect(shim, arith_series, tmp_path, **options)
    assert result.status == "found", result.summary()
    assert (result.last_broken, result.first_fixed, str(result.floor)) == (
        "1.8",
        "1.9",
        "toylib>=1.9",
    )
    skipped = result.not_applicable
    assert skipped and all(p.outcome in ("skipped", "env-failed") for p in skipped)
    assert any("toylib.arith is not importable with toylib 1." in p.detail for p in skipped)
    assert result.conclusive_runs <= result.run_bound and not result.unknown
    assert f"{len([p for p in skipped if not p.cached])} not applicable" in result.summary()

    recorded = validation.load(manifest_path)
    # an env that was never built ran nothing
    ran = [p for p in result.probes if p.outcome != "env-failed"]
    assert result.records_added == len(recorded) == len(ran)
    assert {r.lane for r in recorded} == {"bisect"} and {r.mode for r in recorded} == {"without"}
    # the reproducer's own stamp
    assert all(r.host.get("hostname") and r.host.get("python") for r in recorded)
    assert sorted(r.versions["toylib"] for r in recorded) == sorted(p.version for p in ran)
    assert all(
        r.environment["kind"] == "overlay"
        and r.environment["installed"] == {"toylib": r.versions["toylib"]}
        for r in recorded
    )
    # The verdicts read them: the first fixed release found here is a clean run inside the floor.
    history = records.history(recorded, "toylib_arith")
    clean = execution.first_clean(history, "toylib", {"toylib": Version("1.9")})
    assert clean.state == "clean" and clean.floor == Version("1.9"), clean.why
    assert execution.newest(history, "toylib", None).state == "clean"

    again = _bisect(shim, arith_series, tmp_path, **options)
    assert (again.status, again.first_fixed, again.runs, again.records_added) == (
        "found",
        "1.9",
        0,
        0,
    )
    assert len(validation.load(manifest_path)) == len(recorded)


@pytest.mark.slow
def test_an_import_error_or_no_installable_file_is_not_applicable(tmp_path, arith_series):
    shim = load_manifest(
        write_shim(tmp_path / "shims", "toylib_bare", reproducer=BARE_IMPORT_REPRODUCER)
        / "manifest.toml"
    )
    # 1.2 has no toylib.arith (the reproducer dies importing it), 1.12 has no wheel for this Python,
    # 1.7.5 is listed but has no file at all.
    result = _bisect(
        shim,
        arith_series,
        tmp_path,
        versions=["1.2", "1.7", "1.7.5", "1.8", "1.9", "1.12"],
        bounds=Bounds(since="1.2"),
        limits=bisect.Limits(max_unknown=1),
    )
    states = {p.version: (p.state, p.outcome) for p in result.probes}
    assert (
        states["1.12"] == ("not-applicable", "env-failed")
        and "Python>=3.99" in result.run_of("1.12").detail
    )
    assert result.status == "found" and (result.last_broken, result.first_fixed) == ("1.8", "1.9")
    # one unknown would have stopped it
    assert not result.unknown
    below = _bisect(
        shim,
        arith_series,
        tmp_path,
        versions=["1.2", "1.7.5", "1.9"],
        limits=bisect.Limits(max_unknown=1),
    )
    assert below.status == "no-transition" and "not applicable below it: 1.2, 1.7.5" in below.reason
    states = {p.version: (p.state, p.outcome) for p in below.probes}
    assert states["1.2"] == ("not-applicable", "crashed")
    assert "No module named 'toylib.arith'" in below.run_of("1.2").detail
    assert (
        states["1.7.5"] == ("not-applicable", "env-failed")
        and "toylib==1.7.5" in below.run_of("1.7.5").detail
    )


@pytest.mark.slow
def test_an_unreachable_index_is_unknown_not_inapplicable(tmp_path, shim, monkeypatch):
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    result = bisect.bisect(
        shim,
        ["1.0"],
        bisect.BisectJob(
            shim.id,
            index="http://127.0.0.1:9/simple",
            cache=tmp_path / "cache",
            work_dir=tmp_path / "work",
        ),
    )
    [run] = result.probes
    assert (run.state, run.outcome) == (
        "unknown",
        "env-failed",
    ) and result.status == "no-transition"
    # not cached: asked again next time
    assert not list((tmp_path / "cache").rglob("*.json"))


@pytest.mark.slow
def test_the_range_starts_at_the_newest_release_recorded_broken(tmp_path, arith_series, capsys):
    """A run merged from a GPU host recorded the bug on 1.7: the CLI searches 1.7 … 1.11 only, says
    so, never touches the releases without the API, and records its runs for the verdicts."""
    project = tmp_path / "project"
    write_shim(project / "shims", "toylib_arith", reproducer=ARITH_REPRODUCER)
    manifest_path = project / "validation" / "manifest.jsonl"
    merged = record(
        "toylib_arith",
        "gpu",
        "without",
        "bug-reproduced",
        "2026-06-01T10:00:00.000000+00:00",
        host="h100-1",
        gpu="NVIDIA H100",
        version="1.7",
    )
    validation.append(manifest_path, [merged])
    code = cli(
        [
            "bisect",
            "toylib_arith",
            "--root",
            str(project),
            "--index",
            arith_series.url,
            "--cache",
            str(tmp_path / "cache"),
            "--python",
            sys.executable,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "range from BUG_REPRODUCED on toylib 1.7, lane gpu on h100-1" in out
    assert "toylib 1.9 is the first fixed release (last broken: 1.8)" in out
    assert "proposed retirement floor: toylib>=1.9" in out
    runs = [line for line in out.splitlines() if line.startswith("  [")]
    assert runs and not any(
        f"toylib 1.{i}:" in line for line in runs for i in range(NEW_API_FROM + 1)
    )
    assert [line for line in out.splitlines() if line.startswith("not-applicable")] == [
        line for line in out.splitlines() if line.startswith("not-applicable: 1.12 (env-failed)")
    ]
    added = [r for r in validation.load(manifest_path) if r.record_id != merged.record_id]
    assert {r.lane for r in added} == {"bisect"} and f"recorded {len(added)} run(s)" in out
    # --no-record: the same question with an edited reproducer (so it is asked again) records
    # nothing.
    reproducer = project / "shims" / "toylib_arith" / "reproduce.py"
    reproducer.write_text(reproducer.read_text() + "\n# edited\n")
    code = cli(
        [
            "bisect",
            "toylib_arith",
            "--root",
            str(project),
            "--index",
            arith_series.url,
            "--cache",
            str(tmp_path / "cache"),
            "--python",
            sys.executable,
            "--no-record",
            "--all",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and "range every release (--all)" in out
    assert len(validation.load(manifest_path)) == len(added) + 1


@pytest.mark.slow
def test_overlay_on_a_lane_env_shadows_the_lane_version(tmp_path, clean_series, capsys):
    """``--lane``: the base is the lane's venv (which locks the broken 1.5); each overlay sees the
    lane's packages but its own toylib, and the index comes from the lane. The lane recorded the
    bug without saying on which toylib: its lock says, and the range starts there."""
    from retire.lanes import lanefile
    from retire.locks import locking

    project = tmp_path / "project"
    write_shim(project / "shims", "toylib_add")
    (project / "lanes").mkdir()
    (project / "lanes" / "base.toml").write_text(
        f'[lane]\npython = "{sys.version_info[0]}.{sys.version_info[1]}"\nplatform = "linux"\n'
        f'requirements = ["toylib==1.5"]\nshims = ["toylib_add"]\n\n'
        f'[lane.indexes.main]\nurl = "{clean_series.url}"\ndefault = true\n'
    )
    [locked] = locking.lock_lanes(lanefile.load_lanes(project / "lanes"), project / "locks")
    assert locked.ok, locked.message
    unversioned = record(
        "toylib_add", "base", "without", "bug-reproduced", "2026-06-01T10:00:00.000000+00:00"
    )
    validation.append(
        project / "validation" / "manifest.jsonl", [replace(unversioned, versions={})]
    )
    code = cli(["bisect", "toylib_add", "--root", str(project), "--lane", "base", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["range_note"].startswith("from toylib 1.5 locked by lane base's lock")
    # Had the lane's 1.5 leaked into the overlays, 1.9 would read broken: no transition.
    assert (result["status"], result["first_fixed"]) == ("found", FIRST_FIXED)
    assert result["candidates"]["versions"] == ["1.5", "1.6", "1.7", "1.8", "1.9"]
    assert all(p["outcome"] in ("bug-reproduced", "fix-validated") for p in result["probes"])
    # other base, other keys
    assert result["base"] != bisect.inspect_base(sys.executable, "toylib").fingerprint
    recorded = validation.load(project / "validation" / "manifest.jsonl")
    added = [r for r in recorded if r.lane != "base"]
    assert {r.lane for r in added} == {"bisect:base"} and all(r.environment["lock"] for r in added)
    # The lock's 1.5 is the broken release the search starts from (not run again); the runs
    # above it stay evidence (one bisection lane is many environments), the first fixed one's
    # clean run among them, so the verdicts see it.
    assert "1.5" not in {r.versions.get("toylib") for r in added}
    assert any(r.outcome == "fix-validated" and r.versions.get("toylib") == "1.6" for r in added)
    history = records.history(recorded, "toylib_add")
    clean = execution.first_clean(history, "toylib", {"toylib": Version(FIRST_FIXED)})
    assert clean.state == "clean" and clean.floor == Version(FIRST_FIXED), clean.why
    assert execution.newest(history, "toylib", None).state == "clean"


def test_releases_come_from_the_index_the_lane_pins_the_package_to(tmp_path, monkeypatch):
    from retire.commands.bisect import _default_index
    from retire.core.errors import InputError
    from retire.core.project import Project
    from retire.lanes.model import IndexSpec, Lane

    lane = Lane(
        "nightly",
        "3.12",
        "linux",
        ("torch",),
        indexes=(IndexSpec("pytorch-nightly"),),
        sources=(("torch", "pytorch-nightly"),),
    )
    monkeypatch.setenv("UV_INDEX", "pytorch-nightly=http://127.0.0.1:10/whl/nightly")
    assert (
        _default_index(Project(tmp_path), "s", "torch", lane) == "http://127.0.0.1:10/whl/nightly"
    )
    # the host default
    assert _default_index(Project(tmp_path), "s", "numpy", lane) == "http://127.0.0.1:9/simple"
    monkeypatch.delenv("UV_INDEX")
    with pytest.raises(InputError, match="has no URL on this host"):
        _default_index(Project(tmp_path), "s", "torch", lane)


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--until", "banana"], "--until: 'banana' is not a PEP 440 version"),
        (["--since", "1.x"], "--since: '1.x' is not a PEP 440 version"),
    ],
)
def test_a_bad_version_bound_is_one_line(tmp_path, capsys, argv, said):
    write_shim(tmp_path / "shims", "toylib_add")
    code = cli(
        [
            "bisect",
            "toylib_add",
            "--root",
            str(tmp_path),
            "--index",
            "http://127.0.0.1:9/simple",
            *argv,
        ]
    )
    _out, err = capsys.readouterr()
    assert (
        code == 2 and said in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    )


@pytest.mark.slow
def test_a_corrupt_validation_manifest_line_is_quarantined_and_the_bisection_records(
    tmp_path, clean_series, capsys
):
    write_shim(tmp_path / "shims", "toylib_add")
    corrupt = tmp_path / "validation" / "manifest.jsonl"
    corrupt.parent.mkdir()
    corrupt.write_text("{not json\n")
    code = cli(
        [
            "bisect",
            "toylib_add",
            "--root",
            str(tmp_path),
            "--index",
            clean_series.url,
            "--python",
            sys.executable,
        ]
    )
    _, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert "patchlane: warning: " in err and "manifest.jsonl: line 1: not valid JSON" in err
    # kept, out of the way
    assert (tmp_path / "validation" / "manifest.jsonl.quarantine").read_text() == "{not json\n"
    # the runs were recorded
    assert "{not json" not in corrupt.read_text() and corrupt.read_text().count("\n") >= 1
