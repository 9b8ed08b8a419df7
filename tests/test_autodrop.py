"""Auto-drop for real: a git repository made here, locks made by uv through a loopback index, the
branch made in a separate worktree and inspected; PRs opened against a loopback code host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from retire.branches import autodrop
from retire.branches.autodrop import DropPlan
from retire.branches.options import ApplyOptions
from retire.branches.prstatus import PrState
from retire.commands import main as cli
from retire.evidence.floor import Floor
from retire.lanes import lanefile
from retire.lanes.lanedit import FloorConflictError, edit_lane_text, raise_floor
from retire.locks import locking
from tests.support.gitrepos import git
from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import REPO_ROOT, write_shim
from tests.support.wheels import build_wheel

CPU_LANE = """\
# The CPU lane: comments here must survive an automated edit byte for byte.
[lane]
description = "toylib on the CPU"  # a trailing comment
python = "3.12"
platform = "x86_64-manylinux_2_28"
requirements = [
    "toylib>=1.0",  # the floor the retirement raises
    # helper stays exactly as it is
    "helper==1.0",
]
shims = [
    "toylib_add",
    "other_shim",  # stays
]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""

PINNED_LANE = """\
[lane]
python = "3.12"
platform = "x86_64-manylinux_2_28"
requirements = ["toylib==1.0"]  # pinned below the floor
shims = ["toylib_add"]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""

VIA_APP_LANE = """\
# toylib only comes in through app.
[lane]
python = "3.12"
platform = "x86_64-manylinux_2_28"
requirements = ["app"]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""

PLAN = DropPlan(
    "toylib_add",
    why="toylib 1.6 fixed add(); the reproducer prints FIX_VALIDATED from 1.6 on.",
    floors=(Floor.parse("toylib>=1.6"),),
    evidence_markdown="Bisection: toylib 1.6 is the first fixed release (last broken: 1.5).\n\n"
    "```\nBUG_REPRODUCED\n```\n",
    upstream_links=(
        ("fix", "https://example.org/toylib/pull/2"),
        ("link", "https://example.org/toylib/issues/1"),
    ),
)


def toylib_wheel(folder: Path, version: str, *, fixed: bool) -> Path:
    source = (
        f'__version__ = "{version}"\n\ndef add(a, b):\n    return a {"+" if fixed else "-"} b\n'
    )
    return build_wheel(folder, "toylib", version, files={"toylib/__init__.py": source})


