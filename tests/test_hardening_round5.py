"""Hardening, fifth round (issue 35): the regression loop, leases and evidence files under faults
and hostile input. Real git, real file systems (a tmpfs for a full disk, RLIMIT_FSIZE for a write
that fails midway), real signals; one section per class of the issue."""

from __future__ import annotations

import json
import os
import stat

import pytest

from retire.core.git import Git, GitError, revision
from retire.mirrors.config import Mirror
from retire.mirrors.history import build_obstacle, commits_between, release_tag
from retire.mirrors.repo import MirrorRepo, open_mirror
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.support.historyrepo import make_window_repo
from tests.test_shim_new_values import fill, small_disk  # noqa: F401  (a fixture: a full disk)

UPSTREAM = "https://git.example/acme/toylib"
#: A release-tag pattern a shop may well write: anything ending in vX.Y.
PERMISSIVE = r".*v(?P<version>\d+(?:\.\d+)*)"


# ---------------------------------------------------------------------------------------------
# Class 2: option injection into git


def test_a_revision_that_looks_like_an_option_is_refused_where_git_would_read_one():
    assert revision("v1.0") == "v1.0" and revision("refs/tags/--x") == "refs/tags/--x"
    for text in ("--output=/tmp/x", "-p", "", "a\nb", "a\0b"):
        with pytest.raises(GitError) as caught:
            revision(text)
        assert "\n" not in str(caught.value)


def test_a_mirror_tag_named_like_an_option_is_a_tag_and_never_writes_a_file(tmp_path):
    """A tag `--output=DIR/x-v1.2`, a release under a permissive pattern. Before: `git log`
    read it as --output and wrote DIR/x-v1.2^{commit}..v1.3^{commit}. Now: the range is read
    as the range it names, and nothing is written."""
    repo = make_window_repo(tmp_path / "upstream")
    out = tmp_path / "out"
    out.mkdir()
    hostile = f"--output={out}/x-v1.2"
    git(repo.path, "update-ref", f"refs/tags/{hostile}", repo.tags["1.2"])
    git(repo.path, "tag", "-d", "v1.2")
    folder = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder, tags=PERMISSIVE))
    assert isinstance(mirror, MirrorRepo)
    assert release_tag(mirror, "1.2") == hostile
    commits = commits_between(mirror, hostile, "v1.3")
    assert [c.sha for c in commits][-1] == repo.tags["1.3"] and len(commits) == 5
    assert repo.introduced in {c.sha for c in commits}
    assert build_obstacle(mirror, hostile) is None
    # the mirror's other reads take it as a tag too
    contained = mirror.probe_commit(repo.tags["1.0"])
    assert hostile in contained.release_tags
    ancestry = mirror.probe_ancestry(repo.introduced)
    assert ancestry.contains == (hostile, "1.2")
    assert list(out.iterdir()) == []


def _project_in_git(root) -> None:
    """A project with a lane, its (hand-written) lock and a shim, committed."""
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "cpu.toml").write_text(
        '[lane]\npython = "3.11"\nrequirements = ["toylib"]\nshims = ["toy"]\n'
    )
    (root / "locks" / "cpu").mkdir(parents=True)
    (root / "locks" / "cpu" / "pylock.toml").write_text('lock-version = "1.0"\n')
    shimtree.write_shim(root / "shims", "toy")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a shop")


