"""The HTTP client probes use, and the deadline it honours on every read and write.

Per-read timeouts alone let a server that trickles one byte at a time, in its headers as much as
its body, run on forever. The client's network streams clamp every read and write to what is
left of the deadline the :class:`~retire.probes.http.Fetcher` set for this thread
(:func:`deadline_scope`), and fail at once past it: the deadline is total from the connection to
the last byte. (The Fetcher's watchdog does the same for the body of a client injected without
these streams.)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import ssl
import threading
import time
from collections.abc import Iterator

import httpcore
import httpx

__all__ = ["MAX_IN_FLIGHT", "USER_AGENT", "deadline_scope", "make_client"]

USER_AGENT = "patchlane-probe/0.1"
#: GitHub's secondary rate limit allows 100 concurrent requests; stay at it, never above.
MAX_IN_FLIGHT = 100
#: Connection pools a client's threads are spread over (:class:`_Pools`), at least 8 connections
#: each.
POOLS = 8

_local = threading.local()


@contextlib.contextmanager
def deadline_scope(at: float) -> Iterator[None]:
    """Every read and write of this thread's probe requests ends by ``at`` (``time.monotonic``)."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = at
    try:
        yield
    finally:
        _local.deadline = previous


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    at = getattr(_local, "deadline", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the probe's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._inner.start_tls(
                ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _DeadlineStream(
            self._inner.connect_tcp(
                host, port, _clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options
            )
        )

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(
            self._inner.connect_unix_socket(
                path, _clamp(timeout, httpcore.ConnectTimeout), socket_options
            )
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: loading the CA bundle costs ~50 ms, more than a warm run's
    requests."""
    return ssl.create_default_context()


class _Pools(httpx.BaseTransport):
    """Several connection pools behind one client, each thread on one of them (taken in turn at
    its first request).

    httpcore's pool looks at every one of its connections whenever a request comes or goes, and
    for each idle one counts the idle ones again and polls its socket: with the 100 connections a
    probe run keeps in flight, that bookkeeping was most of a warm run's CPU (profiled: 460,000
    ``is_idle`` calls and 11,500 polls for 200 revalidations, 0.6 s on 2 cores). Eight pools of
    13 cost a tenth of it; the :class:`~retire.probes.http.Fetcher`'s semaphore still caps the
    requests in flight at :data:`MAX_IN_FLIGHT` across them all."""

    def __init__(self, limits: httpx.Limits, count: int) -> None:
        total = limits.max_connections or MAX_IN_FLIGHT
        each = -(-total // count)
        self._pools = [
            _pool(httpx.Limits(max_connections=each, max_keepalive_connections=each))
            for _ in range(count)
        ]
        self._turn = itertools.count()
        self._local = threading.local()

    def _mine(self) -> httpx.HTTPTransport:
        pool: httpx.HTTPTransport | None = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = self._pools[next(self._turn) % len(self._pools)]
        return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._mine().handle_request(request)

    def close(self) -> None:
        for pool in self._pools:
            pool.close()


def _transport(limits: httpx.Limits) -> httpx.BaseTransport:
    connections = limits.max_connections or MAX_IN_FLIGHT
    count = max(1, min(POOLS, connections // 8))
    return _pool(limits) if count == 1 else _Pools(limits, count)


def _pool(limits: httpx.Limits) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(verify=_tls(), limits=limits)
    # httpx builds the pool without a backend hook
    pool = getattr(transport, "_pool", None)
    if pool is not None and isinstance(
        getattr(pool, "_network_backend", None), httpcore.NetworkBackend
    ):
        pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport


def make_client(
    *,
    timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
    max_connections: int = MAX_IN_FLIGHT,
) -> httpx.Client:
    """The client probes use when none is injected: pooled, every stream under the probe's
    deadline. (The :class:`Fetcher` follows redirects itself, same host only, whatever the
    client's own setting.)"""
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    return httpx.Client(
        timeout=timeout,
        follow_redirects=True,
        transport=transport or _transport(limits),
        verify=_tls(),
        limits=limits,
        headers={"User-Agent": USER_AGENT},
    )