class DropProject:
    """A patchlane project in a git repository; its locks hold toylib 1.5 until 1.6 ships."""

    def __init__(self, tmp: Path, *, app_pins_old: bool = False) -> None:
        self.root = tmp / "project"
        wheels = tmp / "wheels"
        self.index = PackageIndex()
        for version, when in [("1.0", "2026-01-01"), ("1.5", "2026-02-01")]:
            self.index.add(toylib_wheel(wheels, version, fixed=False), when)
        self.index.add(build_wheel(wheels, "helper", "1.0"), "2026-01-01")
        self.index.add(
            build_wheel(
                wheels, "app", "1.0", requires=["toylib<1.6" if app_pins_old else "toylib"]
            ),
            "2026-01-01",
        )
        self.server = IndexServer(self.index).__enter__()
        lanes = self.root / "lanes"
        lanes.mkdir(parents=True)
        for name, text in [("cpu", CPU_LANE), ("pinned", PINNED_LANE), ("viaapp", VIA_APP_LANE)]:
            (lanes / f"{name}.toml").write_text(text.replace("@MAIN@", self.server.url))
        write_shim(self.root / "shims", "toylib_add")
        write_shim(self.root / "shims", "other_shim")
        (self.root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
        results = locking.lock_lanes(
            lanefile.load_lanes(lanes, root=self.root), self.root / "locks"
        )
        assert all(r.ok for r in results), results
        # Upstream ships the fix after the locks were made.
        for version, when in [("1.6", "2026-03-01"), ("1.7", "2026-04-01")]:
            self.index.add(toylib_wheel(wheels, version, fixed=True), when)
        git(self.root, "init", "--quiet", "-b", "main")
        git(self.root, "config", "user.name", "Lane Keeper")
        git(self.root, "config", "user.email", "keeper@example.org")
        git(self.root, "add", "-A")
        git(self.root, "commit", "--quiet", "-m", "a patchlane project")
        self.origin = tmp / "origin.git"
        git(tmp, "init", "--quiet", "--bare", str(self.origin))
        git(self.root, "remote", "add", "origin", str(self.origin))

    def close(self) -> None:
        self.server.__exit__(None, None, None)

    def state(self) -> dict:
        """Everything about the user's checkout that auto-drop must leave alone."""
        return {
            "head": git(self.root, "rev-parse", "HEAD"),
            "branch": git(self.root, "symbolic-ref", "HEAD"),
            "status": git(self.root, "status", "--porcelain", "--untracked-files=all"),
            "index": git(self.root, "ls-files", "--stage"),
            "lanes": {p.name: p.read_bytes() for p in (self.root / "lanes").iterdir()},
            "worktrees": git(self.root, "worktree", "list", "--porcelain").count("worktree "),
        }

    def refs(self) -> str:
        return git(self.root, "for-each-ref", "--format=%(refname) %(objectname)")

    def show(self, path: str, ref: str = autodrop.BRANCH_PREFIX + "toylib_add") -> str:
        return git(self.root, "show", f"{ref}:{path}") + "\n"


@pytest.fixture
def drop_project(tmp_path):
    made = DropProject(tmp_path)
    yield made
    made.close()


def _lock_version(text: str, name: str) -> str:
    return next(p["version"] for p in tomllib.loads(text)["packages"] if p["name"] == name)


@pytest.mark.slow
def test_drop_makes_one_commit_on_a_branch_and_leaves_the_checkout_alone(drop_project, tmp_path):
    before = drop_project.state()
    steps = []
    [outcome] = autodrop.apply(
        drop_project.root,
        [PLAN],
        ApplyOptions(open_prs=False),
        on_step=lambda s, step: steps.append(step),
    )
    assert outcome.status == "proposed", outcome.reason
    assert steps == ["worktree", "shim-removed", "lanes-edited", "locked", "committed"]
    # same HEAD, branch, index, files; no worktree left
    assert drop_project.state() == before
    branch = outcome.branch
    assert branch == "patchlane/retire-toylib_add"
    assert git(drop_project.root, "rev-list", "--count", f"main..{branch}") == "1"
    assert git(drop_project.root, "rev-parse", f"{branch}^") == before["head"]

    changed = dict(
        line.split("\t", 1)[::-1]
        for line in git(drop_project.root, "diff", "--name-status", "main", branch).splitlines()
    )
    # the patch goes; the manifest gains [guard] and the reproducer stays: a guard
    assert {p for p, s in changed.items() if s == "D"} == {"shims/toylib_add/patch.py"}
    assert {p for p, s in changed.items() if s == "M"} == {
        "shims/toylib_add/manifest.toml",
        "lanes/cpu.toml",
        "lanes/pinned.toml",
        "lanes/viaapp.toml",
        "locks/cpu/pylock.toml",
        "locks/pinned/pylock.toml",
        "locks/viaapp/pylock.toml",
    }

    # Lane files: only the touched items changed; every comment line is byte-identical.
    cpu_before = (drop_project.root / "lanes" / "cpu.toml").read_text()
    expected = cpu_before.replace('"toylib>=1.0",', '"toylib>=1.6",').replace(
        '    "toylib_add",\n', ""
    )
    assert drop_project.show("lanes/cpu.toml") == expected
    pinned = drop_project.show("lanes/pinned.toml")
    assert (
        'requirements = ["toylib==1.6"]  # pinned below the floor' in pinned
        and "shims = []" in pinned
    )
    viaapp = drop_project.show("lanes/viaapp.toml")
    assert (
        viaapp.startswith("# toylib only comes in through app.\n")
        and 'constraints = ["toylib>=1.6"]' in viaapp
    )

    # Locks re-made by uv: valid PEP 751, toylib at or above the floor, provenance of the new lane.
    shown = tmp_path / "shown" / "lanes"
    shown.mkdir(parents=True)
    for lane, old, new in [
        ("cpu", "1.5", "1.7"),
        ("pinned", "1.0", "1.6"),
        ("viaapp", "1.5", "1.7"),
    ]:
        text = drop_project.show(f"locks/{lane}/pylock.toml")
        Pylock.from_dict(tomllib.loads(text))
        assert _lock_version(text, "toylib") == new
        assert (
            _lock_version(
                (drop_project.root / "locks" / lane / "pylock.toml").read_text(), "toylib"
            )
            == old
        )
        (shown / f"{lane}.toml").write_text(drop_project.show(f"lanes/{lane}.toml"))
        [edited] = lanefile.load_lanes(shown)
        # `lock --check` is green
        assert tomllib.loads(text)["tool"]["patchlane"]["digest"] == edited.digest
        (shown / f"{lane}.toml").unlink()
    assert set(outcome.locks_remade) == {"cpu", "pinned", "viaapp"}

    message = git(drop_project.root, "log", "-1", "--format=%B", branch)
    assert message.startswith("Retire shim toylib_add: toylib 1.6 fixed add()")
    assert "https://example.org/toylib/pull/2" in message and "Floors: toylib>=1.6" in message
    assert "Bisection: toylib 1.6 is the first fixed release" in message
    assert git(drop_project.root, "log", "-1", "--format=%an", branch) == "Lane Keeper"

    body = Path(outcome.pr_body_path).read_text()
    assert (
        Path(outcome.pr_body_path)
        == drop_project.root / ".patchlane/prs/patchlane/retire-toylib_add.md"
    )
    assert "BUG_REPRODUCED" in body and "cpu: toylib 1.5 → 1.7" in body and "never merges" in body

    # Twice: nothing new.
    refs = drop_project.refs()
    [again] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(open_prs=False))
    assert again.status == "already-proposed" and again.commit == outcome.commit
    assert drop_project.refs() == refs and drop_project.state() == before


