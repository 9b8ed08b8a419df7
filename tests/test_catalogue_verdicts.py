"""`patchlane verdicts` on a copy of the committed catalogue, as an air-gapped cluster sees it: the
code host unreachable, a loopback index, and git mirrors built here for every upstream repository
the catalogue's retirement conditions name (in each repository's declared tag style).

What must hold: every shim whose evidence is decisive gets a decision. An *unknown* may only be
waiting for a reproducer run (execution is the one evidence a host cannot fetch); never for the
code host, a mirror or the index. A shim whose bug reproduces without it on the newest locked
release is *keep*. The code host's failures are shown as flags, not hidden.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from retire.commands import main as cli
from retire.core.project import Project
from retire.evidence.validation import load
from retire.lanes.lanefile import project_lanes
from retire.locks.locking import lock_path, read_lock
from retire.mirrors.config import project_mirrors, repository_key
from tests.support.faults import unused_port
from tests.support.gitrepos import commit, git
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

REPO = Path(__file__).resolve().parents[1]

# real git mirrors of the catalogue's upstreams and a full verdicts run
pytestmark = pytest.mark.slow


def committed_copy(root: Path) -> Project:
    for folder in ("shims", "lanes", "locks", "validation"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "patchlane.toml", root / "patchlane.toml")
    return Project(root)


def locked_versions(project: Project) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for lane in project_lanes(project):
        lock = read_lock(lock_path(project.locks_dir, lane.name)) or {}
        for package in lock.get("packages", []):
            # a branch build from a mirror ([lane.revisions]), not a release
            if "vcs" in package:
                continue
            found.setdefault(canonicalize_name(package["name"]), set()).add(str(package["version"]))
    return found


def release_tag(mirror, version: str) -> str:
    """The tag the upstream would give ``version``, in the style its mirror declares."""
    for candidate in (f"v{version}", f"core_v{version}", version):
        if mirror.tag_version(candidate) == version:
            return candidate
    raise AssertionError(f"no tag style of {mirror.repository} maps to {version}")


@pytest.fixture
def air_gapped(tmp_path):
    project = committed_copy(tmp_path / "shop")
    manifests = project.manifests()
    locked = locked_versions(project)
    mirrors = project_mirrors(project, tmp_path / "mirrors")
    # Every pull request a condition names lands (squash) and is released in the newest locked
    # version.
    landed: dict[str, list[tuple[int, str]]] = {}
    for manifest in manifests.values():
        for condition in manifest.retirement.conditions:
            if condition.kind == "pr-released":
                repository, number = condition.url.split("/pull/")
                dist = canonicalize_name(condition.distribution)
                newest = max(locked.get(dist, {"1.0"}), key=Version)
                landed.setdefault(repository, []).append((int(number), newest))
    for repository, pulls in landed.items():
        mirror = mirrors.for_repository(repository)
        assert mirror is not None, f"patchlane.toml declares no mirror of {repository}"
        work = tmp_path / "upstream" / "/".join(repository_key(repository))
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", "main")
        commit(work, "README", "0\n", "Initial import")
        for number, version in sorted(pulls):
            commit(work, f"fix{number}.py", "fixed\n", f"Fix the bug (#{number})")
            git(work, "tag", release_tag(mirror, version))
        mirror.path.parent.mkdir(parents=True, exist_ok=True)
        git(mirror.path.parent, "clone", "-q", "--mirror", str(work), str(mirror.path))
    # The index: every version the locks and the records name, for every distribution a condition
    # reads.
    index = PackageIndex()
    wanted = {
        canonicalize_name(c.distribution)
        for m in manifests.values()
        for c in m.retirement.conditions
        if c.kind in ("version-floor", "pr-released")
    }
    recorded = {
        (canonicalize_name(d), v)
        for r in load(project.validation)
        for d, v in r.versions.items()
        if v
    }
    for dist in sorted(wanted):
        versions = locked.get(dist, set()) | {v for d, v in recorded if d == dist}
        for day, version in enumerate(sorted(versions, key=Version), start=1):
            index.add(
                build_wheel(tmp_path / "wheels", dist, version), f"2026-{(day % 12) + 1:02d}-01"
            )
    with IndexServer(index) as server:
        yield project, server.url, tmp_path / "mirrors"


def test_every_shim_with_decisive_evidence_gets_a_decision_without_the_code_host(
    air_gapped, capsys, monkeypatch
):
    project, index_url, mirrors = air_gapped
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("UV_INDEX", f"pytorch-nightly={index_url}")
    dead = f"http://127.0.0.1:{unused_port()}"
    code = cli(
        [
            "verdicts",
            "--root",
            str(project.root),
            "--json",
            "--no-cache",
            "--api-url",
            dead,
            "--index-url",
            index_url,
            "--mirrors",
            str(mirrors),
        ]
    )
    assert code == 0
    verdicts = {v["shim"]: v for v in json.loads(capsys.readouterr().out)}
    assert set(verdicts) == set(project.manifests())

    for shim, verdict in verdicts.items():
        # only a missing reproducer run may leave a shim undecided
        if verdict["verdict"] == "unknown":
            assert verdict["action"] and verdict["action"].startswith("run the reproducer"), (
                shim,
                verdict["why"],
            )
            assert "code host" not in verdict["why"] and "mirror" not in verdict["why"], (
                shim,
                verdict["why"],
            )
        # mirrors answered every pull request
        for condition in verdict["conditions"]:
            if condition["kind"] == "pr-released":
                assert (
                    condition["state"] in ("holds", "fails") and "landed as" in condition["why"]
                ), (shim, condition)

    # Execution decides: a bug reproduced without the shim on the newest locked release is keep.
    locked = locked_versions(project)
    for shim, manifest in project.manifests().items():
        dist = canonicalize_name(manifest.target.distribution)
        runs = [
            r
            for r in load(project.validation)
            if r.shim == shim
            and r.mode == "without"
            and r.outcome in ("bug-reproduced", "fix-validated", "memory-save-verified")
        ]
        versioned = [
            (Version(r.versions[d]), r.outcome)
            for r in runs
            for d in r.versions
            if canonicalize_name(d) == dist and r.versions[d]
        ]
        if not versioned or not locked.get(dist):
            continue
        top = max(v for v, _ in versioned)
        if top >= max(map(Version, locked[dist])) and any(
            o == "bug-reproduced" for v, o in versioned if v == top
        ):
            assert verdicts[shim]["verdict"] == "keep", (shim, verdicts[shim]["why"])

    # The code host's failures are flags, never hidden and never decisive.
    linked = [s for s, m in project.manifests().items() if m.upstream.links]
    for shim in linked:
        texts = " ".join(f["text"] for f in verdicts[shim]["flags"] if f["kind"] == "probe-failed")
        assert "connection refused" in texts or "connect" in texts, (shim, verdicts[shim]["flags"])


def test_a_bug_reproduced_on_the_newest_dev_commit_keeps_a_shim_no_release_carries(
    tmp_path, capsys, monkeypatch
):
    """hopper_flce_dispatcher patches a file that is in no megatron-core release (its reproducer
    skips there) and reproduced on an H100 with megatron-core built from Megatron-LM's dev branch.
    Where the mirror's dev branch ends at that commit and the fix PR has landed nowhere, the
    verdict is keep — from the run, with the code host unreachable."""
    project = committed_copy(tmp_path / "shop")
    mirror = project_mirrors(project, tmp_path / "mirrors").for_repository(
        "https://github.com/NVIDIA/Megatron-LM"
    )
    work = tmp_path / "upstream" / "Megatron-LM"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    commit(work, "README", "0\n", "Initial import (#1)")
    git(work, "tag", "core_v0.19.2")
    git(work, "checkout", "-q", "-b", "dev")
    tip = commit(
        work,
        "fused_linear_cross_entropy.py",
        "blackwell only\n",
        "[Dev] Feature: linear cross entropy fusion (#2256)",
    )
    mirror.path.parent.mkdir(parents=True, exist_ok=True)
    git(mirror.path.parent, "clone", "-q", "--mirror", str(work), str(mirror.path))
    # The committed dev-branch records, as if that commit were the one they were built from.
    lines = project.validation.read_text(encoding="utf-8").splitlines()
    # in the version label, and in the host stamp's revisions
    dev = "d48bd6be0a85cc0d6d3cc71e8750cf357cc6bdb1"
    rewritten = [
        line.replace("0.19.0+d48bd6b", f"0.19.0+{tip[:7]}").replace(dev, tip)
        if '"megatron-dev"' in line
        else line
        for line in lines
    ]
    assert rewritten != lines
    project.validation.write_text("\n".join(rewritten) + "\n", encoding="utf-8")
    index = PackageIndex()
    index.add(build_wheel(tmp_path / "wheels", "megatron-core", "0.19.2"), "2026-08-19")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    with IndexServer(index) as server:
        monkeypatch.setenv("UV_INDEX", f"pytorch-nightly={server.url}")
        code = cli(
            [
                "verdicts",
                "hopper_flce_dispatcher",
                "--root",
                str(project.root),
                "--json",
                "--no-cache",
                "--api-url",
                f"http://127.0.0.1:{unused_port()}",
                "--index-url",
                server.url,
                "--mirrors",
                str(tmp_path / "mirrors"),
            ]
        )
    assert code == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "keep", verdict["why"]
    assert f"built from {tip[:10]}: the newest commit of dev" in verdict["why"]
    # Once dev moves on past the tested commit, the run no longer speaks for dev's newest code.
    commit(work, "other.py", "1\n", "Unrelated (#9999)")
    git(mirror.path, "fetch", "-q", str(work), "+refs/heads/*:refs/heads/*")
    with IndexServer(index) as server:
        cli(
            [
                "verdicts",
                "hopper_flce_dispatcher",
                "--root",
                str(project.root),
                "--json",
                "--no-cache",
                "--api-url",
                f"http://127.0.0.1:{unused_port()}",
                "--index-url",
                server.url,
                "--mirrors",
                str(tmp_path / "mirrors"),
            ]
        )
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "unknown" and verdict["action"], verdict["why"]
