"""A shim's window in the weekly report (issue 26, "everywhere the answer is read"): one line under
the verdict in the Shims table, where it came from, and a ``window`` object in the JSON — the
verdict's window (retire.history), else the one reading of the validation records; with the
target mirrored, the fix commit too (a real toy upstream, tests/support/historyrepo.py)."""

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
    alpha = windows["alpha"]
    assert isinstance(alpha, dict)
    assert {key: alpha[key] for key in ("first_fixed", "last_broken", "commit", "line")} == {
        "first_fixed": "1.6",
        "last_broken": "1.5",
        "commit": None,
        "line": "fixed in 1.6 (last broken 1.5)",
    }
    # the shop's own lane runs and the three bisection runs: where the window came from
    assert alpha["source"].endswith(", 3 of them bisection or culprit runs")
    # the other shims' runs show no fixed edge: no window line (their JSON says what ran)
    assert all(w is None or w["first_fixed"] is None for s, w in windows.items() if s != "alpha")
    row = _shims_row(written.markdown, "alpha")
    assert "<br>**Window:** fixed in 1.6 (last broken 1.5)<br>" in row
    # where the window came from
    assert f"*{alpha['source']}*" in row
    assert "Window:" not in _shims_row(written.markdown, "beta")


def test_a_fix_on_a_branch_in_no_release_is_the_window_line(shop):
    import dataclasses

    from tests.support.windows import branch_fixed

    fix = branch_fixed("https://github.com/acme/toylib", "a" * 40, "Fix add() (#92)", 92)
    verdicts = [
        dataclasses.replace(v, window=fix) if v.shim == "alpha" else v for v in shop_verdicts()
    ]
    packs = types.SimpleNamespace(filing_queue=lambda root: [], markdown_section=lambda e: "")
    written = weekly.generate(Project(shop), now=NOW, verdicts=verdicts, packs=packs)
    check("report", json.loads(written.json_text))
    assert "<br>**Window:** fixed on main at aaaaaaaaaaaa (#92), in no release yet<br>" in (
        _shims_row(written.markdown, "alpha")
    )
    assert "Window:" not in _shims_row(written.markdown, "beta")


def test_without_the_records_no_shim_has_a_window(shop):
    written = _generate(shop)
    # the shop's lane runs pin no edge of any window: none is said
    for window in _window_rows(written).values():
        assert window is None or window["first_fixed"] is None
    assert "**Window:**" not in written.markdown


@pytest.mark.slow
@pytest.mark.parametrize(
    "manifest, found, how",
    [
        (
            {"links": [("fix", "https://github.com/acme/toylib/pull/63")]},
            "link",
            "declared in patchlane.toml, named by the link https://github.com/acme/toylib/pull/63",
        ),
        # no link and no lane revision: the mirror declared in patchlane.toml, named as the
        # package with the releases tagged, is the one every reader finds
        (
            {"linked": False},
            "name-and-tags",
            "declared in patchlane.toml, matched by its name and release tags",
        ),
    ],
    ids=["linked", "declared-only"],
)
def test_with_the_target_mirrored_the_fix_commit_is_named_and_how_the_mirror_was_found(
    shop, tmp_path, manifest, found, how
):
    repo = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    write_shim(shop / "shims", "alpha", manifest=shim_manifest("alpha", **manifest))
    (shop / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\npath = "{mirror}"\n'
    )
    before, _, _ = repo.around_fix()
    runs = [
        _run("bug-reproduced", "1.5"),
        _run("fix-validated", "1.6"),
        _run("bug-reproduced", "1.5", commit=before),
        _run("fix-validated", "1.5", commit=repo.fixed),
    ]
    validation.append(shop / "validation" / "manifest.jsonl", runs)
    written = _generate(shop)
    window = _window_rows(written)["alpha"]
    assert isinstance(window, dict)
    assert window["commit"] == {"sha": repo.fixed, "subject": "Fix add() (#63)", "pull": 63}
    line = f'fixed in 1.6 (last broken 1.5), by {repo.fixed[:12]} "Fix add() (#63)" (#63)'
    assert window["line"] == line
    row = _shims_row(written.markdown, "alpha")
    assert f"**Window:** {line}" in row
    # where the mirror came from: in the source line under it, and as values
    ordered = f"commits ordered by the mirror of https://github.com/acme/toylib, {how}"
    assert ordered in window["source"] and ordered in row
    assert window["mirror"]["found"] == found and window["mirror"]["declared"]
    (page,) = [path for path in written.paths if path.suffix == ".html"]
    # (the page draws a URL as a link)
    assert how.partition(" https://")[0] in page.read_text(encoding="utf-8")


def test_the_reports_window_is_the_verdicts_window_one_answer_and_a_flag(shop, capsys):
    """Records on which the two old readings disagreed — the newest run of 1.6 is clean (the
    report said "fixed in 1.6"), an older one on 1.6 reproduced the bug (the verdict's window
    said fixed by 1.8): one reading now, the bug wins, the report's line is the verdict's
    window's, and the disagreement is a conflict for a person."""
    from retire.commands import main as cli
    from tests.support.reportshop import WEEK, record

    validation.append(
        shop / "validation" / "manifest.jsonl",
        [
            record("alpha", "gpu", "without", "bug-reproduced", "2026-11-10T09:00:00+00:00",
                   version="1.5"),
            record("alpha", "gpu", "without", "bug-reproduced", "2026-11-10T09:01:00+00:00",
                   version="1.6", host="h100-1"),
            record("alpha", "cpu", "without", "fix-validated", "2026-11-12T09:00:00+00:00",
                   version="1.6", host="ci-2"),
            record("alpha", "cpu", "without", "fix-validated", "2026-11-13T09:00:00+00:00",
                   version="1.8", host="ci-3"),
        ],
    )  # fmt: skip
    assert cli(["report", "--root", str(shop), "--week", WEEK, "--no-probe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    check("report", data)
    row = next(r for r in data["shims"] if r["shim"] == "alpha")
    verdict = next(v for v in data["verdicts"] if v["shim"] == "alpha")
    assert row["window"] == verdict["window"]
    assert row["window"]["line"] == "fixed in 1.8 (last broken 1.6)"
    [said] = row["window"]["disagreements"]
    assert said.startswith("toylib 1.6: BUG_REPRODUCED (lane gpu on h100-1) and clean")
    assert any(f["kind"] == "conflict" and said in f["text"] for f in verdict["flags"])
    markdown = (shop / "reports" / f"{WEEK}.md").read_text()
    assert "**Window:** fixed in 1.8 (last broken 1.6)<br>" in _shims_row(markdown, "alpha")
