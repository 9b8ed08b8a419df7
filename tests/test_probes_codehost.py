"""The code-host probe against the GitHub-API stand-in on loopback (tests.support.codehost)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from retire.evidence.values import IssueState, ProbeFailure, PullState
from retire.probes.codehost import auth_headers, parse_link, probe_link, token_from_env
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import Fault
from tests.support.probing import FAST, fetcher

PR = "https://github.com/org/toylib/pull/2"
ISSUE = "https://github.com/org/toylib/issues/1"
TOKEN = "ghp_exampleexampleexample0123456789"


@pytest.fixture
def api():
    host = CodeHost()
    host.add_issue("org", "toylib", 1, state="closed", state_reason="completed", closed_at="2026-02-02")
    host.add_pull("org", "toylib", 2, state="closed", merged=True, merged_at="2026-02-01T10:00:00",
                  merge_commit_sha="a" * 40)
    host.add_pull("org", "toylib", 3, state="open")
    host.add_pull("org", "toylib", 4, state="closed", merged=False, closed_at="2026-01-05")
    with CodeHostServer(host) as server:
        yield server


def test_merged_pull_request(api):
    found = probe_link(fetcher(), PR, api_base=api.url)
    assert isinstance(found, PullState)
    assert found.merged and found.state == "closed" and found.number == 2
    assert found.merged_at == dt.datetime(2026, 2, 1, 10, tzinfo=dt.timezone.utc)
    assert found.merge_commit_sha == "a" * 40
    assert api.host.requests[-1][0] == "/repos/org/toylib/pulls/2"


def test_open_and_closed_unmerged_pull_requests(api):
    opened = probe_link(fetcher(), "https://github.com/org/toylib/pull/3", api_base=api.url)
    closed = probe_link(fetcher(), "https://github.com/org/toylib/pull/4", api_base=api.url)
    assert opened.state == "open" and not opened.merged and opened.merge_commit_sha is None
    assert closed.state == "closed" and not closed.merged


def test_issue(api):
    found = probe_link(fetcher(), ISSUE, api_base=api.url)
    assert isinstance(found, IssueState)
    assert found.state == "closed" and found.state_reason == "completed" and found.label == "issue #1"


def test_links_that_are_not_github_issues_or_pulls():
    assert parse_link("https://example.org/toylib/pull/2") is None
    assert parse_link("https://github.com/org/toylib/commit/abc") is None
    assert parse_link("https://github.com/org/toylib/pull/2/files") is None
    ref = parse_link("https://ghe.corp/org/toylib/issues/9", web_host="ghe.corp")
    assert ref.kind == "issue" and ref.api_path() == "/repos/org/toylib/issues/9"
    found = probe_link(fetcher(), "https://example.org/toylib/pull/2", api_base="http://127.0.0.1:9")
    assert isinstance(found, ProbeFailure) and "not an issue or pull request URL" in found.reason


def test_missing_pull_request_is_a_failure_not_a_retry(api):
    found = probe_link(fetcher(), "https://github.com/org/toylib/pull/99", api_base=api.url)
    assert isinstance(found, ProbeFailure)
    assert "not found" in found.reason and not found.retryable
    assert len(api.host.requests) == 1


def test_token_is_sent_and_never_shown(api):
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(status=500))
    # Some enterprise setups put the token in the API URL; failures must not show it either.
    base = api.url.replace("http://", f"http://x-access-token:{TOKEN}@")
    found = probe_link(fetcher(secrets=(TOKEN,)), PR, api_base=base, token=TOKEN)
    assert isinstance(found, ProbeFailure) and "server error 500" in found.reason
    assert TOKEN not in str(found) and "<redacted>" in found.target
    assert isinstance(probe_link(fetcher(), ISSUE, api_base=api.url, token=TOKEN), IssueState)
    assert api.host.requests[-1][2] == f"Bearer {TOKEN}"
    assert auth_headers(None) == {"X-GitHub-Api-Version": "2022-11-28"}


def test_token_from_environment():
    assert token_from_env({"GH_TOKEN": "b"}) == "b"
    assert token_from_env({"GITHUB_TOKEN": "a", "GH_TOKEN": "b"}) == "a"
    assert token_from_env({"GITHUB_TOKEN": ""}) is None


def test_warm_run_sends_if_none_match_and_gets_304(api, tmp_path):
    first = probe_link(fetcher(tmp_path), PR, api_base=api.url)
    second = probe_link(fetcher(tmp_path), PR, api_base=api.url)
    assert first == second
    (_, cold_tag, _), (_, warm_tag, _) = api.host.requests
    assert cold_tag is None and warm_tag
    assert api.host.statuses == [200, 304]
    assert api.host.rate_remaining == 4999  # like GitHub, a 304 costs no quota


def test_upstream_change_is_seen_through_the_cache(api, tmp_path):
    assert probe_link(fetcher(tmp_path), "https://github.com/org/toylib/pull/3", api_base=api.url).state == "open"
    api.host.add_pull("org", "toylib", 3, state="closed", merged=True, merged_at="2026-06-01", merge_commit_sha="b" * 40)
    found = probe_link(fetcher(tmp_path), "https://github.com/org/toylib/pull/3", api_base=api.url)
    assert found.merged and api.host.statuses == [200, 200]


def test_fresh_cache_entry_makes_no_request(api, tmp_path):
    api.host.max_age = 60
    probe_link(fetcher(tmp_path), PR, api_base=api.url)
    probe_link(fetcher(tmp_path), PR, api_base=api.url)
    assert len(api.host.requests) == 1


def test_rate_limit_403_waits_for_a_near_reset_then_succeeds(api):
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(
        status=403, times=1, body=b'{"message": "API rate limit exceeded"}',
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 1)}))
    slept = []
    found = probe_link(fetcher(sleep=lambda s: slept.append(s) or time.sleep(min(s, 0.05))), PR, api_base=api.url)
    assert isinstance(found, PullState)
    assert len(slept) == 1 and 0 <= slept[0] <= 2


def test_rate_limit_403_with_a_far_reset_ends_at_once(api):
    api.host.rate_remaining = 0
    api.host.rate_reset = int(time.time()) + 3600
    started = time.monotonic()
    found = probe_link(fetcher(), PR, api_base=api.url)
    assert time.monotonic() - started < 1.5
    assert isinstance(found, ProbeFailure) and found.retryable
    assert "403 rate limit" in found.reason and "GITHUB_TOKEN" in found.reason
    assert len(api.host.requests) == 1


def test_429_retry_after_is_honoured(api):
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(status=429, times=2, headers={"Retry-After": "0"}))
    found = probe_link(fetcher(), PR, api_base=api.url)
    assert isinstance(found, PullState)
    assert len(api.host.requests) == 3


def test_secondary_rate_limit_403_with_retry_after(api):
    api.host.faults.add("/repos/org/toylib/issues/1", Fault(status=403, times=1, headers={"Retry-After": "0"}))
    assert isinstance(probe_link(fetcher(), ISSUE, api_base=api.url), IssueState)


def test_plain_403_is_not_retried(api):
    api.host.faults.add("/repos/org/toylib/issues/1", Fault(status=403, body=b'{"message": "Resource not accessible"}'))
    found = probe_link(fetcher(), ISSUE, api_base=api.url)
    assert isinstance(found, ProbeFailure) and "HTTP 403" in found.reason and found.attempts == 1


def test_unexpected_payload_is_a_failure(api):
    api.host.faults.add("/repos/org/toylib/issues/1", Fault(status=200, body=b'{"message": "hi"}'))
    found = probe_link(fetcher(), ISSUE, api_base=api.url)
    assert isinstance(found, ProbeFailure) and "state" in found.reason


def test_policy_budget_is_respected(api):
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(status=503))
    slow = FAST.__class__(attempts=10, backoff=0.2, max_backoff=0.2, budget=0.5, timeout=2.0)
    started = time.monotonic()
    found = probe_link(fetcher(policy=slow), PR, api_base=api.url)
    assert time.monotonic() - started < 1.5
    assert isinstance(found, ProbeFailure) and "budget" in found.reason and found.attempts < 10
