"""Fixed on a branch, in no release (issue 26 item 4), through `patchlane verdicts --json` on a
real git mirror of a toy upstream whose fix lands on main after the last release
(tests/support/historyrepo.py, ``released=False``: "Fix add() (#92)" after v1.8).

The recorded runs pin the fix commit (broken on the commit before it, clean on it): a revision
lane locked at or past it drops the shim there, one locked before it keeps it, a release lane
says "fixed on main at <sha> (#92), in no release yet" — and once a release tag contains the fix
the verdict says "first released in 1.9" without a new bisection."""

from __future__ import annotations

import json

import pytest

from retire.commands import main as cli
from retire.evidence import validation
from retire.evidence.validation import ValidationRecord
from retire.history.mirrored import read_mirrored
from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.support.retirement import REPRODUCER_CLEAN, Project
from tests.support.windows import linked
from tests.test_json_schemas import check

SHIM = "toylib_add"
URL = "https://github.com/acme/toylib"
LANE = """[lane]
python = "3.12"
platform = "linux"
requirements = ["toylib"]
shims = ["toylib_add"]
"""
REVISION = f'\n[lane.revisions]\ntoylib = {{ mirror = "{URL}", rev = "main" }}\n'


def run_record(
    outcome: str, minute: int, commit: str | None = None, version: str = "1.8"
) -> ValidationRecord:
    """A run without the shim on ``version`` — on a package built from ``commit`` of the
    mirror (a bisection's), or of the release (lane rel)."""
    host: dict[str, object] = {"hostname": "gpu-1", "gpu": None}
    if commit is not None:
        host["revisions"] = {"toylib": f"{URL}.git@{commit}"}
    return ValidationRecord(
        shim=SHIM,
        mode="without",
        lane="bisect" if commit else "rel",
        host=host,
        versions={"toylib": version},
        sentinel="BUG_REPRODUCED" if outcome == "bug-reproduced" else "FIX_VALIDATED",
        outcome=outcome,
        exit_code=10 if outcome == "bug-reproduced" else 0,
        duration_s=0.1,
        started_at=f"2026-06-01T00:{minute:02d}:00.000000+00:00",
    )


def _lock(root, lane: str, commit: str | None = None) -> None:
    vcs = (
        f'[packages.vcs]\ntype = "git"\nurl = "{URL}.git"\ncommit-id = "{commit}"\n'
        if commit
        else ""
    )
    folder = root / "locks" / lane
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pylock.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "tests"\n\n[[packages]]\nname = "toylib"\n'
        f'version = "1.8"\n{vcs}'
    )


