"""Every ``--json`` document has a contract: a JSON Schema (draft 2020-12) in ``retire/schemas/``.

The commands run for real here (loopback indexes, real uv and git, the projects other tests
build) and what they print is validated against its schema. A command that gains ``--json``
without a schema fails :func:`test_every_json_command_has_a_schema`; a schema whose enums drift
from the code's vocabularies fails :func:`test_enums_are_the_code_vocabularies`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys

import pytest
from jsonschema import Draft202012Validator

from retire import schemas
from retire.commands import build_parser
from retire.commands import main as cli
from retire.commands.aliases import ALIASES
from tests.conftest import PYTHON, ROOT, run_cli, subprocess_env
from tests.support.gitrepos import make_upstream
from tests.support.packtree import PackProject, pack_toml
from tests.support.reportshop import WEEK, build_shop
from tests.support.shimtree import write_shim
from tests.test_bisect import clean_series  # noqa: F401 - fixture
from tests.test_bump import shop  # noqa: F401 - fixture
from tests.test_catalogue_verdicts import air_gapped  # noqa: F401 - fixture
from tests.test_locking import lane_text
from tests.test_mirrors import write_config
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401 - fixtures

#: $defs that several schemas carry: each must be the same everywhere.
SHARED = ("verdict", "flag", "condition", "probeFailure", "change", "laneRun", "pack", "culprit")


def check(name: str, document: object) -> None:
    """``document`` is valid under ``<name>.schema.json``; every error is listed if not."""
    errors = sorted(
        Draft202012Validator(schemas.load(name)).iter_errors(document),
        key=lambda e: list(e.absolute_path),
    )
    assert not errors, "\n".join(
        f"{name}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}"
        for e in errors
    )


def printed(capsys, root, *args: str) -> tuple[int, object]:
    code, out, err = run_cli(root, *args, "--json", capsys=capsys)
    assert out, err
    return code, json.loads(out)


# ---------------------------------------------------------------------------------------------
# The schemas themselves


@pytest.mark.slow
@pytest.mark.parametrize("name", schemas.names())
def test_every_schema_is_a_valid_draft_2020_12_schema(name):
    schema = schemas.load(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def _json_commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> set[str]:
    found = set()
    for action in parser._actions:
        if "--json" in action.option_strings and words:
            found.add(" ".join(words))
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _json_commands(sub, (*words, name))
    return found


def test_every_json_command_has_a_schema():
    # a deprecated spelling prints its replacement's document
    deprecated = {alias.name for alias in ALIASES}
    found = {
        words for words in _json_commands(build_parser()) if words.split()[0] not in deprecated
    }
    assert found == set(schemas.DOCUMENTS)
    named = {name for names in schemas.DOCUMENTS.values() for name in names}
    # each schema describes a command's document (or every command's error), and each document
    # has its schema
    assert named | {schemas.ERROR} == set(schemas.names())


def test_shared_definitions_are_the_same_in_every_schema():
    seen: dict[str, tuple[str, object]] = {}
    for name in schemas.names():
        for key, definition in schemas.load(name).get("$defs", {}).items():
            if key not in SHARED:
                continue
            first = seen.setdefault(key, (name, definition))
            assert definition == first[1], f"$defs/{key} differs in {name} and {first[0]}"
    assert set(seen) == set(SHARED)


def test_enums_are_the_code_vocabularies():
    import shims
    from retire.evidence.validation import ShimOutcome
    from retire.evidence.values import EVIDENCE_KINDS
    from retire.verdicts.model import ConditionState, Decision, FlagKind

    defs = schemas.load("verdicts")["$defs"]
    assert defs["verdict"]["properties"]["verdict"]["enum"] == list(Decision)
    assert defs["flag"]["properties"]["kind"]["enum"] == list(FlagKind)
    assert defs["condition"]["properties"]["state"]["enum"] == list(ConditionState)
    kinds = {
        defs[ref["$ref"].rsplit("/", 1)[1]]["properties"]["kind"]["const"]
        for ref in defs["evidence"]["oneOf"]
    }
    assert kinds == set(EVIDENCE_KINDS.values())
    outcome = schemas.load("run")["$defs"]["laneRun"]["properties"]["shims"]["items"]
    assert outcome["properties"]["outcome"]["enum"] == list(ShimOutcome)
    from shims.__main__ import LISTING_STATES

    assert schemas.load("shims")["items"]["properties"]["state"]["enum"] == list(LISTING_STATES)
    assert list(LISTING_STATES[: len(shims.STATES)]) == list(shims.STATES)
    from retire.bisect.culprit import CulpritStatus

    culprit = schemas.load("culprit")["$defs"]["culprit"]["properties"]
    assert culprit["status"]["enum"] == list(CulpritStatus)
    from retire.mirrors.resolve import Found

    # a window's mirror says which rule of the one resolver found it
    report = schemas.load("report")["$defs"]
    for window in (defs["verdict"], report["verdict"], report["shimRow"]):
        mirror = window["properties"]["window"]["properties"]["mirror"]["properties"]
        assert mirror["found"]["enum"] == list(Found)
    from retire.history.edge import CommitSearch

    edge = schemas.load("bisect")["properties"]["commit_edges"]["items"]["properties"]
    assert edge["search"]["properties"]["how"]["enum"] == list(CommitSearch)


def test_a_commit_edge_says_how_its_commits_were_searched():
    """``search`` of a commit edge: what CommitSpan.search_json writes validates; a way of
    searching the code does not know, or a missing key, does not."""
    from retire.history.edge import CommitSearch, CommitSpan, EdgeKind, EdgeState

    search = schemas.load("bisect")["properties"]["commit_edges"]["items"]["properties"]["search"]
    validator = Draft202012Validator(search)
    span = CommitSpan(
        EdgeKind.FIXED,
        ("v0.8.1", "v0.8.2"),
        37,
        EdgeState.UNPINNED,
        search=CommitSearch.TOUCHING,
        search_note="informed: 2 of 37 commits touch the target's files; …",
        paths=("src/liger_kernel/ops/fused_linear_cross_entropy.py",),
        touching=2,
    )
    assert validator.is_valid(span.search_json())
    assert span.search_json()["how"] == "touching"
    assert validator.is_valid(CommitSpan(EdgeKind.FIXED, ("a", "b"), 1, "found").search_json())
    assert not validator.is_valid({**span.search_json(), "how": "guessed"})
    assert not validator.is_valid({"how": "full", "note": "", "paths": []})


# ---------------------------------------------------------------------------------------------
# Real output


def test_init_and_shim_new(tmp_path, capsys):
    root = tmp_path / "shop"
    code, document = printed(capsys, root, "init", "--no-lock")
    assert code == 0
    check("init", document)
    code, document = printed(capsys, root, "shim", "new", "my_fix", "--owner", "me@example.org")
    assert code == 0
    check("shim-new", document)


@pytest.mark.slow
def test_lanes_lock_lock_check_and_lockdiff(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    # cannot resolve: a failed row
    project.write("b", lane_text('"torchlike==9.9"'))
    code, document = printed(capsys, project.root, "lock")
    assert code == 1 and {r["status"] for r in document["lanes"]} == {"locked", "failed"}
    check("lock", document)
    code, document = printed(capsys, project.root, "lock", "--check")
    assert code == 1
    check("lock-check", document)
    code, document = printed(capsys, project.root, "lanes")
    assert code == 0 and len(document) == 2
    check("lanes", document)

    old = project.root / "old.toml"
    shutil.copy(project.lock_file("a"), old)
    project.write("a", lane_text('"helper==1.5"'))
    assert run_cli(project.root, "lock", "a", capsys=capsys)[0] == 0
    code, document = printed(
        capsys, project.root, "lockdiff", str(old), str(project.lock_file("a"))
    )
    assert code == 0 and [c["kind"] for c in document["changes"]] == ["minor"]
    check("lockdiff", document)


@pytest.mark.slow
def test_run_and_summary(toy_project, capsys):
    toy_project.write("old", lane())
    toy_project.write("fixed", lane(reqs='"toylib==1.1"'))
    assert run_cli(toy_project.root, "lock", capsys=capsys)[0] == 0
    code, document = printed(capsys, toy_project.root, "run", "--no-record", "--run-id", "s1")
    assert code == 0
    check("run", document)
    code, document = printed(capsys, toy_project.root, "summary", "--run-id", "s1")
    assert code == 0
    check("summary", document)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["-m", "retire", "--root", str(ROOT), "shim", "list", "--json"],
        ["-m", "shims", "--root", str(ROOT), "--json"],
    ],
)
def test_shims(command):
    # A subprocess: listing activates the shims in the process that lists them.
    result = subprocess.run(
        [PYTHON, *command],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document
    check("shims", document)


def test_catalogue(capsys):
    code, document = printed(capsys, ROOT, "catalogue")
    assert code == 0 and any(row["proofs"] for row in document)
    check("catalogue", document)


@pytest.mark.slow
def test_mirrors_list_and_sync(tmp_path, capsys):
    upstream = make_upstream(tmp_path / "upstream")
    root = tmp_path / "project"
    write_config(
        root,
        f'[[mirrors.repository]]\nurl = "https://github.com/org/toylib"\n'
        f'fetch = "{upstream.path.as_uri()}"\n'
        '[[mirrors.repository]]\nurl = "https://github.com/org/gone"\n'
        'fetch = "http://127.0.0.1:9/gone.git"\n',
    )
    code, document = printed(capsys, root, "mirrors", "sync")
    assert code == 0 and {r["status"] for r in document} == {"cloned", "unreachable"}
    check("mirrors-sync", document)
    code, document = printed(capsys, root, "mirrors", "list")
    assert code == 0 and {r["present"] for r in document} == {True, False}
    check("mirrors-list", document)


@pytest.mark.slow
def test_verdicts(air_gapped, capsys, monkeypatch):
    from tests.support.faults import unused_port

    project, index_url, mirrors = air_gapped
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("UV_INDEX", f"pytorch-nightly={index_url}")
    code, document = printed(
        capsys,
        project.root,
        "verdicts",
        "--no-cache",
        "--api-url",
        f"http://127.0.0.1:{unused_port()}",
        "--index-url",
        index_url,
        "--mirrors",
        str(mirrors),
    )
    assert code == 0
    kinds = {e["kind"] for v in document for e in v["evidence"]}
    assert {"release-list", "mirror-pull", "execution-history"} <= kinds, kinds
    assert any(v["failures"] for v in document)
    check("verdicts", document)


@pytest.mark.slow
def test_report_and_retire_without_apply(tmp_path, capsys):
    root = build_shop(tmp_path / "shop")
    for command in ("report", "retire"):
        code, document = printed(
            capsys, root, command, "--week", WEEK, "--no-probe", "--out", str(tmp_path / command)
        )
        assert code == 0 and document["verdicts"]
        check("report", document)


@pytest.mark.slow
def test_retire_apply(tmp_path, capsys):
    from tests.test_autodrop import DropProject

    project = DropProject(tmp_path)
    try:
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps({"shim_id": "toylib_add", "why": "fixed in 1.6", "floors": ["toylib>=1.6"]})
        )
        for status in ("proposed", "already-proposed"):
            code, document = printed(
                capsys, project.root, "retire", "--apply", "--plan", str(plan), "--no-pr"
            )
            assert code == 0 and [p["status"] for p in document["proposals"]] == [status]
            check("retire-apply", document)
    finally:
        project.close()


@pytest.mark.slow
def test_bump(shop, capsys):
    code, document = printed(
        capsys, shop["repo"], "bump", "toy", "--no-run", "--no-pr", "--now", "2026-06-01T12:00:00"
    )
    assert code == 0 and document["lanes"][0]["changes"]
    check("bump", document)
    code, document = printed(
        capsys, shop["repo"], "bump", "--dry-run", "--now", "2026-06-01T12:00:00"
    )
    assert code == 0 and document["dry_run"] and document["runs"]
    check("bump-dry-run", document)


@pytest.mark.slow
def test_bisect(tmp_path, clean_series, capsys):
    root = tmp_path / "project"
    write_shim(root / "shims", "toylib_add")
    code, document = printed(
        capsys,
        root,
        "bisect",
        "toylib_add",
        "--index",
        clean_series.url,
        "--python",
        sys.executable,
        "--cache",
        str(tmp_path / "cache"),
        "--no-record",
    )
    assert code == 0 and document["status"] == "found"
    check("bisect", document)


def test_pack_check_plan_and_queue(tmp_path, capsys):
    import datetime as _dt

    project = PackProject(tmp_path)
    project.add("toy_add")
    project.record("toy_add", at=_dt.datetime.now(_dt.UTC))
    # an unknown category: blocked, with its reason
    (project.add("broken") / "pack.toml").write_text(pack_toml(category="memory"))
    for action, name in (("check", "pack-check"), ("plan", "pack-plan"), ("queue", "pack-queue")):
        capsys.readouterr()
        assert cli(["--root", str(project.root), "pack", action, "--json"]) in (0, 1)
        check(name, json.loads(capsys.readouterr().out))


def test_a_class_name_tag_is_no_part_of_any_document():
    """The tags that leaked before the schemas (``"type": "ConditionResult"``) are refused."""
    condition = {
        "kind": "version-floor",
        "state": "holds",
        "why": "out",
        "floor": None,
        "action": None,
    }
    verdict = {
        "shim": "s",
        "verdict": "keep",
        "why": "w",
        "action": None,
        "flags": [],
        "lanes": [],
        "floors": [],
        "lane_verdicts": [],
        "window": None,
        "branch_fix": None,
        "conditions": [condition],
        "failures": [],
        "evidence": [],
    }
    check("verdicts", [verdict])
    leaked = {**verdict, "conditions": [{**condition, "type": "ConditionResult"}]}
    with pytest.raises(AssertionError, match="'type' was unexpected"):
        check("verdicts", [leaked])


def test_a_verdict_per_lane_with_ancestry_evidence_matches_the_schema():
    """Lane verdicts of every kind and an ``ancestry`` evidence value, as decide makes them."""
    from retire.evidence.values import Ancestry
    from tests.test_verdicts import (
        CLEAN_ON_1_2,
        REPO,
        VERSION_FLOOR,
        ev,
        lane_at,
        revision_lane,
        verdict,
    )

    commit = "d" * 40
    found = verdict(
        VERSION_FLOOR,
        ev(
            locks={"floor": {"toylib": "1.0"}, "stable": {"toylib": "1.2"}, "main": {}},
            commits={"main": {"toylib": commit}},
            ancestry={(REPO, commit): Ancestry(REPO, commit, ("v1.2", "1.2"), None)},
            execution=CLEAN_ON_1_2,
        ),
        lanes=[
            lane_at("floor", policy="hold"),
            lane_at("stable"),
            revision_lane("main", "main", "http://index/simple"),
        ],
    )
    assert {lv.step for lv in found.lane_verdicts} == {"hold", "drop"}
    document = [found.to_json()]
    assert "ancestry" in {e["kind"] for e in document[0]["evidence"]}
    check("verdicts", document)


# ---------------------------------------------------------------------------------------------
# Failures keep the contract: one error document on stdout (issue 20, class 9)

#: A command line that fails in the broken project below, for every command that takes --json.
FAILING: dict[str, tuple[list[str], int]] = {
    "init": (["init", "--python", "3.x", "new"], 2),
    "lanes": (["lanes"], 2),
    "lock": (["lock"], 2),
    "lockdiff": (["lockdiff", "old.toml", "new.toml"], 2),
    "run": (["run"], 2),
    "summary": (["summary", "--run-id", "never"], 2),
    "shim list": (["shim", "list", "--check"], 2),
    "shim new": (["shim", "new", "Not-An-Id"], 2),
    "catalogue": (["catalogue"], 2),
    "mirrors list": (["mirrors", "list"], 2),
    "mirrors sync": (["mirrors", "sync"], 2),
    "verdicts": (["verdicts", "--no-cache"], 2),
    "bisect": (["bisect", "no_such_shim"], 2),
    "report": (["report", "--no-probe"], 2),
    "retire": (["retire", "--no-probe"], 2),
    "bump": (["bump", "no-such-lane", "--no-run", "--no-pr"], 2),
    "culprit": (["culprit", "x", "toy"], 2),
    "pack check": (["pack", "check"], 2),
    "pack plan": (["pack", "plan"], 2),
    "pack queue": (["pack", "queue"], 2),
}


@pytest.fixture
def broken(tmp_path):
    """A project where every reader finds something wrong (and no git repository)."""
    root = tmp_path / "broken"
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "x.toml").write_text("lane = 3\n")
    write_shim(root / "shims", "bad_one", manifest="id = 3\n")
    (root / "packs").mkdir()
    (root / "packs" / "deny.toml").write_text("[[[\n")
    (root / "patchlane.toml").write_text("[mirrors\n")
    return root


def test_every_failing_command_table_covers_every_json_command():
    assert set(FAILING) == set(schemas.DOCUMENTS)


@pytest.mark.parametrize("words", sorted(FAILING))
def test_a_failure_with_json_prints_one_error_document(broken, capsys, words):
    args, expected = FAILING[words]
    code, out, err = run_cli(broken, *args, capsys=capsys)
    assert code == expected and out == "" and err.startswith("patchlane"), (out, err)
    code, out, json_err = run_cli(broken, *args, "--json", capsys=capsys)
    # the exit code and the stderr line are unchanged; stdout is exactly one document
    assert code == expected
    assert json_err == err
    document = json.loads(out)
    check("error", document)
    assert document["exit_code"] == expected
    assert json_err.splitlines()[-1].endswith(
        document["error"]["message"]
        + (f" — {document['error']['fix']}" if document["error"]["fix"] else "")
    )


def test_a_usage_error_with_json_is_an_error_document_too(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        run_cli(tmp_path, "lanes", "--json", "--no-such-option")
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert err.startswith("patchlane lanes: error: unrecognized arguments: --no-such-option")
    document = json.loads(out)
    check("error", document)
    assert document["error"]["kind"] == "usage"
    # the command's own help (issue 36)
    assert document["error"]["fix"] == "see `patchlane lanes --help`"
    # `--json` after `--` is an argument, not the option
    with pytest.raises(SystemExit):
        run_cli(tmp_path, "lanes", "--no-such-option", "--", "--json")
    assert capsys.readouterr().out == ""
