"""No link needed (issue 34 item 3, the verdicts' side): a shim that links nothing, on lanes that
pin no revision, with its target's mirror declared once in ``patchlane.toml`` — the gather finds
that mirror as every command does (retire/mirrors/resolve.py: the one declared mirror named as the
package whose release tags hold the recorded releases) and orders the recorded commit runs with
it: ``patchlane verdicts --json`` names the window's fix commit and its pull request, says where
the mirror came from, and a fix on a branch the mirror's entry names is found too (a real toy
upstream, tests/support/historyrepo.py; real git)."""

from __future__ import annotations

import pytest

from retire.evidence import validation
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.support.retirement import REPRODUCER_CLEAN, Project
from tests.test_verdicts_branchfix import LANE, SHIM, URL, run_record, verdict_row


def _shop(tmp_path, *, released: bool = True, entry: str = ""):
    """A shop whose only word on toylib's repository is its ``[[mirrors.repository]]`` entry."""
    upstream = make_window_repo(tmp_path / "upstream", released=released)
    mirror = tmp_path / "clones" / "toylib.git"
    mirror.parent.mkdir(parents=True)
    git(mirror.parent, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    p = Project(tmp_path / "project")
    # no upstream link, no pr-released condition: nothing names the repository
    p.shim(SHIM, REPRODUCER_CLEAN, status="not-applicable")
    (p.root / "lanes" / "rel.toml").write_text(LANE)
    (p.root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "{URL}"\npath = "{mirror}"\n{entry}'
    )
    return p, upstream, mirror


@pytest.mark.slow
def test_a_declared_mirror_names_the_fix_commit_and_its_pull_request(tmp_path, capsys):
    p, upstream, _ = _shop(tmp_path)
    before, fixed, _ = upstream.around_fix()
    validation.append(
        p.validation,
        [
            run_record("bug-reproduced", 0, version="1.5"),
            run_record("fix-validated", 1, version="1.6"),
            run_record("bug-reproduced", 2, before, version="1.5"),
            run_record("fix-validated", 3, fixed, version="1.5"),
        ],
    )
    window = verdict_row(p, capsys)["window"]
    assert window["commit"] == {"sha": upstream.fixed, "subject": "Fix add() (#63)", "pull": 63}
    assert window["line"] == (
        f'fixed in 1.6 (last broken 1.5), by {upstream.fixed[:12]} "Fix add() (#63)" (#63)'
    )
    # where the mirror came from: the one resolver's rule 4, said in words and as values
    says = (
        "mirror of toylib: declared in patchlane.toml, matched by its name and release tags "
        "(2 of its 2 releases tagged)"
    )
    assert window["mirror"] == {
        "repository": URL,
        "found": "name-and-tags",
        "declared": True,
        "subdirectory": None,
        "says": says,
    }
    assert window["source"].endswith(
        f"commits ordered by the mirror of {URL}, declared in patchlane.toml, matched by its name "
        "and release tags (2 of its 2 releases tagged)"
    )


@pytest.mark.slow
def test_a_mirror_named_otherwise_is_not_taken_for_the_package(tmp_path, capsys):
    """The declared mirror must be named as the package: one named otherwise orders nothing."""
    p, upstream, mirror = _shop(tmp_path)
    (p.root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/other"\npath = "{mirror}"\n'
    )
    validation.append(
        p.validation,
        [
            run_record("bug-reproduced", 0, version="1.5"),
            run_record("fix-validated", 1, version="1.6"),
            run_record("fix-validated", 2, upstream.fixed, version="1.5"),
        ],
    )
    window = verdict_row(p, capsys)["window"]
    assert window["commit"] is None and window["mirror"] is None
    assert window["line"] == "fixed in 1.6 (last broken 1.5)"


@pytest.mark.slow
def test_a_branch_the_mirror_names_carries_a_fix_in_no_release(tmp_path, capsys):
    """No lane follows a branch; the mirror's entry names main: the fix on it, in no release yet,
    is the window's, with its pull request, and the commit runs are placed by ancestry."""
    p, upstream, _ = _shop(tmp_path, released=False, entry='branches = ["main"]\n')
    before = git(upstream.path, "rev-parse", f"{upstream.fixed}^")
    validation.append(
        p.validation,
        [
            run_record("bug-reproduced", 0),
            run_record("bug-reproduced", 1, before),
            run_record("fix-validated", 2, upstream.fixed),
        ],
    )
    row = verdict_row(p, capsys)
    short = upstream.fixed[:12]
    assert row["branch_fix"]["line"] == f"fixed on main at {short} (#92), in no release yet"
    assert row["branch_fix"]["repository"] == URL
    assert row["window"]["mirror"]["found"] == "name-and-tags"
    # the release lane keeps the shim, and is told where the fix is
    (lane,) = row["lane_verdicts"]
    assert lane["step"] == "keep"
    assert lane["why"].endswith(f"fixed on main at {short} (#92), in no release yet")
    # the commit the newest run was built from is asked of the same mirror: by ancestry, and
    # whether it is a followed branch's newest commit
    asked = {(e["kind"], e["repository"], e["commit"]) for e in row["evidence"] if "commit" in e}
    assert asked == {("ancestry", URL, upstream.fixed), ("branch-tip", URL, upstream.fixed)}
