"""``--json`` keeps its contract on every path: stdout holds exactly one JSON document, also when
there is nothing to do (no mirror declared, no shim, no pack), and a command that would return
without one prints the error document instead (exit 1), never nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

from retire.commands import base
from tests.conftest import run_cli
from tests.test_json_schemas import check

#: (command line, its schema): each on a project `init` just made, with nothing in it yet.
NOTHING_TO_DO = [
    (("mirrors", "sync"), "mirrors-sync"),
    (("mirrors", "list"), "mirrors-list"),
    (("catalogue",), "catalogue"),
    (("lanes",), "lanes"),
    (("shim", "list"), "shims"),
    (("verdicts",), "verdicts"),
    (("pack", "check"), "pack-check"),
    (("pack", "plan"), "pack-plan"),
    (("pack", "queue"), "pack-queue"),
    (("retire", "--apply"), "retire-apply"),
]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    code, _out, _err = run_cli(root, "init", "--no-lock")
    assert code == 0
    return root


@pytest.mark.slow
@pytest.mark.parametrize(("words", "schema"), NOTHING_TO_DO, ids=lambda v: " ".join(v))
def test_nothing_to_do_is_still_one_document(fresh, capsys, words, schema):
    capsys.readouterr()
    code, out, err = run_cli(fresh, *words, "--json", capsys=capsys)
    assert code == 0, err
    document = json.loads(out)
    check(schema, document)


def test_mirrors_sync_without_mirrors_prints_an_empty_list_and_says_why_on_stderr(fresh, capsys):
    capsys.readouterr()
    code, out, err = run_cli(fresh, "mirrors", "sync", "--json", capsys=capsys)
    assert (code, json.loads(out)) == (0, [])
    assert "no mirrors declared" in err


def test_a_command_that_returns_without_a_document_prints_the_error_document(capsys):
    base.configure(json=True)
    try:
        code = base.json_kept(0)
    finally:
        base.configure(json=False)
    out, err = capsys.readouterr()
    document = json.loads(out)
    check("error", document)
    assert code == 1 and document["exit_code"] == 1 and not document["ok"]
    assert "printed no JSON document" in err and err.count("\n") == 1
