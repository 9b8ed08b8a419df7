"""`patchlane bisect --max-runs N` / `--max-minutes M`: a bisection capped as a weekly budget caps
one (retire.bisect.budget's Meter), ending with what it found — for real, on tests/test_bisect.py's
toylib series (broken up to 1.5, fixed from 1.6) on a loopback index. The weekly report's Slurm
jobs pass each bisection its share of the budget this way."""

from __future__ import annotations

import json
import sys

import pytest
from jsonschema import Draft202012Validator

from retire.evidence import validation
from retire.schemas import load as load_schema
from tests.conftest import run_cli
from tests.support.shimtree import write_shim
from tests.test_bisect import clean_series  # noqa: F401 - fixture


@pytest.mark.slow
def test_max_runs_ends_the_search_with_what_it_found(tmp_path, clean_series, capsys):
    root = tmp_path / "project"
    write_shim(root / "shims", "toylib_add")
    common = ["--index", clean_series.url, "--python", sys.executable, "--all"]
    code, out, err = run_cli(
        root, "bisect", "toylib_add", *common, "--max-runs", "2", "--json", capsys=capsys
    )
    document = json.loads(out)
    Draft202012Validator(load_schema("bisect")).validate(document)
    # two fresh runs, then the search ends where it is: no first fixed release pinned
    assert code == 1 and document["runs"] == 2, err
    assert document["stopped"] == "the budget of 2 reproducer runs is spent"
    assert document["status"] != "found" and document["summary"].endswith(
        "2 reproducer run(s) over 9 release(s)."
    )
    added = validation.load(root / "validation/manifest.jsonl")
    assert len(added) == 2 == document["records_added"]
    # the cached answers are free: with room for 4 more the search goes on from there to its
    # end, saying nothing of a stop
    code, out, err = run_cli(
        root, "bisect", "toylib_add", *common, "--max-runs", "4", "--json", capsys=capsys
    )
    document = json.loads(out)
    assert code == 0 and document["status"] == "found" and document["stopped"] is None, err
    assert document["first_fixed"] == "1.6" and 0 < document["runs"] <= 4
    assert document["records_added"] == document["runs"]


@pytest.mark.slow
def test_max_minutes_starts_no_candidate_once_spent(tmp_path, capsys, monkeypatch):
    import types

    from retire.bisect import budget

    root = tmp_path / "project"
    write_shim(root / "shims", "toylib_add")
    # the meter's clock: an hour passes between its start and its first reading; the index is
    # never asked for a candidate (a closed port: a run would be unknown, not absent)
    readings = iter([0.0])
    monkeypatch.setattr(
        budget, "time", types.SimpleNamespace(monotonic=lambda: next(readings, 3600.0))
    )
    monkeypatch.setattr(
        "retire.bisect.list_releases", lambda url, name: (["1.0", "1.1"], set()), raising=True
    )
    code, out, err = run_cli(
        root,
        "bisect",
        "toylib_add",
        "--index",
        "http://127.0.0.1:9/simple",
        "--all",
        "--max-minutes",
        "0.5",
        capsys=capsys,
    )
    assert code == 1, err
    assert "stopped before its end: the 0.5-minute budget is spent" in out
    assert "0 reproducer run(s)" in out


def test_a_bisections_slurm_job_is_given_the_same_caps(tmp_path):
    from retire.commands import build_parser
    from retire.commands.bisect import job_of
    from retire.core.project import Project

    project = Project(tmp_path)
    args = build_parser().parse_args(
        ["bisect", "toy", "--executor", "slurm", "--max-runs", "3", "--max-minutes", "2.5"]
    )
    passed = job_of(args, project).arguments()
    assert passed[passed.index("--max-runs") + 1] == "3"
    assert passed[passed.index("--max-minutes") + 1] == "2.5"
    plain = job_of(build_parser().parse_args(["bisect", "toy"]), project)
    assert "--max-runs" not in plain.arguments()
