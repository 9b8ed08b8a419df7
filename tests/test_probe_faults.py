"""Faults injected through loopback servers: each is retried where that makes sense, shown with
its reason, and never lets a shim be retired wrongly.

The catalogue is built so that every shim WOULD retire with healthy upstreams
(``test_baseline_every_shim_retires``). A fault on a look-up a retirement condition needs makes
that shim *unknown*; a fault on an informational link (``floor_fixed``'s issue) is a flag and
changes nothing — the decision rests on the index and the recorded runs.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time

import pytest

from retire.commands import main as cli
from retire.evidence.floor import Floor
from retire.probes.http import RetryPolicy
from retire.verdicts.gather import GatherOptions, gather
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import (
    Fault,
    FaultyIndexServer,
    oversized,
    redirect,
    slow_drip,
    unused_port,
)
from tests.support.gitrepos import git, make_upstream
from tests.support.probing import toylib_index
from tests.support.retirement import NOW, VERSION_FLOOR, Project, commit_in_tag, pr_released

# Each fault runs a whole gather against a misbehaving loopback server: the full suite's, not
# the fast tier's (about 14 s in all).
pytestmark = pytest.mark.slow

PR = "https://github.com/org/toylib/pull/2"
ISSUE = "https://github.com/org/toylib/issues/1"
REPO = "https://github.com/org/toylib"
PR_PATH = "/repos/org/toylib/pulls/2"
ISSUE_PATH = "/repos/org/toylib/issues/1"
INDEX_PATH = "/simple/toylib/"
POLICY = RetryPolicy(
    attempts=3,
    backoff=0.02,
    max_backoff=0.05,
    budget=5.0,
    max_wait=2.0,
    timeout=0.3,
    json_attempts=2,
)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    up = make_upstream(root / "toylib")
    git(up.path, "tag", "v1.2", up.merge)
    return up


@pytest.fixture
def world(tmp_path, upstream):
    mirrors = tmp_path / "mirrors"
    (mirrors / "org").mkdir(parents=True)
    git(
        mirrors / "org",
        "clone",
        "-q",
        "--mirror",
        str(upstream.path),
        str(mirrors / "org" / "toylib.git"),
    )
    host = CodeHost()
    host.add_issue(
        "org", "toylib", 1, state="closed", closed_at="2026-02-02", updated_at="2026-06-01"
    )
    host.add_pull(
        "org",
        "toylib",
        2,
        state="closed",
        merged=True,
        merged_at="2026-02-01",
        merge_commit_sha=upstream.merge,
        updated_at="2026-06-01",
    )
    p = Project(tmp_path / "project")
    with FaultyIndexServer(toylib_index(tmp_path / "wheels")) as index, CodeHostServer(host) as api:
        # index + code host
        p.shim("floor_fixed", VERSION_FLOOR, links=(("report", ISSUE),))
        # code host + index + git
        p.shim("pr_fixed", pr_released(PR), links=(("fix", PR),))
        # git only
        p.shim("tagged_fix", commit_in_tag(REPO, upstream.fix), status="not-applicable")
        p.lane("cpu", ["floor_fixed", "pr_fixed", "tagged_fix"], index_url=index.url)
        for shim in ("floor_fixed", "pr_fixed", "tagged_fix"):
            p.run(shim, "bug-reproduced", "1.0", when="2026-01-20T00:00:00.000000+00:00")
            p.run(shim, "fix-validated", "1.2", host="gpu-1")
        yield {"project": p, "index": index, "api": api, "mirrors": mirrors, "tmp": tmp_path}


def verdicts(world, *, api_base=None, mirrors=None, cache=True, policy=POLICY, token=None) -> dict:
    p = world["project"]
    found = gather(
        p.manifests(),
        p.lanes(),
        p.root / "locks",
        p.validation,
        GatherOptions(
            api_base=api_base or world["api"].url,
            token=token,
            mirrors=mirrors or world["mirrors"],
            cache_dir=world["tmp"] / "cache" if cache else None,
            policy=policy,
            clock=lambda: NOW,
        ),
    )
    return {v.shim: v for v in found}


def requests_to(world, path: str) -> int:
    return sum(1 for r in world["api"].host.requests if r[0] == path)


def assert_unknown(
    found: dict, shims: tuple[str, ...], reason: str, *, probe_failed: bool = True
) -> None:
    """``shims`` needed the faulty look-up: unknown, with the reason and the action to take."""
    for shim in shims:
        assert found[shim].decision == "unknown", (shim, found[shim].decision, found[shim].why)
        assert reason in found[shim].why, (shim, found[shim].why)
        assert found[shim].action, shim
        assert bool(found[shim].failures) == probe_failed and found[shim].floors == ()


def assert_flagged(found: dict, shims: tuple[str, ...], reason: str) -> None:
    """``shims`` did not need the faulty look-up: decided as without the fault, the fault a flag."""
    for shim in shims:
        assert found[shim].decision == "retire", (shim, found[shim].decision, found[shim].why)
        assert any(f.kind == "probe-failed" and reason in f.text for f in found[shim].flags), (
            shim,
            found[shim].flags,
        )


def test_baseline_every_shim_retires(world):
    found = verdicts(world)
    assert {shim: v.decision for shim, v in found.items()} == {
        "floor_fixed": "retire",
        "pr_fixed": "retire",
        "tagged_fix": "retire",
    }
    assert not any(v.failures for v in found.values())


@pytest.mark.slow
def test_timeout_is_retried_then_unknown(world):
    world["api"].host.faults.add(ISSUE_PATH, Fault(latency=1.0))
    started = time.monotonic()
    found = verdicts(world)
    assert time.monotonic() - started < 4
    assert_flagged(found, ("floor_fixed",), "timed out after 0.3s")
    assert any("after 3 attempts" in f.text for f in found["floor_fixed"].flags)
    assert requests_to(world, ISSUE_PATH) == 3
    # an unrelated shim is not held back
    assert found["tagged_fix"].decision == "retire"


def test_connection_refused(world):
    found = verdicts(world, api_base=f"http://127.0.0.1:{unused_port()}", mirrors=world["tmp"])
    assert_unknown(found, ("pr_fixed",), "connection refused")
    assert_flagged(found, ("floor_fixed",), "connection refused")
    assert found["floor_fixed"].failures[0].attempts == 3


def test_dns_failure_through_gather(world):
    found = verdicts(world, api_base="http://nonexistent.invalid", mirrors=world["tmp"])
    assert_unknown(found, ("pr_fixed",), "DNS lookup failed")
    assert_flagged(found, ("floor_fixed",), "DNS lookup failed")
    # the air-gapped way to decide it
    assert "mirror" in found["pr_fixed"].action


def test_server_error_5xx_is_retried(world):
    world["index"].faults.add(INDEX_PATH, Fault(status=503))
    found = verdicts(world, mirrors=world["tmp"])
    assert_unknown(found, ("floor_fixed", "pr_fixed"), "server error 503")
    # answered by the fault layer
    assert world["index"].index.requests.count(INDEX_PATH) == 0
    assert len([f for f in world["index"].faults.fired if f[0] == INDEX_PATH]) == 3


def test_transient_5xx_heals_with_a_retry(world):
    world["index"].faults.add(INDEX_PATH, Fault(status=502, times=2))
    found = verdicts(world)
    assert found["floor_fixed"].decision == "retire"


def test_429_with_retry_after_is_retried_then_unknown(world):
    world["api"].host.faults.add(PR_PATH, Fault(status=429, headers={"Retry-After": "0"}))
    found = verdicts(world, mirrors=world["tmp"])
    assert_unknown(found, ("pr_fixed",), "429 Too Many Requests")
    assert requests_to(world, PR_PATH) == 3


def test_429_with_a_long_retry_after_is_not_slept_on(world):
    world["api"].host.faults.add(PR_PATH, Fault(status=429, headers={"Retry-After": "3600"}))
    started = time.monotonic()
    found = verdicts(world, mirrors=world["tmp"])
    assert time.monotonic() - started < 2
    assert_unknown(found, ("pr_fixed",), "asks to wait 3600s")
    assert requests_to(world, PR_PATH) == 1


def test_the_mirror_decides_what_the_code_host_cannot_answer(world):
    """Air-gapped: every code-host request fails, the mirror says which commit landed PR #2 and
    which release tags contain it; the informational issue link stays a flag."""
    found = verdicts(world, api_base="http://nonexistent.invalid")
    assert {shim: v.decision for shim, v in found.items()} == {
        "floor_fixed": "retire",
        "pr_fixed": "retire",
        "tagged_fix": "retire",
    }
    assert "landed as" in found["pr_fixed"].why and found["pr_fixed"].floors == (
        Floor.parse("toylib>=1.2"),
    )
    assert_flagged(found, ("floor_fixed", "pr_fixed"), "DNS lookup failed")


def test_403_rate_limit(world):
    world["api"].host.rate_remaining = 0
    found = verdicts(world, mirrors=world["tmp"])
    assert_unknown(found, ("pr_fixed",), "403 rate limit exceeded")
    assert_flagged(found, ("floor_fixed",), "403 rate limit exceeded")


def test_truncated_json_is_fetched_twice_then_unknown(world):
    world["index"].faults.add(INDEX_PATH, Fault(truncate=True))
    found = verdicts(world, mirrors=world["tmp"])
    assert_unknown(found, ("floor_fixed", "pr_fixed"), "truncated JSON")
    assert world["index"].index.requests.count(INDEX_PATH) == 2


def test_invalid_json(world):
    world["api"].host.faults.add(ISSUE_PATH, Fault(status=200, body=b"<not json>"))
    world["api"].host.faults.add(PR_PATH, Fault(status=200, body=b"<not json>"))
    found = verdicts(world, mirrors=world["tmp"])
    assert_flagged(found, ("floor_fixed",), "invalid JSON")
    assert_unknown(found, ("pr_fixed",), "invalid JSON")


def test_connection_dropped_mid_body_and_before_any_answer(world):
    world["index"].faults.add(INDEX_PATH, Fault(short=True))
    world["api"].host.faults.add(ISSUE_PATH, Fault(drop=True))
    found = verdicts(world, mirrors=world["tmp"])
    assert_unknown(found, ("floor_fixed", "pr_fixed"), "connection dropped")
    assert requests_to(world, ISSUE_PATH) == 3


def test_a_broken_body_is_never_cached(world):
    world["index"].faults.add(INDEX_PATH, Fault(truncate=True, times=2))
    assert verdicts(world)["floor_fixed"].decision == "unknown"
    assert verdicts(world)["floor_fixed"].decision == "retire"


def test_tag_that_does_not_exist_in_the_mirror(world):
    git(world["mirrors"] / "org" / "toylib.git", "tag", "-d", "v1.1", "v1.2")
    found = verdicts(world)
    # Not a failed probe but missing evidence: the mirror is behind the index.
    assert_unknown(found, ("pr_fixed",), "has no tag in the mirror", probe_failed=False)
    assert "mirrors sync" in found["pr_fixed"].action


def test_commit_missing_from_the_mirror_and_no_mirror(world, tmp_path):
    empty = tmp_path / "empty-mirrors"
    empty.mkdir()
    found = verdicts(world, mirrors=empty)
    assert_unknown(found, ("tagged_fix",), "no mirror of https://github.com/org/toylib")
    other = tmp_path / "other-mirrors" / "org"
    other.mkdir(parents=True)
    git(other, "init", "-q", "--bare", "toylib.git")
    found = verdicts(world, mirrors=other.parent)
    assert_unknown(found, ("tagged_fix",), "not in the mirror")


@pytest.mark.slow
def test_faults_are_shown_by_the_cli(world, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    root = world["project"].root
    world["api"].host.rate_remaining = 0
    code = cli(
        [
            "verdicts",
            "--root",
            str(root),
            "--api-url",
            world["api"].url,
            "--mirrors",
            str(world["mirrors"]),
            "--no-cache",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:-1] if not line.startswith(" ")}
    assert (
        rows["floor_fixed"].split()[1] == "retire"
        and "⚑" in out
        and "403 rate limit exceeded" in out
    )
    # the mirror may decide it; the code host cannot
    assert rows["pr_fixed"].split()[1] in ("retire", "unknown")
    assert (
        cli(
            [
                "verdicts",
                "--root",
                str(root),
                "--api-url",
                "http://nonexistent.invalid",
                "--no-cache",
                "floor_fixed",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "DNS lookup failed" in out and "probe-failed" in out


# ---------------------------------------------------------------------------------------------
# An answer counts only from the host that was asked


def test_a_redirect_to_another_host_is_not_believed(world):
    """The bug this reproduces: the code host answered PR #2 (open) with a redirect to another
    server, which said "merged" — and the engine retired the shim on that other host's answer."""
    world["api"].host.add_pull("org", "toylib", 2, state="open", updated_at="2026-06-01")
    impostor = CodeHost()
    impostor.add_pull(
        "org",
        "toylib",
        2,
        state="closed",
        merged=True,
        merged_at="2026-02-01",
        merge_commit_sha="f" * 40,
        updated_at="2026-06-01",
    )
    with CodeHostServer(impostor) as other:
        world["api"].host.faults.add(PR_PATH, redirect(other.url + PR_PATH))
        found = verdicts(world, mirrors=world["tmp"])
    assert found["pr_fixed"].decision == "unknown", found["pr_fixed"].why
    assert "redirected (302) to another host" in found["pr_fixed"].why
    # never even asked
    assert impostor.requests == []
    # not retried: asking again cannot make it the right host
    assert requests_to(world, PR_PATH) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "token", [None, "ghp_examplefaulttoken0123456789"], ids=["rest", "graphql"]
)
def test_a_slow_drip_ends_at_the_probe_deadline(world, token):
    """Every byte arrives well within the per-read timeout; the probe's total deadline ends it."""
    body = json.dumps(
        {"number": 2, "state": "closed", "merged": True, "padding": "x" * 300}
    ).encode()
    world["api"].host.faults.add(PR_PATH, slow_drip(body, 0.02))
    world["api"].host.faults.add("/graphql", slow_drip(body, 0.02))
    started = time.monotonic()
    found = verdicts(
        world,
        mirrors=world["tmp"],
        policy=dataclasses.replace(POLICY, budget=0.8, timeout=2.0),
        token=token,
    )
    # GraphQL's deadline, then REST's
    assert time.monotonic() - started < 2 * 0.8 + 1
    assert_unknown(found, ("pr_fixed",), "within the 0.8s deadline")


