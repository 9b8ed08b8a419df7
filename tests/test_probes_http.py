"""The Fetcher's limits against real loopback servers: redirects only on the host that was asked,
a total deadline (not per read), a size cap on the streamed body, secrets out of bodies and
cache."""

from __future__ import annotations

import base64
import json
import time
from typing import Self

import pytest

from retire.evidence.values import ProbeFailure
from retire.probes.http import Fetched, mask_url
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import Fault, oversized, redirect, slow_drip
from tests.support.probing import FAST, fetcher

PULL = "/repos/org/toylib/pulls/2"
TOKEN = "ghp_exampleexampleexample0123456789"


@pytest.fixture
def api():
    host = CodeHost()
    host.add_pull(
        "org",
        "toylib",
        2,
        state="closed",
        merged=True,
        merged_at="2026-02-01T10:00:00",
        merge_commit_sha="a" * 40,
    )
    with CodeHostServer(host) as server:
        yield server


def paths(api) -> list[str]:
    return [r[0] for r in api.host.requests]


def test_a_same_host_redirect_is_followed(api):
    api.host.faults.add("/moved/2", redirect(PULL, status=301))
    found = fetcher().get_json(api.url + "/moved/2", probe="t")
    assert not isinstance(found, ProbeFailure), found
    assert found[0]["number"] == 2 and paths(api) == ["/moved/2", PULL]


def test_redirects_are_bounded(api):
    api.host.faults.add("/loop", redirect("/loop"))
    found = fetcher().get(api.url + "/loop", probe="t")
    assert isinstance(found, ProbeFailure) and "more than 5 redirects" in found.reason
    assert paths(api) == ["/loop"] * 6 and not found.retryable


def test_a_redirect_to_another_host_is_a_failure_without_asking_it(api):
    other = CodeHost()
    other.add_pull("org", "toylib", 2, state="open")
    with CodeHostServer(other) as elsewhere:
        for target in (
            elsewhere.url + PULL,
            elsewhere.url.replace("127.0.0.1", "localhost") + PULL,
        ):
            api.host.faults.clear()
            api.host.faults.add(PULL, redirect(target, status=307))
            found = fetcher().get_json(api.url + PULL, probe="t")
            assert isinstance(found, ProbeFailure), found
            assert "redirected (307) to another host" in found.reason and target in found.reason
    assert other.requests == [] and found.attempts == 1


def test_a_post_is_never_redirected(api):
    api.host.faults.add("/graphql", redirect("/graphql-v2", status=308))
    found = fetcher().post(
        api.url + "/graphql", {"query": "{}"}, probe="t", headers={"Authorization": "bearer x"}
    )
    assert isinstance(found, ProbeFailure) and "redirected (308) a POST request" in found.reason


@pytest.mark.slow
def test_a_slow_drip_ends_at_the_total_deadline_not_per_read(api):
    """Each byte arrives well within the per-read timeout; only a total deadline ends it."""
    body = json.dumps({"state": "open", "padding": "x" * 400}).encode()
    # ~9 s to send it all
    api.host.faults.add(PULL, slow_drip(body, 0.02))
    policy = FAST.__class__(attempts=3, timeout=2.0, budget=0.6, backoff=0.01)
    started = time.monotonic()
    found = fetcher(policy=policy).get_json(api.url + PULL, probe="t")
    elapsed = time.monotonic() - started
    assert isinstance(found, ProbeFailure) and "within the 0.6s deadline" in found.reason, found
    assert elapsed < 1.2, elapsed
    # the deadline is total: no second attempt
    assert found.retryable and found.attempts == 1


@pytest.mark.slow
def test_a_stalled_body_ends_at_the_deadline_even_with_long_read_timeouts(api):
    # one byte, then silence
    api.host.faults.add(PULL, slow_drip(b'{"state": "open"}', 5.0))
    policy = FAST.__class__(attempts=1, timeout=30.0, budget=0.5)
    started = time.monotonic()
    found = fetcher(policy=policy).get(api.url + PULL, probe="t")
    assert isinstance(found, ProbeFailure) and "deadline" in found.reason
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_cap_is_abandoned(api, chunked):
    api.host.faults.add(PULL, oversized(4 * 2**20, chunked=chunked))
    policy = FAST.__class__(attempts=3, max_body=256 * 2**10)
    found = fetcher(policy=policy).get(api.url + PULL, probe="t")
    assert isinstance(found, ProbeFailure) and "over the 256 KiB cap" in found.reason, found
    # a declared length is refused unread
    assert ("abandoned after" in found.reason) == chunked
    assert found.attempts == 1 and not found.retryable
    api.host.faults.clear()
    api.host.faults.add(PULL, oversized(200 * 2**10, chunked=chunked))
    assert isinstance(fetcher(policy=policy).get(api.url + PULL, probe="t"), Fetched)