@pytest.mark.slow
def test_same_tree_with_other_evidence_is_already_proposed(drop_project):
    [_first] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(open_prs=False))
    other = DropPlan(PLAN.shim_id, "a different explanation", PLAN.floors, "new evidence")
    refs = drop_project.refs()
    [again] = autodrop.apply(drop_project.root, [other], ApplyOptions(base="main", open_prs=False))
    assert again.status == "already-proposed" and drop_project.refs() == refs
    [higher] = autodrop.apply(
        drop_project.root,
        [DropPlan(PLAN.shim_id, "x", (Floor.parse("toylib>=1.7"),))],
        ApplyOptions(open_prs=False),
    )
    # never overwritten
    assert higher.status == "exists-differs" and drop_project.refs() == refs


@pytest.mark.slow
def test_an_exception_midway_leaves_no_worktree_and_no_half_edited_lane(drop_project):
    before = drop_project.state()

    def boom(shim, step):
        if step == "lanes-edited":
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        autodrop.apply(drop_project.root, [PLAN], ApplyOptions(open_prs=False), on_step=boom)
    assert drop_project.state() == before
    assert not list((drop_project.root / ".patchlane" / "worktrees").iterdir())
    assert "retire" not in drop_project.refs()


@pytest.mark.slow
def test_a_killed_run_is_cleaned_up_by_the_next(drop_project):
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from retire.branches import autodrop
        from retire.branches.options import ApplyOptions
        from tests.test_autodrop import PLAN
        def die(shim, step):
            if step == "lanes-edited":
                os.kill(os.getpid(), signal.SIGKILL)  # no finally runs
        no_prs = ApplyOptions(open_prs=False)
        autodrop.apply({str(drop_project.root)!r}, [PLAN], no_prs, on_step=die)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ)
    )
    assert proc.returncode == -9, proc.stderr
    leftovers = list((drop_project.root / ".patchlane" / "worktrees").iterdir())
    assert leftovers and "retire-toylib_add" in git(drop_project.root, "worktree", "list")
    assert "retire" not in drop_project.refs()
    [outcome] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(open_prs=False))
    assert outcome.status == "proposed"
    assert git(drop_project.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list((drop_project.root / ".patchlane" / "worktrees").iterdir())


@pytest.mark.slow
def test_a_lane_that_cannot_be_relocked_aborts_cleanly(tmp_path):
    # app requires toylib<1.6: the floor cannot hold
    drop_project = DropProject(tmp_path, app_pins_old=True)
    try:
        before = drop_project.state()
        [outcome] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(open_prs=False))
        assert (
            outcome.status == "aborted"
            and "re-locking failed" in outcome.reason
            and "viaapp" in outcome.reason
        )
        assert "retire" not in drop_project.refs() and drop_project.state() == before
        assert not (drop_project.root / ".patchlane" / "prs").exists()
    finally:
        drop_project.close()


