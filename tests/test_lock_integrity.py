"""A lock is trusted only while it is what patchlane wrote and allows only what its lane allows;
a run proves its env matches the lock. Real uv, the loopback index, real envs."""

from __future__ import annotations

import json
import re

import pytest

from retire.lanes import lanefile
from retire.locks import locking
from retire.locks.integrity import PROVENANCE_HEADER, content_digest
from retire.runs import envcheck, envs
from tests.conftest import run_cli
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401  (fixtures)


def restamp(text: str) -> str:
    """What a careful forger does after an edit: recompute the recorded content digest."""
    at = text.rfind(PROVENANCE_HEADER)
    return text[:at] + re.sub(
        r'content = "[^"]+"', f'content = "{content_digest(text[:at])}"', text[at:]
    )


def toylib_block(text: str) -> str:
    return re.search(r'\[\[packages\]\]\nname = "toylib"\n.*?(?=\n\n|\n\[)', text, re.DOTALL).group(
        0
    )


@pytest.mark.slow
def test_a_lock_records_its_content_and_an_edit_makes_it_tampered(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    path = p.lock_file("old")
    text = path.read_text()
    assert re.search(r'\ncontent = "sha256:[0-9a-f]{64}"\n', text[text.rfind(PROVENANCE_HEADER) :])
    assert run_cli(p.root, "lock", "--check", capsys=capsys)[0] == 0

    # One hex digit of toylib's hash changed: the provenance no longer covers the content.
    block = toylib_block(text)
    digest = re.search(r'sha256 = "([0-9a-f]+)"', block).group(1)
    path.write_text(text.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:]))
    code, out, _ = run_cli(p.root, "lock", "--check", capsys=capsys)
    assert code == 1 and "tampered old: its content changed after patchlane wrote it" in out, out
    code, out, err = run_cli(p.root, "run", "old", capsys=capsys)
    assert code == 1 and "the lock is tampered" in out + err
    # Re-locking replaces it, and does not start from the tampered versions.
    code, out, _ = run_cli(p.root, "lock", capsys=capsys)
    assert code == 0 and run_cli(p.root, "lock", "--check", capsys=capsys)[0] == 0
    assert toylib_block(path.read_text()) == block


def test_a_version_the_lane_forbids_fails_even_with_a_consistent_hash_and_digest(
    toy_project, capsys
):
    p = toy_project
    # toylib==1.0
    p.write("old", lane())
    p.write("fixed", lane(reqs='"toylib==1.1"'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    old, fixed = p.lock_file("old"), p.lock_file("fixed")
    # 1.1's real entry (its own URL and hash: uv would install it happily), digest recomputed.
    swapped = restamp(
        old.read_text().replace(toylib_block(old.read_text()), toylib_block(fixed.read_text()))
    )
    old.write_text(swapped)
    [lane_old] = [x for x in lanefile.load_lanes(p.root / "lanes") if x.name == "old"]
    state = locking.lock_state(lane_old, p.root / "locks")
    assert (
        state.freshness == "tampered"
        and state.why == "toylib 1.1 is locked, but the lane's requirements say toylib==1.0"
    )
    code, out, _ = run_cli(p.root, "lock", "--check", "--json", capsys=capsys)
    rows = {row["lane"]: row for row in json.loads(out)["lanes"]}
    assert code == 1 and rows["old"]["state"] == "tampered" and rows["fixed"]["state"] == "current"


@pytest.mark.slow
def test_a_hash_tampered_after_the_env_was_built_is_caught_by_the_next_run(toy_project, capsys):
    """The warm re-sync only audits an env; a lock that changed gets a fresh env, installed
    hash-checked."""
    p = toy_project
    p.write("old", lane())
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    assert run_cli(p.root, "run", "old", "--no-record", "--run-id", "r1", capsys=capsys)[0] == 0
    path = p.lock_file("old")
    text = path.read_text()
    digest = re.search(r'sha256 = "([0-9a-f]+)"', toylib_block(text)).group(1)
    path.write_text(restamp(text.replace(digest, "f" * 64)))
    code, _out, _err = run_cli(p.root, "run", "old", "--no-record", "--run-id", "r2", capsys=capsys)
    summary = json.loads((p.root / ".patchlane/runs/r2/old.json").read_text())
    assert code == 1 and summary["status"] == "build-failed", summary
    assert "hash" in summary["why"].lower(), summary["why"]


@pytest.mark.slow
def test_the_installed_versions_are_compared_with_the_lock(toy_project, capsys):
    p = toy_project
    p.write("old", lane())
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    [lane_old] = lanefile.load_lanes(p.root / "lanes")
    env = envs.build(lane_old, p.lock_file("old"), p.root / ".patchlane/envs")
    site = envs.describe_paths(env.python)["purelib"]
    installed = envcheck.installed_versions(site)
    assert installed["toylib"] == "1.0"
    assert envcheck.mismatches({"toylib": "1.0"}, installed) == []
    assert envcheck.mismatches({"toylib": "1.1", "helper": "2"}, installed) == [
        "helper 2 is locked but not installed",
        "toylib 1.0 is installed, the lock says 1.1",
    ]
    # An env whose recorded expectations disagree with what is installed fails the build, one line.
    state_file = env.path / envs.STATE_NAME
    state = json.loads(state_file.read_text())
    state["expected"] = {"toylib": "1.1"}
    state_file.write_text(json.dumps(state))
    try:
        envs.build(lane_old, p.lock_file("old"), p.root / ".patchlane/envs")
    except envs.BuildError as exc:
        assert "does not match pylock.toml: toylib 1.0 is installed, the lock says 1.1" in str(exc)
        assert "\n" not in str(exc)
    else:
        raise AssertionError("a mismatching env was accepted")
