"""Filing waves and the human gate: the planner, approvals and exports through a real git repo."""

from __future__ import annotations

import datetime as _dt
import json
import random
import subprocess
import sys

import pytest

from retire.core.errors import InputError
from retire.packs.store import filing_queue, load_pack, markdown_section
from retire.packs.waves import (
    Approval,
    Candidate,
    Filing,
    FilingState,
    dumps_state,
    last_waves,
    parse_state,
    plan_wave,
)
from tests.support.gitrepos import git
from tests.support.packtree import PackProject, github_manifest

NOW = _dt.datetime.now(_dt.UTC)
DAY = _dt.date(2026, 11, 23)


# ---------------------------------------------------------------------------------------------
# The planner (pure)

QUEUE = [
    Candidate("mega_report", "NVIDIA/Megatron-LM", "report"),
    Candidate("mega_crash", "NVIDIA/Megatron-LM", "crash-fix"),
    Candidate("mega_comment", "NVIDIA/Megatron-LM", "thread-comment"),
    Candidate("mega_crash_2", "NVIDIA/Megatron-LM", "crash-fix"),
    Candidate("mamba_refactor", "state-spaces/mamba", "refactor"),
    Candidate("mamba_crash", "state-spaces/mamba", "crash-fix"),
    Candidate("tl_refactor", "tile-ai/tilelang", "refactor"),
    Candidate("te_report", "NVIDIA/TransformerEngine", "report"),
]


def ids(plan) -> list[str]:
    return [c.id for c in plan.packs]


def test_wave_takes_priority_order_two_per_repository_at_most_four():
    plan = plan_wave(QUEUE, {}, DAY)
    assert ids(plan) == ["mega_crash", "mega_crash_2", "mamba_crash", "mamba_refactor"]
    assert [repo for repo, _ in plan.by_repository()] == [
        "NVIDIA/Megatron-LM",
        "state-spaces/mamba",
    ]
    held = dict(plan.held)
    assert held["tile-ai/tilelang"] == "wave full (4 packs); waits for the next one"
    assert "NVIDIA/TransformerEngine" in held


def test_wave_spacing_is_two_days_per_repository():
    waves = {
        "nvidia/megatron-lm": DAY - _dt.timedelta(days=1),
        "state-spaces/mamba": DAY - _dt.timedelta(days=2),
    }
    plan = plan_wave(QUEUE, waves, DAY)
    assert "NVIDIA/Megatron-LM" not in {c.repository for c in plan.packs}
    assert ids(plan) == ["mamba_crash", "mamba_refactor", "tl_refactor", "te_report"]
    assert (
        dict(plan.held)["NVIDIA/Megatron-LM"] == "last wave 2026-11-22; next on or after 2026-11-24"
    )
    # The day after, Megatron-LM is eligible again and its crash fixes come first.
    assert ids(plan_wave(QUEUE, waves, DAY + _dt.timedelta(days=1)))[:2] == [
        "mega_crash",
        "mega_crash_2",
    ]


def test_priority_order_across_the_four_classes():
    queue = [
        Candidate("d", "o/d", "report"),
        Candidate("c", "o/c", "refactor"),
        Candidate("b", "o/b", "thread-comment"),
        Candidate("a", "o/a", "crash-fix"),
    ]
    assert ids(plan_wave(queue, {}, DAY)) == ["a", "b", "c", "d"]


def test_no_wave_below_two_packs_and_output_is_deterministic():
    single = plan_wave([Candidate("only", "o/r", "crash-fix")], {}, DAY)
    assert single.packs == () and "a wave needs at least 2" in single.reason
    assert plan_wave([], {}, DAY).reason == "no ready packs"
    assert ids(plan_wave([Candidate("only", "o/r", "crash-fix")], {}, DAY, min_size=1)) == ["only"]
    shuffled = QUEUE[:]
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        assert plan_wave(shuffled, {}, DAY) == plan_wave(QUEUE, {}, DAY)


def test_state_round_trip_and_last_waves():
    state = FilingState().approve("a", Approval("Ada", "2026-11-20T09:00:00Z", "d" * 64))
    state = state.file(
        "a", Filing("https://github.com/o/r/issues/9", "2026-11-20T10:00:00Z", "o/R")
    )
    state = state.file(
        "b", Filing("https://github.com/o/r/issues/10", "2026-11-21T10:00:00Z", "o/r")
    )
    assert parse_state(dumps_state(state), "s.json") == state
    assert last_waves(state) == {"o/r": _dt.date(2026, 11, 21)}
    with pytest.raises(InputError, match="not valid JSON"):
        parse_state("{", "packs/state.json")
    with pytest.raises(InputError, match="approval needs by/at/digest"):
        parse_state('{"version": 1, "packs": {"a": {"approval": {"by": "x"}}}}', "packs/state.json")
    with pytest.raises(InputError, match=r"packs.a.filings\[0\].at: malformed date 'soon'"):
        parse_state(
            '{"version": 1, "packs": {"a": {"filings": [{"url": "u", "at": "soon", "repository": '
            '"o/r"}]}}}',
            "packs/state.json",
        )