@pytest.mark.slow
def test_unknown_shim_aborts(drop_project):
    [outcome] = autodrop.apply(
        drop_project.root, [DropPlan("no_such_shim", "x", ())], ApplyOptions(open_prs=False)
    )
    assert outcome.status == "aborted" and "does not exist" in outcome.reason


@pytest.mark.slow
def test_bisect_then_drop_end_to_end(drop_project):
    """The flagship flow: bisect the shim's target on the lane's index, then propose the drop."""
    from retire import bisect
    from shims.manifest import load_manifest

    manifest = load_manifest(drop_project.root / "shims" / "toylib_add" / "manifest.toml")
    versions, yanked = bisect.list_releases(drop_project.server.url, "toylib")
    result = bisect.bisect(
        manifest,
        versions,
        bisect.BisectJob(
            manifest.id,
            yanked=frozenset(yanked),
            index=drop_project.server.url,
            cache=drop_project.root / ".patchlane" / "cache" / "bisect",
        ),
    )
    assert result.status == "found" and str(result.floor) == "toylib>=1.6"
    plan = autodrop.plan_from_bisect(result, manifest)
    assert (
        plan.floor_versions == {"toylib": "1.6"}
        and ("fix", "https://example.org/toylib/pull/2") in plan.upstream_links
    )
    [outcome] = autodrop.apply(drop_project.root, [plan], ApplyOptions(open_prs=False))
    assert outcome.status == "proposed", outcome.reason
    body = Path(outcome.pr_body_path).read_text()
    assert "| 1.5 | broken | bug-reproduced |" in body and "| 1.6 | fixed | fix-validated |" in body
    # reproducer output before / after
    assert "BUG_REPRODUCED" in body and "FIX_VALIDATED" in body
    assert 'requirements = ["toylib==1.6"]' in drop_project.show("lanes/pinned.toml")
    # A Verdict's floors ("dist>=version" strings) map straight onto a plan.
    assert DropPlan("toylib_add", "x", (Floor.parse("toylib>=1.6"),)).floor_versions == {
        "toylib": "1.6"
    }


# ---------------------------------------------------------------------------------------------
# The floor rule


@pytest.mark.parametrize(
    "before, floor, after",
    [
        # a pin that satisfies stays
        ("megatron-core==0.16.1", "0.16", "megatron-core==0.16.1"),
        ("megatron-core>=0.15", "0.18", "megatron-core>=0.18"),
        # a pin below is raised, still a pin
        ("megatron-core==0.15.0", "0.18", "megatron-core==0.18"),
        ("megatron-core", "0.18", "megatron-core>=0.18"),
        ("megatron-core>=0.19", "0.18", "megatron-core>=0.19"),
        ("megatron-core>=0.15,<0.20", "0.18", "megatron-core>=0.18,<0.20"),
        ("megatron-core~=0.15", "0.18", "megatron-core>=0.18,<1"),
        (
            "transformer-engine[pytorch]>=2.8; sys_platform == 'linux'",
            "2.10",
            'transformer-engine[pytorch]>=2.10; sys_platform == "linux"',
        ),
        ("megatron-core==0.18.*", "0.18.2", "megatron-core>=0.18.2,==0.18.*"),
    ],
)
def test_floor_rule(before, floor, after):
    assert raise_floor(before, floor) == after


