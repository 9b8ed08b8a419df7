"""A shim's window read back from the validation records alone, with a mirror's side
(retire.history.mirrored): the release edge from release runs, and the fix commit from commit runs
ordered by a real mirror of a toy upstream (tests/support/historyrepo.py: add() fixed by "Fix add()
(#63)" between 1.5 and 1.6)."""

from __future__ import annotations

import pytest

from retire.evidence.validation import ValidationRecord
from retire.history.mirrored import read_mirrored
from retire.history.reading import read
from tests.support.historyrepo import mirrored_window_repo
from tests.support.reportshop import record
from tests.support.windows import linked

SHIM = "toylib_add"


def _run(
    outcome: str, version: str, *, commit: str | None = None, when: str = ""
) -> ValidationRecord:
    made = record(
        SHIM, "bisect", "without", outcome, when or "2026-03-01T00:00:00+00:00", version=version
    )
    if commit is None:
        return made
    host = {**made.host, "revisions": {"toylib": f"file:///mirrors/toylib.git@{commit}"}}
    return ValidationRecord(**{**made.to_json(), "host": host, "record_id": ""})


def _releases() -> list[ValidationRecord]:
    return [
        _run("bug-reproduced", "1.4"),
        _run("bug-reproduced", "1.5"),
        _run("fix-validated", "1.6"),
        _run("fix-validated", "1.8"),
        # a run with the shim applied says nothing about the bug's window
        record(SHIM, "bisect", "with", "fix-validated", "2026-03-01T00:00:00+00:00", version="1.5"),
    ]


def test_release_edge_from_release_runs_alone():
    found = read(_releases(), SHIM, "toylib")
    assert found is not None
    assert (found.last_broken, found.first_fixed, found.fix_commit) == ("1.5", "1.6", None)
    assert found.line() == "fixed in 1.6 (last broken 1.5)"


def test_no_fixed_edge_without_a_broken_run_and_a_clean_newer_one():
    clean = read([_run("fix-validated", "1.4"), _run("fix-validated", "1.6")], SHIM, "toylib")
    assert clean is not None and not clean.seen and clean.first_fixed is None
    still = read([_run("fix-validated", "1.2"), _run("bug-reproduced", "1.6")], SHIM, "toylib")
    assert still is not None and still.first_fixed is None
    assert read(_releases(), "another_shim", "toylib") is None


def test_a_later_bug_on_a_clean_release_wins_and_is_flagged():
    """The newest run of a release used to decide here, the bug anywhere in the verdicts: one
    reading now, the bug wins, and the disagreement is said."""
    again = [*_releases(), _run("bug-reproduced", "1.6", when="2026-04-01T00:00:00+00:00")]
    found = read(again, SHIM, "toylib")
    assert found is not None and (found.last_broken, found.first_fixed) == ("1.6", "1.8")
    assert [d.items for d in found.disagreements] == [("1.6",)]
    # and whichever run is newer: a later clean run on 1.6 does not take it back
    later = [*_releases(), _run("bug-reproduced", "1.6", when="2026-02-01T00:00:00+00:00")]
    assert read(later, SHIM, "toylib") == found


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return mirrored_window_repo(tmp_path_factory.mktemp("recorded"))


@pytest.mark.slow
def test_the_fix_commit_from_commit_runs_ordered_by_the_mirror(toy):
    repo, mirror = toy
    before, fixed, after = repo.around_fix()
    runs = [
        *_releases(),
        # bisection order: the middle first, then the edges (the version is the older release's)
        _run("bug-reproduced", "1.5", commit=before),
        _run("fix-validated", "1.5", commit=fixed),
        _run("fix-validated", "1.5", commit=after),
    ]
    found = read_mirrored(runs, SHIM, "toylib", linked(mirror))
    assert found is not None and found.fix_commit is not None
    assert found.fix_commit.sha == repo.fixed
    assert (
        found.line()
        == f'fixed in 1.6 (last broken 1.5), by {repo.fixed[:12]} "Fix add() (#63)" (#63)'
    )
    assert found.to_json()["commit"] == {
        "sha": repo.fixed,
        "subject": "Fix add() (#63)",
        "pull": 63,
    }
    assert found.source.mirror is not None
    assert found.source.mirror.mirror.repository == "https://git.example/acme/toylib"
    # where the window came from says how the mirror was found, in JSON too
    assert found.source.describe().endswith(
        "commits ordered by the mirror of https://git.example/acme/toylib, declared in "
        "patchlane.toml, named by the link https://git.example/acme/toylib/pull/63"
    )
    assert found.to_json()["mirror"] == {
        "repository": "https://git.example/acme/toylib",
        "found": "link",
        "declared": True,
        "subdirectory": None,
        "says": "mirror of toylib: declared in patchlane.toml, named by the link "
        "https://git.example/acme/toylib/pull/63",
    }
    # commit runs do not count as runs of the release their package version names
    assert (found.last_broken, found.first_fixed) == ("1.5", "1.6")
    # without the mirror the commits cannot be ordered: the answer stays at the releases
    bare = read_mirrored(runs, SHIM, "toylib", None)
    assert bare is not None and bare.fix_commit is None


@pytest.mark.slow
def test_an_unpinned_commit_edge_names_no_commit(toy):
    repo, mirror = toy
    before, _, after = repo.around_fix()
    # broken before the fix and clean two after: the fix is one of two commits
    runs = [
        *_releases(),
        _run("bug-reproduced", "1.5", commit=before),
        _run("fix-validated", "1.5", commit=after),
    ]
    found = read_mirrored(runs, SHIM, "toylib", linked(mirror))
    assert found is not None and found.fix_commit is None
    span = found.fixed.commits
    assert span is not None and span.state == "unpinned" and span.after == after


def test_a_hostile_subject_is_inert_in_markdown():
    from retire.history.reading import CommitOrder
    from retire.mirrors.history import Commit

    evil = Commit(
        "a" * 40, "Fix <img src=x onerror=alert(1)> [click](https://evil.example)", "2026", 7
    )
    order = CommitOrder(
        ("1.5", "1.6"), ("v1.5", "v1.6"), "b" * 40, (evil, Commit("c" * 40, "", ""))
    )
    runs = [*_releases(), _run("fix-validated", "1.5", commit=evil.sha)]
    window = read(runs, SHIM, "toylib", orders=(order,))
    assert window is not None
    said = window.markdown()
    assert "<img" not in said and "[click](" not in said
    assert "&lt;img" in said and "\\[click\\]" in said
    assert said.startswith("fixed in `1.6` (last broken `1.5`), by `aaaaaaaaaaaa`")