def test_a_token_echoed_by_the_server_reaches_neither_the_body_nor_the_cache(api, tmp_path):
    api.host.echo_authorization = True
    probe = fetcher(tmp_path, secrets=(TOKEN,))
    found = probe.get_json(api.url + PULL, probe="t", headers={"Authorization": f"Bearer {TOKEN}"})
    data, fetched = found
    assert data["title"] == "fix (seen: Bearer <redacted>)"
    assert TOKEN.encode() not in fetched.body
    stored = [path.read_bytes() for path in tmp_path.rglob("*.json")]
    assert stored, "the answer had an ETag: it is cached"
    for raw in stored:
        assert TOKEN.encode() not in raw
        assert TOKEN.encode() not in base64.b64decode(json.loads(raw)["body"])


def test_credentials_in_urls_are_masked(api, tmp_path):
    assert (
        mask_url(f"https://x-access-token:{TOKEN}@ghe.corp/api/v3")
        == "https://x-access-token:<redacted>@ghe.corp/api/v3"
    )
    assert mask_url(f"https://{TOKEN}@ghe.corp/") == "https://<redacted>@ghe.corp/"
    assert mask_url("https://ghe.corp/a@b") == "https://ghe.corp/a@b"
    api.host.faults.add(PULL, Fault(status=500))
    base = api.url.replace("http://", f"http://user:{TOKEN}@")
    # the fetcher was not told the secret
    found = fetcher(tmp_path).get(base + PULL, probe="t")
    assert (
        isinstance(found, ProbeFailure)
        and TOKEN not in str(found)
        and "user:<redacted>@" in found.target
    )


def test_a_post_is_never_cached(api, tmp_path):
    found = fetcher(tmp_path).post(
        api.url + "/graphql", {"query": "{ x }"}, probe="t", headers={"Authorization": "bearer x"}
    )
    assert isinstance(found, Fetched) and found.status == 200
    assert list(tmp_path.rglob("*.json")) == []


class TrickleServer:
    """A raw loopback server whose answer trickles one byte at a time forever: the status line,
    then an endless header (``headers=True``) or an endless chunked body."""

    def __init__(self, *, headers: bool, pace: float = 0.02) -> None:
        import socket
        import threading

        self.headers, self.pace = headers, pace
        self.listener = socket.create_server(("127.0.0.1", 0))
        # so the accept loop sees the stop promptly
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.listener.close()

    def _serve(self) -> None:
        import threading

        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn) -> None:
        with conn:
            try:
                conn.recv(65536)
                head = (
                    b"HTTP/1.1 200 OK\r\nX-Pad: "
                    if self.headers
                    else b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                    b"chunked\r\n\r\n"
                )
                conn.sendall(head)
                piece = (
                    b"a"
                    if self.headers
                    else (b"1\r\na\r\n" if self.pace else b"1000\r\n" + b"a" * 4096 + b"\r\n")
                )
                while not self.stop.is_set():
                    conn.sendall(piece)
                    time.sleep(self.pace)
            except OSError:
                return


@pytest.mark.slow
@pytest.mark.parametrize("headers", [True, False], ids=["headers", "body"])
def test_a_trickle_ends_at_the_total_deadline_in_the_headers_too(headers):
    """One byte every 20 ms, well within the 2 s read timeout: only a total deadline ends it,
    whether the server trickles its body or never finishes its headers."""
    policy = FAST.__class__(attempts=3, timeout=2.0, budget=0.6, backoff=0.01)
    with TrickleServer(headers=headers) as server:
        started = time.monotonic()
        found = fetcher(policy=policy).get(server.url + "/slow", probe="t")
        elapsed = time.monotonic() - started
    assert isinstance(found, ProbeFailure) and "within the 0.6s deadline" in found.reason, found
    assert elapsed < 1.2, elapsed
    assert found.attempts == 1


def test_a_fast_endless_body_ends_at_the_size_cap():
    with TrickleServer(headers=False, pace=0) as server:
        found = fetcher(policy=FAST.__class__(attempts=1, max_body=64 * 2**10)).get(
            server.url + "/big", probe="t"
        )
    assert isinstance(found, ProbeFailure) and "over the 64 KiB cap" in found.reason, found