def test_culprit_since_an_option_never_makes_git_show_write(tmp_path, capsys):
    """`culprit --since=--output=DIR/x` (whose `git show DIR/x:locks/cpu/pylock.toml` had a
    folder to write into). Before: git show wrote the file. Now: one line naming --since, exit 2,
    nothing written."""
    root = tmp_path / "shop"
    _project_in_git(root)
    out = tmp_path / "out"
    (out / "x:locks" / "cpu").mkdir(parents=True)
    code, _out, err = run_cli(
        root, "culprit", "cpu", "toy", f"--since=--output={out}/x", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1 and "--since" in err, err
    assert "Traceback" not in err
    assert list((out / "x:locks" / "cpu").iterdir()) == []


def test_a_branch_named_like_an_option_is_read_as_a_branch(tmp_path):
    """A branch `--foo` (git branch refuses the name; a fetch or update-ref makes it): `culprit
    --since=--foo` reads the lock it holds, and a mirror follows it like any branch."""
    from retire.branches import breaks
    from retire.core.project import Project

    root = tmp_path / "shop"
    _project_in_git(root)
    git(root, "update-ref", "refs/heads/--foo", "HEAD")
    (root / "locks" / "cpu" / "pylock.toml").write_text('lock-version = "1.0"\n# moved\n')
    git(root, "commit", "-q", "-am", "a move")
    text, rev = breaks.old_lock_at(Project(root), "cpu", "--foo")
    assert (text, rev) == (b'lock-version = "1.0"\n', "--foo")
    assert Git(root).rev_parse("--foo") == git(root, "rev-parse", "HEAD~1")
    assert Git(root).is_ancestor("--foo", "HEAD")

    repo = make_window_repo(tmp_path / "upstream")
    git(repo.path, "update-ref", "refs/heads/--foo", repo.tags["1.4"])
    folder = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder, branches=("--foo",)))
    assert isinstance(mirror, MirrorRepo)
    ancestry = mirror.probe_ancestry("--foo")
    assert ancestry.branch == "--foo" and ancestry.contains == ("v1.4", "1.4")
    assert mirror.probe_tip(repo.tags["1.4"]).branches == ("--foo",)


# ---------------------------------------------------------------------------------------------
# Class 3: GPU leases


def _planted(tmp_path):
    """A lease folder anyone may write (as a shared one is), where another user planted
    ``gpu-0.lock`` as a link to a file of this user's that does not exist yet."""
    folder = tmp_path / "leases"
    folder.mkdir()
    folder.chmod(0o1777)
    target = tmp_path / "victim" / "made-by-the-lease"
    target.parent.mkdir()
    (folder / "gpu-0.lock").symlink_to(target)
    return folder, target


def test_a_planted_lease_link_is_refused_and_its_target_never_created(tmp_path):
    from retire.runs.gpus import Gpu
    from retire.runs.packing import GpuPool, LeaseError
    from shims.gpuneeds import GpuNeeds

    folder, target = _planted(tmp_path)
    pool = GpuPool((Gpu("0"), Gpu("1")), folder)
    with pytest.raises(LeaseError) as caught, pool.hold(GpuNeeds(1)):
        pass
    line = str(caught.value)
    assert "gpu-0.lock: is a symbolic link" in line and "\n" not in line
    assert not target.exists() and not target.is_symlink()
    # once the link is gone, a lease made here is made new: this user's, 0600
    (folder / "gpu-0.lock").unlink()
    with pool.hold(GpuNeeds(2)) as given:
        assert [gpu.id for gpu in given] == ["0", "1"]
    made = (folder / "gpu-0.lock").stat()
    assert stat.S_IMODE(made.st_mode) == 0o600 and made.st_uid == os.geteuid()


def test_a_lease_file_of_another_user_or_writable_by_others_is_refused(tmp_path):
    from retire.runs.packing import LeaseError, lease_file

    folder = tmp_path / "leases"
    folder.mkdir()
    loose = folder / "gpu-1.lock"
    loose.write_text("")
    loose.chmod(0o666)
    with pytest.raises(LeaseError, match="may be written by others"):
        lease_file(loose)
    if os.geteuid() == 0:
        theirs = folder / "gpu-2.lock"
        theirs.write_text("")
        theirs.chmod(0o600)
        os.chown(theirs, 12345, 12345)
        with pytest.raises(LeaseError, match="belongs to user 12345"):
            lease_file(theirs)
    (folder / "gpu-3.lock").mkdir()
    with pytest.raises(LeaseError, match=r"gpu-3\.lock"):
        lease_file(folder / "gpu-3.lock")


GPU_LANE = """
[lane]
python = "3.11"
requirements = ["helper==1.0"]
shims = ["sees"]
needs-cuda = true

[lane.indexes.main]
url = "@MAIN@"
default = true
"""


