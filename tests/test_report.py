"""The weekly retirement report (issue 6): a throwaway shop with a real git history over several
ISO weeks, real validation records and an earlier report; verdicts either passed in as plain data
or gathered for real against the loopback code-host stand-in (with injected faults)."""

from __future__ import annotations

import datetime as _dt
import html
import json
import re
import types
from pathlib import Path

import pytest

from retire.commands import main as cli
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import Project
from retire.probes.http import RetryPolicy
from retire.report import markdown as report_render
from retire.report import model as report_model
from retire.report import weekly as report
from retire.verdicts.model import Verdict
from tests.support import reportshop
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import Fault
from tests.support.gitrepos import git
from tests.support.reportshop import NOW, WEEK, build_shop, shop_verdicts


@pytest.fixture
def shop(tmp_path) -> Path:
    return build_shop(tmp_path / "shop")


def generate(root: Path, **options) -> report.Written:
    options.setdefault("now", NOW)
    options.setdefault("verdicts", shop_verdicts())
    # never the real retire.packs: the shop has none
    options.setdefault(
        "packs",
        types.SimpleNamespace(filing_queue=lambda root: [], markdown_section=lambda entries: ""),
    )
    return report.generate(Project(root), **options)


def shims_of(written: report.Written) -> dict[str, dict]:
    return {row["shim"]: row for row in json.loads(written.json_text)["shims"]}


# ---------------------------------------------------------------------------------------------
# Files and content


def test_writes_markdown_html_and_json_for_the_iso_week(shop):
    written = generate(shop)
    names = sorted(p.name for p in (shop / "reports").iterdir())
    assert names == ["2026-W46.json", "2026-W47.html", "2026-W47.json", "2026-W47.md"]
    assert [p.name for p in written.paths] == ["2026-W47.md", "2026-W47.html", "2026-W47.json"]
    assert (shop / "reports" / "2026-W47.md").read_text() == written.markdown
    data = json.loads((shop / "reports" / "2026-W47.json").read_text())
    assert data["kind"] == "patchlane-report" and data["week"] == WEEK
    assert data["headline"] == {
        "carried": 4,
        "retire": 1,
        "newly_broken": 1,
        "unknown": 1,
        "broken": 1,
        "keep": 2,
        "stale": 1,
        "drift": 0,
        "never_run": 1,
        "retire_in_some": 0,
        "blocked": 0,
    }
    assert not list((shop / "reports").glob(".*.tmp"))


def test_per_shim_rows_say_where_each_was_proven_or_that_it_never_ran(shop):
    rows = shims_of(generate(shop))
    alpha = rows["alpha"]
    assert alpha["fix_class"] == "source-patch" and alpha["owner"] == "kernels@example.org"
    assert alpha["age_days"] == (NOW.date() - _dt.date(2026, 4, 14)).days
    assert alpha["upstream"]["status"] == "submitted"
    assert {"role": "fix", "url": "https://example.org/toylib/pull/2"} in alpha["upstream"]["links"]
    assert alpha["verdict"] == "keep" and alpha["why"] == "pr-released: PR #2 is open"
    assert (
        alpha["retirement"]["mode"] == "any"
        and "reproducer clean without the shim" in alpha["retirement"]["conditions"]
    )
    # Latest proof: the H200 overlay lane, a lane that exists only in the records.
    assert alpha["last_proven"] == {
        "host": "gpu-node",
        "gpu": "NVIDIA H200",
        "lane": "h200-overlay",
        "date": "2026-11-17",
        "started_at": "2026-11-17T10:00:04.000000+00:00",
        "outcome": "fix-validated",
        "mode": "with",
        "detail": "",
    }
    assert rows["delta"]["proven"] == "never run" and rows["delta"]["last_run"] is None
    assert rows["epsilon"]["proven"].startswith(
        "never proven — last run skipped on ci-box · lane cpu · 2026-11-16"
    )
    assert rows["delta"]["owner"] == "numerics@example.org"
    assert rows["beta"]["floors"] == ["toylib>=1.1"]
    # Unproven: no lane that lists the shim has latest runs judged needed or upstream-fixed (a
    # lane that exists only in the records, like h200-overlay, proves nothing for today's lanes).
    assert {shim: row["unproven"] for shim, row in rows.items()} == {
        "alpha": None,
        "beta": None,
        "delta": "cpu: no run recorded; gpu: no run recorded",
        "epsilon": "cpu: skipped — no CUDA device",
    }


