"""A probe client spreads its threads over several connection pools (httpcore's pool bookkeeping
grows with its connections), each pool under the probe's deadline, the requests in flight still
capped by the Fetcher."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from retire.evidence.values import ProbeFailure
from retire.probes import client as probe_client
from retire.probes.http import Fetcher, RetryPolicy, make_client
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import slow_drip

ISSUE = "/repos/org/toylib/issues/{}"


def test_threads_take_pools_in_turn_and_every_request_is_answered():
    host = CodeHost()
    for number in range(1, 41):
        host.add_issue("org", "toylib", number, state="open", updated_at="2026-06-01")
    with CodeHostServer(host) as server, make_client() as client:
        transport = client._transport
        assert isinstance(transport, probe_client._Pools)
        pools = transport._pools
        assert len(pools) == probe_client.POOLS
        # every pool's streams are clamped to the probe's deadline
        assert all(
            isinstance(pool._pool._network_backend, probe_client._DeadlineBackend) for pool in pools
        )
        with ThreadPoolExecutor(max_workers=40) as threads:
            answers = list(
                threads.map(
                    lambda n: client.get(server.url + ISSUE.format(n)).status_code, range(1, 41)
                )
            )
        assert answers == [200] * 40
        used = [len(pool._pool.connections) for pool in pools]
        # 40 threads, 8 pools taken in turn: every pool served some, none more than its share
        assert all(count >= 1 for count in used) and sum(used) <= 40
        assert max(used) <= -(-probe_client.MAX_IN_FLIGHT // probe_client.POOLS)


def test_a_small_client_keeps_one_pool():
    with make_client(max_connections=10) as client:
        assert not isinstance(client._transport, probe_client._Pools)


def test_a_slow_drip_still_ends_at_the_deadline_in_any_pool():
    host = CodeHost()
    host.faults.add(ISSUE.format(2), slow_drip(b"x" * 400, 0.02))
    policy = RetryPolicy(attempts=1, timeout=2.0, budget=0.5)
    with CodeHostServer(host) as server, make_client() as client:
        fetcher = Fetcher(client, policy=policy)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as threads:
            results = list(
                threads.map(
                    lambda _: fetcher.get(server.url + ISSUE.format(2), probe="link"), range(4)
                )
            )
    assert time.monotonic() - started < 2.0
    assert all(isinstance(result, ProbeFailure) for result in results), results
    assert all("deadline" in result.reason for result in results), results