def test_run_stops_at_a_planted_lease_in_one_line(project, tmp_path, capsys, monkeypatch):
    folder, target = _planted(tmp_path)
    monkeypatch.setenv("PATCHLANE_GPUS", "1")
    monkeypatch.setenv("PATCHLANE_GPU_LOCKS", str(folder))
    shimtree.write_shim(project.root / "shims", "sees")
    project.write("gpu", GPU_LANE)
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(project.root, "run", "gpu", capsys=capsys)
    assert code == 1 and "Traceback" not in out + err
    assert err.count("\n") == 1 and "gpu-0.lock: is a symbolic link" in err, err
    assert not target.exists()


@pytest.mark.parametrize(
    ("declared", "visible", "given"),
    [
        ("none", "0,1", []),
        ("0", "0,1", []),
        ("1", "0,1,2", ["0"]),
        ("2", "4,5,6", ["4", "5"]),
        ("h100,h100", "0", ["0"]),
        ("3=h100", "0,1,2", []),
        ("h100:9.0:80,h100:9.0:80", "2,3", ["2", "3"]),
    ],
)
def test_patchlane_gpus_is_a_ceiling_and_a_filter_of_the_visible_set(
    declared, visible, given, monkeypatch
):
    """Before: `none` under CUDA_VISIBLE_DEVICES=0,1 handed out both GPUs, `1` under three visible
    handed out three. Now never a GPU more than PATCHLANE_GPUS declares, nor one it does not
    name."""
    from retire.runs import lanerun
    from retire.runs.gpus import discover

    found = discover({"PATCHLANE_GPUS": declared, "CUDA_VISIBLE_DEVICES": visible})
    assert [gpu.id for gpu in found.gpus] == given
    monkeypatch.setenv("PATCHLANE_GPUS", declared)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.delenv("PATCHLANE_HOST_CUDA", raising=False)
    host = lanerun.Host.detect()
    assert [gpu.id for gpu in host.gpus] == given and host.cuda == bool(given)


# ---------------------------------------------------------------------------------------------
# Class 4: guards never lose or invent files

CPU_LANE = '[lane]\npython = "3.11"\nrequirements = ["toylib"]\nshims = []\n'


def _guarded(tmp_path, *, patch_as_folder: bool = False):
    """A project in git whose shim toy retired into a guard of lane cpu by
    :func:`retire.branches.guards.leave_guard` (the retirement's own step): patch.py was in the
    patch commit — a folder there with ``patch_as_folder`` — and is gone since."""
    import datetime as dt

    from retire.branches.guards import leave_guard

    root = tmp_path / "shop"
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "cpu.toml").write_text(CPU_LANE.replace("[]", '["toy"]'))
    folder = shimtree.write_shim(root / "shims", "toy")
    if patch_as_folder:
        (folder / "patch.py").unlink()
        (folder / "patch.py").mkdir()
        (folder / "patch.py" / "__init__.py").write_text("# a package here\n")
    manifest = (folder / "manifest.toml").read_text()
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a shop")
    patch_commit = git(root, "rev-parse", "HEAD")
    (root / "lanes" / "cpu.toml").write_text(CPU_LANE)
    if patch_as_folder:
        import shutil

        shutil.rmtree(folder / "patch.py")
    leave_guard(
        folder,
        reason="fixed",
        patch_commit=patch_commit,
        lanes=["cpu"],
        retired=dt.date(2026, 11, 1),
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "retire toy")
    return root, folder, manifest