@pytest.mark.parametrize(
    "requirement",
    [
        "megatron-core<0.17",
        "megatron-core!=0.18",
        "megatron-core==0.15.*",
        "megatron-core @ https://example.org/m.whl",
    ],
)
def test_floor_conflicts_need_a_human(requirement):
    with pytest.raises(FloorConflictError):
        raise_floor(requirement, "0.18")


MATRIX = """\
# Which torch × Transformer Engine pairs the patch lane is proven on.
[matrix]
name = "torch{torch}-te{te}"

[matrix.base]
python = "3.12"
platform = "x86_64-manylinux_2_28"
requirements = ["liger-kernel==0.8.5", "megatron-core==0.16.1"]
shims = ["liger_flce_reduction_none", "sparse_mla_fp8_dispatch", "hopper_flce_dispatcher"]

[matrix.axes.torch."2.10"]
requirements = ["torch==2.10.0"]

[matrix.axes.te."2.19"]
requirements = ["transformer-engine[pytorch]==2.19.0"]
static-metadata = [{ name = "transformer-engine-torch", version = "2.19.0", requires-dist = [
    "torch>=2.1", "megatron-core>=0.1",  # static metadata is not a requirement: never touched
] }]

# TE 2.20 is only shipped with torch 2.11.
[[matrix.exclude]]
torch = "2.10"
te = "2.20"
"""


def test_matrix_edit_keeps_everything_else():
    text = MATRIX
    new, changes = edit_lane_text(text, "hopper_flce_dispatcher", {"megatron-core": "0.18.0"})
    assert '"megatron-core==0.18.0"' in new and '"hopper_flce_dispatcher"' not in new
    assert len(changes) == 2
    old_lines, new_lines = text.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    assert [line for line in old_lines if line.lstrip().startswith("#")] == [
        line for line in new_lines if line.lstrip().startswith("#")
    ]
    assert sum(a != b for a, b in zip(old_lines, new_lines, strict=True)) == 2


# ---------------------------------------------------------------------------------------------
# Pull requests against a loopback code host


