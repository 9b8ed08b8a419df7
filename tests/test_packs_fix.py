"""An already-fixed pack's upstream state cites the fix as the recorded runs show it: the first
fixed release and, where the target's repository is mirrored on this host, the fix commit (sha,
subject, pull request) — read from the validation records and a real git mirror of a toy
upstream (tests/support/historyrepo.py: add() fixed by "Fix add() (#63)" between 1.5 and 1.6)."""

from __future__ import annotations

import datetime as _dt

import pytest

from retire.evidence import validation
from retire.evidence.validation import ValidationRecord
from retire.packs.store import load_pack
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.support.packtree import PackProject

SHIM = "toy_fixed"
AT = _dt.datetime(2026, 3, 1, tzinfo=_dt.UTC)


def _run(
    outcome: str, version: str, commit: str | None = None, minute: int = 0
) -> ValidationRecord:
    host: dict[str, object] = {"hostname": "gpu-host-1", "gpu": None}
    if commit is not None:
        host["revisions"] = {"toylib": f"file:///mirrors/toylib.git@{commit}"}
    return ValidationRecord(
        shim=SHIM,
        mode="without",
        lane="bisect",
        host=host,
        versions={"toylib": version},
        sentinel="BUG_REPRODUCED" if outcome == "bug-reproduced" else "FIX_VALIDATED",
        outcome=outcome,
        exit_code=10 if outcome == "bug-reproduced" else 0,
        duration_s=0.1,
        # each run its own moment: the manifest keeps one record per run
        started_at=(AT + _dt.timedelta(minutes=minute)).isoformat(timespec="microseconds"),
    )


@pytest.fixture
def fixed(tmp_path):
    upstream = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirrors" / "toyorg" / "toylib.git"
    mirror.parent.mkdir(parents=True)
    git(mirror.parent, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    p = PackProject(tmp_path)
    p.add(
        SHIM,
        state="already-fixed",
        thread="https://github.com/toyorg/toylib/pull/63",
        against="toylib==1.5",
    )
    (p.root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/toyorg/toylib"\npath = "{mirror}"\n'
    )
    return p, upstream


@pytest.mark.slow
def test_an_already_fixed_pack_cites_the_recorded_fix_commit(fixed):
    p, upstream = fixed
    before, fixed, _ = upstream.around_fix()
    validation.append(
        p.manifest_path,
        [
            _run("bug-reproduced", "1.5"),
            _run("fix-validated", "1.6"),
            _run("bug-reproduced", "1.5", before, minute=1),
            _run("fix-validated", "1.5", fixed, minute=2),
        ],
    )
    body = load_pack(p.root, SHIM).pack.body
    state = next(line for line in body.splitlines() if line.startswith("**Upstream state:**"))
    assert "already fixed upstream (https://github.com/toyorg/toylib/pull/63)" in state
    assert (
        f"our runs without the shim: fixed in `1.6` (last broken `1.5`), by "
        f"`{upstream.fixed[:12]}`" in state
    )
    assert "(#63)" in state and "Fix" in state
    # where the mirror came from, in one clause
    assert (
        " — mirror of toylib: declared in `patchlane.toml`, named by the link "
        "https://github.com/toyorg/toylib/issues/1; kept"
    ) in state
    assert state.endswith("kept as regression coverage, not filed.")


@pytest.mark.slow
def test_without_a_mirror_the_pack_cites_the_release_and_without_runs_nothing(fixed):
    p, _ = fixed
    body = load_pack(p.root, SHIM).pack.body
    assert "our runs" not in body
    (p.root / "patchlane.toml").unlink()
    validation.append(
        p.manifest_path, [_run("bug-reproduced", "1.5"), _run("fix-validated", "1.6")]
    )
    state = next(
        line
        for line in load_pack(p.root, SHIM).pack.body.splitlines()
        if line.startswith("**Upstream state:**")
    )
    assert "our runs without the shim: fixed in `1.6` (last broken `1.5`); kept" in state