# ---------------------------------------------------------------------------------------------
# The planner over a real project: several repositories, filings on several dates


def test_plan_over_a_project_with_history(tmp_path, capsys):
    project = PackProject(tmp_path)
    for shim_id, repo, priority in [
        ("alpha_crash", "toyorg/alpha", "crash-fix"),
        ("alpha_report", "toyorg/alpha", "report"),
        ("beta_refactor", "toyorg/beta", "refactor"),
        ("gamma_comment", "toyorg/gamma", "thread-comment"),
        ("gamma_crash", "toyorg/gamma", "crash-fix"),
    ]:
        project.add(shim_id, repo=repo, priority=priority)
        project.record(shim_id, at=NOW)
    # never ran: not a candidate
    project.add("blocked_one", repo="toyorg/beta", priority="crash-fix")
    today = NOW.date()
    state = FilingState().file(
        "old",
        Filing(
            "https://github.com/toyorg/gamma/issues/1",
            f"{today - _dt.timedelta(days=1)}T12:00:00Z",
            "toyorg/gamma",
        ),
    )
    (project.root / "packs" / "state.json").write_text(dumps_state(state))

    assert project.cli("plan", "--json") == 0
    plan = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in plan["wave"]] == ["alpha_crash", "alpha_report", "beta_refactor"]
    assert plan["held"] == [
        {
            "repository": "toyorg/gamma",
            "reason": f"last wave {today - _dt.timedelta(days=1)}; next on or after "
            f"{today + _dt.timedelta(days=1)}",
        }
    ]
    assert project.cli("plan") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"wave for {today}: 3 pack(s)"
    assert "needs `patchlane pack approve alpha_crash --by NAME`" in out
    assert "blocked_one" not in out


# ---------------------------------------------------------------------------------------------
# The human gate through git


@pytest.fixture
def repo(tmp_path) -> PackProject:
    project = PackProject(tmp_path)
    project.add("toy_add")
    # a real run of the toy reproducer, today, on this host
    project.record_real_run("toy_add")
    git(project.root, "init", "-q", "-b", "main")
    git(project.root, "add", "-A")
    git(project.root, "commit", "-q", "-m", "shims, packs and validation")
    return project


@pytest.mark.slow
def test_approve_commit_export_round_trip(repo, tmp_path, capsys):
    out = tmp_path / "out"
    # Unapproved: refused, nothing written.
    assert repo.cli("export", "toy_add", "--to", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchlane: error: toy_add: not approved") and err.count("\n") == 1
    assert not out.exists()

    assert repo.cli("approve", "toy_add", "--by", "Ada Lovelace") == 0
    assert "recorded in packs/state.json" in capsys.readouterr().out
    assert git(repo.root, "status", "--porcelain") == "?? packs/state.json"
    git(repo.root, "add", "packs/state.json")
    git(repo.root, "commit", "-q", "-m", "approve toy_add")
    committed = json.loads(git(repo.root, "show", "HEAD:packs/state.json"))
    assert committed["packs"]["toy_add"]["approval"]["by"] == "Ada Lovelace"

    assert repo.cli("export", "toy_add", "--to", str(out)) == 0
    loaded = load_pack(repo.root, "toy_add")
    assert (out / "ISSUE.md").read_text() == loaded.pack.body
    assert (out / "reproduce.py").read_text() == loaded.reproducer_text
    readme = (out / "README.md").read_text()
    assert "python reproduce.py --mode without" in readme and "Approved by Ada Lovelace" in readme
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "ISSUE.md",
        "README.md",
        "reproduce.py",
        "shims/__init__.py",
        "shims/reproducer.py",
    ]
    # The export is self-contained: the documented command runs there, outside the project.
    run = subprocess.run(
        [sys.executable, "reproduce.py", "--mode", "without"],
        cwd=out,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo.site)},
        timeout=60,
    )
    assert run.returncode == 10 and run.stdout.splitlines()[-1] == "BUG_REPRODUCED", run.stderr
    # exporting never touches the repository
    assert git(repo.root, "status", "--porcelain") == ""


