"""``retire --apply`` after faults and races: what a killed run left, outputs that are links, a
working tree that is not the base, a blocker lifted by a backfilled upload, a bad ``--plan``.

Each test builds the real thing: a git repository, a loopback index, uv re-locks, ``git worktree``
left locked the way a ``kill -9`` during ``git worktree add`` leaves it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import shutil
import subprocess

import pytest

from retire.core.errors import InputError
from retire.locks.trial import try_raise
from retire.mirrors.config import MirrorSet
from retire.probes.http import Fetcher, make_client
from retire.verdicts.plan import Sources
from retire.verdicts.served import served_digest
from tests.conftest import run_cli
from tests.support.gitrepos import git
from tests.support.wheels import build_wheel
from tests.test_retire_lanes import BRANCH, SHIM, LaneShop

pytestmark = pytest.mark.slow


@pytest.fixture
def own_shop(tmp_path):
    """A LaneShop of this test's own: the tests here change its index and its tree."""
    made = LaneShop(tmp_path)
    yield made
    made.close()


def test_a_blocker_lifted_by_a_backfilled_upload_is_asked_again(own_shop):
    lane = own_shop.lanes()["blocked"]
    # frozen by a fixed date: its answers are cached
    frozen = dataclasses.replace(lane, exclude_newer=dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    client = make_client()
    sources = Sources({}, None, "github.com", MirrorSet())
    where = {
        "locks_dir": own_shop.root / "locks",
        "scratch_dir": own_shop.root / ".patchlane" / "trials",
        "cache_dir": own_shop.root / ".patchlane" / "trial-cache",
        "served": functools.partial(served_digest, Fetcher(client), sources),
    }
    try:
        first, again = (try_raise(frozen, {"toylib": "1.6"}, **where) for _ in range(2))
        assert not first.resolved and "pinner 1.0 requires toylib==1.5" in (first.blocker or "")
        assert again.cached and again.blocker == first.blocker
        # A pinner that allows the fix appears, dated before the freeze: a backfilled upload.
        # The lane and its lock are as they were; the index is not.
        own_shop.index.add(
            build_wheel(own_shop.wheels, "pinner", "1.1", requires=["toylib>=1.5"]), "2026-02-01"
        )
        lifted = try_raise(frozen, {"toylib": "1.6"}, **where)
        assert not lifted.cached and lifted.resolved, lifted
        # and that answer is kept while the index serves the same files
        assert try_raise(frozen, {"toylib": "1.6"}, **where).cached
    finally:
        client.close()


def _branch(shop: LaneShop) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}"],
        cwd=shop.root,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or None


def test_a_worktree_a_killed_run_left_locked_is_removed_and_the_run_goes_on(own_shop, tmp_path):
    # what `kill -9` during `git worktree add` leaves: the worktree registered and locked
    # ("initializing"), its folder gone
    left = own_shop.root / ".patchlane" / "worktrees" / f"retire-{SHIM}"
    git(own_shop.root, "worktree", "add", "-q", "--lock", "--reason", "initializing",
        "--detach", str(left), "HEAD")  # fmt: skip
    shutil.rmtree(left)
    # a worktree of the user's own, locked too: never touched
    mine = tmp_path / "mine"
    git(own_shop.root, "worktree", "add", "-q", "--lock", "--detach", str(mine), "HEAD")
    verdict = own_shop.verdict()
    for _ in range(2):
        [outcome] = own_shop.apply(verdict)
        assert outcome.status in ("proposed", "already-proposed"), outcome.reason
    listed = git(own_shop.root, "worktree", "list", "--porcelain")
    assert str(left) not in listed and str(mine) in listed and mine.is_dir()


def test_an_output_that_is_a_link_is_refused_before_the_branch_is_made(own_shop, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (own_shop.root / ".patchlane").mkdir(exist_ok=True)
    (own_shop.root / ".patchlane" / "prs").symlink_to(outside)
    with pytest.raises(InputError, match=r"prs: is a symbolic link"):
        own_shop.apply(own_shop.verdict())
    # no branch the next run would call already proposed, no body outside
    assert _branch(own_shop) is None and not list(outside.iterdir())


def test_a_body_path_that_is_a_link_is_refused_before_the_branch_is_made(own_shop, tmp_path):
    outside = tmp_path / "body.md"
    body = own_shop.root / ".patchlane" / "prs" / f"{BRANCH}.md"
    body.parent.mkdir(parents=True)
    body.symlink_to(outside)
    with pytest.raises(InputError, match=r"is a symbolic link"):
        own_shop.apply(own_shop.verdict())
    assert _branch(own_shop) is None and not outside.exists()


@pytest.mark.parametrize("change", ["edited", "untracked"])
def test_a_working_tree_that_is_not_the_base_is_refused_in_one_line(own_shop, capsys, change):
    verdict = own_shop.verdict()
    if change == "edited":
        # HEAD pins follow to toylib==1.5; the working tree already raised it
        lane = own_shop.root / "lanes" / "follow.toml"
        lane.write_text(lane.read_text().replace('"toylib==1.5"', '"toylib==1.6"'))
        named = "lanes/follow.toml"
    else:
        own_shop.lane("extra", '["toylib==1.5"]', f'["{SHIM}"]')
        named = "lanes/extra.toml"
    with pytest.raises(InputError) as refused:
        own_shop.apply(verdict)
    said = str(refused.value)
    assert said.startswith(f"{named}: differs from ") and "\n" not in said
    assert _branch(own_shop) is None


def test_retire_apply_on_a_tree_that_is_not_the_base_says_so_in_one_line(own_shop, capsys):

    own_shop.record_fix()
    # HEAD pins follow to toylib==1.5; the working tree already raised it
    lane = own_shop.root / "lanes" / "follow.toml"
    lane.write_text(lane.read_text().replace('"toylib==1.5"', '"toylib==1.6"'))
    code, out, err = run_cli(own_shop.root, "retire", "--apply", "--no-pr", "--json", capsys=capsys)
    assert code == 2 and "lanes/follow.toml: differs from " in err, err
    assert json.loads(out)["error"]["file"] == "lanes/follow.toml"
    assert _branch(own_shop) is None


def test_a_plan_file_with_a_bad_shim_id_names_the_file(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"shim_id": "../../etc", "why": "x", "floors": {}}))
    code, out, err = run_cli(tmp_path, "retire", "--apply", "--plan", str(plan), capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{plan}: shim: invalid shim id" in err, err
    code, out, _err = run_cli(
        tmp_path, "retire", "--apply", "--plan", str(plan), "--json", capsys=capsys
    )
    assert json.loads(out)["error"]["file"] == str(plan)