def test_an_oversized_body_is_a_failure(world):
    world["index"].faults.add(INDEX_PATH, oversized(3 * 2**20, chunked=True))
    found = verdicts(
        world, mirrors=world["tmp"], policy=dataclasses.replace(POLICY, max_body=2**20)
    )
    assert_unknown(found, ("floor_fixed", "pr_fixed"), "over the 1 MiB cap")


def test_html_to_a_json_request_is_read_as_html(world):
    """A PEP 503-only index (with data-upload-time) decides exactly as the JSON one."""
    world["index"].index.api = "html"
    found = verdicts(world, mirrors=world["tmp"])
    assert (found["floor_fixed"].decision, found["pr_fixed"].decision) == ("retire", "retire")
    assert "by upload time" in found["pr_fixed"].why


@pytest.mark.parametrize("api", ["both", "html"])
def test_an_index_without_upload_times_limits_only_what_needs_them(world, api):
    """pr-released without a mirror needs upload times: unknown, naming the index; the version
    floor does not: retire. With the mirror, release tags decide and upload times are not needed."""
    world["index"].index.api, world["index"].index.upload_times = api, False
    found = verdicts(world, mirrors=world["tmp"])
    assert found["floor_fixed"].decision == "retire"
    assert_unknown(found, ("pr_fixed",), f"the index {world['index'].url}", probe_failed=False)
    assert "gives no upload times" in found["pr_fixed"].why and "mirror" in found["pr_fixed"].action
    assert verdicts(world)["pr_fixed"].decision == "retire"


@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_a_token_echoed_by_the_code_host_is_nowhere(world, graphql):
    token = "ghp_echoedtoken0123456789abcdef"
    world["api"].host.echo_authorization = True
    if not graphql:
        world["api"].host.faults.add("/graphql", Fault(status=404))
    found = verdicts(world, mirrors=world["tmp"], token=token)
    assert found["pr_fixed"].decision == "retire"
    text = json.dumps([v.to_json() for v in found.values()])
    assert token not in text and "(seen: Bearer <redacted>)" in text
    for path in (world["tmp"] / "cache").rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert token.encode() not in raw
            assert token.encode() not in base64.b64decode(json.loads(raw)["body"])
