"""Candidate bisections inside the weekly run (issue 19, item 5): `patchlane report` and `retire`
with `--bisect-budget RUNS` / `--bisect-minutes M` run the `patchlane bisect` a candidate verdict
names — for real: toylib releases on a loopback index (tests/test_bisect.py's series, broken up to
1.5 and fixed from 1.6), one overlay env per candidate built by uv, every run recorded — until the
budget is spent, then decide again on the new runs. The report says which bisections ran, how many
runs each took and which were left; the bisection's runs never show as a lane."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from retire.evidence import validation
from retire.verdicts.actions import Bisect, RunLane
from tests.conftest import run_cli
from tests.support.retirement import Project, manifest_toml
from tests.support.shimtree import write_shim
from tests.test_bisect import clean_series  # noqa: F401 - fixture

WEEK = "2026-W27"
#: Upstream released the fix in 1.6 (the index says so); the lanes still lock the broken 1.0.
FIXED_IN_16 = '\n[[retirement.conditions]]\nkind = "version-floor"\nversion = ">=1.6"\n'
SHIMS = ("add_a", "add_b")


@pytest.fixture
def shop(tmp_path, clean_series):
    """Two shims of toylib's add(), each recorded broken on the cpu lane's toylib 1.0, while the
    index has the fixed 1.6 … 1.9: both are kept, flagged candidate."""
    project = Project(tmp_path / "shop")
    for shim in SHIMS:
        write_shim(project.root / "shims", shim, manifest=manifest_toml(shim, FIXED_IN_16))
        project.run(shim, "bug-reproduced", "1.0")
        project.run(shim, "fix-validated", "1.0", mode="with")
    project.lane("cpu", list(SHIMS), index_url=clean_series.url)
    return project


def report(project: Project, capsys, *options: str) -> dict:
    code, out, err = run_cli(
        project.root, "report", "--week", WEEK, "--json", *options, capsys=capsys
    )
    assert code == 0, err
    return json.loads(out)


def verdict_of(document: dict, shim: str) -> dict:
    return next(v for v in document["verdicts"] if v["shim"] == shim)


@pytest.mark.slow
def test_candidate_bisections_run_within_the_budget_and_the_report_decides_again(shop, capsys):
    before = report(shop, capsys)
    assert before["bisections"] is None
    for shim in SHIMS:
        verdict = verdict_of(before, shim)
        assert verdict["verdict"] == "keep" and "candidate" in {f["kind"] for f in verdict["flags"]}
    assert len(validation.load(shop.validation)) == 4

    # Two runs: the first bisection starts and stops at the budget, the second is left.
    first = report(shop, capsys, "--bisect-budget", "2")
    done = first["bisections"]
    assert done["budget"] == {"runs": 2, "minutes": None} and done["runs"] == 2
    [ran] = done["ran"]
    assert ran["shim"] == "add_a" and ran["command"] == "patchlane bisect add_a"
    assert ran["runs"] == 2 and ran["stopped"] == "the budget of 2 reproducer runs is spent"
    assert done["left"] == [
        {
            "shim": "add_b",
            "command": "patchlane bisect add_b",
            "why": "the budget of 2 reproducer runs is spent",
        }
    ]
    added = [r for r in validation.load(shop.validation) if r.lane == "bisect"]
    assert len(added) == 2 and {r.shim for r in added} == {"add_a"}
    # Decided again on the new runs: the newest end, 1.9, is clean — inside the floor the index
    # proposes (1.6), so add_a retires although its bisection did not pin the first fixed
    # release; add_b waits for its own.
    assert verdict_of(first, "add_a")["verdict"] == "retire"
    assert verdict_of(first, "add_b")["verdict"] == "keep"

    # A larger budget next week: add_b's bisection runs to its end; add_a retired on 1.9, a
    # floor its runs prove but that may not be minimal (nobody ran the releases between its last
    # broken run and 1.9), so the gap's bisection tightens it.
    second = report(shop, capsys, "--bisect-budget", "10")
    done = second["bisections"]
    assert [(b["shim"], b["status"], b["floor"], b["stopped"]) for b in done["ran"]] == [
        ("add_a", "found", "toylib>=1.6", None),
        ("add_b", "found", "toylib>=1.6", None),
    ]
    assert done["ran"][0]["command"].startswith("patchlane bisect add_a --since 1.")
    # at most ceil(log2 9) + 1 conclusive runs for add_b's
    assert done["left"] == [] and 0 < done["ran"][1]["runs"] <= 5
    assert done["runs"] == sum(b["runs"] for b in done["ran"])
    for shim in SHIMS:
        verdict = verdict_of(second, shim)
        assert verdict["verdict"] == "retire", verdict["why"]
        assert verdict["floors"] == ["toylib>=1.6"]
    # the bisections' runs are evidence, never a lane
    assert [lane["name"] for lane in second["lanes"]] == ["cpu"]
    assert second["changes"]["newly_broken"] == []
    md = (shop.root / "reports" / f"{WEEK}.md").read_text()
    assert "## Bisections" in md and "| `add_b` | `patchlane bisect add_b` |" in md
    assert "on bisect" not in md and "with-shim run is missing" not in md
    page = (shop.root / "reports" / f"{WEEK}.html").read_text()
    assert '<section id="bisections">' in page and "patchlane bisect add_b" in page


def test_a_spent_minute_budget_starts_nothing_and_retire_takes_the_options(
    shop, capsys, monkeypatch
):
    """`retire` (without --apply) is the report: the same options. A budget of minutes that is
    spent before the first bisection starts runs nothing and says so."""
    import types

    from retire.bisect import budget

    # the meter's clock: an hour passes between its start and its first reading
    readings = iter([0.0])
    monkeypatch.setattr(
        budget, "time", types.SimpleNamespace(monotonic=lambda: next(readings, 3600.0))
    )
    code, out, err = run_cli(
        shop.root, "retire", "--week", WEEK, "--json", "--bisect-minutes", "0.5", capsys=capsys
    )
    assert code == 0, err
    done = json.loads(out)["bisections"]
    assert done["ran"] == [] and done["runs"] == 0
    assert [b["why"] for b in done["left"]] == ["the 0.5-minute budget is spent"] * 2
    assert done["budget"] == {"runs": None, "minutes": 0.5}


@pytest.mark.parametrize("command", ["report", "retire"])
@pytest.mark.parametrize("option", [["--bisect-budget", "3"], ["--bisect-minutes", "5"]])
def test_a_budget_without_probes_is_a_one_line_error(tmp_path, capsys, command, option):
    project = Project(tmp_path / "shop")
    code, _, err = run_cli(project.root, command, "--no-probe", *option, capsys=capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"patchlane: error: {option[0]}: a bisection installs releases")


@pytest.mark.parametrize(
    ("flags", "next_actions", "command"),
    [
        # the exact bisection a candidate flag names (issue 19: `--since` the newest run or lock)
        (
            [("candidate", "releases after 1.0 untested", Bisect("toy", Version("1.0")))],
            (),
            "patchlane bisect toy --since 1.0",
        ),
        # today's flag names none; the action does
        (
            [("candidate", "upstream looks fixed", None)],
            (RunLane("cpu"), Bisect("toy")),
            "patchlane bisect toy",
        ),
        # another shim's bisection is not this one's
        (
            [("candidate", "see other", Bisect("other", Version("2.0")))],
            (),
            "patchlane bisect toy",
        ),
        ([("stale", "no movement", None)], (), None),
    ],
)
def test_the_candidate_bisection_comes_from_the_flag(flags, next_actions, command):
    """The budget takes the flag's action as data: no text is read back."""
    from retire.commands.bisect import candidate_bisection
    from retire.verdicts.model import Flag, Verdict

    verdict = Verdict(
        "toy", "keep", "why", flags=tuple(Flag(*flag) for flag in flags), next=next_actions
    )
    found = candidate_bisection(verdict)
    assert (None if found is None else str(found)) == command