def test_matrix_rebuilds_the_latest_run_per_lane_with_judge(shop):
    data = json.loads(generate(shop).json_text)
    matrix = {
        shim: {lane: cell["outcome"] for lane, cell in lanes.items()}
        for shim, lanes in data["matrix"].items()
    }
    assert matrix == {
        "alpha": {"cpu": "needed", "gpu": "shim-broken", "h200-overlay": "needed"},
        "beta": {"cpu": "upstream-fixed"},
        "delta": {"cpu": "not-run", "gpu": "not-run"},
        "epsilon": {"cpu": "skipped"},
    }
    assert data["lanes"] == [
        {"name": "cpu", "defined": True},
        {"name": "gpu", "defined": True},
        {"name": "h200-overlay", "defined": False},
    ]


def test_changes_since_the_previous_report(shop):
    changes = json.loads(generate(shop).json_text)["changes"]
    assert changes["previous_week"] == "2026-W46"
    assert changes["new"] == ["epsilon"]
    assert changes["retired"] == ["gamma"]
    assert [(c["shim"], c["before"], c["after"]) for c in changes["verdicts"]] == [
        ("beta", "unknown", "retire"),
        ("delta", "keep", "unknown"),
    ]
    assert changes["newly_broken"] == [{"shim": "alpha", "lane": "gpu", "outcome": "shim-broken"}]


def test_a_cell_broken_last_week_too_is_not_newly_broken(shop):
    previous = reportshop.previous_report()
    previous["matrix"]["alpha"]["gpu"] = {"outcome": "shim-broken"}
    (shop / "reports" / "2026-W46.json").write_text(json.dumps(previous))
    written = generate(shop)
    assert written.report.headline.newly_broken == 0 and written.report.headline.broken == 1
    assert shims_of(written)["alpha"]["attention"] == ["broken on gpu"]


def test_burn_down_from_git_history_and_previous_reports(shop):
    points = json.loads(generate(shop).json_text)["burndown"]
    assert [(p["week"], p["carried"], p["candidates"], p["source"]) for p in points] == [
        # alpha, beta, gamma committed 2026-10-27
        ("2026-W44", 3, None, "git"),
        # + delta
        ("2026-W45", 4, None, "git"),
        # no commit; last week's report wins over git for its week
        ("2026-W46", 4, 0, "report"),
        # - gamma + epsilon, counted from the tree as it is
        ("2026-W47", 4, 1, "now"),
    ]


def test_burn_down_counts_git_alone_when_there_is_no_report(tmp_path):
    root = build_shop(tmp_path / "shop", with_previous=False)
    git(root, "rm", "-q", "-r", "--cached", "shims/beta")
    git(root, "commit", "-q", "-m", "retire beta", when="2026-11-18T09:00:00+00:00")
    written = generate(root, now=NOW + _dt.timedelta(days=7), week="2026-W48")
    points = [(p.week, p.carried, p.source) for p in written.report.burndown]
    assert points == [
        ("2026-W44", 3, "git"),
        ("2026-W45", 4, "git"),
        ("2026-W46", 4, "git"),
        # beta's folder is still on disk
        ("2026-W47", 3, "git"),
        ("2026-W48", 4, "now"),
    ]
    assert written.report.changes.previous_week is None
    assert "No previous report to compare with" in written.markdown


def test_no_git_repository_is_a_note_not_a_failure(tmp_path):
    root = build_shop(tmp_path / "shop", with_git=False)
    written = generate(root)
    # advice (nothing is wrong), not a warning (issue 36)
    assert any("not in a git repository" in note for note in written.report.advice)
    assert not any("not in a git repository" in note for note in written.report.notes)
    assert [p.source for p in written.report.burndown] == ["report", "now"]


def test_markdown_is_an_issue_body_with_tables_and_collapsible_evidence(shop):
    md = generate(shop).markdown
    assert md.startswith(report_render.MARKER + "\n# Shim retirement report — 2026-W47")
    assert (
        "**4 shims carried** · **1 retire candidate** · **1 newly broken** · **1 with unknown "
        "evidence**" in md
    )
    assert (
        "| shim | fix class | owner | age | upstream | verdict | why | retire when | last proven |"
        in md
    )
    assert re.search(
        r"\| \[`delta`\]\(#evidence-delta\) \| source-patch \| numerics@example.org \| 218 d "
        r"\|.*\| \*\*unproven\*\*: [^|]*<br>never run \|",
        md,
    )
    # cpu, gpu, h200-overlay
    assert "| `alpha` | 🩹 | 🔴 | 🩹 |" in md
    assert "| shim | cpu | gpu | h200-overlay ⁺ |" in md
    # one per shim + burn-down points
    assert md.count("<details") == md.count("</details>") == 4 + 1
    assert '<details id="evidence-delta"><summary><code>delta</code> — ❔ unknown' in md
    assert (
        "⚠️ codehost https://example.org/toylib/pull/2: server error 500 Internal Server Error" in md
    )
    assert "## Changes since 2026-W46" in md and "**Retired (gone from shims/):** `gamma`" in md
    assert "- `epsilon` — **stale**: no upstream movement since 2026-01-02 (318 days)" in md
    assert "```mermaid\nxychart-beta" in md and '"26-W44", "26-W45", "26-W46", "26-W47"' in md
    # Every table row has as many cells as its header: nothing breaks the table.
    for block in re.findall(r"(?:^\|.*\|\n)+", md, flags=re.MULTILINE):
        rows = list(block.splitlines())
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in rows}
        assert len(widths) == 1, block


