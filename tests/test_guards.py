"""Guards for real: a shim retired through a real branch (git, uv against a loopback index) keeps
its reproducer; a bump that brings the bug back fails the lane loudly, and `shim restore` brings
the patch back from git history so the lane passes again."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from retire.branches import autodrop
from retire.branches.autodrop import DropPlan
from retire.branches.bump import bump
from retire.branches.options import ApplyOptions, BumpOptions
from retire.core.errors import InputError
from retire.evidence.floor import Floor
from shims.manifest import parse_manifest
from tests.conftest import run_cli, subprocess_env
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel


def toylib(folder: Path, version: str, *, fixed: bool) -> Path:
    source = (
        f'__version__ = "{version}"\n\ndef add(a, b):\n    return a {"+" if fixed else "-"} b\n'
    )
    return build_wheel(folder, "toylib", version, files={"toylib.py": source})


LANE = """\
[lane]
python = "3.11"
requirements = ["toylib"]
shims = ["toy"]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""


@pytest.fixture
def shop(tmp_path):
    """A project in git: lane cpu locks toylib 1.0 (add() subtracts) and carries shim toy."""
    root, wheels = tmp_path / "shop", tmp_path / "wheels"
    index = PackageIndex()
    index.add(toylib(wheels, "1.0", fixed=False), "2026-01-05")
    with IndexServer(index) as server:
        (root / "lanes").mkdir(parents=True)
        (root / "lanes" / "cpu.toml").write_text(LANE.replace("@MAIN@", server.url))
        shimtree.write_shim(root / "shims", "toy")
        (root / ".gitignore").write_text(".patchlane/\n__pycache__/\nvalidation/\n")
        assert run_cli(root, "lock")[0] == 0
        git(root, "init", "--quiet", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "--quiet", "-m", "a shop")
        yield root, index, wheels


def _summary(root: Path, run_id: str) -> dict:
    return json.loads((root / ".patchlane" / "runs" / run_id / "cpu.json").read_text())


@pytest.mark.slow
def test_a_retired_shim_guards_regresses_after_a_bump_and_is_restored(shop, capsys):
    root, index, wheels = shop
    index.add(toylib(wheels, "1.1", fixed=True), "2026-02-05")
    base = git(root, "rev-parse", "HEAD")
    plan = DropPlan("toy", "toylib 1.1 fixed add().", (Floor.parse("toylib>=1.1"),))
    [outcome] = autodrop.apply(root, [plan], ApplyOptions(open_prs=False))
    assert outcome.status == "proposed", outcome.reason
    git(root, "merge", "--quiet", "--ff-only", outcome.branch)

    # the patch is gone, the reproducer and manifest stay as a guard of the lane that carried it
    folder = root / "shims" / "toy"
    assert not (folder / "patch.py").exists() and (folder / "reproduce.py").is_file()
    guard = tomllib.loads((folder / "manifest.toml").read_text())["guard"]
    assert guard["status"] == "guarding" and guard["lanes"] == ["cpu"]
    assert guard["patch-commit"] == base and guard["reason"] == "toylib 1.1 fixed add()."
    assert "toy" not in (root / "lanes" / "cpu.toml").read_text().split("shims")[1]

    # the lane runs the guard without a shim: it holds
    code, out, err = run_cli(root, "run", "--run-id", "holds", capsys=capsys)
    assert code == 0, out + err
    assert _summary(root, "holds")["guards"][0]["outcome"] == "holding"

    # upstream breaks add() again; the bump takes it
    index.add(toylib(wheels, "1.2", fixed=False), "2026-03-05")
    options = BumpOptions(now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC), release_notes_links=False)
    result = bump(root, options)
    assert result.status == "proposed", result.reason
    [lane] = result.lanes
    assert ("toy", "regressed", "holding") in lane.outcomes
    body = Path(result.body_path).read_text()
    assert "Guards that regressed" in body and "`toy` on lane `cpu`" in body
    git(root, "merge", "--quiet", "--ff-only", result.branch)

    # the lane fails loudly, --strict or not
    for extra in ((), ("--strict",)):
        code, out, err = run_cli(root, "run", "-v", "--run-id", "broke", *extra, capsys=capsys)
        assert code == 1
        assert "lane[cpu]::guard::toy FAILED" in out and "guard REGRESSED" in out
        assert "REGRESSED: guard toy reproduces again in lane cpu" in err
    assert _summary(root, "broke")["guards"][0]["outcome"] == "regressed"

    # the weekly report leads with it, in every format
    code, _, _ = run_cli(root, "report", "--no-probe", "--week", "2026-W48", capsys=capsys)
    assert code == 0
    markdown = (root / "reports" / "2026-W48.md").read_text()
    assert markdown.index("## Regressions") < markdown.index("shims carried")
    assert "| `cpu` | `toy` | guard regressed — `patchlane shim restore toy` |" in markdown
    page = (root / "reports" / "2026-W48.html").read_text()
    assert page.index('id="regressions"') < page.index("<h2>", page.index("</section>"))
    document = json.loads((root / "reports" / "2026-W48.json").read_text())
    assert [(r["lane"], r["subject"], r["kind"]) for r in document["regressions"]] == [
        ("cpu", "toy", "guard-regressed")
    ]

    # one step brings the patch back from history; the lane passes with the shim
    code, out, _ = run_cli(root, "shim", "restore", "toy", capsys=capsys)
    assert code == 0 and f"patch.py from {base[:12]}" in out
    assert (folder / "patch.py").read_text() == textwrap.dedent(shimtree.TOY_PATCH)
    assert "guard" not in tomllib.loads((folder / "manifest.toml").read_text())
    assert tomllib.loads((root / "lanes" / "cpu.toml").read_text())["lane"]["shims"] == ["toy"]
    code, out, _ = run_cli(root, "run", "--run-id", "restored", capsys=capsys)
    assert code == 0, out
    summary = _summary(root, "restored")
    assert summary["shims"] == [
        {
            "shim": "toy",
            "outcome": "needed",
            "why": summary["shims"][0]["why"],
            "with_shim": "fix-validated",
        }
    ]
    assert summary["guards"] == []


