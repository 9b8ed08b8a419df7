"""What patchlane's child processes inherit (issue 30, class 1): git and every hook it runs get no
secret-named variable, and uv gets its index credentials without them being in its environment,
so lane code that reads ``/proc/<pid>/environ`` of a running uv finds none.

Real git with a repository's own ``core.hooksPath``, real uv against a loopback index that
answers 401 without HTTP basic auth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retire.core import uv, uvauth
from retire.core.git import Git
from tests.support.gitrepos import git
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

SECRETS = {
    "GITHUB_TOKEN": "ghp_hooktoken123456",
    "HF_TOKEN": "hf_hooktoken123456",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-123456",
    "WANDB_API_KEY": "wandb-key-123456",
    "UV_INDEX_PRIVATE_PASSWORD": "index-password-123456",
    # AUTH as a word of the name: no TOKEN, SECRET, KEY or PASSWORD to give it away
    "AUTH_HEADER": "Bearer auth-header-123456",
    "PROXY_AUTHORIZATION": "Basic proxy-auth-123456",
    "npm_config__auth": "bnBtOm5wbS1hdXRoLTEyMzQ1Ng==",
}

#: A hook that records its whole environment (one JSON document per call).
RECORDING_HOOK = """#!{python}
import json, os, sys
with open({out!r}, "a") as handle:
    handle.write(json.dumps({{"hook": sys.argv[0], "env": dict(os.environ)}}) + "\\n")
"""


def _hooks(folder: Path, out: Path) -> Path:
    folder.mkdir()
    for name in ("post-checkout", "post-commit", "pre-commit", "reference-transaction", "pre-push"):
        hook = folder / name
        hook.write_text(RECORDING_HOOK.format(python=sys.executable, out=str(out)))
        hook.chmod(0o755)
    return folder


def _recorded(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


@pytest.mark.slow
def test_git_and_its_hooks_get_no_secret(tmp_path, monkeypatch):
    """A repository whose core.hooksPath records every hook's environment; patchlane's git adds
    a worktree and commits in it with tokens in the engine's environment. Before: every hook
    saw GITHUB_TOKEN, HF_TOKEN, AWS_SECRET_ACCESS_KEY… Now: none of them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    out = tmp_path / "hooks.jsonl"
    git(repo, "config", "core.hooksPath", str(_hooks(tmp_path / "hooks", out)))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    engine = Git(repo, env={**identity, "GIT_COMMITTER_EMAIL": "t@x"})
    engine.run("worktree", "add", "-q", "-b", "work", str(tmp_path / "wt"))
    work = Git(tmp_path / "wt", env={**identity, "GIT_COMMITTER_EMAIL": "t@x"})
    (tmp_path / "wt" / "b.txt").write_text("b\n")
    work.run("add", "b.txt")
    work.run("commit", "-q", "-m", "second")
    seen = _recorded(out)
    assert {Path(r["hook"]).name for r in seen} >= {"post-checkout", "pre-commit", "post-commit"}
    for record in seen:
        leaked = {k for k, v in record["env"].items() if k in SECRETS or v in SECRETS.values()}
        assert not leaked, f"{record['hook']} saw {sorted(leaked)}"
        # the rest of the caller's environment is still there (PATH, HOME)
        assert record["env"]["PATH"].endswith(os.environ["PATH"])


@pytest.mark.slow
def test_retire_apply_runs_no_hook_with_a_secret(tmp_path, monkeypatch, capsys):
    """`retire --apply` on a shop whose repository configures hooks: every hook it triggers
    (worktree checkout, commits, ref updates) records an environment without any token."""
    from tests.conftest import run_cli
    from tests.test_retire_lanes import LaneShop

    shop = LaneShop(tmp_path)
    try:
        shop.record_fix()
        out = tmp_path / "hooks.jsonl"
        git(shop.root, "config", "core.hooksPath", str(_hooks(tmp_path / "hooks", out)))
        for name, value in SECRETS.items():
            monkeypatch.setenv(name, value)
        code, _, err = run_cli(shop.root, "retire", "--apply", "--no-pr", "--json", capsys=capsys)
        assert code == 0, err
        seen = _recorded(out)
        assert seen, "retire --apply triggered no hook: the test proves nothing"
        for record in seen:
            leaked = {k for k, v in record["env"].items() if k in SECRETS or v in SECRETS.values()}
            assert not leaked, f"{record['hook']} saw {sorted(leaked)}"
    finally:
        shop.close()


# -- uv's index credentials ----------------------------------------------------------------------


