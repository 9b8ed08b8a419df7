"""Secrets never reach lane code, uv gets only its index credentials, and no token leaves the
process: not on stdout (``--json`` included), not in report files, not in the HTTP cache.

The code host here echoes the ``Authorization`` header into every issue title, as a hostile or
buggy server might; the token comes from ``GITHUB_TOKEN`` as it does in CI.
"""

from __future__ import annotations

import json

import pytest

from retire.core import childenv, secrets
from retire.core.atomic import atomic_write
from retire.runs.reproduce import run_reproducer
from shims.manifest import load_manifest
from tests.support.shimtree import subprocess_env, write_shim, write_target
from tests.test_probe_faults import upstream, world  # noqa: F401  (fixtures: a project, a code host, an index)
from tests.test_runs import toy_index, toy_project  # noqa: F401  (fixtures: a lane project on the loopback index)

TOKEN = "secret-xyz"


def test_the_allow_list_drops_secrets_even_under_allowed_prefixes():
    env = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCH_LOGS": "+dynamo",
        "NCCL_DEBUG": "INFO",
        "PATCHLANE_HOST_CUDA": "0",
        "UV_CACHE_DIR": "/c",
        "GITHUB_TOKEN": TOKEN,
        "FOO_SECRET": "s3cr3t-value",
        "MY_API_KEY": "k" * 12,
        "HF_TOKEN": "hf_x" * 3,
        "TORCH_AUTH_HEADER": "x",
        "PATCHLANE_GITHUB_TOKEN": "t" * 9,
        "AWS_SECRET_ACCESS_KEY": "a" * 20,
        "RANDOM_TOOL_SETTING": "1",
        "UV_INDEX_PRIVATE_PASSWORD": "pw-123456",
        "UV_INDEX_PRIVATE_USERNAME": "me",
        "SSH_AUTH_SOCK": "/tmp/s",
    }
    lane = childenv.for_lane(env)
    assert lane == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCH_LOGS": "+dynamo",
        "NCCL_DEBUG": "INFO",
        "PATCHLANE_HOST_CUDA": "0",
    }
    tool = childenv.for_uv(env)
    assert tool["UV_CACHE_DIR"] == "/c"
    # uv's index credentials reach it outside its environment (retire.core.uvauth)
    assert not {
        "UV_INDEX_PRIVATE_PASSWORD",
        "UV_INDEX_PRIVATE_USERNAME",
        "GITHUB_TOKEN",
        "FOO_SECRET",
        "MY_API_KEY",
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "PATCHLANE_GITHUB_TOKEN",
        "RANDOM_TOOL_SETTING",
    } & set(tool)
    # A host passes more names explicitly, never a secret-named one.
    passed = childenv.for_lane({**env, "PATCHLANE_PASS_ENV": "RANDOM_TOOL_SETTING GITHUB_TOKEN"})
    assert passed["RANDOM_TOOL_SETTING"] == "1" and "GITHUB_TOKEN" not in passed
    # A caller's own environment for a reproducer keeps its variables but never a secret-named one.
    assert childenv.for_reproducer({"FOO": "1", "GITHUB_TOKEN": TOKEN}) == {"FOO": "1"}


@pytest.mark.slow
def test_a_reproducer_sees_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("FOO_SECRET", "foo-secret-value")
    monkeypatch.setenv("MY_API_KEY", "my-api-key-value")
    monkeypatch.setenv("RANDOM_TOOL_SETTING", "on")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    root, site = tmp_path / "shims", tmp_path / "site"
    write_target(site)
    reproducer = """from shims import reproducer
import json, os
def check(with_shim):
    print("ENV " + json.dumps(sorted(os.environ)))
    print("leaked: " + os.environ.get("GITHUB_TOKEN", "none"))
    return reproducer.BUG_REPRODUCED
reproducer.run("toy_env", check)
"""
    manifest = load_manifest(write_shim(root, "toy_env", reproducer=reproducer) / "manifest.toml")
    # inherited, and a caller's copy of os.environ
    for env in (None, subprocess_env(tmp_path, root, site)):
        record = run_reproducer(manifest, "without", env=env)
        assert record.outcome == "bug-reproduced", record.output_tail
        seen = json.loads(
            next(line for line in record.output_tail.splitlines() if line.startswith("ENV "))[4:]
        )
        assert not {"GITHUB_TOKEN", "FOO_SECRET", "MY_API_KEY"} & set(seen), seen
        assert "NCCL_DEBUG" in seen and "leaked: none" in record.output_tail
        if env is None:
            # the allow-list, not a deny-list
            assert "RANDOM_TOOL_SETTING" not in seen


