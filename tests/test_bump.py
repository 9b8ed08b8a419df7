"""Lockfile bumps for real: a git repository made here, uv re-locking against a loopback index
that gains releases, the shim suite run on the bumped lock, and the branch inspected."""

from __future__ import annotations

import datetime as dt
import textwrap
import tomllib
from pathlib import Path

import pytest

from retire.branches import bump
from retire.branches.options import BumpOptions
from retire.evidence import validation
from retire.locks import lockdiff
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

# cooldown 7 days → cutoff 2026-05-25
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)

TOY_LANE = """\
# The toy lane: this comment must survive the bump.
[lane]
python = "3.11"
exclude-newer = 2026-03-01  # frozen
requirements = [
    "toylib>=1.0",
    "helper",  # any helper
]
shims = ["toy"]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""

SIDE_LANE = """\
[lane]
python = "3.11"
exclude-newer = 2026-03-01
requirements = ["helper"]

[lane.indexes.side]
url = "@SIDE@"
default = true
"""


@pytest.fixture
def shop(tmp_path, capsys):
    """A git repository with two lanes locked at 2026-03-01, and two indexes that will move."""
    wheels = tmp_path / "wheels"
    main, side = PackageIndex(), PackageIndex()
    main.add(
        build_wheel(
            wheels, "toylib", "1.0", files={"toylib.py": textwrap.dedent(shimtree.BUGGY_TARGET)}
        ),
        "2026-01-05",
    )
    for index in (main, side):
        index.add(build_wheel(wheels, "helper", "1.0"), "2026-01-01")
    with IndexServer(main) as main_server, IndexServer(side) as side_server:
        repo = tmp_path / "shop"
        (repo / "lanes").mkdir(parents=True)
        (repo / "lanes" / "toy.toml").write_text(TOY_LANE.replace("@MAIN@", main_server.url))
        (repo / "lanes" / "side.toml").write_text(SIDE_LANE.replace("@SIDE@", side_server.url))
        shimtree.write_shim(repo / "shims", "toy")
        (repo / ".gitignore").write_text(".patchlane/\n")
        assert run_cli(repo, "lock", capsys=capsys)[0] == 0
        # What the shop knew before the bump: the shim is needed on toylib 1.0.
        assert run_cli(repo, "run", "toy", "--run-id", "before", capsys=capsys)[0] == 0
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "shop")
        # Upstream moves on: a fix, a helper release, and two releases inside the cooldown.
        main.add(
            build_wheel(
                wheels,
                "toylib",
                "1.1",
                files={"toylib.py": textwrap.dedent(shimtree.FIXED_TARGET)},
                project_urls={
                    "Source": "https://example.org/toylib",
                    "Release Notes": "https://example.org/toylib/releases/1.1",
                },
            ),
            "2026-04-01",
        )
        main.add(build_wheel(wheels, "helper", "1.1"), "2026-04-02")
        main.add(build_wheel(wheels, "helper", "2.0"), "2026-05-28")
        main.add(
            build_wheel(
                wheels, "toylib", "1.2", files={"toylib.py": "def add(a, b): return a + b\n"}
            ),
            "2026-05-30",
        )
        yield {
            "repo": repo,
            "main": main_server,
            "side": side_server,
            "wheels": wheels,
            "side_index": side,
        }


@pytest.mark.slow
def test_bump_makes_a_branch_with_the_diff_and_the_suites_word(shop, capsys):
    repo = shop["repo"]
    # the side lane's index goes away: it cannot re-resolve
    shop["side"].__exit__(None, None, None)
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    result = bump.bump(repo, BumpOptions(cooldown_days=7, now=NOW))
    assert result.status == "proposed" and result.branch == "patchlane/bump-all-2026-06-01"
    by_lane = {lane.lane: lane for lane in result.lanes}
    toy = by_lane["toy"]
    assert toy.status == "bumped"
    # The cooldown kept helper 2.0 and toylib 1.2 (uploaded after 2026-05-25) out.
    assert {c.name: (c.old, c.new, c.kind) for c in toy.changes} == {
        "toylib": ("1.0", "1.1", "minor"),
        "helper": ("1.0", "1.1", "minor"),
    }
    assert toy.outcomes == (("toy", "upstream-fixed", "needed"),)
    assert result.retirement_candidates == [("toy", "toy")] and result.newly_broken == []
    side = by_lane["side"]
    assert side.status == "failed" and "unreachable" in side.why and "untouched" in side.why

    # The user's checkout is exactly as it was.
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == status
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    # The branch: one commit on main, lane comments kept, the freeze rolled, the lock re-made.
    branch = result.branch
    assert git(repo, "rev-list", "--count", f"main..{branch}") == "1"
    lane_text = git(repo, "show", f"{branch}:lanes/toy.toml")
    assert lane_text == TOY_LANE.replace("@MAIN@", shop["main"].url).replace(
        "2026-03-01", "2026-05-25"
    ).rstrip("\n")
    lock = tomllib.loads(git(repo, "show", f"{branch}:locks/toy/pylock.toml"))
    assert {p["name"]: p["version"] for p in lock["packages"]} == {"toylib": "1.1", "helper": "1.1"}
    # The failed lane's file and lock are untouched on the branch.
    assert git(repo, "show", f"{branch}:lanes/side.toml") == git(
        repo, "show", "main:lanes/side.toml"
    )
    assert git(repo, "show", f"{branch}:locks/side/pylock.toml") == git(
        repo, "show", "main:locks/side/pylock.toml"
    )
    # The suites' records travel with the branch.
    records = git(repo, "show", f"{branch}:validation/manifest.jsonl").splitlines()
    assert len(records) > len(git(repo, "show", "main:validation/manifest.jsonl").splitlines())
    # The PR body says it all.
    body = Path(result.body_path).read_text()
    assert "| toylib | 1.0 | 1.1 | minor |" in body
    assert "Shims that became retirement candidates" in body and "`toy` on lane `toy`" in body
    assert "Lane `side` — failed" in body
    assert "2026-05-25" in body
    # Release notes where the index's core metadata names them (toylib), none invented (helper).
    assert toy.notes == (("toylib", "https://example.org/toylib/releases/1.1"),)
    assert "Release notes: [toylib 1.1](https://example.org/toylib/releases/1.1)" in body

    # Running it again creates nothing new.
    again = bump.bump(repo, BumpOptions(cooldown_days=7, now=NOW))
    assert again.status == "already-proposed"
    assert git(repo, "rev-list", "--count", f"main..{branch}") == "1"
    assert not list((repo / ".patchlane" / "worktrees").glob("bump*"))


@pytest.mark.slow
def test_nothing_new_means_no_branch(shop, capsys):
    repo = shop["repo"]
    # With a long cooldown none of the new releases is old enough yet.
    result = bump.bump(
        repo, BumpOptions(lanes=("side",), cooldown_days=200, now=NOW, run_suites=False)
    )
    assert result.status == "unchanged"
    assert git(repo, "branch", "--list", "patchlane/*") == ""


@pytest.mark.slow
def test_package_option_upgrades_only_that_package(shop, capsys):
    repo = shop["repo"]
    result = bump.bump(
        repo,
        BumpOptions(
            lanes=("toy",), packages=("helper",), cooldown_days=7, now=NOW, run_suites=False
        ),
    )
    assert result.status == "proposed" and result.branch == "patchlane/bump-toy-2026-06-01"
    [toy] = result.lanes
    assert [(c.name, c.new) for c in toy.changes] == [("helper", "1.1")]


@pytest.mark.slow
def test_cli_reports_and_refuses_bad_input(shop, capsys):
    repo = shop["repo"]
    code, out, err = run_cli(repo, "bump", "nope", capsys=capsys)
    assert code == 2 and "unknown lane 'nope'" in err
    # argparse's type: before anything runs
    with pytest.raises(SystemExit) as refused:
        run_cli(repo, "bump", "--cooldown", "-1", capsys=capsys)
    err = capsys.readouterr().err
    assert (
        refused.value.code == 2
        and "--cooldown: must be zero or more" in err
        and err.count("\n") == 1
    )
    code, out, _ = run_cli(
        repo, "bump", "toy", "--no-run", "--no-pr", "--now", "2026-06-01T12:00:00", capsys=capsys
    )
    assert code == 0 and "proposed: patchlane/bump-toy-2026-06-01" in out


@pytest.mark.parametrize(
    "old,new,kind",
    [
        ("1.0", "2.0", "major"),
        ("1.0", "1.1", "minor"),
        ("1.0.1", "1.0.2", "patch"),
        ("2.1", "2.2.0rc1", "pre-release"),
        ("2.12.0.dev20260101", "2.12.0.dev20260201", "nightly"),
        ("2.0", "1.9", "downgrade"),
        (None, "1.0", "added"),
        ("1.0", None, "removed"),
    ],
)
def test_version_changes_are_classified(old, new, kind):
    assert lockdiff.classify(old, new) == kind


def test_previous_outcomes_judge_the_latest_pair():
    def rec(mode, outcome, sentinel, when):
        return validation.ValidationRecord(
            shim="s",
            mode=mode,
            lane="l",
            host={},
            versions={},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=0,
            duration_s=1,
            started_at=when,
        )

    records = [
        rec("without", "bug-reproduced", "BUG_REPRODUCED", "2026-01-01"),
        rec("with", "fix-validated", "FIX_VALIDATED", "2026-01-01"),
        rec("without", "fix-validated", "FIX_VALIDATED", "2026-02-01"),
    ]
    assert bump.previous_outcomes(records) == {("l", "s"): "upstream-fixed"}


def test_the_freeze_roll_reaches_every_cell_of_a_matrix(tmp_path):
    from retire.lanes import lanedit, lanefile

    (tmp_path / "lanes").mkdir()
    path = tmp_path / "lanes" / "grid.toml"
    path.write_text(
        textwrap.dedent("""\
        # no base table, and only one axis value has a freeze date
        [matrix]
        [matrix.axes.torch."2.10"]
        python = "3.12"
        requirements = ["torch==2.10.0"]
        exclude-newer = 2026-01-01
        [matrix.axes.torch."2.11"]
        python = "3.12"
        requirements = ["torch==2.11.0"]
    """)
    )
    cutoff = dt.datetime(2026, 5, 25, tzinfo=dt.UTC)
    assert lanedit.roll_exclude_newer(path, cutoff, within=tmp_path)
    frozen = {lane.name: lane.exclude_newer for lane in lanefile.load_lanes(tmp_path / "lanes")}
    assert frozen == {"grid-2.10": cutoff, "grid-2.11": cutoff}
    assert path.read_text().startswith("# no base table")
    # nothing left to move
    assert not lanedit.roll_exclude_newer(path, cutoff, within=tmp_path)


def test_a_constraint_is_added_once():
    from retire.lanes.lanedit import add_constraint

    text = '[matrix]\n[matrix.axes.a.x]\npython = "3.12"\nrequirements = []\n'
    once = add_constraint(text, "numpy>=2")
    assert add_constraint(once, "numpy>=2") == once and once.count("numpy>=2") == 1


@pytest.mark.slow
def test_json_is_one_document_with_each_lanes_diff(shop, capsys):
    import json

    code, out, err = run_cli(
        shop["repo"],
        "bump",
        "toy",
        "--no-run",
        "--no-pr",
        "--now",
        "2026-06-01T12:00:00",
        "--json",
        capsys=capsys,
    )
    assert code == 0
    document = json.loads(out)
    assert (
        document["status"] == "proposed" and document["branch"] == "patchlane/bump-toy-2026-06-01"
    )
    assert document["pr_status"] == "not-requested"
    [toy] = document["lanes"]
    assert (
        toy["status"] == "bumped"
        and toy["changes"]
        and {"name", "old", "new", "kind", "marker"} <= set(toy["changes"][0])
    )
    # the human summary went to stderr
    assert "proposed: patchlane/bump-toy-2026-06-01" in err


@pytest.mark.parametrize(
    "metadata, url",
    [
        ("Project-URL: Changelog, https://example.org/c\n", "https://example.org/c"),
        (
            "Project-URL: Source, https://example.org/s\nProject-URL: What's New?, https://example.org/w\n",
            "https://example.org/w",
        ),
        (
            "Project-URL: changes, https://example.org/c\nProject-URL: Release-Notes, https://example.org/r\n",
            "https://example.org/r",
        ),
        ("Project-URL: Homepage, https://example.org/\n", None),
        # only web links
        ("Project-URL: Changelog, javascript:alert(1)\n", None),
        ("Project-URL: Changelog\n", None),
    ],
)
def test_release_notes_come_from_project_urls(metadata, url):
    from retire.probes.notes import notes_url

    assert notes_url("Metadata-Version: 2.1\nName: x\nVersion: 1\n" + metadata) == url


# ---------------------------------------------------------------------------------------------
# issue 36: a dry run, an adoption not committed yet, "before" of a lock that never ran


@pytest.mark.slow
def test_a_dry_run_says_what_would_move_and_run_and_writes_nothing(shop, capsys):
    import json

    repo = shop["repo"]
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    plan = bump.dry_run(repo, BumpOptions(cooldown_days=7, now=NOW, lanes=("toy",)))
    [toy] = plan.lanes
    assert toy.status == "bumped"
    assert {c.name: (c.old, c.new) for c in toy.changes} == {
        "toylib": ("1.0", "1.1"),
        "helper": ("1.0", "1.1"),
    }
    assert plan.runs == (("toy", ("toy",), ""),) and plan.branch == "patchlane/bump-toy-2026-06-01"
    # no branch, no worktree, no PR body, the checkout as it was
    assert git(repo, "branch", "--list", "patchlane/*") == ""
    assert not list((repo / ".patchlane" / "worktrees").glob("bump*"))
    assert not (repo / ".patchlane" / "prs").exists()
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == status
    # the command: what would move, what would run, where it would go
    code, out, _ = run_cli(
        repo, "bump", "toy", "--dry-run", "--repo", "acme/shop", "--now", "2026-06-01T12:00:00",
        capsys=capsys,
    )  # fmt: skip
    assert code == 0
    assert "dry run: no branch, no pull request, nothing written" in out
    assert "would bump toy: 2 package(s) would change" in out
    assert "toylib 1.0 → 1.1 (minor)" in out and "would run  toy: toy" in out
    assert "would make branch patchlane/bump-toy-2026-06-01" in out
    assert "open its pull request in acme/shop" in out
    code, out, _ = run_cli(
        repo, "bump", "--dry-run", "--no-run", "--json", "--now", "2026-06-01T12:00:00",
        capsys=capsys,
    )  # fmt: skip
    document = json.loads(out)
    assert code == 0 and document["dry_run"] is True and document["pull_request"] is None
    assert document["runs"] == [{"lane": "toy", "subjects": ["toy"], "skipped": "--no-run"}]
    assert git(repo, "branch", "--list", "patchlane/*") == ""


@pytest.mark.slow
def test_a_bump_before_the_adoption_is_committed_says_commit_it_first(tmp_path, capsys):
    # was: "…/worktrees/bump/lanes: no lanes folder — create it" (it exists, uncommitted)
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert run_cli(repo, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0")[0] == 0
    capsys.readouterr()
    for options in (["--no-pr"], ["--dry-run"]):
        code, _, err = run_cli(repo, "bump", *options, capsys=capsys)
        assert code == 2 and "has no commit yet" in err, err
        assert "commit the adoption first (`git add -A && git commit" in err
    (repo / "README.md").write_text("# shop\n")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the shop")
    code, _, err = run_cli(repo, "bump", "--no-pr", capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "lanes/cpu.toml: is not in" in err and "the commit the bump branch starts from" in err
    assert "commit the adoption first (`git add -A && git commit" in err
    assert "no lanes folder" not in err


@pytest.mark.slow
def test_before_is_the_outcome_on_the_lock_being_replaced_not_another_ones(shop, capsys):
    repo = shop["repo"]
    # the lane changes (a new bound): its lock is re-made and never run; the "needed" on record
    # ran on the lock before it
    lane = repo / "lanes" / "toy.toml"
    lane.write_text(lane.read_text().replace('"toylib>=1.0"', '"toylib>=1.0,<9"'))
    assert run_cli(repo, "lock", "toy", capsys=capsys)[0] == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a bound")
    result = bump.bump(repo, BumpOptions(lanes=("toy",), cooldown_days=7, now=NOW))
    [toy] = result.lanes
    assert toy.outcomes == (("toy", "upstream-fixed", None),)
    body = Path(result.body_path).read_text()
    assert "| toy | upstream-fixed | — |" in body and "| needed" not in body