def _environ_readings(stop: threading.Event, binary: str, found: list[bytes]) -> None:
    """Read /proc/<pid>/environ of every running uv until ``stop``, as lane code of another
    lane could."""
    while not stop.is_set():
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                exe = os.readlink(f"/proc/{entry}/exe")
                if os.path.realpath(exe) != os.path.realpath(binary):
                    continue
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    found.append(handle.read())
            except OSError:
                continue
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd (Linux)")
def test_uv_gets_index_credentials_no_other_process_reads_in_its_environment(tmp_path, monkeypatch):
    """A private index (401 without basic auth) named in the call's uv.toml; the host gives its
    credentials as UV_INDEX_PRIVATE_USERNAME/PASSWORD. uv resolves through it, while another
    process reads the environment of every running uv. Before: the password was in uv's
    environment block. Now: uv had it from a netrc in a memory file, never as a variable."""
    password = "index-password-" + "x" * 12
    index = PackageIndex(credentials=("me", password), latency=0.05)
    index.add(build_wheel(tmp_path, "toylib", "1.0"), "2024-01-01T00:00:00")
    (tmp_path / "req.in").write_text("toylib\n")
    monkeypatch.setenv("UV_INDEX_PRIVATE_USERNAME", "me")
    monkeypatch.setenv("UV_INDEX_PRIVATE_PASSWORD", password)
    monkeypatch.setenv("UV_NO_CACHE", "1")
    stop = threading.Event()
    readings: list[bytes] = []
    with IndexServer(index) as server:
        config = tmp_path / "uv.toml"
        config.write_text(f'[[index]]\nname = "private"\nurl = "{server.url}"\ndefault = true\n')
        reader = threading.Thread(target=_environ_readings, args=(stop, uv.binary(), readings))
        reader.start()
        try:
            proc = uv.run(
                ["pip", "compile", "--config-file", str(config), "--no-header", "req.in"],
                cwd=tmp_path,
                without_indexes=True,
            )
        finally:
            stop.set()
            reader.join()
    assert proc.returncode == 0, proc.stderr
    assert "toylib==1.0" in proc.stdout
    assert readings, "no running uv was seen: the test proves nothing"
    assert not any(password.encode() in block for block in readings)
    assert not any(b"UV_INDEX_PRIVATE_PASSWORD" in block for block in readings)


@pytest.mark.slow
def test_without_credentials_the_private_index_refuses(tmp_path, monkeypatch):
    """The loopback index really demands them: the same call without credentials fails."""
    index = PackageIndex(credentials=("me", "index-password-123456"))
    index.add(build_wheel(tmp_path, "toylib", "1.0"), "2024-01-01T00:00:00")
    (tmp_path / "req.in").write_text("toylib\n")
    monkeypatch.delenv("UV_INDEX_PRIVATE_PASSWORD", raising=False)
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    with IndexServer(index) as server:
        config = tmp_path / "uv.toml"
        config.write_text(f'[[index]]\nname = "private"\nurl = "{server.url}"\ndefault = true\n')
        proc = uv.run(
            ["pip", "compile", "--config-file", str(config), "--no-header", "req.in"],
            cwd=tmp_path,
            without_indexes=True,
        )
    assert proc.returncode != 0


def test_the_netrc_names_each_index_host_once_and_keeps_the_hosts_own():
    given = uvauth.credentials(
        {
            "UV_INDEX_PRIVATE_USERNAME": "me",
            "UV_INDEX_PRIVATE_PASSWORD": 'p w"\\',
            "UV_INDEX_TOKEN_ONLY_PASSWORD": "tok",
            "UV_INDEX_UNKNOWN_PASSWORD": "never",
        }
    )
    text = uvauth.netrc_text(
        given,
        {"private": "https://idx.example/simple", "token-only": "http://other.example:8080/s"},
        "machine mine.example login a password b\n",
    )
    assert text.splitlines() == [
        'machine idx.example login me password "p w\\"\\\\"',
        "machine other.example password tok",
        "machine mine.example login a password b",
    ]


def test_the_memory_file_is_closed_after_the_call(monkeypatch):
    monkeypatch.setenv("UV_INDEX_A_PASSWORD", "pw-123456789")
    with uvauth.handed(os.environ, lambda: {"a": "http://h.example/simple"}) as auth:
        [descriptor] = auth.pass_fds
        assert auth.env == {"NETRC": f"/dev/fd/{descriptor}"}
        assert os.pread(descriptor, 100, 0).startswith(b"machine h.example password pw-1234")
        # close-on-exec: no process another thread starts meanwhile inherits it
        assert not os.get_inheritable(descriptor)
    with pytest.raises(OSError):
        os.fstat(descriptor)
    subprocess.run(["true"], check=True)


