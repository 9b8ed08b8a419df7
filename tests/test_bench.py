"""The benchmark harness: `python -m bench` runs, prints one table, survives a broken module."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import types

import pytest

from bench import __main__ as harness
from tests.conftest import ROOT, subprocess_env

SHIM_ROWS = (
    "shims.activate-then-import",
    "shims.share-of-torch-import",
    "shims.untouched-activate-cost",
    "shims.untouched-import-cost",
)


@pytest.mark.slow
def test_quick_shims_bench_prints_the_table_and_writes_json(tmp_path):
    output = tmp_path / "latest.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "shims", "--quick", "--output", str(output)],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["benchmark", "measured", "goal", "result"]
    for name in SHIM_ROWS:
        [line] = [each for each in lines if each.startswith(name + " ")]
        assert line.split()[-1] in ("PASS", "MISS", "SKIP"), line
    report = json.loads(output.read_text())
    rows = {r["name"]: r for r in report["rows"]}
    assert set(rows) == set(SHIM_ROWS)
    assert report["quick"] is True and report["module_seconds"]["shims"] > 0
    measured = rows["shims.activate-then-import"]
    # A real measurement of a real patch: the toy shim was applied in the timed interpreters.
    assert (
        measured["unit"] == "ms"
        and 0 < measured["value"] < 1000
        and "applied" in measured["detail"]
    )
    torch_row = rows["shims.share-of-torch-import"]
    # never a made-up number for what this host cannot measure
    if torch_row["result"] == "SKIP":
        assert torch_row["value"] is None and "torch not installed" in torch_row["detail"]


def test_discovery_skips_helpers():
    found = harness.discover()
    assert {"locks", "shims", "lanes"} <= set(found)
    assert not [name for name in found if name.startswith("_")]


def test_a_broken_module_becomes_an_error_row_and_the_others_still_run(
    monkeypatch, tmp_path, capsys
):
    def boom() -> list[dict]:
        raise RuntimeError("index exploded")

    broken = types.ModuleType("bench.zz_broken")
    broken.run = boom
    malformed = types.ModuleType("bench.zz_malformed")
    malformed.run = lambda: [{"name": "zz.half", "value": 1.0}]
    fine = types.ModuleType("bench.zz_fine")
    fine.run = lambda: [
        {
            "name": "zz.ratio",
            "value": 1.05,
            "goal": "<= 1.1x",
            "unit": "x",
            "ok": True,
            "detail": "d",
        },
        {
            "name": "zz.slow",
            "value": 3.0,
            "goal": "<= 1.1x",
            "unit": "x",
            "ok": False,
            "detail": "",
        },
    ]
    for module in (broken, malformed, fine):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(harness, "discover", lambda: ["zz_broken", "zz_malformed", "zz_fine"])

    output = tmp_path / "out.json"
    code = harness.main(["--output", str(output)])
    out = capsys.readouterr().out
    # a crashed benchmark is a bug; a MISS alone would exit 0
    assert code == 1
    table = {
        line.split()[0]: line.split()[-1]
        for line in out.splitlines()[2:]
        if line.strip() and ":" not in line
    }
    assert table == {
        "zz_broken": "ERROR",
        "zz_malformed": "ERROR",
        "zz.ratio": "PASS",
        "zz.slow": "MISS",
    }
    assert "RuntimeError: index exploded" in out and "lacks goal, unit, ok, detail" in out
    assert "MISS: 1 goal(s) not met here: zz.slow" in out
    rows = json.loads(output.read_text())["rows"]
    assert [r["result"] for r in rows] == ["ERROR", "ERROR", "PASS", "MISS"]


def test_miss_alone_exits_zero_and_unknown_names_are_refused(monkeypatch, tmp_path, capsys):
    slow = types.ModuleType("bench.zz_slow")
    slow.run = lambda: [
        {
            "name": "zz.slow",
            "value": math.nan,
            "goal": "g",
            "unit": "x",
            "ok": False,
            "detail": "not measured: x",
        },
        {"name": "zz.miss", "value": 9.0, "goal": "<= 1x", "unit": "x", "ok": False, "detail": ""},
    ]
    monkeypatch.setitem(sys.modules, slow.__name__, slow)
    monkeypatch.setattr(harness, "discover", lambda: ["zz_slow"])
    assert harness.main(["--only", "zz_slow", "--output", str(tmp_path / "o.json")]) == 0
    out = capsys.readouterr().out
    assert "SKIP" in out and "MISS" in out and "9.00×" in out
    assert harness.main(["--only", "nope", "--output", str(tmp_path / "o.json")]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (63.2, "x", "63.20×"),
        (250.0, "x", "250×"),
        (0.172, "s", "0.172 s"),
        (math.nan, "ms", "—"),
        (0.45, "%", "0.45 %"),
    ],
)
def test_values_are_formatted_with_their_unit(value, unit, text):
    assert harness.format_value(value, unit) == text


def test_the_informed_search_rows_count_runs_and_compare_answers(monkeypatch):
    from bench import QUICK_ENV, commits

    monkeypatch.setenv(QUICK_ENV, "1")
    rows = {r["name"]: r for r in commits._search_rows()}
    assert set(rows) == {"commits.informed-runs", "commits.informed-same-answers"}
    informed = rows["commits.informed-runs"]
    # ⌈log2 5⌉ + 2, met on every toy history and on the one git read
    assert informed["goal"] == "<= 5" and informed["ok"] and informed["value"] <= 5
    assert "right commit" in informed["detail"] and "k=5 read by git log" in informed["detail"]
    same = rows["commits.informed-same-answers"]
    assert same["value"] == 0 and same["ok"] and "of 760" in same["detail"]


def test_the_cpu_lane_ratio_is_also_taken_without_the_reproducer_whose_own_work_dominates():
    from types import SimpleNamespace

    from bench.launcher import dominant_split

    def runs(durations):
        return [SimpleNamespace(shim=shim, duration_s=d) for shim, d in durations]

    # the launcher saves 6 s of imports per run but the heavy shim's 25 s are its own, both ways
    records = {
        "launcher": runs([("light", 0.1), ("light", 0.1), ("heavy", 12.0), ("heavy", 13.0)]),
        "process": runs([("light", 6.1), ("light", 6.1), ("heavy", 18.0), ("heavy", 19.0)]),
    }
    samples = {"launcher": [26.0, 26.4, 25.8], "process": [50.0, 49.6, 50.4]}
    shim, own, launcher_s, process_s, ratio = dominant_split(samples, records)
    assert (shim, own) == ("heavy", 25.0)
    assert (round(launcher_s, 3), round(process_s, 3)) == (1.0, 13.0)
    assert round(ratio, 3) == 13.0


def test_the_side_by_side_rows_time_j4_against_j1_and_count_launchers(monkeypatch):
    """The stand-in bisection, shortened: -j 4 kept busy against -j 1 and phase 1's rounds, the
    same answers (each contender checks its edges), one launcher per slot."""
    from bench import QUICK_ENV, sidebyside

    monkeypatch.setenv(QUICK_ENV, "1")
    monkeypatch.setattr(sidebyside, "IMPORT_S", 0.2)
    monkeypatch.setattr(sidebyside, "SHORT_S", 0.05)
    monkeypatch.setattr(sidebyside, "LONG_S", 0.3)
    rows = {r["name"]: r for r in sidebyside.run()}
    assert set(rows) == {
        "sidebyside.j4-vs-j1-wall",
        "sidebyside.j4-vs-j1-rounds",
        "sidebyside.launcher-starts",
    }
    assert 0 < rows["sidebyside.j4-vs-j1-wall"]["value"] < 1
    assert (
        "the floor, the same searches on a virtual clock"
        in rows["sidebyside.j4-vs-j1-wall"]["detail"]
    )
    assert rows["sidebyside.j4-vs-j1-rounds"]["value"] == 0.5
    starts = rows["sidebyside.launcher-starts"]
    assert starts["value"] == 4 and starts["ok"] and "one per runner, 8" in starts["detail"]