@pytest.mark.slow
def test_a_dropped_guard_stops_running_with_its_reason(shop, capsys):
    root, index, wheels = shop
    index.add(toylib(wheels, "1.1", fixed=True), "2026-02-05")
    plan = DropPlan("toy", "fixed", (Floor.parse("toylib>=1.1"),))
    [outcome] = autodrop.apply(root, [plan], ApplyOptions(open_prs=False))
    git(root, "merge", "--quiet", "--ff-only", outcome.branch)
    with pytest.raises(SystemExit) as refused:
        run_cli(root, "shim", "drop", "toy", capsys=capsys)
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
    code, _, err = run_cli(root, "shim", "drop", "toy", "--reason", " ", capsys=capsys)
    assert code == 2 and "--reason: is empty" in err
    code, _, _ = run_cli(
        root, "shim", "drop", "toy", "--reason", "covered by toylib's own tests", capsys=capsys
    )
    guard = tomllib.loads((root / "shims/toy/manifest.toml").read_text())["guard"]
    assert code == 0 and guard["status"] == "dropped"
    assert guard["drop-reason"] == "covered by toylib's own tests"
    assert run_cli(root, "run", "--run-id", "after", capsys=capsys)[0] == 0
    assert _summary(root, "after")["guards"] == []
    # only a guard can be restored
    code, _, err = run_cli(root, "shim", "restore", "nothing", capsys=capsys)
    assert code == 2 and "is not a guard" in err


GUARDED = shimtree.manifest_text("toy") + textwrap.dedent("""
    [guard]
    status = "guarding"
    retired = 2026-11-01
    reason = "toylib 1.1 fixed add()"
    patch-commit = "0123456789abcdef0123456789abcdef01234567"
    lanes = ["cpu"]
    """)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (('patch-commit = "0123', 'patch-commit = "XYZ'), "guard.patch-commit"),
        (('status = "guarding"', 'status = "gone"'), "guard.status"),
        (('lanes = ["cpu"]', 'lanes = ["CPU lane"]'), "guard.lanes[0]"),
        (('status = "guarding"', 'status = "dropped"'), "guard.dropped"),
        (("retired = 2026-11-01", 'retired = "soon"'), "guard.retired"),
        (('lanes = ["cpu"]', 'lanes = ["cpu"]\nwhen = 1'), "guard"),
        (('status = "guarding"', 'status = "guarding"\ndrop-reason = "x"'), "guard.status"),
    ],
)
def test_bad_guard_tables_are_one_line_errors(change, key):
    good = parse_manifest(GUARDED, Path("shims/toy/manifest.toml"))
    assert good.guard is not None and good.guard.guarding and good.guard.lanes == ("cpu",)
    with pytest.raises(InputError) as caught:
        parse_manifest(GUARDED.replace(*change), Path("shims/toy/manifest.toml"))
    message = str(caught.value)
    assert "\n" not in message and f": {key}" in message, message