class CodeHost:
    """A small GitHub REST stand-in: list and create pulls; records every request."""

    def __init__(self) -> None:
        self.pulls: list[dict] = []
        self.requests: list[tuple[str, str, dict]] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                host.requests.append(("GET", self.path, dict(self.headers)))
                if self.path.startswith("/repos/acme/project/pulls?"):
                    head = (
                        self.path.split("head=", 1)[1]
                        .split("&")[0]
                        .replace("%3A", ":")
                        .replace("%2F", "/")
                    )
                    return self._reply(200, [p for p in host.pulls if f"acme:{p['head']}" == head])
                return self._reply(404, {"message": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                host.requests.append(("POST", self.path, dict(self.headers)))
                if self.path == "/repos/acme/project/pulls":
                    if self.headers.get("Authorization") != "Bearer s3cret-token-value":
                        return self._reply(401, {"message": "Bad credentials"})
                    pull = {
                        **body,
                        "number": len(host.pulls) + 1,
                        "html_url": "http://codehost.invalid/acme/project/pull/"
                        f"{len(host.pulls) + 1}",
                    }
                    host.pulls.append(pull)
                    return self._reply(201, pull)
                return self._reply(404, {"message": "Not Found"})

            def do_PUT(self):
                host.requests.append(("PUT", self.path, dict(self.headers)))
                return self._reply(405, {"message": "patchlane must never merge"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def codehost():
    host = CodeHost()
    yield host
    host.close()


@pytest.mark.slow
def test_pr_is_opened_once_and_never_merged(drop_project, codehost, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "s3cret-token-value")
    options = {"repository": "acme/project", "api_base": codehost.url}
    [outcome] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(**options))
    assert outcome.status == "proposed" and outcome.pr_status.state == PrState.OPENED, outcome
    assert outcome.pr_url.endswith("/pull/1")
    [pull] = codehost.pulls
    assert pull["head"] == "patchlane/retire-toylib_add" and pull["base"] == "main"
    assert "### Evidence" in pull["body"] and "toylib>=1.6" in pull["title"]
    # The branch was pushed (never forced) to the remote the PR is opened from.
    assert (
        git(drop_project.origin, "rev-parse", "refs/heads/patchlane/retire-toylib_add")
        == outcome.commit
    )

    [again] = autodrop.apply(drop_project.root, [PLAN], ApplyOptions(**options))
    assert (
        again.status == "already-proposed"
        and again.pr_status.state == PrState.EXISTS
        and len(codehost.pulls) == 1
    )
    assert [m for m, _, _ in codehost.requests].count("POST") == 1
    assert not any(m == "PUT" or "merge" in path for m, path, _ in codehost.requests)
    assert "s3cret-token-value" not in repr(outcome) + repr(again)


@pytest.mark.slow
def test_pr_failures_are_reported_without_the_token(drop_project, codehost, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "wrong-token-value")
    [outcome] = autodrop.apply(
        drop_project.root, [PLAN], ApplyOptions(repository="acme/project", api_base=codehost.url)
    )
    assert outcome.status == "proposed" and str(outcome.pr_status).startswith(
        "failed: opening the pull request: HTTP 401"
    )
    assert "wrong-token-value" not in str(outcome.pr_status)
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.delenv("GH_TOKEN", raising=False)
    [again] = autodrop.apply(
        drop_project.root, [PLAN], ApplyOptions(repository="acme/project", api_base=codehost.url)
    )
    assert again.pr_status.state == PrState.SKIPPED
    assert str(again.pr_status).startswith("skipped: no GITHUB_TOKEN")
    dead = CodeHost()
    dead.close()
    monkeypatch.setenv("GITHUB_TOKEN", "s3cret-token-value")
    [down] = autodrop.apply(
        drop_project.root, [PLAN], ApplyOptions(repository="acme/project", api_base=dead.url)
    )
    assert down.status == "already-proposed" and str(down.pr_status).startswith(
        "failed: the code host is unreachable"
    )


@pytest.mark.slow
def test_cli_takes_plans_as_json(drop_project, tmp_path, capsys):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps(
            {
                "shim_id": "toylib_add",
                "why": "fixed in 1.6",
                "floors": ["toylib>=1.6"],
                "upstream_links": [["fix", "https://example.org/toylib/pull/2"]],
            }
        )
    )
    args = ["--root", str(drop_project.root), "--plan", str(plan_file), "--no-pr", "--json"]
    assert cli(["retire", "--apply", *args]) == 0
    # one document: {"ok", "proposals"} (docs/commands.md)
    document = json.loads(capsys.readouterr().out)
    [row] = document["proposals"]
    assert (
        document["ok"]
        and row["status"] == "proposed"
        and row["branch"] == "patchlane/retire-toylib_add"
    )
    # the pull request's status is the one string it always was (retire.branches.prstatus)
    assert row["pr_status"] == "not-requested" and row["pr_url"] is None
    assert cli(["retire", "--apply", *args]) == 0
    assert json.loads(capsys.readouterr().out)["proposals"][0]["status"] == "already-proposed"
    plan_file.write_text(json.dumps({"shim_id": "../etc", "why": "x"}))
    assert cli(["retire", "--apply", *args]) == 2
    assert "invalid shim id" in capsys.readouterr().err