@pytest.fixture
def shop(tmp_path):
    upstream = make_window_repo(tmp_path / "upstream", released=False)
    mirror = tmp_path / "mirrors" / "acme" / "toylib.git"
    mirror.parent.mkdir(parents=True)
    git(mirror.parent, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    before = git(upstream.path, "rev-parse", f"{upstream.fixed}^")
    tip = git(upstream.path, "rev-parse", "main")
    p = Project(tmp_path / "project")
    p.shim(SHIM, REPRODUCER_CLEAN, status="not-applicable")
    (p.root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{URL}"\npath = "{mirror}"\n'
    )
    (p.root / "lanes" / "rel.toml").write_text(LANE)
    _lock(p.root, "rel")
    for name, commit in (("dev", tip), ("stale", before)):
        (p.root / "lanes" / f"{name}.toml").write_text(LANE + REVISION)
        _lock(p.root, name, commit)
    validation.append(
        p.validation,
        [
            run_record("bug-reproduced", 0),
            run_record("bug-reproduced", 1, before),
            run_record("fix-validated", 2, upstream.fixed),
        ],
    )
    return p, upstream, mirror


def verdict_row(p: Project, capsys) -> dict:
    """``patchlane verdicts --json --no-resolve`` of the one shim, checked against its schema."""
    assert cli(["verdicts", "--root", str(p.root), "--json", "--no-resolve", SHIM]) == 0
    document = json.loads(capsys.readouterr().out)
    check("verdicts", document)
    (row,) = document
    return row


@pytest.mark.slow
def test_the_fix_commit_on_the_branch_from_the_records(shop):
    p, upstream, mirror = shop
    repo = open_mirror(Mirror(URL, mirror))
    assert isinstance(repo, MirrorRepo)
    records = validation.load(p.validation)

    def branch_fix(runs):
        window = read_mirrored(runs, SHIM, "toylib", linked(repo), ["main"])
        return window.branch_fix if window is not None else None

    found = branch_fix(records)
    assert found is not None and found.commit is not None
    assert (found.commit.sha, found.commit.pull) == (upstream.fixed, 92)
    # the fix is on main only: no release tag contains it yet
    assert found.released_in is None and found.branch == "main"
    # the commit before it was not run: the fix is one of two commits, so none is named
    unpinned = [r for r in records if r.revisions.get("toylib") != upstream.fixed]
    unpinned.append(run_record("fix-validated", 4, git(upstream.path, "rev-parse", "main")))
    assert branch_fix(unpinned) is None
    # a release newer than the broken one run clean: the fix is in a release, not on the branch
    released = [*records, run_record("fix-validated", 3)]
    released[-1] = ValidationRecord(**{**released[-1].to_json(), "versions": {"toylib": "1.9"}})
    assert branch_fix(released) is None


@pytest.mark.slow
def test_revision_lanes_past_the_fix_drop_it_and_release_lanes_are_told(shop, capsys):
    p, upstream, mirror = shop
    row = verdict_row(p, capsys)
    short = upstream.fixed[:12]
    assert row["branch_fix"]["sha"] == upstream.fixed
    assert row["branch_fix"]["line"] == f"fixed on main at {short} (#92), in no release yet"
    lanes = {lane["lane"]: lane for lane in row["lane_verdicts"]}
    assert {name: lane["step"] for name, lane in lanes.items()} == {
        "dev": "drop",
        "rel": "keep",
        "stale": "keep",
    }
    assert lanes["dev"]["window"] == "after"
    assert f"fixed on main at {short} (#92), in no release yet" in lanes["dev"]["why"]
    assert "proven clean there by a run without the shim" in lanes["dev"]["why"]
    assert lanes["rel"]["why"].endswith(f"fixed on main at {short} (#92), in no release yet")
    # the bug is in every release: the shim stays for the release lane, goes for dev
    assert row["verdict"] == "retire-in-some"
    assert f"— but fixed on main at {short} (#92), in no release yet — can go in dev" in row["why"]
    assert "rel keeps it" in row["why"]

    # upstream releases it: the mirror's new tag moves the verdict, no bisection runs
    git(mirror, "tag", "v1.9", "main")
    runs = len(validation.load(p.validation))
    row = verdict_row(p, capsys)
    assert row["branch_fix"]["released_in"] == "1.9"
    lanes = {lane["lane"]: lane for lane in row["lane_verdicts"]}
    assert lanes["rel"]["why"].endswith(f"fixed on main at {short} (#92), first released in 1.9")
    assert len(validation.load(p.validation)) == runs


@pytest.mark.slow
def test_a_bug_recorded_past_the_fix_unpins_it_and_the_lane_keeps_the_shim(shop, capsys):
    p, upstream, _ = shop
    tip = git(upstream.path, "rev-parse", "main")
    validation.append(p.validation, [run_record("bug-reproduced", 5, tip)])
    row = verdict_row(p, capsys)
    # broken again on the lane's own commit: no fix on the branch is pinned any more
    assert row["branch_fix"] is None and row["verdict"] == "keep"
    lanes = {lane["lane"]: lane for lane in row["lane_verdicts"]}
    assert lanes["dev"]["step"] == "keep"


@pytest.mark.slow
def test_retire_apply_drops_the_shim_from_the_revision_lane_past_the_fix(shop, capsys):
    """The branch `retire --apply` makes edits only the lane past the fix; the shim's folder stays
    for the lanes that keep it, and the PR body names the fix commit."""
    p, upstream, _ = shop
    git(p.root, "init", "-q", "-b", "main")
    git(p.root, "add", "-A")
    git(p.root, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "x")
    args = ["retire", "--root", str(p.root), "--apply", "--no-pr", "--no-probe", "--json"]
    assert cli(args) == 0
    capsys.readouterr()
    branch = "patchlane/retire-toylib_add"
    changed = git(p.root, "diff", "--name-only", "main", branch).split()
    assert changed == ["lanes/dev.toml"]
    assert "toylib_add" not in git(p.root, "show", f"{branch}:lanes/dev.toml")
    message = git(p.root, "log", "-1", "--format=%B", branch)
    assert f"fixed on main at {upstream.fixed[:12]} (#92), in no release yet" in message