def test_markdown_escapes_what_would_break_a_table_or_inject_html(shop):
    verdicts = shop_verdicts()
    verdicts[0] = Verdict("alpha", "keep", "a | b <script>x</script>\nsecond line", lanes=("cpu",))
    md = generate(shop, verdicts=verdicts).markdown
    assert "a \\| b &lt;script&gt;x&lt;/script&gt; second line" in md and "<script>" not in md


def test_markdown_is_trimmed_to_fit_an_issue_body(shop):
    written = generate(shop)
    full = report_render.to_markdown(written.report)
    trimmed = report_render.to_markdown(
        written.report, limit=len(full) - 1, full_report="reports/2026-W47.html"
    )
    assert len(trimmed) < len(full) and "<details id=" not in trimmed
    assert (
        "Evidence sections left out to fit an issue body. The full report is in "
        "reports/2026-W47.html." in trimmed
    )
    tiny = report_render.to_markdown(written.report, limit=3000)
    assert len(tiny) <= 3000 and "Truncated to fit an issue body" in tiny


def test_html_page_is_self_contained(shop):
    page = (generate(shop).paths[1]).read_text()
    assert page.startswith("<!doctype html>")
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"""(?:src|srcset)\s*=\s*["']?(?!data:)""", page)
    assert "default-src 'none'" in page
    assert page.count('class="o-shim-broken') == 1 and page.count('class="o-needed') == 2
    assert "<svg" in page and "<polyline" in page
    assert "never run" in page and 'href="https://example.org/toylib/pull/2"' in page


def test_short_version_names_the_shims_that_need_attention(shop, capsys):
    written = generate(shop)
    text = report_render.short_text(written.report, ["reports/2026-W47.md"])
    lines = text.splitlines()
    assert lines[0] == (
        "retirement report 2026-W47: 4 shims carried, 1 retire candidate(s), 1 newly broken, "
        "1 unknown evidence"
    )
    assert "  alpha    newly broken on gpu — pr-released: PR #2 is open" in lines
    assert any(
        line.startswith("  delta    unknown evidence; reproducer never run — codehost")
        for line in lines
    )
    assert any(line.startswith("  epsilon  stale; no upstream link") for line in lines)
    assert lines[-1] == "wrote reports/2026-W47.md"


# ---------------------------------------------------------------------------------------------
# Faults


def test_corrupted_previous_report_is_reported_in_one_line_and_ignored(shop):
    (shop / "reports" / "2026-W45.json").write_text(
        json.dumps(reportshop.previous_report("2026-W45"))
    )
    # cut short
    (shop / "reports" / "2026-W46.json").write_text('{"kind": "patchlane-report", "week": "2026-W4')
    written = generate(shop)
    notes = [n for n in written.report.notes if "2026-W46.json" in n]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "previous report is not valid JSON" in notes[0] and notes[0].endswith("— ignored")
    # the newest report that reads
    assert written.report.changes.previous_week == "2026-W45"
    assert "2026-W46" not in [p.week for p in written.report.burndown if p.source == "report"]
    assert notes[0] in report_render.short_text(written.report)
    assert (shop / "reports" / "2026-W47.json").exists()


def test_a_json_file_that_is_not_a_report_is_ignored_with_the_reason(shop):
    (shop / "reports" / "2026-W46.json").write_text("[1, 2]")
    written = generate(shop)
    assert written.report.changes.previous_week is None
    assert any(
        "not a usable previous report (not a JSON object)" in n for n in written.report.notes
    )


def test_unreadable_validation_records_never_claim_never_run(shop):
    manifest = shop / "validation" / "manifest.jsonl"
    manifest.write_text(manifest.read_text() + "{not json\n")
    written = generate(shop)
    assert any(
        n.startswith("validation records unreadable, runs left out:") for n in written.report.notes
    )
    rows = shims_of(written)
    assert (
        rows["delta"]["proven"] != "never run" and "records unreadable" in rows["delta"]["proven"]
    )