def test_restore_refuses_to_overwrite_a_patch_written_by_hand(tmp_path, capsys):
    """Before: `shim restore` replaced an untracked, hand-written patch.py with the old one."""
    root, folder, _ = _guarded(tmp_path)
    (folder / "patch.py").write_text("# my own work, not committed\n")
    guarded = (folder / "manifest.toml").read_text()
    code, _out, err = run_cli(root, "shim", "restore", "toy", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "shims/toy/patch.py" in err, err
    assert (folder / "patch.py").read_text() == "# my own work, not committed\n"
    assert (folder / "manifest.toml").read_text() == guarded
    assert "shims = []" in (root / "lanes" / "cpu.toml").read_text()
    # committed, then changed: refused too; committed as it is: git keeps it, so restore goes on
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a patch of my own")
    (folder / "patch.py").write_text("# changed since\n")
    code, _out, err = run_cli(root, "shim", "restore", "toy", capsys=capsys)
    assert code == 2 and "shims/toy/patch.py" in err
    git(root, "checkout", "-q", "--", "shims/toy/patch.py")
    assert run_cli(root, "shim", "restore", "toy", capsys=capsys)[0] == 0
    assert "def apply" in (folder / "patch.py").read_text()


def test_restore_of_a_patch_that_was_a_folder_writes_no_listing(tmp_path, capsys):
    """Before: `git show COMMIT:shims/toy/patch.py` of a tree printed its listing, which was
    written as patch.py, and the guard was ended. Now: one line, nothing written."""
    root, folder, _ = _guarded(tmp_path, patch_as_folder=True)
    guarded = (folder / "manifest.toml").read_text()
    code, _out, err = run_cli(root, "shim", "restore", "toy", capsys=capsys)
    assert code == 1 and err.count("\n") == 1, err
    assert "patch.py is a folder there, not a file" in err
    assert not (folder / "patch.py").exists()
    assert (folder / "manifest.toml").read_text() == guarded


def test_restore_puts_the_manifest_back_as_it_was(tmp_path, capsys):
    """Before: the blank line before [guard] stayed at the end of the manifest."""
    root, folder, manifest = _guarded(tmp_path)
    assert run_cli(root, "shim", "restore", "toy", capsys=capsys)[0] == 0
    assert (folder / "manifest.toml").read_text() == manifest
    assert not manifest.endswith("\n\n")


def test_a_second_drop_keeps_the_first_drops_date_and_reason(tmp_path, capsys):
    """Before: a second `shim drop --reason` replaced the first drop's date and reason, and a
    dropped guard still said the reproducer keeps running."""
    import tomllib

    from retire.branches.guards import DROPPED_NOTE, GUARDING_NOTE

    root, folder, _ = _guarded(tmp_path)
    code, _out, err = run_cli(
        root, "shim", "drop", "toy", "--reason", "covered upstream", capsys=capsys
    )
    assert code == 0, err
    first = (folder / "manifest.toml").read_text()
    guard = tomllib.loads(first)["guard"]
    assert guard["status"] == "dropped" and guard["drop-reason"] == "covered upstream"
    assert GUARDING_NOTE not in first and f"# {DROPPED_NOTE}" in first
    code, _out, err = run_cli(root, "shim", "drop", "toy", "--reason", "another", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "dropped already" in err, err
    assert "covered upstream" in err and "shims/toy/manifest.toml" in err
    assert (folder / "manifest.toml").read_text() == first


# ---------------------------------------------------------------------------------------------
# Class 5: damaged evidence files never crash their readers

WHOLE = {
    "lane": "cpu",
    "subject": "toy",
    "mode": "without",
    "status": "found",
    "reason": "",
    "line": "toylib 1.2 breaks toy in lane cpu (1.1 clean)",
    "packages": [{"name": "toylib", "old": "1.0", "new": "1.3"}],
    "last_clean": "1.1",
    "first_broken": "1.2",
    "commit": None,
    "proof": [],
}


def _damaged_culprits(path) -> bytes:
    """A culprits file as a crash, an editor and a bad disk leave it: a line that is not UTF-8,
    one cut short, entries missing a key or with packages of the wrong shape, around two whole
    entries."""
    lines = [
        json.dumps(WHOLE).encode(),
        b'{"lane": "cpu", "subject": "toy", "line": "caf\xe9 \xff"}',
        b'{"lane": "cpu", "subject": "toy", "status": "fo',
        json.dumps({k: v for k, v in WHOLE.items() if k != "line"}).encode(),
        json.dumps({**WHOLE, "packages": None}).encode(),
        json.dumps({**WHOLE, "commit": "abc"}).encode(),
        b"[1, 2]",
        json.dumps({**WHOLE, "line": "the newest"}).encode(),
    ]
    data = b"\n".join(lines) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def test_the_one_reader_skips_each_damaged_line_naming_the_file_and_the_line(tmp_path, capsys):
    from retire.evidence import culprits

    path = tmp_path / "validation" / "culprits.jsonl"
    _damaged_culprits(path)
    found = culprits.load(path)
    assert [c["line"] for c in found] == [WHOLE["line"], "the newest"]
    err = capsys.readouterr().err
    said = err.splitlines()
    assert len(said) == 6, err
    assert all(line.startswith(f"patchlane: warning: {path}: line ") for line in said)
    assert [line.split(": line ")[1].split(":")[0] for line in said] == [
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
    assert "not UTF-8 text" in said[0] and "not valid JSON" in said[1]
    assert "'line' is missing" in said[2] and "'packages'" in said[3] and "'commit'" in said[4]
    # a FIFO or a folder in its place: one line, no culprit, never a block
    path.unlink()
    os.mkfifo(path)
    assert culprits.load(path) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FIFO" in err and str(path) in err
    path.unlink()
    path.mkdir()
    assert culprits.load(path) == []
    assert "directory" in capsys.readouterr().err


def test_recording_a_culprit_keeps_every_line_already_there(tmp_path):
    """Before: `culprit` and `bump` read the file as UTF-8 to append to it and raised
    UnicodeDecodeError after every candidate ran. Now the lines stay, byte for byte."""
    from retire.bisect.culprit import Culprit, CulpritStatus
    from retire.branches import breaks
    from retire.core.project import Project

    root = tmp_path / "shop"
    path = root / "validation" / "culprits.jsonl"
    data = _damaged_culprits(path)
    path.write_bytes(data[:-1])
    culprit = Culprit(
        "cpu", "toy", "without", CulpritStatus.NOT_REPRODUCED, "the old lock broke too"
    )
    assert breaks.record(Project(root), [culprit]) == path
    written = path.read_bytes()
    assert written.startswith(data) and json.loads(written[len(data) :])["reason"] == culprit.reason


def test_report_reads_past_a_damaged_culprits_file(tmp_path, capsys):
    """Before: a line that is not UTF-8 raised UnicodeDecodeError in `report`, whose reader said it
    skipped damaged lines. Now: warnings naming the line, and the report is written."""
    root = tmp_path / "shop"
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "cpu.toml").write_text(CPU_LANE.replace("[]", '["toy"]'))
    shimtree.write_shim(root / "shims", "toy")
    _damaged_culprits(root / "validation" / "culprits.jsonl")
    code, out, err = run_cli(root, "report", "--no-probe", "--week", "2026-W48", capsys=capsys)
    assert code == 0 and "Traceback" not in out + err, err
    assert "culprits.jsonl: line 2: not UTF-8 text" in err
    assert (root / "reports" / "2026-W48.md").is_file()


@pytest.mark.parametrize("packages", [[], None, "missing"])
def test_pack_new_from_a_culprit_without_its_package_is_one_line(tmp_path, capsys, packages):
    """Before: ValueError (no package) or KeyError (no key) from `pack new --from-culprit`."""
    root = tmp_path / "shop"
    shimtree.write_shim(root / "shims", "toy")
    (root / "lanes").mkdir()
    entry = {**WHOLE, "packages": packages}
    if packages == "missing":
        del entry["packages"]
    (root / "validation").mkdir()
    (root / "validation" / "culprits.jsonl").write_text(json.dumps(entry) + "\n")
    args = ("pack", "new", "toy", "--from-culprit", "cpu", "--category", "kernel-numerics")
    code, out, err = run_cli(root, *args, "--repository", "toy/toylib", capsys=capsys)
    assert code == 2 and "Traceback" not in out + err
    error = err.splitlines()[-1]
    assert error.startswith("patchlane: error: ") and "culprits.jsonl" in error, err
    assert not (root / "shims" / "toy" / "pack.toml").exists()


# ---------------------------------------------------------------------------------------------
# Class 6: messages that mislead


def test_the_lane_run_a_bisection_without_evidence_suggests_is_one_run_accepts():
    """Before: `patchlane run --lane LANE`, which `run` refuses."""
    import re
    import shlex
    from types import SimpleNamespace

    from retire.bisect.windowresult import WindowResult
    from retire.commands import build_parser

    unseen = SimpleNamespace(window=SimpleNamespace(seen=False, untried=()))
    [step] = WindowResult.decide(unseen, "toy")  # type: ignore[arg-type]
    [command] = re.findall(r"`(patchlane run[^`]*)`", step)
    args = build_parser().parse_args(shlex.split(command.replace("LANE", "cpu"))[1:])
    assert args.lanes == ["cpu"]


ESCAPED = (
    "\x1b]8;;https://evil.example/\x07see the docs\x1b]8;;\x07 "
    "\x1b[1;31msbatch: error:\x1b[0m Batch job submission failed: Invalid account"
    "\x1b]0;owned\x1b\\\x9b2J\x07"
)


def _no_control(text: str) -> None:
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text), repr(
        text
    )


def test_a_tools_refusal_is_relayed_without_its_control_sequences(tmp_path, monkeypatch):
    """Before: sbatch's refusal came through with its colours, an OSC hyperlink and a title
    change. Now every tool's relayed output is plain text: sbatch (a site's wrapper, as job-submit
    filters print), git (a hook's message), a named build's log and uv."""
    import sys
    from pathlib import Path

    from retire.core import uv
    from retire.runs import slurmclient
    from retire.runs.wheelbuild import WheelBuildError, build_wheel
    from shims.wheelbuild import WheelBuild

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex_quote(ESCAPED)} >&2\nexit 1\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    job, said = slurmclient.sbatch(tmp_path / "job.sh")
    assert job is None
    assert said == "see the docs sbatch: error: Batch job submission failed: Invalid account"
    # a repository's hook is its code: what it prints comes through git's failure
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex_quote(ESCAPED)} >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(GitError) as caught:
        Git(repo).run("worktree", "add", "--detach", "--quiet", str(tmp_path / "work"), "HEAD")
    _no_control(str(caught.value))
    assert "Invalid account" in str(caught.value)
    with pytest.raises(GitError):
        Git(repo).run("log", "-1", revs=["no[such]revision"])
    # a named build that fails: its log's tail is relayed
    build = WheelBuild(("sh", "-c", f"printf '%s\\n' {shlex_quote(ESCAPED)}; exit 3"))
    source = tmp_path / "source"
    source.mkdir()
    with pytest.raises(WheelBuildError) as failed:
        build_wheel(
            build,
            source,
            tmp_path / "out",
            tmp_path / "build.log",
            python=Path(sys.executable),
            commit="a" * 40,
            distribution="toylib",
        )
    _no_control(str(failed.value))
    assert "Invalid account" in str(failed.value) and "exit 3" in str(failed.value)
    # uv's own output (it sanitises most of its own) goes through the same helper
    assert uv.plain(ESCAPED + "\r\nnext\rredrawn") == (
        "see the docs sbatch: error: Batch job submission failed: Invalid account\nredrawn"
    )


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_a_write_failing_midway_in_init_repoint_names_its_file(tmp_path):
    """A file-size limit (RLIMIT_FSIZE) under the README's size: the workflows are re-pointed, the
    README's write fails midway. Before: "patchlane: error: File too large", no file named. Now
    the README is named, and what was written is put back."""
    import resource
    import subprocess
    import sys

    from tests.conftest import subprocess_env

    shop = tmp_path / "shop"
    shop.mkdir()
    git(shop, "init", "-q")
    (shop / "README.md").write_text("# shop\n\n" + "a line of the shop's own text\n" * 4000)
    assert run_cli(shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0")[0] == 0
    before = {p: p.read_bytes() for p in shop.rglob("*") if p.is_file() and ".git" not in p.parts}
    limit = 64 * 1024
    assert (shop / "README.md").stat().st_size > limit
    assert all(len(data) < limit for p, data in before.items() if p.name != "README.md")

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "retire",
            "--root",
            str(shop),
            "init",
            "--repoint",
            "--from",
            "patchlane[engine]==0.2.0",
        ],
        env=subprocess_env(PYTHONDONTWRITEBYTECODE="1"),
        preexec_fn=capped,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "README.md" in proc.stderr, proc.stderr
    assert "File too large" in proc.stderr
    after = {p: p.read_bytes() for p in shop.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before


def test_a_hand_edited_install_line_is_blamed_on_the_workflow(tmp_path, capsys):
    """Before: "--from: '…' is not a requirement on patchlane", naming no workflow."""
    shop = tmp_path / "shop"
    shop.mkdir()
    git(shop, "init", "-q")
    assert run_cli(shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0")[0] == 0
    lanes = shop / ".github" / "workflows" / "patchlane-lanes.yml"
    lanes.write_text(
        lanes.read_text().replace(
            "patchlane[engine]==0.1.0", "patchlane[engine]>=0.1; os_name == 'posix'"
        )
    )
    args = ("init", "--repoint", "--from", "patchlane[engine]==0.2.0")
    code, _out, err = run_cli(shop, *args, capsys=capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert ".github/workflows/patchlane-lanes.yml: python -m pip install:" in err
    assert "--from:" not in err


# ---------------------------------------------------------------------------------------------
# Class 7: left from the fourth round


def test_init_never_reads_a_shops_file_through_a_link(tmp_path, capsys):
    """`README.md` and `.pre-commit-config.yaml` linked to files outside the repository (one not
    UTF-8, one a FIFO). Before: init read them through the links (and said what it found there).
    Now: the link stops it in one line, before anything is read or written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "README.md").write_bytes(b"# theirs \xff\n")
    os.mkfifo(outside / "hooks.yaml")
    shop = tmp_path / "shop"
    shop.mkdir()
    git(shop, "init", "-q")
    (shop / "README.md").symlink_to(outside / "README.md")
    code, _out, err = run_cli(
        shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert "README.md: is a symbolic link" in err
    (shop / "README.md").unlink()
    (shop / ".pre-commit-config.yaml").symlink_to(outside / "hooks.yaml")
    code, _out, err = run_cli(
        shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0", capsys=capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert ".pre-commit-config.yaml: is a symbolic link" in err
    assert sorted(p.name for p in shop.iterdir()) == [".git", ".pre-commit-config.yaml"]


def test_init_repoint_never_reads_a_workflow_through_a_linked_folder(tmp_path, capsys):
    shop = tmp_path / "shop"
    shop.mkdir()
    git(shop, "init", "-q")
    assert run_cli(shop, "init", "--no-lock", "--from", "patchlane[engine]==0.1.0")[0] == 0
    elsewhere = tmp_path / "elsewhere"
    (shop / ".github").rename(elsewhere)
    (shop / ".github").symlink_to(elsewhere)
    # what is there is not the shop's: read, it would stop init for another reason
    report = elsewhere / "workflows" / "patchlane-report.yml"
    report.write_bytes(report.read_bytes() + b"# \xff\n")
    args = ("init", "--repoint", "--from", "patchlane[engine]==0.2.0")
    code, _out, err = run_cli(shop, *args, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and ".github: is a symbolic link" in err, err
    assert (
        "patchlane[engine]==0.1.0" in (elsewhere / "workflows" / "patchlane-lanes.yml").read_text()
    )


def test_lock_of_a_changed_lane_on_a_full_disk_names_the_lock(
    small_disk, einops_index, monkeypatch, capsys
):
    """The lane changed; uv's cache shares the full disk with the checkout. Before: the lane
    failed with uv's words about its cache, exit 1, no line naming the lock. Now the lock is
    named, and kept."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", einops_index.url)
    project = small_disk / "shop"
    assert run_cli(small_disk, "init", str(project), capsys=capsys)[0] == 0
    lock = project / "locks" / "cpu" / "pylock.toml"
    kept = lock.read_bytes()
    lane = project / "lanes" / "cpu.toml"
    lane.write_text(
        lane.read_text().replace('requirements = ["einops"]', 'requirements = ["einops>=0.8"]')
    )
    cache = small_disk / "uv-cache"
    cache.mkdir()
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    fill(small_disk)
    code, out, err = run_cli(project, "lock", capsys=capsys)
    assert code == 1 and "Traceback" not in out + err
    failed = [line for line in out.splitlines() if line.strip().startswith("failed")]
    assert len(failed) == 1, out
    assert "locks/cpu/pylock.toml: not re-locked:" in failed[0] and "No space left" in failed[0]
    assert failed[0].endswith("— the previous lock is kept as it was")
    assert lock.read_bytes() == kept


KILLER = """#!/bin/sh
# the repository's own hook (its code): kill -9 the patchlane whose git made the ref, the moment
# the ref transaction for {pattern} is committed
[ "$1" = committed ] || exit 0
while read -r old new ref; do
    case "$ref" in
        {pattern}) kill -9 "$(cut -d' ' -f4 /proc/$PPID/stat)" ;;
    esac
done
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "at", ["refs/heads/patchlane/*", "refs/patchlane/*"], ids=["branch", "temporary"]
)
def test_kill_9_of_retire_apply_never_leaves_a_half_made_branch(tmp_path, at):
    """`retire --apply` killed outright (SIGKILL, from the repository's reference-transaction
    hook) the moment a ref is made: its branch, or the temporary ref the branch is built on.
    Before: the branch was there without its PR body, and the next run said "already proposed".
    Now a branch is there only with its body; the next run clears the temporary ref and ends the
    proposal."""
    import subprocess
    import sys

    from tests.conftest import subprocess_env
    from tests.test_retire_lanes import LaneShop

    shop = LaneShop(tmp_path)
    try:
        shop.record_fix()
        hook = shop.root / ".git" / "hooks" / "reference-transaction"
        hook.write_text(KILLER.format(pattern=at))
        hook.chmod(0o755)
        command = [
            sys.executable,
            "-m",
            "retire",
            "--root",
            str(shop.root),
            "retire",
            "--apply",
            "--no-pr",
        ]
        killed = subprocess.run(
            command, env=subprocess_env(), capture_output=True, text=True, timeout=300
        )
        assert killed.returncode == -9, killed.stdout + killed.stderr
        branches = git(
            shop.root, "for-each-ref", "--format=%(refname:short)", "refs/heads/patchlane/"
        ).split()
        bodies = shop.root / ".patchlane" / "prs"
        for branch in branches:
            assert (bodies / f"{branch}.md").is_file(), f"{branch} was made without its PR body"
        hook.unlink()
        again = subprocess.run(
            command, env=subprocess_env(), capture_output=True, text=True, timeout=300
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert git(shop.root, "for-each-ref", "refs/patchlane/") == ""
        branches = git(
            shop.root, "for-each-ref", "--format=%(refname:short)", "refs/heads/patchlane/"
        ).split()
        assert branches and all((bodies / f"{b}.md").is_file() for b in branches)
        assert len(git(shop.root, "worktree", "list").splitlines()) == 1
    finally:
        shop.close()


# ---------------------------------------------------------------------------------------------
# Class 9: tests that let a mutation through — a change first after its tag, a range of two


def _window_of(repo, tmp_path):
    """The bug's window of ``repo`` found by execution, no evidence given (as
    tests/test_bisect_history.py finds it): releases on a loopback index, commits built by uv from
    a mirror."""
    from retire.bisect.transitions import Source
    from shims.manifest import load_manifest
    from tests.support.historyrepo import bisect_releases

    folder = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(folder))
    mirror = open_mirror(Mirror(UPSTREAM, folder))
    assert isinstance(mirror, MirrorRepo)
    shim = load_manifest(
        shimtree.write_shim(tmp_path / "project" / "shims", "toylib_add") / "manifest.toml"
    )
    return bisect_releases(shim, repo, Source(mirror), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("at", "per_release"), [(0, 4), (0, 1)], ids=["first-after-its-tag", "a-range-of-two"]
)
def test_the_commit_search_tries_the_first_commit_after_the_older_tag(tmp_path, at, per_release):
    """Every toy history put the change in the middle of its range, so a commit search that never
    tried the first commit after the older tag passed every test. Here the breaking and the fixing
    commit are each the first after their tag (in a range of five, and of two): both are named,
    with the older tag's own commit as the clean (or broken) side before them."""
    from tests.support.historyrepo import FIXED, INTRODUCED

    repo = make_window_repo(tmp_path / "upstream", at=at, per_release=per_release)
    result = _window_of(repo, tmp_path)
    window = result.window
    assert (window.introduced.after, window.fixed.after) == (INTRODUCED, FIXED), result.summary()
    introduced, fixed = window.introduced.commits, window.fixed.commits
    assert introduced is not None and fixed is not None, result.stops
    assert introduced.count == fixed.count == per_release + 1
    assert introduced.commit is not None and introduced.commit.sha == repo.introduced
    assert fixed.commit is not None and fixed.commit.sha == repo.fixed
    assert introduced.before == repo.tags["1.2"] and fixed.before == repo.tags["1.5"]
    assert result.floor == "toylib>=1.6" and result.status == "found"
