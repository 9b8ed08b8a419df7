"""A shim's window in the weekly report (issue 26, "everywhere the answer is read"): one line under
the verdict in the Shims table and a ``window`` object in the JSON, read from the validation
records alone (retire.mirrors.recorded); with the target mirrored, the fix commit too (a real toy
upstream, tests/support/historyrepo.py)."""

from __future__ import annotations

import itertools
import json
import types

import pytest

from retire.core.project import Project
from retire.evidence import validation
from retire.evidence.validation import ValidationRecord
from retire.report import weekly
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.support.reportshop import NOW, build_shop, record, shim_manifest, shop_verdicts
from tests.support.shimtree import write_shim
from tests.test_json_schemas import check

_MINUTES = itertools.count()


def _run(outcome: str, version: str, commit: str | None = None) -> ValidationRecord:
    # each run its own moment: a record's id is its shim, lane, host and start
    when = f"2026-11-18T09:{next(_MINUTES) % 60:02d}:00+00:00"
    made = record("alpha", "bisect", "without", outcome, when, version=version)
    if commit is None:
        return made
    host = {**made.host, "revisions": {"toylib": f"file:///mirror.git@{commit}"}}
    return ValidationRecord(**{**made.to_json(), "host": host, "record_id": ""})


def _generate(root):
    packs = types.SimpleNamespace(filing_queue=lambda root: [], markdown_section=lambda e: "")
    return weekly.generate(Project(root), now=NOW, verdicts=shop_verdicts(), packs=packs)


def _window_rows(written) -> dict[str, object]:
    data = json.loads(written.json_text)
    check("report", data)
    return {row["shim"]: row["window"] for row in data["shims"]}


def _shims_row(markdown: str, shim: str) -> str:
    section = markdown.split("## Shims", 1)[1]
    return next(line for line in section.splitlines() if line.startswith(f"| [`{shim}`]"))


@pytest.fixture
def shop(tmp_path):
    return build_shop(tmp_path / "shop")


def test_the_release_window_of_the_records_is_one_line_in_the_shims_table(shop):
    runs = [
        _run("bug-reproduced", "1.4"),
        _run("bug-reproduced", "1.5"),
        _run("fix-validated", "1.6"),
    ]
    validation.append(shop / "validation" / "manifest.jsonl", runs)
    written = _generate(shop)
    windows = _window_rows(written)
    assert windows["alpha"] == {
        "first_fixed": "1.6",
        "last_broken": "1.5",
        "commit": None,
        "line": "fixed in 1.6 (last broken 1.5)",
    }
    assert windows["beta"] is None and windows["delta"] is None
    assert "<br>**Window:** fixed in 1.6 (last broken 1.5) |" in _shims_row(
        written.markdown, "alpha"
    )
    assert "Window:" not in _shims_row(written.markdown, "beta")


def test_a_fix_on_a_branch_in_no_release_is_the_window_line(shop):
    import dataclasses

    from retire.evidence.branchfix import BranchFix

    fix = BranchFix("https://github.com/acme/toylib", "main", "a" * 40, "Fix add() (#92)", 92)
    verdicts = [
        dataclasses.replace(v, branch_fix=fix) if v.shim == "alpha" else v for v in shop_verdicts()
    ]
    packs = types.SimpleNamespace(filing_queue=lambda root: [], markdown_section=lambda e: "")
    written = weekly.generate(Project(shop), now=NOW, verdicts=verdicts, packs=packs)
    check("report", json.loads(written.json_text))
    assert "<br>**Window:** fixed on main at aaaaaaaaaaaa (#92), in no release yet |" in _shims_row(
        written.markdown, "alpha"
    )
    assert "Window:" not in _shims_row(written.markdown, "beta")


def test_without_the_records_no_shim_has_a_window(shop):
    windows = _window_rows(_generate(shop))
    assert set(windows.values()) == {None}


@pytest.mark.slow
def test_with_the_target_mirrored_the_fix_commit_is_named(shop, tmp_path):
    repo = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    write_shim(
        shop / "shims",
        "alpha",
        manifest=shim_manifest("alpha", links=[("fix", "https://github.com/acme/toylib/pull/63")]),
    )
    (shop / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\npath = "{mirror}"\n'
    )
    between = git(repo.path, "rev-list", "--first-parent", "--reverse", "v1.5..v1.6").split()
    at = between.index(repo.fixed)
    runs = [
        _run("bug-reproduced", "1.5"),
        _run("fix-validated", "1.6"),
        _run("bug-reproduced", "1.5", commit=between[at - 1]),
        _run("fix-validated", "1.5", commit=repo.fixed),
    ]
    validation.append(shop / "validation" / "manifest.jsonl", runs)
    written = _generate(shop)
    window = _window_rows(written)["alpha"]
    assert isinstance(window, dict)
    assert window["commit"] == {"sha": repo.fixed, "subject": "Fix add() (#63)", "pull": 63}
    line = f'fixed in 1.6 (last broken 1.5), by {repo.fixed[:12]} "Fix add() (#63)" (#63)'
    assert window["line"] == line
    assert f"**Window:** {line}" in _shims_row(written.markdown, "alpha")