@pytest.fixture
def codehost_shop(tmp_path):
    """Two shims linked to GitHub issues served by the loopback stand-in; #2 answers 500."""
    root = tmp_path / "shop"
    clean_only = (
        '[retirement]\nmode = "all"\n\n[[retirement.conditions]]\nkind = "reproducer-clean"\n\n'
    )
    for shim, number in (("healthy", 1), ("flaky", 2)):
        reportshop.write_shim(
            root / "shims",
            shim,
            manifest=reportshop.shim_manifest(
                shim,
                links=[("report", f"https://github.com/acme/toylib/issues/{number}")],
                conditions=clean_only,
            ),
        )
    reportshop.write_lanes(root, {"cpu": ["healthy", "flaky"]})
    from retire.evidence import validation

    validation.append(
        root / "validation" / "manifest.jsonl",
        [
            reportshop.record(
                shim, "cpu", "without", "bug-reproduced", f"2026-11-16T08:0{i}:00.000000+00:00"
            )
            for i, shim in enumerate(("healthy", "flaky"))
        ],
    )
    host = CodeHost()
    for number in (1, 2):
        host.add_issue("acme", "toylib", number, updated_at="2026-11-10T00:00:00")
    host.faults.add("/repos/acme/toylib/issues/2", Fault(status=500))
    with CodeHostServer(host) as server:
        yield root, server


def test_failing_probes_still_write_a_report_and_never_hide_execution(codehost_shop):
    """Both shims reproduce their bug without the shim: keep, whatever the code host says; the
    failed look-up of flaky's (informational) issue link is a flag, shown, never decisive."""
    root, server = codehost_shop
    options = {
        "api_base": server.url,
        "token": None,
        "clock": lambda: NOW,
        "index_url": "http://127.0.0.1:9/simple",
        "policy": RetryPolicy(attempts=2, backoff=0.01, max_backoff=0.02),
    }
    written = report.generate(Project(root), now=NOW, gather_options=options, packs=None)
    rows = shims_of(written)
    assert rows["healthy"]["verdict"] == "keep", rows["healthy"]["why"]
    assert rows["flaky"]["verdict"] == "keep" and "BUG_REPRODUCED" in rows["flaky"]["why"]
    assert any(
        f["kind"] == "probe-failed"
        and "server error 500" in f["text"]
        and "/repos/acme/toylib/issues/2" in f["text"]
        for f in rows["flaky"]["flags"]
    )
    assert any("server error 500" in f for f in rows["flaky"]["failures"])
    assert all(p.exists() for p in written.paths)
    assert "- ⚑ `probe-failed` — codehost" in written.markdown

    # --no-probe: the same report from the HTTP cache, without a single request.
    asked = len(server.host.requests)
    cached = report.generate(
        Project(root),
        now=NOW,
        probe=False,
        packs=None,
        gather_options={"api_base": server.url, "token": None, "clock": lambda: NOW},
    )
    assert len(server.host.requests) == asked
    rows = shims_of(cached)
    assert rows["healthy"]["verdict"] == "keep"
    assert rows["flaky"]["verdict"] == "keep"
    assert any("not in the HTTP cache" in f["text"] for f in rows["flaky"]["flags"])
    assert any("--no-probe" in n for n in cached.report.advice)


def test_a_gather_that_raises_makes_every_row_unknown(shop):
    def broken(*args, **kwargs):
        raise RuntimeError("probe engine exploded")

    written = generate(shop, verdicts=None, gather=broken)
    assert {row.verdict.decision for row in written.report.rows} == {"unknown"}
    assert all("probe engine exploded" in row.verdict.why for row in written.report.rows)
    assert written.paths[-1].exists()


def test_a_missing_verdict_is_unknown_not_dropped(shop):
    written = generate(shop, verdicts=shop_verdicts()[:2])
    rows = shims_of(written)
    assert set(rows) == {"alpha", "beta", "delta", "epsilon"}
    assert rows["epsilon"]["verdict"] == "unknown" and "no verdict" in rows["epsilon"]["why"]


def test_a_rendering_failure_writes_nothing(shop, monkeypatch):
    old = generate(shop)
    before = {p.name: p.read_bytes() for p in old.paths}

    def explode(report_value, **options):
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(report.report_html, "to_html", explode)
    with pytest.raises(RuntimeError):
        generate(shop, verdicts=shop_verdicts()[:1])
    # last good files untouched
    assert {p.name: p.read_bytes() for p in old.paths} == before
    assert not [p for p in (shop / "reports").iterdir() if p.name.endswith(".tmp")]


