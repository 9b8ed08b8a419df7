"""The culprit flow end to end (issue 34 item 2): a lane locked on a clean release is bumped into a
bug's window — the culprit names the release and records its runs, the clean old release among
them — the fix is released, the lane moves past it and runs clean, and `patchlane verdicts` says
**retire**, not keep with a false conflict; `patchlane retire --apply` proposes the branch.

Real uv against a loopback index, a real project in git (tests/test_culprits.py's shop), the shim
retiring by its reproducer alone: its floor is the first clean release after the last broken one,
and the culprit's clean run below the window never lowers it."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.test_culprits import REPRODUCER, Shop, _branch, stable  # noqa: F401 - fixture
from tests.test_json_schemas import check

# the shim retires by its reproducer alone: no index, code host or mirror condition to lean on
_CONDITIONS = re.compile(
    r"\[\[retirement\.conditions\]\].*?(?=\[\[retirement|\[reproducer\])", re.DOTALL
)


def _reproducer_only(shop: Shop) -> None:
    text = shimtree.manifest_text(
        "toy", module="beta", distribution="beta", fix_class="version-floor"
    )
    kept = _CONDITIONS.sub(lambda m: m.group(0) if '"reproducer-clean"' in m.group(0) else "", text)
    assert kept.count("[[retirement.conditions]]") == 1
    shimtree.write_shim(
        shop.root / "shims", "toy", patch=None, reproducer=REPRODUCER, manifest=kept
    )


@pytest.fixture
def shop(stable):
    _reproducer_only(stable)
    return stable


@pytest.mark.slow
def test_a_shim_bumped_into_its_window_retires_once_the_lane_moves_past_the_fix(shop, capsys):
    shop.start(capsys)
    # upstream: 1.1 clean, 1.2 brings the bug, 1.3 still has it
    for version, ok in (("1.1", True), ("1.2", False), ("1.3", False)):
        shop.add("beta", version, "2026-02-01", ok=ok)
    _, lane = shop.bump()
    [culprit] = lane.culprits
    assert culprit.line() == "beta 1.2 breaks toy in lane cpu (1.1 clean)"
    # a person merges the bump: the lane now locks the broken 1.3, and the culprit's runs (the
    # clean old lock on 1.0 among them) are evidence on main
    git(shop.root, "merge", "--quiet", "--no-edit", _branch(shop))
    records = (shop.root / "validation" / "manifest.jsonl").read_text()
    assert '"lane": "bisect:cpu"' in records or '"lane":"bisect:cpu"' in records

    # upstream fixes it in 1.4; the lane moves past the fix and runs clean there
    shop.add("beta", "1.4", "2026-03-01", ok=True)
    assert run_cli(shop.root, "lock", "--upgrade", capsys=capsys)[0] == 0
    code, out, _ = run_cli(shop.root, "run", "--run-id", "after", capsys=capsys)
    assert code == 0, out
    git(shop.root, "add", "-A")
    git(shop.root, "commit", "--quiet", "-m", "the lane past the fix, and its run")

    code, out, err = run_cli(shop.root, "verdicts", "--json", "--no-resolve", "toy", capsys=capsys)
    assert code == 0, err
    document = json.loads(out)
    check("verdicts", document)
    (row,) = document
    # retire, with the first clean release after the last broken one as the floor — not keep
    # with a conflict between the fixed release and the culprit's records
    assert row["verdict"] == "retire", row["why"]
    assert row["floors"] == ["beta>=1.4"]
    assert not [f for f in row["flags"] if f["kind"] == "conflict"], row["flags"]
    [condition] = row["conditions"]
    assert condition["kind"] == "reproducer-clean" and condition["state"] == "holds"
    assert "the first clean release after 1.3" in condition["why"]
    window = row["window"]
    assert (window["last_broken"], window["first_fixed"]) == ("1.3", "1.4")
    assert window["introduced"] == "the bug came in after 1.1 (clean), by 1.2 (broken)"
    assert "bisection or culprit runs" in window["source"]
    [cpu] = row["lane_verdicts"]
    assert (cpu["step"], cpu["window"]) == ("drop", "after")

    code, out, err = run_cli(shop.root, "retire", "--apply", "--no-pr", "--json", capsys=capsys)
    assert code == 0, err
    applied = json.loads(out)
    check("retire-apply", applied)
    [proposal] = applied["proposals"]
    assert (proposal["shim_id"], proposal["status"]) == ("toy", "proposed"), proposal
    assert git(shop.root, "rev-parse", "--verify", proposal["branch"])