#: A reproducer that, for a few seconds, reads the environment of every process it can — as
#: lane code of one lane could while another lane's uv runs beside it under ``run --jobs 2``.
NEIGHBOUR = """
import json, os, time
from shims import reproducer

PASSWORD = {password!r}
OUT = {out!r}


def check(with_shim):
    seen_uv, leaked = 0, []
    ends = time.monotonic() + 8
    while time.monotonic() < ends:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{{entry}}/cmdline", "rb") as handle:
                    command = handle.read().split(b"\\0")
                with open(f"/proc/{{entry}}/environ", "rb") as handle:
                    block = handle.read()
            except OSError:
                continue
            if command and command[0].endswith(b"/uv") and b"sync" in command:
                seen_uv += 1
            if PASSWORD.encode() in block or b"UV_INDEX_PRIVATE_PASSWORD" in block:
                leaked.append(b" ".join(command).decode(errors="replace")[:200])
        time.sleep(0.01)
    with open(OUT, "a") as out:
        out.write(json.dumps({{"seen_uv": seen_uv, "leaked": leaked}}) + "\\n")
    return reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("neighbour", check)
"""

TWO_LANES = """
[lane]
python = "3.11"
requirements = ["toylib==1.0"]
shims = {shims}

[lane.indexes.{index}]
url = "{url}"
default = true
"""


@pytest.mark.slow
def test_a_lanes_code_cannot_read_the_index_password_of_the_lane_beside_it(tmp_path):
    """`run --jobs 2`: lane `private` syncs from an index that answers 401 without basic auth
    (and takes 3 s a file); lane `neighbour`'s reproducer reads /proc/<pid>/environ of every
    process meanwhile. Before: it read UV_INDEX_PRIVATE_PASSWORD in the private lane's `uv pip
    sync`. Now: uv got it from a netrc in a memory file; the neighbour sees the sync run but no
    password, and the private lane still installs (the credentials reached uv)."""
    import textwrap

    from tests.conftest import subprocess_env
    from tests.support import shimtree

    password = "index-password-" + "y" * 12
    out = tmp_path / "seen.jsonl"
    files = {"toylib.py": textwrap.dedent(shimtree.BUGGY_TARGET)}
    private, public = PackageIndex(credentials=("me", password)), PackageIndex()
    for index in (private, public):
        index.add(build_wheel(tmp_path / "wheels", "toylib", "1.0", files=files), "2026-01-05")
    root = tmp_path / "project"
    (root / "lanes").mkdir(parents=True)
    shimtree.write_shim(root / "shims", "toy")
    shimtree.write_shim(
        root / "shims", "neighbour", reproducer=NEIGHBOUR.format(password=password, out=str(out))
    )
    env = subprocess_env(
        UV_INDEX_PRIVATE_USERNAME="me",
        UV_INDEX_PRIVATE_PASSWORD=password,
        UV_CACHE_DIR=str(tmp_path / "lock-cache"),
    )
    with IndexServer(private) as private_server, IndexServer(public) as public_server:
        for lane, shims, index, url in (
            ("private", ["toy"], "private", private_server.url),
            ("neighbour", ["neighbour"], "main", public_server.url),
        ):
            (root / "lanes" / f"{lane}.toml").write_text(
                TWO_LANES.format(shims=json.dumps(shims), index=index, url=url)
            )
        command = [sys.executable, "-m", "retire", "--root", str(root)]
        done = subprocess.run([*command, "lock"], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        # a cold cache: the private lane's sync downloads, slowly, while the neighbour looks
        private.latency = 3.0
        env["UV_CACHE_DIR"] = str(tmp_path / "run-cache")
        done = subprocess.run(
            [*command, "run", "--jobs", "2", "--json"], capture_output=True, text=True, env=env
        )
    document = json.loads(done.stdout)
    lanes = {lane["lane"]: lane for lane in document["lanes"]}
    assert lanes["private"]["status"] != "build-failed", lanes["private"]
    looks = [json.loads(line) for line in out.read_text().splitlines()]
    assert looks and any(look["seen_uv"] for look in looks), (looks, done.stderr)
    assert not [leak for look in looks for leak in look["leaked"]], looks
    assert password not in done.stdout + done.stderr