def test_a_write_failure_leaves_no_partial_file_and_no_json(shop, capsys):
    # the page cannot replace a folder
    (shop / "reports" / "2026-W47.html").mkdir()
    code = cli(["report", "--root", str(shop), "--week", WEEK, "--no-probe"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("patchlane: error: cannot write") and err.count("\n") == 1
    # JSON goes last: never ahead of its files
    assert not (shop / "reports" / "2026-W47.json").exists()
    md = shop / "reports" / "2026-W47.md"
    # complete, not cut
    assert md.read_text().rstrip().endswith("</details>")
    assert not [p for p in (shop / "reports").iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------------------------
# CLI and the optional filing-queue section


@pytest.mark.slow
def test_main_writes_the_report_and_prints_the_short_version(shop, capsys, monkeypatch):
    monkeypatch.chdir(shop)
    code = cli(["report", "--week", WEEK, "--no-probe"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("retirement report 2026-W47: 4 shims carried")
    assert "wrote reports/2026-W47.md, reports/2026-W47.html, reports/2026-W47.json" in out
    code = cli(["report", "--week", WEEK, "--no-probe", "--json", "--out", "elsewhere"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["week"] == WEEK and (shop / "elsewhere" / "2026-W47.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize("week", ["2026-47", "2026-W54", "next week"])
def test_a_bad_week_is_a_one_line_error(shop, capsys, week):
    assert cli(["report", "--root", str(shop), "--week", week, "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchlane: error: --week:") and err.count("\n") == 1
    assert not (shop / "reports" / "2026-W47.md").exists()


def test_a_broken_manifest_is_a_one_line_error(shop, capsys):
    (shop / "shims" / "alpha" / "manifest.toml").write_text('id = "alpha"\n')
    assert cli(["report", "--root", str(shop), "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchlane: error: ") and "alpha" in err and err.count("\n") == 1


def test_filing_queue_section_is_included_when_packs_provides_it(shop):
    packs = types.SimpleNamespace(
        filing_queue=lambda root: ["one"],
        markdown_section=lambda entries: f"## Filing queue\n\n{len(entries)} ready.\n",
    )
    written = generate(shop, packs=packs)
    assert "## Filing queue\n\n1 ready." in written.markdown
    assert json.loads(written.json_text)["filing_queue"].startswith("## Filing queue")
    assert '<section id="filing-queue">' in written.paths[1].read_text()
    # a packs module with nothing to say: no section
    empty = generate(shop)
    assert "Filing queue" not in empty.markdown


def test_a_failing_filing_queue_is_a_note(shop):
    def boom(root):
        raise OSError("packs folder unreadable")

    written = generate(
        shop, packs=types.SimpleNamespace(filing_queue=boom, markdown_section=lambda e: "")
    )
    assert "filing queue left out: OSError: packs folder unreadable" in written.report.notes


# ---------------------------------------------------------------------------------------------
# Model


def test_iso_weeks():
    assert report_model.iso_week(_dt.date(2026, 1, 1)) == "2026-W01"
    assert report_model.iso_week(_dt.date(2027, 1, 1)) == "2026-W53"
    assert report_model.week_bounds("2026-W47") == (_dt.date(2026, 11, 16), _dt.date(2026, 11, 22))
    with pytest.raises(ValueError, match="no ISO week 53"):
        report_model.parse_week("2025-W53")


def test_previous_report_round_trips_through_json(shop):
    data = json.loads(generate(shop).json_text)
    again = report_model.PreviousReport.from_json(data)
    assert again.week == WEEK and again.carried == 4 and again.candidates == 1
    assert again.verdicts == {
        "alpha": "keep",
        "beta": "retire",
        "delta": "unknown",
        "epsilon": "keep",
    }
    assert again.broken == {("alpha", "gpu")}
    with pytest.raises(ValueError, match="not a patchlane report"):
        report_model.PreviousReport.from_json({"week": WEEK, "shims": []})


@pytest.mark.slow
def test_a_report_run_twice_the_same_week_compares_with_the_week_before(shop):
    generate(shop)
    again = generate(shop)
    assert again.report.changes.previous_week == "2026-W46"


def test_config_errors_are_config_errors(shop):
    with pytest.raises(InputError):
        generate(shop, week="W47")
    assert issubclass(PatchlaneError, Exception)


def test_reports_name_indexes_instead_of_writing_their_urls(monkeypatch):
    # Reports are committed: like the rest of the repository they carry index names, not hosts.
    from retire.lanes.model import IndexSpec, Lane
    from retire.report.weekly import index_names, name_indexes

    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_INDEX", "pytorch-nightly=http://127.0.0.1:10/whl/nightly")
    lane = Lane(
        "l", "3.12", "linux", ("x",), indexes=(IndexSpec("mirror", "http://127.0.0.1:11/simple/"),)
    )
    names = index_names([lane])
    text = (
        "releases on http://127.0.0.1:9/simple; nightly from http://127.0.0.1:10/whl/nightly; "
        "mirror http://127.0.0.1:11/simple"
    )
    assert name_indexes(text, names) == (
        "releases on the default index; nightly from index 'pytorch-nightly'; mirror index 'mirror'"
    )


# ---------------------------------------------------------------------------------------------
# Bisection records are evidence, not a lane (issue 19, item 6)


def test_a_bisection_of_a_still_broken_shim_is_not_a_lane(shop):
    """`patchlane bisect alpha` ran without the shim only, on releases 1.0 … 1.9, and the bug
    reproduced on each (lane ``bisect``; ``bisect:cpu`` when overlaid on the cpu lane's env). Its
    runs are evidence about releases: no matrix column, nothing newly broken, no "with-shim run
    missing" cell; last week's report, written before this rule, listed one as broken."""
    from retire.evidence import validation

    previous = reportshop.previous_report()
    previous["matrix"]["alpha"]["bisect"] = {"outcome": "crashed"}
    (shop / "reports" / "2026-W46.json").write_text(json.dumps(previous))
    bisection = [
        reportshop.record(
            "alpha",
            lane,
            "without",
            "bug-reproduced",
            f"2026-11-17T12:0{i}:00.000000+00:00",
            version=f"1.{i}",
        )
        for i, lane in enumerate(["bisect"] * 5 + ["bisect:cpu"] * 5)
    ]
    validation.append(shop / "validation" / "manifest.jsonl", bisection)
    written = generate(shop)
    data = json.loads(written.json_text)
    assert [lane["name"] for lane in data["lanes"]] == ["cpu", "gpu", "h200-overlay"]
    assert set(data["matrix"]["alpha"]) == {"cpu", "gpu", "h200-overlay"}
    assert data["changes"]["newly_broken"] == [
        {"shim": "alpha", "lane": "gpu", "outcome": "shim-broken"}
    ]
    assert data["changes"]["repaired"] == []
    assert shims_of(written)["alpha"]["newly_broken_lanes"] == ["gpu"]
    for text in (written.markdown, written.paths[1].read_text(), written.json_text):
        assert "with-shim run is missing" not in text
        assert "on bisect" not in text and "lane bisect" not in text
    # still evidence: the newest proving run is the bisection's, and says so
    assert shims_of(written)["alpha"]["proven"] == (
        "ci-box · bisection on lane cpu's environment · 2026-11-17 (bug-reproduced, without shim)"
    )


# ---------------------------------------------------------------------------------------------
# Retirement per lane (issue 19): steps, blockers, holds, unknown lanes, conflicts


@pytest.fixture
def per_lane(tmp_path) -> report.Written:
    root = build_shop(tmp_path / "shop", beta_title=reportshop.TRICKY_TITLE)
    return generate(root, verdicts=reportshop.per_lane_verdicts())


def github_html(markdown: str) -> str:
    """What GitHub shows for an issue body (its renderer, raw HTML kept as GitHub keeps
    <details> and <summary>)."""
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="the test extra installs cmarkgfm")
    from cmarkgfm.cmark import Options

    return cmarkgfm.github_flavored_markdown_to_html(
        markdown, options=Options.CMARK_OPT_HARDBREAKS | Options.CMARK_OPT_UNSAFE
    )


def test_per_lane_steps_and_blockers_are_in_the_json(per_lane):
    from jsonschema import Draft202012Validator

    from retire import schemas

    data = json.loads(per_lane.json_text)
    errors = list(Draft202012Validator(schemas.load("report")).iter_errors(data))
    assert not errors, [e.message[:200] for e in errors]
    assert data["schema"] == 4
    assert data["headline"]["retire_in_some"] == 1 and data["headline"]["blocked"] == 2
    beta = shims_of(per_lane)["beta"]
    assert beta["verdict"] == "retire-in-some"
    assert [(lane["lane"], lane["step"]) for lane in beta["lane_verdicts"]] == [
        ("cpu", "drop"),
        ("nightly", "raise"),
        ("floor", "hold"),
        ("stable", "blocked"),
        ("mamba3", "blocked"),
        ("megatron-main", "unknown"),
    ]
    assert beta["attention"][:2] == ["retire in cpu, nightly", "blocked on stable, mamba3"]
    assert data["blocked"] == [
        {
            "shim": "beta",
            "lane": lane,
            "blocker": reportshop.BLOCKER,
            "floors": ["toylib>=1.1"],
            "file": f"lanes/{lane}.toml",
            "locked": "toylib 1.0",
            "why": "raising toylib to 1.1 does not resolve",
        }
        for lane in ("stable", "mamba3")
    ]
    assert data["bisections"] is None


def test_per_lane_markdown_renders_on_github(per_lane):
    md = per_lane.markdown
    assert "· **1 retire in some lanes** · **2 lanes blocked**" in md
    # a legend naming every step
    for step in ("drop", "raise", "hold", "blocked", "keep", "unknown"):
        assert re.search(rf"\S+ {step} — ", md), step
    page = github_html(md)
    beta_row = re.search(r"<tr>\s*<td><a href=\"#evidence-beta\">.*?</tr>", page, re.DOTALL)
    assert beta_row, page[:3000]
    cells = re.findall(r"<td>(.*?)</td>", beta_row.group(0), re.DOTALL)
    assert "retire-in-some" in cells[1]
    assert cells[2] == (
        "✂️ cpu (drop) · ⏫ nightly (raise) · ✋ floor (hold) · ⛔ stable (blocked) · "
        "⛔ mamba3 (blocked) · ❔ megatron-main (unknown)"
    )
    blocked = page[page.index("<h2>Blocked</h2>") :]
    blocked = blocked[: blocked.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", blocked, re.DOTALL)[1:]
    assert [re.findall(r"<td>(.*?)</td>", row, re.DOTALL)[1:] for row in rows] == [
        [lane, "<code>toylib&gt;=1.1</code>", reportshop.BLOCKER] for lane in ("stable", "mamba3")
    ]
    assert (
        "<li><code>beta</code> on <strong>floor</strong> — the lane holds its pins (policy hold); "
        "toylib 1.0 &lt; 1.1 <strong>Until:</strong> the lane's toylib==1.0 reaches 1.1</li>"
        in page
    ), page
    assert "<strong>Next:</strong> run <code>patchlane run megatron-main</code></li>" in page, page
    # the conflict names both sides
    assert reportshop.CONFLICT in page
    # the shim's own lane table in its evidence section
    assert "| floor | ✋ hold | hold | toylib 1.0 |" in md


def test_a_title_with_backticks_and_pipes_renders_in_summary(per_lane):
    page = github_html(per_lane.markdown)
    summary = re.search(r'<details id="evidence-beta"><summary>(.*?)</summary>', page).group(1)
    assert summary.endswith(
        "<code>LigerFusedLinearCrossEntropy</code> with reduction='none' | <code>a|b</code> "
        "&lt;sums&gt;"
    ), summary
    html_page = per_lane.paths[1].read_text()
    assert (
        "<code>LigerFusedLinearCrossEntropy</code> with reduction='none' | "
        "<code>a|b</code> &lt;sums&gt;</summary>" in html_page
    )
    assert "`" not in re.sub(r"<code>.*?</code>", "", html_page.split("<summary>", 1)[1][:300])


def test_per_lane_html_has_the_step_grid_the_blocked_list_and_the_holds(per_lane):
    page = per_lane.paths[1].read_text()
    lanes = page[page.index('<section id="lanes">') :]
    lanes = lanes[: lanes.index("</section>")]
    for step in ("drop", "raise", "hold", "blocked", "keep", "unknown"):
        assert f'class="s-{step}"' in lanes, step
    assert lanes.count('class="s-blocked"') == 2
    text = html.unescape(re.sub(r"<[^>]+>", "", lanes))
    assert "Until: the lane's toylib==1.0 reaches 1.1" in text
    assert "<strong>Next:</strong> run <code>patchlane run megatron-main</code>" in lanes
    assert reportshop.CONFLICT in text
    blocked = page[page.index('<section id="blocked">') :]
    blocked = blocked[: blocked.index("</section>")]
    text = html.unescape(re.sub(r"<[^>]+>", "", blocked))
    assert text.count(reportshop.BLOCKER) == 2 and "<h2>Blocked (2)</h2>" in blocked
    assert '<div class="n">2</div><div class="l">lanes blocked</div>' in page


def test_without_lane_verdicts_the_sections_say_so_and_conflicts_still_show(shop):
    from retire.verdicts.model import Flag

    verdicts = shop_verdicts()
    alpha = verdicts[0]
    verdicts[0] = Verdict(
        alpha.shim, alpha.decision, alpha.why, flags=(Flag("conflict", reportshop.CONFLICT),)
    )
    written = generate(shop, verdicts=verdicts)
    assert "No per-lane verdicts" in written.markdown
    # nothing blocked: no section, no empty card above the to-do (issue 36)
    assert (
        "## Blocked" not in written.markdown and 'id="blocked"' not in written.paths[1].read_text()
    )
    assert json.loads(written.json_text)["blocked"] == []
    assert f"- ⚑ `alpha` — {reportshop.CONFLICT}" in written.markdown
    lanes = written.paths[1].read_text().split('<section id="lanes">', 1)[1].split("</section>")[0]
    assert "<h3>Conflicts</h3>" in lanes and "the floor comes from execution: 1.1" in lanes


# ---------------------------------------------------------------------------------------------
# A fact is said once, with what it touches; paths are the project's; people first (issue 29, 7)


def _said_once_verdicts(root: Path) -> list[Verdict]:
    """Three shims whose unknown lanes share one long mirror reason naming the project's mirror
    folder by its absolute path, and one host fact (no lock for nightly) flagged under each."""
    from retire.verdicts.model import Flag, LaneVerdict

    mirror = f"no mirror of https://example.org/toylib at {root}/.patchlane/mirrors/toylib: " + (
        "declare one in patchlane.toml and run `patchlane mirrors sync` " * 5
    )
    verdicts = []
    for verdict in shop_verdicts()[:3]:
        lanes = tuple(
            LaneVerdict(lane, "unknown", mirror, action="run `patchlane mirrors sync`")
            for lane in ("cpu", "gpu")
        )
        verdicts.append(
            Verdict(
                verdict.shim,
                verdict.decision,
                verdict.why,
                lanes=("cpu", "gpu"),
                flags=(Flag("drift", "no lock for nightly: run `nox -s lock -- nightly`"),),
                lane_verdicts=lanes,
            )
        )
    return [*verdicts, shop_verdicts()[3]]


def test_a_fact_about_several_shims_and_lanes_is_said_once(shop):
    written = generate(shop, verdicts=_said_once_verdicts(shop))
    md, page = written.markdown, written.paths[1].read_text()
    for text in (md, html.unescape(re.sub(r"<[^>]+>", "", page))):
        assert text.count("no mirror of https://example.org/toylib") == 1, "the lane reason, once"
        assert text.count("no lock for nightly") == 1, "the host fact, once"
    pairs = "`alpha` on **cpu**, **gpu**; `beta` on **cpu**, **gpu**; `delta` on **cpu**, **gpu**"
    assert f"- {pairs} — " in md
    assert "**Shims:** `alpha`, `beta`, `delta`" in md
    # under each shim, a pointer, not the text again
    assert md.count("1 flag under *Across shims*") == 3
    # the JSON keeps every verdict whole, for machines
    assert json.loads(written.json_text)["shims"][0]["flags"][0]["text"].startswith("no lock")


def test_no_report_file_names_a_path_of_this_machine(shop):
    written = generate(shop, verdicts=_said_once_verdicts(shop))
    for path in written.paths:
        text = path.read_text()
        assert str(shop) not in text and str(shop.resolve()) not in text, path.name
        assert "at .patchlane/mirrors/toylib" in re.sub(r"<[^>]+>", "", text), path.name


def test_what_needs_a_person_comes_first(per_lane):
    order = ("Blocked", "Ready to retire", "Needs attention", "Retirement per lane", "Shims")
    md = per_lane.markdown
    places = [md.index(f"\n## {title}\n") for title in order]
    assert places == sorted(places)
    page = per_lane.paths[1].read_text()
    ids = ("blocked", "ready", "attention", "lanes", "shims")
    places = [page.index(f'<section id="{name}">') for name in ids]
    assert places == sorted(places)
    assert "<h2>Ready to retire (1)</h2>" in page and "from cpu, nightly" in page


def test_a_count_of_nothing_is_not_drawn_in_an_alarm_colour(per_lane):
    from retire.report.html import CARD_COLOURS

    page = per_lane.paths[1].read_text()
    # 0 retire candidates (beta retires in some lanes only), 2 lanes blocked
    assert f'--c:{CARD_COLOURS["none"]}"><div class="n">0</div>' in page
    assert f'--c:{CARD_COLOURS["blocked"]}"><div class="n">2</div>' in page
    assert f'--c:{CARD_COLOURS["retire"]}"><div class="n">0</div>' not in page


def test_the_console_leads_with_the_blocked_lanes(per_lane):
    # issue 36: the terminal's short text said nothing of them before "needs attention"
    from retire.report.markdown import short_text

    lines = short_text(per_lane.report).splitlines()
    # what broke again first (alpha is newly broken on gpu), then what is blocked
    assert lines[1] == "newly broken: alpha in lane gpu", lines
    at = lines.index("blocked (2):")
    assert lines[at + 1 : at + 3] == [
        f"  beta on stable: blocked by {reportshop.BLOCKER}",
        f"  beta on mamba3: blocked by {reportshop.BLOCKER}",
    ]
    assert at < lines.index("needs attention:")
