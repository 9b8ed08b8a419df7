"""Adversarial inputs through the real CLI: paths that would leave the project, values that used to
end in a traceback, and inputs that used to be accepted silently (issue 12, classes 1, 5, 6, 7).

Every refusal is exit code 2 (bad input) or 1 (a lane or a lock failed) with exactly one
``patchlane: error:`` line on stderr and no traceback; nothing outside the project is touched.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from retire.commands import main
from retire.core.errors import InputError
from retire.evidence import validation
from retire.runs.launcher import Launcher
from retire.runs.reproduce import run_reproducer
from shims.manifest import load_manifest
from tests.support import shimtree
from tests.support.packtree import PackProject, github_manifest
from tests.test_locking import lane_text
from tests.test_runs import lane, toy_index, toy_project  # noqa: F401 - fixtures
from tests.test_validation import record


def cli(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    """``patchlane --root ROOT ARGS`` in this process: (exit code, stdout, stderr)."""
    try:
        code = main(["--root", str(root), *args])
    # argparse usage errors
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return int(code), out, err


def refused(capsys, root: Path, *args: str, code: int = 2, says: str = "") -> str:
    """The command fails with ``code`` and one error line (containing ``says``); that line."""
    got, out, err = cli(capsys, root, *args)
    errors = [line for line in err.splitlines() if "error" in line]
    assert got == code, (args, out, err)
    assert "Traceback" not in out + err
    assert len(errors) == 1, err
    assert says in errors[0], errors[0]
    return errors[0]


def minimal(
    root: Path, lane: str = '[lane]\npython = "3.12"\nrequirements = ["helper==1.0"]\n'
) -> Path:
    (root / "lanes").mkdir(parents=True, exist_ok=True)
    (root / "lanes" / "a.toml").write_text(lane)
    return root


# ---------------------------------------------------------------------------------------------
# Class 1: the evidence store, through real lane runs

ODD_REPRODUCER = shimtree.TOY_REPRODUCER.replace(
    "def check(with_shim):\n",
    "def check(with_shim):\n    print('loss\\u2028nan\\u2029 step\\x85 done')\n",
)


@pytest.mark.slow
def test_a_reproducer_printing_line_separators_never_breaks_the_store(toy_project, capsys):
    """The reported failure: output with U+2028/U+2029/U+0085 recorded, then every later run,
    merge and verdict broke. Now it is one record that reads back, and the store goes on."""
    p = toy_project
    shimtree.write_shim(p.root / "shims", "toy_odd", reproducer=ODD_REPRODUCER)
    p.write("a", lane(shims='["toy_odd"]'))
    assert cli(capsys, p.root, "lock")[0] == 0
    assert cli(capsys, p.root, "run", "a", "--run-id", "r1")[0] == 0
    manifest = p.root / "validation" / "manifest.jsonl"
    records = validation.load(manifest)
    assert len(records) == 2 and all(
        "loss\u2028nan\u2029 step\x85 done" in r.output_tail for r in records
    )
    # even str.splitlines sees two lines
    assert len(manifest.read_text(encoding="utf-8").splitlines()) == 2
    # the next run records too
    assert cli(capsys, p.root, "run", "a", "--run-id", "r2")[0] == 0
    out = p.root / "merged.jsonl"
    code, stdout, err = cli(capsys, p.root, "validation", "merge", str(manifest), "-o", str(out))
    assert code == 0 and "4 records (+4)" in stdout and err == ""
    code, stdout, err = cli(capsys, p.root, "catalogue")
    assert code == 0 and "toy_odd" in stdout and "Traceback" not in err
    assert not (p.root / "validation" / "manifest.jsonl.quarantine").exists()


# ---------------------------------------------------------------------------------------------
# Class 5: paths never leave the project, links are never followed


@pytest.mark.slow
@pytest.mark.parametrize("run_id", ["../../x", "..", "a/b", "/tmp/x", "x" * 65, ".x", "a\nb"])
def test_run_ids_that_would_name_a_folder_elsewhere_are_refused(tmp_path, capsys, run_id):
    root = minimal(tmp_path / "p")
    refused(capsys, root, "summary", "--run-id", run_id, says="is not a run id")
    refused(capsys, root, "run", "a", "--run-id", run_id, "--no-record", says="is not a run id")
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == ["p"] and not (root / ".patchlane").exists()
    )


def test_a_committed_link_under_locks_is_refused_never_followed(tmp_path, capsys):
    root = minimal(tmp_path / "p")
    outside = tmp_path / "outside.toml"
    outside.write_text("lock-version = '1.0'\n")
    (root / "locks" / "a").mkdir(parents=True)
    (root / "locks" / "a" / "pylock.toml").symlink_to(outside)
    line = refused(capsys, root, "lock", "--check", says="is a symbolic link")
    assert "locks/a/pylock.toml" in line and "not followed" in line
    refused(capsys, root, "lanes", says="is a symbolic link")
    # A linked lane folder too.
    (root / "locks" / "a" / "pylock.toml").unlink()
    (root / "locks" / "a").rmdir()
    (root / "locks" / "a").symlink_to(tmp_path)
    refused(capsys, root, "lock", "a", says="locks/a: is a symbolic link")
    assert outside.read_text() == "lock-version = '1.0'\n"


def test_a_committed_link_under_reports_is_refused_and_a_linked_previous_report_ignored(
    tmp_path, capsys
):
    root = minimal(tmp_path / "p")
    outside = tmp_path / "outside.md"
    outside.write_text("keep me\n")
    reports = root / "reports"
    reports.mkdir()
    (reports / "2026-W47.md").symlink_to(outside)
    refused(
        capsys,
        root,
        "report",
        "--no-probe",
        "--week",
        "2026-W47",
        says="reports/2026-W47.md: is a symbolic link",
    )
    assert outside.read_text() == "keep me\n"
    (reports / "2026-W47.md").unlink()
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"week": "2026-W46"}))
    (reports / "2026-W46.json").symlink_to(secret)
    code, out, err = cli(capsys, root, "report", "--no-probe", "--week", "2026-W47", "--json")
    assert code == 0 and "Traceback" not in err
    # noted, never read
    assert "2026-W46.json: is a symbolic link" in json.dumps(json.loads(out))


def test_a_reproducer_linked_out_of_its_shim_folder_is_never_run_nor_attached(tmp_path, capsys):
    project = PackProject(tmp_path)
    folder = project.add("toy_add")
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\nprint('FIX_VALIDATED')\n")
    (folder / "reproduce.py").unlink()
    (folder / "reproduce.py").symlink_to(evil)
    manifest = load_manifest(folder / "manifest.toml")
    with pytest.raises(
        InputError, match=r"reproduce.py: reproducer.path: is a symbolic link .* not followed"
    ):
        run_reproducer(manifest, "without", lane="toy", timeout=30)
    env = shimtree.subprocess_env(tmp_path, project.shims, project.site)
    with (
        Launcher(sys.executable, (), env) as launcher,
        pytest.raises(InputError, match="is a symbolic link"),
    ):
        # the fork server refuses it too
        launcher.run(manifest, "without", env=env, timeout=30)
    assert not marker.exists()
    refused(capsys, project.root, "pack", "show", "toy_add", says="is a symbolic link")
    code, out, _ = cli(capsys, project.root, "pack", "check")
    # never approvable
    assert code == 1 and "NOT READY   toy_add" in out and "is a symbolic link" in out


def test_a_linked_shim_folder_is_never_run(tmp_path):
    real = shimtree.write_shim(tmp_path / "elsewhere", "toy_add")
    (tmp_path / "shims").mkdir()
    (tmp_path / "shims" / "toy_add").symlink_to(real)
    manifest = load_manifest(tmp_path / "shims" / "toy_add" / "manifest.toml")
    with pytest.raises(InputError, match=r"shims/toy_add: reproducer.path: is a symbolic link"):
        run_reproducer(manifest, "without", lane="toy", timeout=30)


@pytest.mark.slow
def test_pack_export_never_overwrites_the_reproducer_with_its_readme(tmp_path, capsys):
    project = PackProject(tmp_path)
    manifest = github_manifest("toy_add").replace('path = "reproduce.py"', 'path = "README.md"')
    folder = project.add("toy_add", manifest=manifest, command="python README.md --mode without")
    (folder / "reproduce.py").rename(folder / "README.md")
    project.record_real_run("toy_add")
    assert project.cli("approve", "toy_add", "--by", "Ada") == 0
    capsys.readouterr()
    out = tmp_path / "out"
    line = refused(
        capsys,
        project.root,
        "pack",
        "export",
        "toy_add",
        "--to",
        str(out),
        says="shims/toy_add/manifest.toml: reproducer.path: the reproducer's file name 'README.md'",
    )
    assert "rename the reproducer" in line and not out.exists()


@pytest.mark.slow
def test_pack_export_refuses_a_link_in_the_destination(tmp_path, capsys):
    project = PackProject(tmp_path)
    project.add("toy_add")
    project.record_real_run("toy_add")
    assert project.cli("approve", "toy_add", "--by", "Ada") == 0
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("mine\n")
    (out / "README.md").symlink_to(victim)
    capsys.readouterr()
    refused(
        capsys,
        project.root,
        "pack",
        "export",
        "toy_add",
        "--to",
        str(out),
        says="README.md: is a symbolic link",
    )
    assert victim.read_text() == "mine\n"


# ---------------------------------------------------------------------------------------------
# Class 6: one line, never a traceback


@pytest.mark.parametrize(
    "args, says",
    [
        (("run", "a", "--timeout", "nan"), "--timeout: must be a finite number"),
        (("run", "a", "--timeout", "inf"), "--timeout: must be a finite number"),
        (("run", "a", "--timeout", "-1"), "--timeout: must be more than zero"),
        (("run", "a", "--jobs", "-1"), "--jobs: must be more than zero"),
        (("lock", "--jobs", "-1"), "--jobs: must be more than zero"),
        (("pack", "--window-days", "nan", "plan"), "--window-days: must be a finite number"),
        (("pack", "--window-days", "-3", "plan"), "--window-days: must be more than zero"),
        (("pack", "--now", "9999-12-31T23:59:59-23:59", "plan"), "out of range in UTC"),
        (("lock", "--check", "--now", "0001-01-01T00:00:00+01:00"), "out of range in UTC"),
        (("report", "--no-probe", "--week", "9999-W52"), "--week: year 9999 is out of range"),
        (("report", "--no-probe", "--week", "0001-W01"), "year 1 is out of range"),
        (("report", "--no-probe", "--week", "2026-W60"), "2026 has no ISO week 60"),
        (("verdicts", "--stale-after", "-1"), "--stale-after: must be more than zero"),
        (("pack", "--window-days", "1e300", "plan"), "--window-days: must be at most 36500"),
        (("pack", "--window-days", "1e6", "check"), "--window-days: must be at most 36500"),
        (("run", "a", "--timeout", "1e300"), "--timeout: must be at most 1e+07"),
        (("lock", "--jobs", "99999999999999999999"), "--jobs: must be at most 1e+06"),
        (
            ("pack", "check", "--max-code-lines", "9" * 30),
            "--max-code-lines: must be at most 1e+06",
        ),
        (("pack", "--now", "0001-01-01T00:00:00Z", "plan"), "write a time between 1900 and 9000"),
        (("pack", "plan", "--day", "0001-01-01"), "write a date between 1900 and 9000"),
        (("lockdiff", "/dev/zero", "/dev/null"), "/dev/zero: not a regular file (a device)"),
        (
            ("bump", "--cooldown", "1000000", "--no-run", "--no-pr"),
            "--cooldown: must be at most 36500",
        ),
        (("bump", "--cooldown", "nan", "--no-run", "--no-pr"), "--cooldown: not a number"),
        (("catalogue", "--validation", "typo.jsonl"), "--validation: 'typo.jsonl': no such file"),
        (("verdicts", "--validation", "/tmp"), "--validation: '/tmp': not a regular file"),
    ],
)
def test_odd_flag_values_are_one_line(tmp_path, capsys, args, says):
    refused(capsys, minimal(tmp_path), *args, says=says)


@pytest.mark.parametrize(
    "lane, says",
    [
        (
            '[matrix]\nname = "'
            + "y" * 300
            + '{a}"\n[matrix.base]\npython = "3.12"\nrequirements = ["x"]\n[matrix.axes.a."1"]\n',
            "at most 100 characters",
        ),
        ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("a = " + "{b = " * 2000 + "1" + "}" * 2000 + "\n", "nested too deeply"),
    ],
)
def test_bad_lane_files_are_one_line(tmp_path, capsys, lane, says):
    root = minimal(tmp_path, lane)
    refused(capsys, root, "lanes", says=says)
    refused(capsys, root, "lock", "--check", says=says)


def test_deep_files_the_engine_reads_are_one_line_or_ignored(tmp_path, capsys):
    root = minimal(tmp_path)
    deep = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
    (root / "patchlane.toml").write_text(deep)
    refused(
        capsys,
        root,
        "mirrors",
        says="patchlane.toml: invalid TOML: arrays or inline tables nested too deeply",
    )
    (root / "patchlane.toml").unlink()
    (root / "locks" / "a").mkdir(parents=True)
    # a lock nobody can parse is foreign, not a crash
    (root / "locks" / "a" / "pylock.toml").write_text(deep)
    code, out, err = cli(capsys, root, "lock", "--check")
    assert code == 1 and "foreign a:" in out and "Traceback" not in err


def test_a_lock_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    root = minimal(tmp_path)
    (root / "locks" / "a" / "pylock.toml").mkdir(parents=True)
    for args in (("lock", "--check"), ("lock", "a"), ("lanes",), ("run", "a", "--no-record")):
        refused(capsys, root, *args, says="locks/a/pylock.toml: not a regular file")


@pytest.mark.slow
def test_a_stray_file_where_an_env_folder_goes_fails_the_lane_in_one_line(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    assert cli(capsys, project.root, "lock")[0] == 0
    envs = project.root / ".patchlane" / "envs"
    envs.mkdir(parents=True)
    (envs / "a").write_text("stray\n")
    code, out, err = cli(capsys, project.root, "run", "a", "--no-record")
    assert code == 1 and "Traceback" not in out + err
    assert "a: build-failed — " in out and "envs/a is a file where the lane env folder goes" in out
    (envs / "a").unlink()
    envs.rmdir()
    # the folder of all envs is a file
    envs.write_text("stray\n")
    code, out, err = cli(capsys, project.root, "run", "a", "--no-record")
    assert (
        code == 1
        and "Traceback" not in out + err
        and "is a file where the lane env folder goes" in out
    )


@pytest.mark.parametrize(
    "summary",
    [
        "{",
        "[]",
        '{"lane": 1}',
        '{"lane": "a", "status": 3}',
        "[" * 100_000,
        '{"lane": "a", "status": "ok", "shims": [{"shim": "s", "outcome": "nope"}]}',
        '{"lane": "a", "status": "ok", "planned": 5}',
        '{"lane": "a", "status": "ok", "seconds": "x"}',
    ],
)
def test_a_corrupt_run_summary_is_one_line(tmp_path, capsys, summary):
    root = minimal(tmp_path)
    folder = root / ".patchlane" / "runs" / "r1"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(summary)
    refused(capsys, root, "summary", "--run-id", "r1", says="unreadable lane summary")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_run_summary_that_is_a_fifo_is_one_line_not_a_block(tmp_path, capsys):
    root = minimal(tmp_path)
    folder = root / ".patchlane" / "runs" / "r1"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "a.json")
    refused(capsys, root, "summary", "--run-id", "r1", says="not a regular file (a FIFO)")


@pytest.mark.parametrize(
    "state, says",
    [
        (
            '{"version": 1, "packs": {"toy_add": {"approval": {"by": "a", "at": "2026-13-45", '
            '"digest": "' + "ab" * 32 + '"}}}}',
            "malformed date",
        ),
        (
            '{"version": 1, "packs": {"toy_add": {"approval": {"by": "a", "at": '
            '"9999-12-31T23:59:59-23:59", "digest": "' + "ab" * 32 + '"}}}}',
            "out of range",
        ),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_a_bad_pack_state_is_one_line(tmp_path, capsys, state, says):
    project = PackProject(tmp_path)
    project.add("toy_add")
    (project.root / "packs" / "state.json").write_text(state)
    for action in ("plan", "queue", "check"):
        refused(capsys, project.root, "pack", action, says=says)


# ---------------------------------------------------------------------------------------------
# Class 7: no more silent acceptance


@pytest.mark.parametrize(
    "lane, says",
    [
        ('[lane]\npython = "3.99"\nrequirements = ["x"]\n', "invalid Python version '3.99'"),
        ('[lane]\npython = "3.05"\nrequirements = ["x"]\n', "invalid Python version '3.05'"),
        ('[lane]\npython = "3.7"\nrequirements = ["x"]\n', "invalid Python version '3.7'"),
        ('[lane]\npython = "2.7"\nrequirements = ["x"]\n', "invalid Python version '2.7'"),
        (
            '[lane]\npython = "3.12"\nplatform = "x86_64-manylinux_2_99"\nrequirements = ["x"]\n',
            "unknown target platform",
        ),
        (
            '[lane]\npython = "3.12"\nplatform = "x86_64-manylinux2010"\nrequirements = ["x"]\n',
            "unknown target platform",
        ),
        (
            '[lane]\npython = "3.12"\nplatform = "i686-unknown-linux-gnu"\nrequirements = ["x"]\n',
            "unknown target platform",
        ),
        (
            (
                '[matrix]\nname = "c{a}"\n[matrix.base]\npython = "3.12"\nrequirements = '
                '["x"]\n[matrix.axes.a."1"]\n'
                '[matrix.axes.a."2"]\n[[matrix.exclude]]\na = "1"\n[[matrix.exclude]]\na = "2"\n'
            ),
            "matrix.exclude: the excludes remove every cell",
        ),
        (
            '[matrix]\nname = "c{a0}{a1}{a2}{a3}{a4}{a5}"\n[matrix.base]\npython = '
            '"3.12"\nrequirements = ["x"]\n'
            + "".join(f'[matrix.axes.a{i}."{j}"]\n' for i in range(6) for j in range(10)),
            "expands to 1000000 cells, more than 4096",
        ),
    ],
)
def test_impossible_lanes_are_refused(tmp_path, capsys, lane, says):
    refused(capsys, minimal(tmp_path, lane), "lanes", says=says)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_lane_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    os.mkfifo(tmp_path / "lanes" / "a.toml")
    refused(capsys, tmp_path, "lanes", says="lanes/a.toml: not a regular file (a FIFO)")


def test_a_sentinel_printed_twice_is_a_crashed_run(tmp_path):
    twice = (
        'print(\'PATCHLANE-HOST {"hostname": '
        '"h"}\')\nprint("BUG_REPRODUCED")\nprint("BUG_REPRODUCED")\nraise SystemExit(10)\n'
    )
    folder = shimtree.write_shim(tmp_path / "shims", "toy_add", reproducer=twice)
    made = run_reproducer(
        load_manifest(folder / "manifest.toml"), "without", lane="toy", timeout=60
    )
    assert made.exit_code == 10 and made.output_tail.count("BUG_REPRODUCED") == 2
    assert (
        made.outcome == "crashed"
        and made.sentinel is None
        and "no single sentinel line" in made.detail
    )


def test_merging_a_manifest_that_does_not_exist_fails_and_writes_nothing(tmp_path, capsys):
    good = tmp_path / "a.jsonl"
    validation.append(good, [record()])
    out = tmp_path / "merged.jsonl"
    refused(
        capsys,
        tmp_path,
        "validation",
        "merge",
        str(good),
        str(tmp_path / "typo.jsonl"),
        "-o",
        str(out),
        says="typo.jsonl: file not found",
    )
    assert not out.exists()


def test_validation_merge_goes_on_past_a_damaged_line_and_keeps_odd_output(tmp_path, capsys):
    host_a, host_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    odd = record(output_tail="step 1\u2028step 2\u2029done\x85", host="h\u2028")
    validation.append(host_a, [odd])
    host_b.write_text(validation.dumps(record(host="h200-b")) + "\n" + '{"cut": "in the mid\n')
    out = tmp_path / "merged.jsonl"
    code, stdout, err = cli(
        capsys, tmp_path, "validation", "merge", str(host_a), str(host_b), "-o", str(out)
    )
    assert code == 0 and "2 records (+2)" in stdout
    assert err.count("patchlane: warning:") == 1 and "b.jsonl: line 2: not valid JSON" in err
    assert (
        "copied to" in err
        and (tmp_path / "b.jsonl.quarantine").read_text() == '{"cut": "in the mid\n'
    )
    assert [r.host["hostname"] for r in validation.load(out)] == ["h\u2028", "h200-b"]


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"internal error")

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_lock_fails_when_the_index_answers_500(tmp_path, capsys, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # uv would retry a 500 three times: one answer is enough here
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/simple"
        root = minimal(tmp_path, lane_text('"helper==1.0"').replace("@MAIN@", url))
        code, out, err = cli(capsys, root, "lock")
        assert code == 1 and "Traceback" not in out + err
        assert (
            "failed      a:" in out
            and "500 Internal Server Error" in out
            and "unreachable" not in out
        )
        assert not (root / "locks" / "a" / "pylock.toml").exists()
        # and the lock it could not make is missing
        code, out, _ = cli(capsys, root, "lock", "--check")
        assert code == 1 and "missing a: no lock" in out
    finally:
        server.shutdown()
