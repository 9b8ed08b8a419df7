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
from pathlib import Path

import pytest

from retire.locks.trial import try_raise
from retire.mirrors.config import MirrorSet
from retire.probes.http import Fetcher, make_client
from retire.verdicts.plan import Sources
from retire.verdicts.served import served_digest
from tests.support.wheels import build_wheel
from tests.test_retire_lanes import LaneShop

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