def test_text_written_anywhere_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "key-1234567")
    atomic_write(tmp_path / "r.md", 'token key-1234567 and {"k": "key-1234567"}', within=tmp_path)
    assert (tmp_path / "r.md").read_text() == 'token <redacted> and {"k": "<redacted>"}'
    # a secret as JSON, HTML and URLs escape it
    monkeypatch.setenv("ODD_TOKEN", 'quo"te\\1234&<x>')
    assert secrets.scrub(json.dumps({"t": 'quo"te\\1234&<x>'})) == '{"t": "<redacted>"}'
    assert secrets.scrub("<td>quo&quot;te\\1234&amp;&lt;x&gt;</td>") == "<td><redacted></td>"
    assert secrets.scrub("?t=quo%22te%5C1234%26%3Cx%3E&u=1") == "?t=<redacted>&u=1"
    # bytes (wheels) are written as given
    atomic_write(tmp_path / "w.bin", b"key-1234567", within=tmp_path)
    assert (tmp_path / "w.bin").read_bytes() == b"key-1234567"


@pytest.mark.slow
@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_an_echoed_token_reaches_no_output_and_no_file(world, graphql, monkeypatch, capsys):
    from retire.commands import main as cli
    from tests.support.faults import Fault

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    world["api"].host.echo_authorization = True
    if not graphql:
        world["api"].host.faults.add("/graphql", Fault(status=404))
    root, cache, reports = world["project"].root, world["tmp"] / "cache", world["tmp"] / "reports"
    common = [
        "--root",
        str(root),
        "--api-url",
        world["api"].url,
        "--mirrors",
        str(world["mirrors"]),
    ]
    assert cli(["verdicts", *common, "--cache-dir", str(cache), "--json"]) == 0
    out, err = capsys.readouterr()
    # the server did echo it: the title is there, the token is not
    assert "seen: Bearer" in out, out
    assert TOKEN not in out and TOKEN not in err
    assert cli(["report", *common, "--out", str(reports), "--week", "2026-W30"]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    assert cli(["report", *common, "--out", str(reports), "--week", "2026-W30", "--json"]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    written = [p for folder in (cache, reports, root) for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in written) and any(
        p.parent == cache or cache in p.parents for p in written
    )
    for path in written:
        assert TOKEN.encode() not in path.read_bytes(), path


def test_secret_names_are_told_from_look_alikes():
    for name in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "HF_TOKEN",
        "MY_API_KEY",
        "FOO_SECRET",
        "PGPASSWORD",
        "AUTH_HEADER",
        "PROXY_AUTHORIZATION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "UV_INDEX_X_PASSWORD",
        "npm_config__auth",
    ):
        assert secrets.looks_secret(name), name
    for name in (
        "GIT_AUTHOR_NAME",
        "SSH_AUTH_SOCK",
        "XDG_SESSION_TYPE",
        "NCCL_IB_PKEY",
        "PATH",
        "UV_KEYRING_PROVIDER",
    ):
        assert not secrets.looks_secret(name), name


@pytest.mark.slow
def test_a_lane_run_leaks_no_secret_a_reproducer_learnt(toy_project, capsys, monkeypatch):
    """The reproducer cannot read the token, but prints it anyway (a server echoed it): neither the
    pytest view, the --json document, the run summaries nor the validation manifest carry it."""
    from tests.conftest import run_cli
    from tests.support import shimtree
    from tests.test_runs import lane

    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    p = toy_project
    shimtree.write_shim(
        p.root / "shims",
        "toy_echo",
        reproducer=f"""
import os
from shims import reproducer

def check(with_shim):
    print("echoed: {TOKEN}; inherited:", os.environ.get("GITHUB_TOKEN"))
    raise RuntimeError("login failed with {TOKEN}")

if __name__ == "__main__":
    reproducer.run("{{shim_id}}", check, packages=["toylib"])
""",
    )
    p.write("old", lane(shims='["toy_echo"]'))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    for extra in ((), ("--json",)):
        code, out, err = run_cli(p.root, "run", "--run-id", f"s{len(extra)}", *extra, capsys=capsys)
        # it crashed, and says so
        assert code == 1 and "toy_echo" in out + err
        assert TOKEN not in out + err
        # the view shows the output, the token scrubbed
        assert "inherited: None" in out + err
    for path in (p.root / ".patchlane" / "runs").rglob("*.json"):
        assert TOKEN not in path.read_text()
    manifest = (p.root / "validation" / "manifest.jsonl").read_text()
    assert "echoed: <redacted>" in manifest and TOKEN not in manifest


def test_the_gpu_hosts_safety_settings_reach_lane_code():
    """GPU hosts here keep NVLink multicast off through these variables, which every program a lane
    starts must keep (a program started with its own environment too)."""
    safety = {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    assert childenv.for_lane({"PATH": "/bin", **safety}) == {"PATH": "/bin", **safety}
    assert safety.items() <= childenv.for_uv({"PATH": "/bin", **safety}).items()