@pytest.mark.slow
def test_change_after_approval_voids_it(repo, tmp_path, capsys):
    assert repo.cli("approve", "toy_add", "--by", "Ada") == 0
    manifest = repo.shims / "toy_add" / "manifest.toml"
    manifest.write_text(
        manifest.read_text().replace("add() returns a - b in toylib 1.0.", "add() subtracts.")
    )
    [entry] = filing_queue(repo.root)
    assert entry.status == "blocked" and entry.reasons[-1].startswith(
        "approval: the body, command or reproducer changed"
    )
    assert repo.cli("export", "toy_add", "--to", str(tmp_path / "out")) == 2
    assert "not ready to export: approval:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    # re-approval after review
    assert repo.cli("approve", "toy_add", "--by", "Ada") == 0
    assert filing_queue(repo.root)[0].status == "approved"


@pytest.mark.slow
def test_bad_input_is_refused_with_one_line(repo, tmp_path, capsys):
    cases = [
        (("approve", "nope", "--by", "Ada"), "unknown pack 'nope'"),
        (("approve", "toy_add", "--by", "  "), "empty approver"),
        (
            ("filed", "toy_add", "--url", "https://github.com/toyorg/toylib/issues/5"),
            "never approved",
        ),
        (("export", "nope", "--to", str(tmp_path / "x")), "unknown pack 'nope'"),
    ]
    for args, fragment in cases:
        assert repo.cli(*args) == 2, args
        err = capsys.readouterr().err
        assert fragment in err and err.count("\n") == 1, err
    # A blocked pack cannot be approved: its reproducer never ran.
    repo.add("never_ran")
    assert repo.cli("approve", "never_ran", "--by", "Ada") == 2
    assert "not ready to approve: validation: the reproducer never ran" in capsys.readouterr().err
    # Upstream link to another repository than the target: not approvable, nothing exported.
    repo.add(
        "elsewhere",
        manifest=github_manifest("elsewhere", repo="someone/else"),
        repo="toyorg/toylib",
    )
    repo.record("elsewhere", at=NOW)
    assert repo.cli("approve", "elsewhere", "--by", "Ada") == 2
    assert (
        "target: manifest report link https://github.com/someone/else/issues/1"
        in capsys.readouterr().err
    )
    assert not (repo.root / "packs" / "state.json").exists()
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_filed_records_the_link_and_the_queue_shows_it(repo, capsys):
    assert repo.cli("approve", "toy_add", "--by", "Ada") == 0
    assert repo.cli("filed", "toy_add", "--url", "https://github.com/other/repo/issues/5") == 2
    assert "is not in toyorg/toylib" in capsys.readouterr().err
    url = "https://github.com/toyorg/toylib/issues/5"
    assert repo.cli("filed", "toy_add", "--url", url) == 0
    [entry] = filing_queue(repo.root)
    assert (entry.status, entry.filed, entry.approved_by) == ("filed", (url,), "Ada")
    assert f"<{url}>" in markdown_section([entry])
    assert repo.cli("export", "toy_add", "--to", str(repo.tmp / "again")) == 2
    assert "already filed" in capsys.readouterr().err
    # The filing starts the repository's two-day pause.
    assert last_waves(parse_state((repo.root / "packs" / "state.json").read_text(), "s")) == {
        "toyorg/toylib": NOW.date()
    }


@pytest.mark.slow
def test_already_fixed_pack_is_regression_coverage_not_a_filing(repo, tmp_path, capsys):
    repo.add("fixed_up", state="already-fixed", thread="https://github.com/toyorg/toylib/pull/2")
    entry = next(e for e in filing_queue(repo.root) if e.id == "fixed_up")
    assert entry.status == "already-fixed" and entry.reasons == ()
    assert repo.cli("approve", "fixed_up", "--by", "Ada") == 2
    assert (
        "already fixed upstream — regression coverage, nothing to approve"
        in capsys.readouterr().err
    )
    assert repo.cli("check", "fixed_up") == 0
    assert "regression  fixed_up: already fixed upstream" in capsys.readouterr().out


def test_a_filing_time_without_offset_is_read_as_utc_when_planning():
    state = parse_state(
        '{"version": 1, "packs": {"a": {"filings": [{"url": "u", "at": "2026-11-21T23:30:00", '
        '"repository": "o/r"}]}}}',
        "packs/state.json",
    )
    assert last_waves(state) == {"o/r": _dt.date(2026, 11, 21)}
