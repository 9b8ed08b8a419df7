"""Retirement PR bodies say where the bug was fixed upstream (issue 26): the plan reads the
shim's window (the verdict's, else the one reading of the validation records: retire.history) —
the first clean release, and with the target's mirror (a real toy upstream) the fix commit and its
pull request — and the body says "Fixed upstream by `<sha>` (#PR), first released in `X`." with
the sha and version as code."""

from __future__ import annotations

import itertools

import pytest

from retire.branches.dropmessage import fixed_upstream, pr_body
from retire.branches.dropplan import DropPlan
from retire.branches.lanemoves import TreeEdit
from retire.branches.retirement import plans
from retire.evidence.validation import ValidationRecord
from retire.verdicts.model import Decision, Verdict
from shims.manifest import load_manifest
from tests.support.historyrepo import mirrored_window_repo
from tests.support.reportshop import record
from tests.support.shimtree import write_shim
from tests.support.windows import linked

SHIM = "toylib_add"
_MINUTES = itertools.count()


def _run(outcome: str, version: str, commit: str | None = None) -> ValidationRecord:
    when = f"2026-11-18T09:{next(_MINUTES) % 60:02d}:00+00:00"
    made = record(SHIM, "bisect", "without", outcome, when, version=version)
    if commit is None:
        return made
    host = {**made.host, "revisions": {"toylib": f"file:///mirror.git@{commit}"}}
    return ValidationRecord(**{**made.to_json(), "host": host, "record_id": ""})


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    base = tmp_path_factory.mktemp("fixed")
    repo, opened = mirrored_window_repo(base)
    manifest = load_manifest(write_shim(base / "shims", SHIM) / "manifest.toml")
    return repo, opened, manifest


def _records(repo) -> list[ValidationRecord]:
    before, _, _ = repo.around_fix()
    return [
        _run("bug-reproduced", "1.5"),
        _run("fix-validated", "1.6"),
        _run("bug-reproduced", "1.5", commit=before),
        _run("fix-validated", "1.5", commit=repo.fixed),
    ]


def _verdict() -> Verdict:
    return Verdict(SHIM, Decision.RETIRE, "fixed upstream")


@pytest.mark.slow
def test_the_plan_names_the_fix_commit_with_the_mirror(toy):
    repo, mirror, manifest = toy
    (plan,) = plans([_verdict()], {SHIM: manifest}, _records(repo), lambda m: linked(mirror))
    assert (plan.first_released, plan.fix_commit, plan.fix_pull) == ("1.6", repo.fixed, 63)
    body = pr_body(plan, TreeEdit())
    # where the mirror that named the commit came from, in one clause
    assert (
        f"Fixed upstream by `{repo.fixed}` (#63), first released in `1.6` — mirror of toylib: "
        "declared in patchlane.toml, named by the link https://git.example/acme/toylib/pull/63."
    ) in body
    # a plan file carries it
    assert DropPlan.from_dict(plan.to_dict()) == plan


def test_without_the_mirror_the_release_alone_and_without_records_nothing(toy):
    repo, _, manifest = toy
    (plan,) = plans([_verdict()], {SHIM: manifest}, _records(repo))
    assert (plan.first_released, plan.fix_commit, plan.fix_pull) == ("1.6", None, None)
    assert "Fixed upstream in `1.6`." in pr_body(plan, TreeEdit())
    (bare,) = plans([_verdict()], {SHIM: manifest}, [])
    assert fixed_upstream(bare) is None and "Fixed upstream" not in pr_body(bare, TreeEdit())
    assert "first_released" not in bare.to_dict()


def test_a_fix_on_a_branch_names_its_commit_without_a_release_edge(toy):
    from tests.support.windows import branch_fixed

    repo, _, manifest = toy
    fix = branch_fixed("https://git.example/acme/toylib", repo.fixed, "Fix add()", 92)
    verdict = Verdict(SHIM, Decision.RETIRE_IN_SOME, "fixed on a branch", window=fix)
    (plan,) = plans([verdict], {SHIM: manifest}, [])
    assert (plan.first_released, plan.fix_commit, plan.fix_pull) == (None, repo.fixed, 92)
    assert f"Fixed upstream by `{repo.fixed}` (#92)." in pr_body(plan, TreeEdit())


def test_a_hostile_fix_commit_in_a_plan_file_stays_code():
    plan = DropPlan.from_dict(
        {"shim_id": SHIM, "fix_commit": "`<img src=x onerror=alert(1)>` [x](https://e.example)"}
    )
    said = fixed_upstream(plan)
    assert said is not None and said.startswith("Fixed upstream by ``")
    with pytest.raises(TypeError):
        DropPlan.from_dict({"shim_id": SHIM, "fix_pull": "63"})
