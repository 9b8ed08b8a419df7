"""The code-host probe against the GitHub-API stand-in on loopback (tests.support.codehost)."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from retire.evidence.values import IssueState, ProbeFailure, PullState
from retire.probes.codehost import auth_headers, parse_link, probe_link, probe_links, token_from_env
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import Fault
from tests.support.probing import FAST, fetcher

PR = "https://github.com/org/toylib/pull/2"
ISSUE = "https://github.com/org/toylib/issues/1"
TOKEN = "ghp_exampleexampleexample0123456789"


@pytest.fixture
def api():
    host = CodeHost()
    host.add_issue(
        "org", "toylib", 1, state="closed", state_reason="completed", closed_at="2026-02-02"
    )
    host.add_pull(
        "org",
        "toylib",
        2,
        state="closed",
        merged=True,
        merged_at="2026-02-01T10:00:00",
        merge_commit_sha="a" * 40,
    )
    host.add_pull("org", "toylib", 3, state="open")
    host.add_pull("org", "toylib", 4, state="closed", merged=False, closed_at="2026-01-05")
    with CodeHostServer(host) as server:
        yield server


def test_merged_pull_request(api):
    found = probe_link(fetcher(), PR, api_base=api.url)
    assert isinstance(found, PullState)
    assert found.merged and found.state == "closed" and found.number == 2
    assert found.merged_at == dt.datetime(2026, 2, 1, 10, tzinfo=dt.UTC)
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
    assert (
        found.state == "closed" and found.state_reason == "completed" and found.label == "issue #1"
    )


def test_links_that_are_not_github_issues_or_pulls():
    assert parse_link("https://example.org/toylib/pull/2") is None
    assert parse_link("https://github.com/org/toylib/commit/abc") is None
    assert parse_link("https://github.com/org/toylib/pull/2/files") is None
    ref = parse_link("https://ghe.corp/org/toylib/issues/9", web_host="ghe.corp")
    assert ref.kind == "issue" and ref.api_path() == "/repos/org/toylib/issues/9"
    found = probe_link(
        fetcher(), "https://example.org/toylib/pull/2", api_base="http://127.0.0.1:9"
    )
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
    # like GitHub, a 304 costs no quota
    assert api.host.rate_remaining == 4999


def test_upstream_change_is_seen_through_the_cache(api, tmp_path):
    assert (
        probe_link(
            fetcher(tmp_path), "https://github.com/org/toylib/pull/3", api_base=api.url
        ).state
        == "open"
    )
    api.host.add_pull(
        "org",
        "toylib",
        3,
        state="closed",
        merged=True,
        merged_at="2026-06-01",
        merge_commit_sha="b" * 40,
    )
    found = probe_link(fetcher(tmp_path), "https://github.com/org/toylib/pull/3", api_base=api.url)
    assert found.merged and api.host.statuses == [200, 200]


def test_fresh_cache_entry_makes_no_request(api, tmp_path):
    api.host.max_age = 60
    probe_link(fetcher(tmp_path), PR, api_base=api.url)
    probe_link(fetcher(tmp_path), PR, api_base=api.url)
    assert len(api.host.requests) == 1


def test_rate_limit_403_waits_for_a_near_reset_then_succeeds(api):
    api.host.faults.add(
        "/repos/org/toylib/pulls/2",
        Fault(
            status=403,
            times=1,
            body=b'{"message": "API rate limit exceeded"}',
            headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 1)},
        ),
    )
    slept = []
    found = probe_link(
        fetcher(sleep=lambda s: slept.append(s) or time.sleep(min(s, 0.05))), PR, api_base=api.url
    )
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
    api.host.faults.add(
        "/repos/org/toylib/pulls/2", Fault(status=429, times=2, headers={"Retry-After": "0"})
    )
    found = probe_link(fetcher(), PR, api_base=api.url)
    assert isinstance(found, PullState)
    assert len(api.host.requests) == 3


def test_secondary_rate_limit_403_with_retry_after(api):
    api.host.faults.add(
        "/repos/org/toylib/issues/1", Fault(status=403, times=1, headers={"Retry-After": "0"})
    )
    assert isinstance(probe_link(fetcher(), ISSUE, api_base=api.url), IssueState)


def test_plain_403_is_not_retried(api):
    api.host.faults.add(
        "/repos/org/toylib/issues/1",
        Fault(status=403, body=b'{"message": "Resource not accessible"}'),
    )
    found = probe_link(fetcher(), ISSUE, api_base=api.url)
    assert isinstance(found, ProbeFailure) and "HTTP 403" in found.reason and found.attempts == 1


def test_unexpected_payload_is_a_failure(api):
    api.host.faults.add("/repos/org/toylib/issues/1", Fault(status=200, body=b'{"message": "hi"}'))
    found = probe_link(fetcher(), ISSUE, api_base=api.url)
    assert isinstance(found, ProbeFailure) and "state" in found.reason


@pytest.mark.slow
def test_policy_budget_is_respected(api):
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(status=503))
    slow = FAST.__class__(attempts=10, backoff=0.2, max_backoff=0.2, budget=0.5, timeout=2.0)
    started = time.monotonic()
    found = probe_link(fetcher(policy=slow), PR, api_base=api.url)
    assert time.monotonic() - started < 1.5
    assert isinstance(found, ProbeFailure) and "budget" in found.reason and found.attempts < 10


def test_wrong_types_are_failures_that_say_what_was_wrong(api):
    api.host.faults.add(
        "/repos/org/toylib/pulls/2",
        Fault(
            status=200,
            body=json.dumps(
                {
                    "number": 2,
                    "state": "closed",
                    "merged": "yes",
                    "merged_at": "2026-02-01T10:00:00Z",
                }
            ).encode(),
        ),
    )
    api.host.faults.add(
        "/repos/org/toylib/pulls/3",
        Fault(
            status=200,
            body=json.dumps(
                {"number": 3, "state": "closed", "merged": True, "merged_at": "last tuesday"}
            ).encode(),
        ),
    )
    api.host.faults.add(
        "/repos/org/toylib/pulls/4",
        Fault(
            status=200, body=json.dumps({"number": 5, "state": "closed", "merged": True}).encode()
        ),
    )
    api.host.faults.add("/repos/org/toylib/issues/1", Fault(status=200, body=b'["closed"]'))
    answers = [
        probe_link(fetcher(), f"https://github.com/org/toylib/pull/{n}", api_base=api.url)
        for n in (2, 3, 4)
    ]
    answers.append(probe_link(fetcher(), ISSUE, api_base=api.url))
    reasons = [a.reason if isinstance(a, ProbeFailure) else a for a in answers]
    assert reasons == [
        "unexpected API response: merged is str, not bool",
        "unexpected API response: merged_at is 'last tuesday', not a time",
        "unexpected API response: the answer is for #5, not #4",
        "unexpected API response: the answer is a JSON list, not an object",
    ]


# ---------------------------------------------------------------------------------------------
# Many links at once: GraphQL with a token, REST without

LINKS = [
    ISSUE,
    PR,
    "https://github.com/org/toylib/pull/3",
    "https://github.com/org/toylib/pull/4",
    "https://github.com/org/toylib/pulls/2",
    "https://github.com/org/toylib/issues/2",
    "https://github.com/org/toylib/pull/1",
    "https://github.com/org/toylib/pull/99",
    "https://github.com/org/elsewhere/issues/1",
    "https://example.org/not/a/link",
]


def test_graphql_gives_what_rest_gives_in_one_request(api):
    """Every kind of answer — merged, open, closed unmerged, an issue, a PR read through an
    issue link, an issue behind a pull link, a missing number, a missing repository — is the
    same value through both APIs; GraphQL asks once."""
    rest = probe_links(fetcher(), LINKS, api_base=api.url, token=None)
    rest_requests = len(api.host.requests)
    graphql = probe_links(fetcher(), LINKS, api_base=api.url, token=TOKEN)
    assert list(graphql) == LINKS
    assert len(api.host.requests) - rest_requests == 1 and api.host.requests[-1][0] == "/graphql"
    # distinct numbers: /pull/2 and /pulls/2 share one node
    assert api.host.graphql_nodes == [6]
    for url in LINKS:
        if isinstance(rest[url], ProbeFailure):
            assert (
                isinstance(graphql[url], ProbeFailure) and "not found" in graphql[url].reason
            ) or "not an issue or pull request URL" in graphql[url].reason, (url, graphql[url])
            assert graphql[url].reason.split(" (")[0] == rest[url].reason.split(" (")[0], url
        else:
            assert graphql[url] == rest[url], url
    assert graphql[PR].merged and graphql[PR].merge_commit_sha == "a" * 40
    # a PR is an issue too
    assert isinstance(graphql["https://github.com/org/toylib/issues/2"], IssueState)
    assert "is an issue" in graphql["https://github.com/org/toylib/pull/1"].reason
    assert (
        "Could not resolve to a Repository"
        in graphql["https://github.com/org/elsewhere/issues/1"].reason
    )


def test_graphql_batches_hold_at_most_100_links(api):
    for number in range(10, 260):
        api.host.add_issue("org", "toylib", number)
    urls = [f"https://github.com/org/toylib/issues/{n}" for n in range(10, 260)]
    found = probe_links(fetcher(), urls, api_base=api.url, token=TOKEN)
    assert all(
        isinstance(found[u], IssueState) and found[u].number == int(u.rsplit("/", 1)[1])
        for u in urls
    )
    assert sorted(api.host.graphql_nodes) == [50, 100, 100]


def test_a_failed_graphql_request_falls_back_to_rest(api, tmp_path):
    api.host.faults.add("/graphql", Fault(status=404, body=b'{"message": "Not Found"}'))
    found = probe_links(fetcher(tmp_path), [PR, ISSUE], api_base=api.url, token=TOKEN)
    assert isinstance(found[PR], PullState) and isinstance(found[ISSUE], IssueState)
    assert next(r[0] for r in api.host.requests) == "/graphql" and len(api.host.requests) == 3


def test_graphql_nodes_of_the_wrong_shape_are_failures(api):
    body = {
        "data": {
            "r0": {
                "n1": {"__typename": "Issue", "number": 1, "state": "SHUT"},
                "n2": {
                    "__typename": "PullRequest",
                    "number": 2,
                    "state": "MERGED",
                    "merged": True,
                    "mergedAt": "2026-02-01T10:00:00Z",
                    "mergeCommit": {"oid": 7},
                },
                "n3": None,
            }
        }
    }
    api.host.faults.add("/graphql", Fault(status=200, body=json.dumps(body).encode()))
    found = probe_links(
        fetcher(),
        [ISSUE, PR, "https://github.com/org/toylib/pull/3"],
        api_base=api.url,
        token=TOKEN,
    )
    assert (
        found[ISSUE].reason
        == "unexpected GraphQL response: state is 'SHUT', not OPEN, CLOSED or MERGED"
    )
    assert found[PR].reason == "unexpected GraphQL response: oid is int, not str"
    assert (
        found["https://github.com/org/toylib/pull/3"].reason
        == "unexpected GraphQL response: r0.n3 is null without an error"
    )


def test_graphql_without_data_fails_the_batch_then_rest_answers(api):
    api.host.faults.add(
        "/graphql",
        Fault(
            status=200,
            body=b'{"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded"}]}',
        ),
    )
    found = probe_links(fetcher(), [PR], api_base=api.url, token=TOKEN)
    assert (
        isinstance(found[PR], PullState) and api.host.requests[-1][0] == "/repos/org/toylib/pulls/2"
    )


def test_graphql_needs_the_token_and_is_sent_it(api):
    probe_links(fetcher(), [PR], api_base=api.url, token=TOKEN)
    assert api.host.requests[0] == ("/graphql", None, f"Bearer {TOKEN}")
    from retire.probes.graphql import endpoint

    assert endpoint("https://ghe.corp/api/v3") == "https://ghe.corp/api/graphql"
    assert endpoint("https://api.example/") == "https://api.example/graphql"


@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_a_token_echoed_into_a_title_is_redacted(api, graphql):
    api.host.echo_authorization = True
    if not graphql:
        api.host.faults.add("/graphql", Fault(status=502))
    found = probe_links(fetcher(secrets=(TOKEN,)), [PR, ISSUE], api_base=api.url, token=TOKEN)
    assert (api.host.requests[-1][0] == "/graphql") == graphql
    for state in found.values():
        assert TOKEN not in repr(state) and state.title.endswith("(seen: Bearer <redacted>)")


def test_when_both_apis_fail_both_reasons_are_shown(api):
    api.host.faults.add("/graphql", Fault(status=404, body=b'{"message": "Not Found"}'))
    api.host.faults.add("/repos/org/toylib/pulls/2", Fault(status=500))
    found = probe_links(fetcher(), [PR], api_base=api.url, token=TOKEN)[PR]
    assert isinstance(found, ProbeFailure)
    assert (
        "server error 500" in found.reason
        and "(GraphQL: no GraphQL endpoint (HTTP 404))" in found.reason
    )


def test_cache_only_runs_with_a_token_read_the_rest_cache(api, tmp_path):
    """``report --no-probe`` makes no request: GraphQL fails at once and the links come from
    the REST answers an earlier run cached."""
    from retire.probes.http import Fetcher, HttpCache, make_client
    from retire.report.weekly import CacheOnlyTransport

    probe_links(fetcher(tmp_path), [PR, ISSUE], api_base=api.url, token=None)
    asked = len(api.host.requests)
    offline = Fetcher(
        make_client(transport=CacheOnlyTransport()), cache=HttpCache(tmp_path), policy=FAST
    )
    found = probe_links(offline, [PR, ISSUE], api_base=api.url, token=TOKEN)
    assert isinstance(found[PR], PullState) and isinstance(found[ISSUE], IssueState)
    assert len(api.host.requests) == asked