def test_the_summary_of_a_run_fails_on_a_regressed_guard_and_says_so(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    run = tmp_path / ".patchlane" / "runs" / "r1"
    run.mkdir(parents=True)
    lane = {
        "lane": "cpu",
        "status": "ran",
        "why": "",
        "planned": [],
        "seconds": 1.0,
        "isolation": "process",
        "note": "",
        "shims": [],
        "guards": [{"guard": "toy", "outcome": "regressed", "why": "the retired bug is back"}],
    }
    (run / "cpu.json").write_text(json.dumps(lane))
    code, out, _ = run_cli(tmp_path, "summary", "--run-id", "r1", capsys=capsys)
    assert code == 1
    assert "guard toy in lane cpu: REGRESSED — the retired bug is back" in out
    assert "FAILED lanes: cpu" in out
    lane["guards"][0]["outcome"] = "gone"
    (run / "cpu.json").write_text(json.dumps(lane))
    code, _, err = run_cli(tmp_path, "summary", "--run-id", "r1", capsys=capsys)
    assert code == 2 and "unreadable lane summary (ValueError)" in err


def test_regressions_lead_with_guards_then_culprits_then_what_no_culprit_names():
    from retire.report.regressions import find_regressions, to_markdown
    from tests.test_validation import record

    guard = parse_manifest(GUARDED, Path("shims/toy/manifest.toml"))
    records = [
        record("toy", lane="cpu", started="2026-11-20T10:00:00+00:00"),
        record("other", lane="cpu", started="2026-11-20T10:00:00+00:00"),
        # the culprit of "healed" was recorded, but its lane is clean again
        record("healed", lane="cpu", sentinel="FIX_VALIDATED"),
    ]
    culprits = [
        {"lane": "cpu", "subject": "other", "mode": "without", "line": "beta 1.2 breaks other"},
        {"lane": "cpu", "subject": "healed", "mode": "without", "line": "gamma 2 breaks healed"},
    ]
    found = find_regressions([guard], records, culprits, [("third", "gpu", "shim-broken")])
    assert [(r.subject, r.kind, r.culprit, r.action) for r in found] == [
        ("toy", "guard-regressed", None, "patchlane shim restore toy"),
        ("other", "newly-broken", "beta 1.2 breaks other", ""),
        ("third", "newly-broken", None, "patchlane culprit gpu third --mode with"),
    ]
    markdown = "\n".join(to_markdown(found))
    assert markdown.startswith("| lane | shim or guard") and "not searched yet" in markdown
    assert find_regressions([guard], [], [], []) == ()


# ---------------------------------------------------------------------------------------------
# issue 36: a guard is in every listing, with where it stands, and the console leads with it


def _guarded_shop(tmp_path: Path, sentinel: str | None) -> Path:
    """A project with guard `toy` (lane cpu), shim `gone` whose distribution is installed nowhere
    here, and (unless None) one run of the guard's reproducer."""
    from retire.evidence import validation
    from tests.test_validation import record

    root = tmp_path / "shop"
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "cpu.toml").write_text(
        '[lane]\npython = "3.11"\nrequirements = ["toylib"]\nshims = ["gone"]\n'
    )
    shimtree.write_shim(root / "shims", "toy", manifest=GUARDED, patch=None)
    shimtree.write_shim(
        root / "shims", "gone", module="no_such_module_here", distribution="no-such-dist-here"
    )
    if sentinel is not None:
        run = record("toy", lane="cpu", sentinel=sentinel, started="2026-11-20T10:00:00+00:00")
        validation.append(root / "validation" / "manifest.jsonl", [run])
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sentinel", "word"),
    [(None, "not-run"), ("FIX_VALIDATED", "holding"), ("BUG_REPRODUCED", "regressed")],
)
def test_a_guard_is_listed_with_where_it_stands(tmp_path, capsys, sentinel, word):
    # was: `shim list` and `catalogue` said "no shims found" while `shim drop` points at them
    root = _guarded_shop(tmp_path, sentinel)

    def listing(*options: str) -> str:
        # a process of its own: the runtime activates one catalogue per process
        done = subprocess.run(
            [sys.executable, "-m", "retire", "--root", str(root), "shim", "list", *options],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = listing()
    (line,) = [line for line in out.splitlines() if line.startswith("toy ")]
    assert f"guard: {word}" in line and "retired 2026-11-01" in line, out
    rows = {row["id"]: row for row in json.loads(listing("--json"))}
    assert rows["toy"]["state"] == "guard" and rows["toy"]["guard"] == word
    # not "not installed" and "pending-import" at once
    assert rows["gone"]["state"] == "not-installed", rows["gone"]
    assert "no-such-dist-here is not installed here" in rows["gone"]["reason"]
    code, out, _ = run_cli(root, "catalogue", capsys=capsys)
    assert code == 0
    guards = out[out.index("## Guards") :]
    assert "| `toy` |" in guards and (f"**{word}**" if word == "regressed" else word) in guards
    _, out, _ = run_cli(root, "catalogue", "--json", capsys=capsys)
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows["toy"]["guard"]["word"] == word and "guard" not in rows["gone"]


def test_the_console_report_leads_with_a_regressed_guard(tmp_path, capsys):
    # was: "nothing needs attention" while the guard had regressed (only the .md had the row)
    root = _guarded_shop(tmp_path, "BUG_REPRODUCED")
    code, out, err = run_cli(root, "report", "--no-probe", "--week", "2026-W48", capsys=capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "REGRESSED: guard toy in lane cpu", out
    assert lines[2] == "  next: patchlane shim restore toy"
    assert "nothing needs attention" not in out