@pytest.mark.slow
def test_retire_apply_bisects_first_then_plans_on_the_new_verdicts(shop, capsys):
    """`retire --apply --bisect-budget`: the candidates' bisections run, the verdicts are gathered
    again on their runs, and the shims they prove fixed get their branches in the same run."""
    from tests.support.gitrepos import git

    (shop.root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
    git(shop.root, "init", "-q", "-b", "main")
    git(shop.root, "config", "user.name", "Lane Keeper")
    git(shop.root, "config", "user.email", "keeper@example.org")
    git(shop.root, "add", "-A")
    git(shop.root, "commit", "-q", "-m", "a shop")
    code, out, err = run_cli(
        shop.root, "retire", "--apply", "--no-pr", "--bisect-budget", "10", "--json", capsys=capsys
    )
    assert code == 0, err
    assert "candidate bisections (budget: 10 reproducer runs): 2 ran" in err
    assert "  add_a: found" in err and "  add_b: found" in err
    proposals = json.loads(out)["proposals"]
    assert [(p["shim_id"], p["status"]) for p in proposals] == [
        ("add_a", "proposed"),
        ("add_b", "proposed"),
    ]


@pytest.mark.slow
def test_a_floor_gap_is_a_candidate_the_weekly_budget_closes(tmp_path, clean_series, capsys):
    """Runs say 1.2 is broken and 1.8 clean; nobody ran 1.3 … 1.7: the floor 1.8 is proven but may
    not be minimal. The verdict flags it candidate with the exact bisection between the two, the
    weekly budget runs it, and the floor becomes the first fixed release, 1.6, proven."""
    project = Project(tmp_path / "shop")
    clean = '\n[[retirement.conditions]]\nkind = "reproducer-clean"\n'
    write_shim(project.root / "shims", "gap", manifest=manifest_toml("gap", clean))
    project.run("gap", "bug-reproduced", "1.2", lane="old")
    project.run("gap", "fix-validated", "1.8", lane="gpu")
    project.run("gap", "fix-validated", "1.0", mode="with")
    project.lane("cpu", ["gap"], index_url=clean_series.url)

    before = verdict_of(report(project, capsys), "gap")
    assert before["floors"] == ["toylib>=1.8"]
    [gap] = [f["text"] for f in before["flags"] if f["kind"] == "candidate"]
    assert "the floor toylib>=1.8 may not be minimal: 1.2 reproduced the bug" in gap
    assert "`patchlane bisect gap --since 1.2 --until 1.8`" in gap

    after = report(project, capsys, "--bisect-budget", "10")
    [ran] = after["bisections"]["ran"]
    assert ran["command"] == "patchlane bisect gap --since 1.2 --until 1.8"
    # from the recorded broken 1.2: the newest end, then a binary search of the gap
    assert (ran["status"], ran["floor"]) == ("found", "toylib>=1.6") and ran["runs"] <= 4
    verdict = verdict_of(after, "gap")
    assert verdict["floors"] == ["toylib>=1.6"]
    assert not [f for f in verdict["flags"] if "may not be minimal" in f["text"]]
