"""Nothing is written through a link (issue 20): every output folder, one check.

A committed symbolic link inside the project — the output folder itself, or a folder on the way
to it — pointing outside is refused in one line (exit 2) and never followed: the outside stays
as it was. One test per output folder (reports, packs, PR bodies and worktrees, the HTTP and
bisection caches, run summaries, lane envs, the validation manifest, wheelhouses, scaffolds,
mirrors, catalogue and bench outputs), plus the writer itself (``retire.core.atomic``).
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
from pathlib import Path

import pytest

from retire.core.atomic import atomic_write, make_folder
from retire.core.errors import InputError
from retire.core.project import Project
from tests.support.packtree import PackProject
from tests.test_hardening_store import cli, minimal, refused


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside every project, with one file that must stay as it is."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me\n")
    return folder


def untouched(folder: Path) -> None:
    """Nothing was written, made or removed under ``folder``."""
    found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert found == ["precious.txt"], found
    assert (folder / "precious.txt").read_text() == "keep me\n"


# ---------------------------------------------------------------------------------------------
# The writer


def test_the_writer_refuses_a_link_on_the_way_or_at_the_file(tmp_path, outside):
    (tmp_path / "linked").symlink_to(outside)
    with pytest.raises(InputError, match=r"linked: is a symbolic link .* not followed"):
        atomic_write(tmp_path / "linked" / "x.md", "x", within=tmp_path)
    with pytest.raises(InputError, match="is a symbolic link"):
        atomic_write(tmp_path / "linked" / "deeper" / "x.md", b"x", within=tmp_path)
    (tmp_path / "file.md").symlink_to(outside / "precious.txt")
    with pytest.raises(InputError, match=r"file.md: is a symbolic link"):
        atomic_write(tmp_path / "file.md", "x", within=tmp_path)
    with pytest.raises(InputError, match="is a symbolic link"):
        make_folder(tmp_path / "linked" / "sub", within=tmp_path)
    with pytest.raises(InputError, match="leaves"):
        atomic_write(tmp_path / ".." / "escaped.md", "x", within=tmp_path)
    untouched(outside)
    # the folder it must stay in may itself be reached through a link (a linked home folder)
    atomic_write(tmp_path / "linked" / "ok.md", "fine", within=tmp_path / "linked")
    assert (outside / "ok.md").read_text() == "fine"


def test_project_hands_out_its_output_folders_checked(tmp_path, outside):
    (tmp_path / ".patchlane").symlink_to(outside)
    project = Project(tmp_path)
    for folder in ("state_dir", "envs_dir", "http_cache", "bisect_cache"):
        with pytest.raises(InputError, match=r"\.patchlane: is a symbolic link"):
            getattr(project, folder)
    with pytest.raises(InputError, match=r"\.patchlane: --run-id: is a symbolic link"):
        project.run_dir("nightly")
    for name, attribute in (
        ("reports", "reports_dir"),
        ("packs", "packs_dir"),
        ("locks", "locks_dir"),
        ("validation", "validation"),
    ):
        (tmp_path / name).symlink_to(outside)
        with pytest.raises(InputError, match=rf"{name}: is a symbolic link"):
            getattr(project, attribute)
    untouched(outside)


# ---------------------------------------------------------------------------------------------
# Each output folder through its command


def test_a_linked_reports_folder_is_refused(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p")
    (root / "reports").symlink_to(outside)
    refused(capsys, root, "report", "--no-probe", "--week", "2026-W47", says="is a symbolic link")
    untouched(outside)
    # a folder on the way to --out inside the project, too
    (root / "reports").unlink()
    (root / "site").symlink_to(outside)
    refused(
        capsys,
        root,
        "report",
        "--no-probe",
        "--week",
        "2026-W47",
        "--out",
        "site/reports",
        says="site: is a symbolic link",
    )
    untouched(outside)
    # --out outside the project is where the user said
    code, out, err = cli(
        capsys, root, "report", "--no-probe", "--week", "2026-W47", "--out", str(tmp_path / "r")
    )
    assert code == 0, out + err
    assert (tmp_path / "r" / "2026-W47.md").is_file()


def _approvable(tmp_path: Path) -> PackProject:
    project = PackProject(tmp_path)
    project.add("toy_add")
    project.record("toy_add", at=_dt.datetime.now(_dt.UTC) - _dt.timedelta(hours=1))
    return project


def test_a_linked_packs_folder_is_refused(tmp_path, capsys, outside):
    project = _approvable(tmp_path)
    deny = project.root / "packs" / "deny.toml"
    (outside / "deny.toml").write_text(deny.read_text())
    deny.unlink()
    (project.root / "packs").rmdir()
    (project.root / "packs").symlink_to(outside)
    refused(capsys, project.root, "pack", "approve", "toy_add", "--by", "Ada", says="packs")
    (outside / "deny.toml").unlink()
    untouched(outside)


def test_pack_export_into_the_project_never_goes_through_a_link(tmp_path, capsys, outside):
    project = _approvable(tmp_path)
    assert project.cli("approve", "toy_add", "--by", "Ada") == 0
    (project.root / "exports").symlink_to(outside)
    refused(
        capsys,
        project.root,
        "pack",
        "export",
        "toy_add",
        "--to",
        str(project.root / "exports" / "toy_add"),
        says="exports: is a symbolic link",
    )
    untouched(outside)


def test_a_linked_validation_folder_is_refused(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p")
    (root / "validation").symlink_to(outside)
    other = tmp_path / "host.jsonl"
    other.write_text("")
    refused(
        capsys,
        root,
        "validation",
        "merge",
        str(other),
        "-o",
        str(root / "validation" / "manifest.jsonl"),
        says="validation: is a symbolic link",
    )
    untouched(outside)


def test_a_linked_cache_folder_is_refused(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p")
    (root / ".patchlane").mkdir()
    (root / ".patchlane" / "cache").symlink_to(outside)
    refused(capsys, root, "verdicts", says=".patchlane/cache: is a symbolic link")
    untouched(outside)


def test_a_linked_run_folder_is_refused(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p")
    (root / ".patchlane").mkdir()
    (root / ".patchlane" / "runs").symlink_to(outside)
    refused(
        capsys, root, "summary", "--run-id", "nightly", says="runs: --run-id: is a symbolic link"
    )
    untouched(outside)


def test_a_linked_lane_env_is_a_build_failure_never_deleted_through(tmp_path, outside):
    from retire.runs.envs import BuildError, _make_folder

    envs = tmp_path / ".patchlane" / "envs"
    envs.mkdir(parents=True)
    (envs / "cpu").symlink_to(outside)
    with pytest.raises(BuildError, match=r"envs/cpu: is a symbolic link .* not followed"):
        _make_folder(envs / "cpu")
    untouched(outside)


def test_a_linked_wheelhouse_folder_is_refused(tmp_path, capsys, outside, monkeypatch):
    from tests.test_hardening_inputs import WHEEL, _artifact, _house

    root = tmp_path / "p"
    root.mkdir()
    data = b"wheel"
    part = _house(tmp_path / "part-001", _artifact(WHEEL, data))
    (part / WHEEL).write_bytes(data)
    (root / "carried").symlink_to(outside)
    monkeypatch.chdir(root)
    refused(
        capsys,
        root,
        "wheelhouse",
        "join",
        str(part),
        "--out",
        "carried/cpu",
        says="carried: is a symbolic link",
    )
    untouched(outside)
    # gather's default folder is checked the same way, before anything is downloaded
    (root / ".patchlane").symlink_to(outside)
    with pytest.raises(InputError, match=r"\.patchlane: is a symbolic link"):
        Project(root).output(Path(".patchlane", "wheelhouse", "cpu"))
    untouched(outside)


def test_a_link_in_the_joined_folder_is_never_written_through(tmp_path, capsys, outside):
    from tests.test_hardening_inputs import WHEEL, _artifact, _house

    data = b"wheel"
    part = _house(tmp_path / "part-001", _artifact(WHEEL, data))
    (part / WHEEL).write_bytes(data)
    out = tmp_path / "joined"
    out.mkdir()
    (out / WHEEL).symlink_to(outside / "precious.txt")
    refused(
        capsys,
        tmp_path,
        "wheelhouse",
        "join",
        str(part),
        "--out",
        str(out),
        says=f"{WHEEL}: is a symbolic link",
    )
    untouched(outside)


def test_scaffolds_never_write_through_a_link(tmp_path, capsys, outside):
    root = tmp_path / "p"
    root.mkdir()
    (root / "lanes").symlink_to(outside)
    refused(capsys, root, "init", says="lanes: is a symbolic link")
    untouched(outside)
    # nothing else was written either
    assert sorted(p.name for p in root.iterdir()) == ["lanes"]


def test_shim_new_never_writes_through_a_linked_catalogue(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p", '[lane]\npython = "3.12"\nrequirements = ["toylib"]\n')
    (root / "shims").symlink_to(outside)
    refused(capsys, root, "shim", "new", "my_fix", says="shims: is a symbolic link")
    untouched(outside)


def test_catalogue_output_inside_the_project_never_goes_through_a_link(tmp_path, capsys, outside):
    root = minimal(tmp_path / "p")
    (root / "docs").symlink_to(outside)
    refused(
        capsys,
        root,
        "catalogue",
        "-o",
        str(root / "docs" / "catalogue.md"),
        says="docs: is a symbolic link",
    )
    untouched(outside)


def test_a_mirrors_folder_inside_the_project_is_never_reached_through_a_link(
    tmp_path, capsys, outside
):
    from retire.mirrors.config import load_mirrors

    root = minimal(tmp_path / "p")
    (root / ".patchlane").mkdir()
    (root / ".patchlane" / "mirrors").symlink_to(outside)
    with pytest.raises(InputError, match=r"patchlane.toml: mirrors.folder: .*is a symbolic link"):
        load_mirrors(root)
    (root / "patchlane.toml").write_text(
        '[[mirrors.repository]]\nurl = "https://github.com/o/r"\npath = "m/r.git"\n'
    )
    (root / "m").symlink_to(outside)
    with pytest.raises(InputError, match=r"mirrors.repository\[0\].path: .*m: is a symbolic"):
        load_mirrors(root, folder=tmp_path / "elsewhere")
    # outside the project, a configured path is where it says
    (root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/o/r"\npath = "{tmp_path / "srv"}"\n'
    )
    [mirror] = load_mirrors(root, folder=tmp_path / "elsewhere").mirrors
    assert mirror.path == tmp_path / "srv"
    untouched(outside)


def test_bench_results_inside_the_repository_never_go_through_a_link(
    tmp_path, outside, monkeypatch
):
    import bench.__main__ as bench_main

    monkeypatch.setattr(bench_main, "ROOT", tmp_path)
    monkeypatch.setattr(bench_main, "DEFAULT_OUTPUT", tmp_path / ".patchlane" / "latest.json")
    monkeypatch.setattr(bench_main, "run_module", lambda name: ([], 0.0))
    (tmp_path / ".patchlane").symlink_to(outside)
    with pytest.raises(InputError, match=r"\.patchlane: is a symbolic link"):
        bench_main.main(["--only", "report", "--output", str(tmp_path / ".patchlane" / "b.json")])
    untouched(outside)


# ---------------------------------------------------------------------------------------------
# Proposal branches: PR bodies and worktrees


def _repo(root: Path) -> Path:
    root.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
    }
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    for args in (("init", "-q"), ("commit", "-q", "--allow-empty", "-m", "base")):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    return root


def test_a_linked_prs_folder_is_refused(tmp_path, outside):
    from retire.branches import proposals

    repo = _repo(tmp_path / "repo")
    (repo / ".patchlane").mkdir()
    (repo / ".patchlane" / "prs").symlink_to(outside)
    with pytest.raises(InputError, match=r"prs: is a symbolic link"):
        proposals.save_body(repo, "retire/x", "body")
    untouched(outside)


def test_a_linked_worktrees_folder_is_never_cleaned_through(tmp_path, outside):
    from retire.branches import proposals

    repo = _repo(tmp_path / "repo")
    (repo / ".patchlane").mkdir()
    (repo / ".patchlane" / "worktrees").symlink_to(outside)
    with pytest.raises(InputError, match=r"worktrees: is a symbolic link"), proposals.session(repo):
        pass
    with pytest.raises(InputError, match=r"worktrees: is a symbolic link"):
        proposals.cleanup_worktrees(repo)
    untouched(outside)
