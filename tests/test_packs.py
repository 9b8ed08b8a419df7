"""Upstream packs: rendering for the real catalogue, and every readiness rule failing on purpose."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from pathlib import Path

import pytest

from retire.core.errors import InputError
from retire.packs.checks import check_deny, check_markdown, check_pasted, parse_deny, readiness
from retire.packs.model import CATEGORIES, PackSpec, UpstreamState, parse_pack_spec
from retire.packs.render import TEMPLATES, codify, render
from retire.packs.store import filing_queue, load_deny, load_pack, markdown_section, pack_ids
from shims.manifest import discover
from tests.support.packtree import PackProject, github_manifest, pack_toml

REPO = Path(__file__).resolve().parents[1]
NOW = _dt.datetime.now(_dt.UTC)


# ---------------------------------------------------------------------------------------------
# The real catalogue


@pytest.mark.slow
def test_real_catalogue_packs_render_with_title_command_and_state():
    ids = pack_ids(REPO)
    assert len(ids) >= 8, ids
    deny = load_deny(REPO)
    assert deny, "packs/deny.toml must hold a starting deny-list"
    for pack_id in ids:
        loaded = load_pack(REPO, pack_id)
        pack, spec, body = loaded.pack, loaded.pack.spec, loaded.pack.body
        # identifiers in the title are code spans
        assert codify(loaded.manifest.title) in body
        assert f"```sh\n{spec.command}\n```" in body
        assert "**Upstream state:**" in body
        state_words = {
            "new-report": "new report",
            "overlap": f"overlaps {spec.upstream.thread}",
            "already-fixed": "already fixed upstream",
        }
        assert state_words[spec.upstream.state] in body, pack_id
        assert CATEGORIES[spec.category] in body
        assert f"Attached as `{pack.reproducer_name}`" in body
        # The structural rules hold for every real body; only evidence and pins may block them.
        assert check_markdown(body) == [], pack_id
        assert check_pasted(body, loaded.reproducer_text) == [], pack_id
        texts = [
            ("body", body),
            ("command", spec.command),
            (pack.reproducer_name, loaded.reproducer_text or ""),
        ]
        assert check_deny(texts, deny) == [], pack_id
        assert loaded.manifest.upstream.status != "not-applicable", (
            f"{pack_id}: a local policy has no upstream pack"
        )


@pytest.mark.slow
def test_real_catalogue_states_follow_the_seeds():
    specs = {pack_id: load_pack(REPO, pack_id).pack.spec for pack_id in pack_ids(REPO)}
    # TileLang #746 merged: regression coverage, not a duplicate report (seed 002).
    assert specs["tilelang_tma_lowering"].upstream.state == "already-fixed"
    assert specs["tilelang_tma_lowering"].upstream.thread.endswith("tile-ai/tilelang/pull/746")
    # The FP8 hazard targets Transformer Engine, not TileLang (the wrapper's contract).
    assert specs["sparse_mla_fp8_dispatch"].repository == "NVIDIA/TransformerEngine"
    assert specs["sparse_mla_fp8_dispatch"].category == "tensor-wrapper-dispatch"
    # Memory-footprint packs go in as comments on the in-flight thread.
    assert specs["dsa_indexer_memory"].upstream.state == "overlap"
    assert specs["dsa_indexer_memory"].body_name == "COMMENT.md"
    assert specs["mamba3_fp32_float16module"].priority == "crash-fix"
    # Env-constraint policy with nothing to upstream: no pack.
    assert "compile_nccl_policy" not in specs
    every_shim = {m.id for m in discover(REPO / "shims")}
    assert set(specs) <= every_shim


@pytest.mark.slow
def test_real_queue_never_trusts_the_body_and_reports_every_pack(tmp_path):
    # An empty validation manifest: nothing ran, so nothing that needs filing is ready.
    entries = filing_queue(REPO, now=NOW, validation_path=tmp_path / "none.jsonl")
    assert {e.id for e in entries} == set(pack_ids(REPO))
    for entry in entries:
        if entry.status != "already-fixed":
            assert entry.status == "blocked", entry
            assert any(
                r.startswith("validation: the reproducer never ran") for r in entry.reasons
            ), entry
    section = markdown_section(entries)
    assert section.startswith("## Filing queue")
    assert check_markdown(section) == []


def test_every_category_has_a_template_that_renders():
    manifest = discover(REPO / "shims")[0]
    assert set(TEMPLATES) == set(CATEGORIES)
    bodies = set()
    for category in CATEGORIES:
        spec = PackSpec(
            shim=manifest.id,
            category=category,
            repository="o/r",
            kind="issue",
            priority="report",
            upstream=UpstreamState("new-report"),
            against="x==1",
            command="python reproduce.py",
        )
        body = render(manifest, spec, 10).body
        assert CATEGORIES[category] in body and check_markdown(body) == []
        bodies.add(body)
    assert len(bodies) == len(CATEGORIES)


# ---------------------------------------------------------------------------------------------
# pack.toml validation: one-line errors


@pytest.mark.parametrize(
    "text, fragment",
    [
        (pack_toml(category="memory"), "unknown category 'memory'"),
        (pack_toml(kind="gist"), "unknown kind 'gist'"),
        (pack_toml(priority="urgent"), "unknown priority 'urgent'"),
        (pack_toml(repo="not a repo"), "not an owner/repo name"),
        (pack_toml(state="overlap"), "an overlap needs the thread"),
        (pack_toml(state="already-fixed"), "already-fixed needs the fix"),
        (
            pack_toml(thread="https://github.com/toyorg/toylib/pull/2"),
            "a new report has no existing thread",
        ),
        (pack_toml(state="overlap", thread="https://example.org/x/1"), "not a github.com URL"),
        (pack_toml(extra='categroy = "x"'), "did you mean 'category'"),
        (pack_toml().replace('against = "toylib==1.0"\n', ""), "reproducer.against: missing"),
        ("category = [", "invalid TOML"),
    ],
)
def test_bad_pack_toml_is_one_line(text, fragment):
    with pytest.raises(InputError) as error:
        parse_pack_spec(text, "shims/x/pack.toml", "x")
    message = str(error.value)
    assert fragment in message and "\n" not in message
    assert message.startswith("shims/x/pack.toml")


def test_bad_deny_list_is_one_line():
    with pytest.raises(InputError, match=r"deny\[0\]\.pattern: bad regular expression"):
        parse_deny("[[deny]]\npattern = '(unclosed'\nwhy = 'x'\n", "packs/deny.toml")
    with pytest.raises(InputError, match="exactly one of pattern or literal"):
        parse_deny("[[deny]]\nwhy = 'x'\n", "packs/deny.toml")


# ---------------------------------------------------------------------------------------------
# Readiness: a ready baseline, then each rule broken on purpose


@pytest.fixture
def pack_project(tmp_path) -> PackProject:
    return PackProject(tmp_path)


def _reasons(pack_project: PackProject, pack_id: str, **options) -> tuple[str, ...]:
    entry = next(e for e in filing_queue(pack_project.root, **options) if e.id == pack_id)
    return entry.reasons


def test_a_real_run_today_makes_the_pack_ready(pack_project, capsys):
    pack_project.add("toy_add")
    record = pack_project.record_real_run("toy_add")
    assert record.outcome == "bug-reproduced" and record.host["hostname"]
    [entry] = filing_queue(pack_project.root)
    assert (entry.status, entry.reasons) == ("ready", ())
    assert pack_project.cli("check") == 0
    assert "ready       toy_add → toyorg/toylib [crash-fix]" in capsys.readouterr().out


def test_never_ran_blocks(pack_project, capsys):
    pack_project.add("toy_add")
    assert _reasons(pack_project, "toy_add") == (
        (
            "validation: the reproducer never ran (no --mode without record in the validation "
            "manifest) "
            "— run it on a host (`patchlane run`) and record the result"
        ),
    )
    assert pack_project.cli("check", "toy_add") == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  toy_add: validation: the reproducer never ran" in "\n".join(lines)


def test_body_text_claiming_validation_is_not_evidence(pack_project):
    pack_project.add(
        "toy_add",
        manifest=github_manifest(
            "toy_add", explanation="Validated today on gpu-host-1: BUG_REPRODUCED, exit 10."
        ),
    )
    assert "`BUG_REPRODUCED`, exit 10" in load_pack(pack_project.root, "toy_add").pack.body
    assert any(
        r.startswith("validation: the reproducer never ran")
        for r in _reasons(pack_project, "toy_add")
    )


def test_stale_run_blocks_and_the_window_is_configurable(pack_project, capsys):
    pack_project.add("toy_add")
    pack_project.record("toy_add", at=NOW - _dt.timedelta(days=2))
    [reason] = _reasons(pack_project, "toy_add", now=NOW)
    assert re.fullmatch(
        r"validation: last BUG_REPRODUCED run was \S+ on gpu-host-1, older than 24 hours — rerun "
        r"the reproducer today",
        reason,
    ), reason
    assert _reasons(pack_project, "toy_add", now=NOW, window=_dt.timedelta(days=3)) == ()
    assert pack_project.cli("--window-days", "3", "check") == 0


def test_unnamed_host_skipped_and_wrong_version_block(pack_project):
    pack_project.add("nameless")
    pack_project.record("nameless", at=NOW, hostname="")
    assert "carry no host name" in _reasons(pack_project, "nameless", now=NOW)[0]

    pack_project.add("skipped")
    pack_project.record(
        "skipped", at=NOW, outcome="skipped", sentinel="SKIPPED", detail="no CUDA device"
    )
    [reason] = _reasons(pack_project, "skipped", now=NOW)
    assert "never printed BUG_REPRODUCED" in reason and "SKIPPED (no CUDA device)" in reason

    pack_project.add("fixed_meanwhile")
    pack_project.record(
        "fixed_meanwhile", at=NOW, outcome="fix-validated", sentinel="FIX_VALIDATED"
    )
    assert 'set state = "already-fixed"' in _reasons(pack_project, "fixed_meanwhile", now=NOW)[0]

    pack_project.add("other_version")
    pack_project.record("other_version", at=NOW, versions={"toylib": "0.9"})
    assert (
        "no BUG_REPRODUCED run against toylib==1.0"
        in _reasons(pack_project, "other_version", now=NOW)[0]
    )
    # the pin spelled unlike the recorded name
    pack_project.add("other_spelling", against="toy_lib==1.0")
    pack_project.record("other_spelling", at=NOW, versions={"toy-lib": "0.9"})
    assert (
        "no BUG_REPRODUCED run against toy_lib==1.0"
        in _reasons(pack_project, "other_spelling", now=NOW)[0]
    )

    pack_project.add("with_mode_only")
    pack_project.record(
        "with_mode_only", at=NOW, mode="with", outcome="fix-validated", sentinel="FIX_VALIDATED"
    )
    assert "never ran" in _reasons(pack_project, "with_mode_only", now=NOW)[0]


def test_missing_reproducer_blocks_without_crashing(pack_project, capsys):
    pack_project.add("no_repro", reproducer=None)
    reasons = _reasons(pack_project, "no_repro")
    assert (
        reasons[0]
        == "reproducer: reproduce.py not found in shims/no_repro — a pack needs a reproducer to "
        "attach"
    )
    assert pack_project.cli("check") == 1


def _ready_project(pack_project: PackProject, shim_id: str = "toy_add", **pack) -> None:
    pack_project.add(shim_id, **pack)
    pack_project.record(shim_id, at=NOW)


def test_deny_list_catches_hosts_and_people(pack_project):
    pack_project.add(
        "leaky",
        manifest=github_manifest("leaky", explanation="Seen on build-07.corp nightly runs."),
    )
    pack_project.record("leaky", at=NOW)
    [reason] = _reasons(pack_project, "leaky", now=NOW)
    assert (
        reason.startswith("deny-list: body line ")
        and "'build-07.corp' looks like an internal host name" in reason
    )

    folder = pack_project.add("leaky_repro")
    pack_project.record("leaky_repro", at=NOW)
    reproducer = folder / "reproduce.py"
    reproducer.write_text("# ask Jane Roe about this\n" + reproducer.read_text())
    [reason] = _reasons(pack_project, "leaky_repro", now=NOW)
    assert reason == (
        "deny-list: reproduce.py line 1: 'Jane Roe' looks like a person who is not a named author "
        "— rewrite it in public terms"
    )


def test_pasted_reproducer_and_broken_markdown_block(pack_project):
    _ready_project(pack_project)
    loaded = load_pack(pack_project.root, "toy_add")
    deny = load_deny(pack_project.root)
    records = []

    def blockers(body: str) -> list[str]:
        pack = dataclasses.replace(loaded.pack, body=body)
        found = readiness(
            pack,
            loaded.manifest,
            reproducer_text=loaded.reproducer_text,
            records=records,
            deny=deny,
            now=NOW,
        )
        return [str(b) for b in found if b.rule != "validation"]

    assert blockers(loaded.pack.body) == []
    long_block = "".join(f"value_{i} = compute({i})\n" for i in range(20))
    pasted = loaded.pack.body + "\n```python\n" + long_block + "```\n"
    assert any(
        b.startswith("pasted: body line") and "a 20-line code block (limit 12)" in b
        for b in blockers(pasted)
    )
    snippet = "\n".join(
        line for line in loaded.reproducer_text.splitlines() if len(line.strip()) >= 8
    )[:400]
    copied = loaded.pack.body + "\n```python\n" + snippet + "\n```\n"
    assert any("repeats" in b and "lines of the reproducer" in b for b in blockers(copied))
    unclosed = loaded.pack.body + "\n```python\nprint(1)\n"
    assert any(
        b.startswith("markdown: body line") and "never closed" in b for b in blockers(unclosed)
    )
    bad_table = loaded.pack.body.replace("| Category |", "| Category | extra |", 1)
    assert any("table row has 3 cells, the header has 2" in b for b in blockers(bad_table))


def test_markdown_checker_rules():
    assert check_markdown("| a | b |\n|---|:-:|\n| 1 | x \\| y |\n") == []
    assert check_markdown("```\n| not | a table\n```\n~~~~\n``` inside\n~~~~\n") == []
    assert "without a |---| delimiter" in str(check_markdown("| a | b |\n| 1 | 2 |\n")[0])
    assert "the delimiter row has 1 cells, the header has 2" in str(
        check_markdown("| a | b |\n|---|\n")[0]
    )
    # a shorter fence does not close
    assert "never closed" in str(check_markdown("````sh\nx\n```\n")[0])
    assert "relative link" in str(check_markdown("see [the doc](docs/packs.md)\n")[0])
    assert check_markdown("see [the PR](https://github.com/o/r/pull/1)\n") == []


def test_state_target_pin_and_command_rules(pack_project):
    _ready_project(pack_project, "no_state", state=None)
    assert _reasons(pack_project, "no_state", now=NOW)[0].startswith(
        "upstream-state: not filled — search toyorg/toylib"
    )

    pack_project.add("wrong_link", manifest=github_manifest("wrong_link", repo="someone/else"))
    pack_project.record("wrong_link", at=NOW)
    reasons = _reasons(pack_project, "wrong_link", now=NOW)
    assert reasons[0] == (
        "target: manifest report link https://github.com/someone/else/issues/1 is not in "
        "toyorg/toylib "
        "— fix repository in pack.toml or the link in the manifest"
    )

    _ready_project(
        pack_project, "wrong_thread", state="overlap", thread="https://github.com/other/repo/pull/3"
    )
    assert any(
        r.startswith("target: upstream-state thread")
        for r in _reasons(pack_project, "wrong_thread", now=NOW)
    )

    _ready_project(pack_project, "moving_ref", against="toyorg/toylib@main")
    assert _reasons(pack_project, "moving_ref", now=NOW)[0].startswith(
        "against: 'toyorg/toylib@main' is not a pinned"
    )
    _ready_project(pack_project, "sha_ref", against="toyorg/toylib@0123abc")
    assert _reasons(pack_project, "sha_ref", now=NOW) == ()

    _ready_project(pack_project, "other_command", command="pytest tests/")
    assert _reasons(pack_project, "other_command", now=NOW)[0].startswith(
        "command: the command does not run the attached reproduce.py"
    )

    pack_project.add("policy", manifest=github_manifest("policy", status="not-applicable"))
    pack_project.record("policy", at=NOW)
    assert _reasons(pack_project, "policy", now=NOW)[0].startswith(
        "manifest: the manifest's upstream status is not-applicable"
    )


def test_broken_pack_toml_is_a_blocked_entry_not_a_crash(pack_project, capsys):
    _ready_project(pack_project, "good")
    folder = pack_project.add("broken")
    (folder / "pack.toml").write_text(pack_toml(category="memory"))
    entries = {e.id: e for e in filing_queue(pack_project.root, now=NOW)}
    assert entries["good"].status == "ready"
    assert entries["broken"].status == "blocked"
    assert entries["broken"].reasons == (
        "pack: shims/broken/pack.toml: category: unknown category 'memory' — "
        "use one of " + ", ".join(CATEGORIES),
    )
    assert pack_project.cli("--now", NOW.isoformat(), "check") == 1
    out = capsys.readouterr().out
    assert "ready       good" in out and "NOT READY   broken" in out


def test_check_of_unknown_pack_is_one_line_error(pack_project, capsys):
    _ready_project(pack_project)
    assert pack_project.cli("check", "nope") == 2
    err = capsys.readouterr().err
    assert (
        err
        == "patchlane: error: unknown pack 'nope': no shims/nope/pack.toml — packs here: toy_add\n"
    )
    assert pack_project.cli("check", "../etc") == 2
    assert "not a shim id" in capsys.readouterr().err


def test_queue_json_is_json_able(pack_project, capsys):
    import json

    _ready_project(pack_project)
    assert pack_project.cli("queue", "--json") == 0
    [data] = json.loads(capsys.readouterr().out)
    assert data["id"] == "toy_add" and data["status"] == "ready" and data["reasons"] == []


def test_check_json_is_one_document_with_notes_on_stderr(pack_project, capsys):
    import json

    _ready_project(pack_project, "good")
    (pack_project.add("broken") / "pack.toml").write_text(pack_toml(category="memory"))
    assert pack_project.cli("--now", NOW.isoformat(), "check", "--json") == 1
    out, err = capsys.readouterr()
    # stdout is the document and nothing else
    document = json.loads(out)
    assert document["ok"] is False
    assert {p["id"]: p["status"] for p in document["packs"]} == {
        "good": "ready",
        "broken": "blocked",
    }
    # the human lines went to stderr
    assert "NOT READY   broken" in err
