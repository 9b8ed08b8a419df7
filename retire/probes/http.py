"""The HTTP layer every probe shares: retries with backoff, rate limits, an on-disk cache, and
the limits that make an answer trustworthy.

A :class:`Fetcher` wraps an injected ``httpx.Client`` (tests hand it a client pointed at a
loopback server, or one with a custom transport). ``get`` / ``post`` return a :class:`Fetched` or
a :class:`~retire.evidence.ProbeFailure` — they never raise.

- **Retried**, with exponential backoff and full jitter: timeouts, connection refused, DNS
  failures, dropped connections, 5xx, 429 and 403 rate limits. A ``Retry-After`` or
  ``X-RateLimit-Reset`` further away than ``max_wait`` is not slept on: the probe ends at once as
  unknown (a weekly report must not hang for an hour).
- **Not retried**: other 4xx, and a body that is not valid JSON is fetched at most twice
  (a truncating proxy may heal; a broken server will not).
- **Only the host that was asked answers**: redirects are followed by hand, only within the same
  scheme, host and port (``max_redirects`` of them); a redirect anywhere else is a failure.
- **A total deadline** (``budget``) covers every attempt, wait, redirect and byte of the body:
  per-read timeouts are clamped to the time left, and a watchdog shuts the connection at the
  deadline, so a server that trickles its body one byte at a time ends there, not later.
- **A size cap** (``max_body``): the body is streamed and counted, and abandoned past the cap
  (a declared ``Content-Length`` over it is refused before reading).
- **Secrets** (the token) are redacted from every body before anything reads or stores it, from
  every failure text, and credentials in URLs are masked.
- **Cache**: responses carrying an ``ETag`` or ``Last-Modified`` are stored (atomically, one
  file per URL); the next request is conditional (``If-None-Match``) and a 304 serves the stored
  body. Within ``Cache-Control: max-age`` no request is made at all (like uv's cache).
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import httpx

from retire.core.secrets import scrub, scrub_bytes
from retire.evidence.values import ProbeFailure
from retire.probes.cache import DEFAULT_CACHE_DIR, CacheEntry, HttpCache, freshness
from retire.probes.client import MAX_IN_FLIGHT, USER_AGENT, deadline_scope, make_client
from retire.probes.fetched import BadBodyError, Fetched, RetryPolicy, decode_json
from retire.probes.redaction import mask_url
from retire.probes.watchdog import WATCHDOG

__all__ = [
    "DEFAULT_CACHE_DIR",
    "MAX_IN_FLIGHT",
    "USER_AGENT",
    "BadBodyError",
    "Fetched",
    "Fetcher",
    "HttpCache",
    "RetryPolicy",
    "decode_json",
    "make_client",
    "mask_url",
]

T = TypeVar("T")

#: The policy a Fetcher follows unless given another (immutable, so one serves every Fetcher).
DEFAULT_POLICY = RetryPolicy()


# ---------------------------------------------------------------------------------------------
# One exchange: redirects on the same host only, a size cap, a total deadline


_DNS_FAILED = "DNS lookup failed"


def _connect_reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if any(
        m in lowered
        for m in (
            "name or service not known",
            "nodename nor servname",
            "name resolution",
            "getaddrinfo",
            "no address associated",
            "not known",
        )
    ):
        return f"{_DNS_FAILED} ({text})"
    if "refused" in lowered:
        return "connection refused"
    return f"cannot connect ({text})"


#: scheme, host and port: where an answer may come from
_Origin = tuple[str, str, int | None]


def _origin(url: httpx.URL) -> _Origin:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def _size(count: int) -> str:
    return (
        f"{count / 2**20:g} MiB"
        if count >= 2**20
        else f"{count / 2**10:g} KiB"
        if count >= 2**10
        else f"{count} bytes"
    )


@dataclass(frozen=True)
class _Reply:
    status: int
    reason_phrase: str
    headers: httpx.Headers
    body: bytes


@dataclass(frozen=True)
class _Trouble:
    reason: str
    retryable: bool
    # no further attempt (the deadline passed, the answer came from elsewhere)
    final: bool = False


@dataclass(frozen=True)
class _Exchange:
    """One GET or POST as the retry loop sees it: what is sent, and the cached copy a 304
    confirms."""

    method: str
    url: str
    probe: str
    headers: Mapping[str, str]
    content: bytes | None
    cached: CacheEntry | None
    accept: str


@dataclass(frozen=True)
class _Retry:
    """An attempt that failed in a way another may not: why, and the wait the server asked for."""

    reason: str
    retryable: bool
    wait: float | None = None


class Fetcher:
    """GET / POST with retries, rate-limit handling, limits and the conditional cache; never
    raises."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        cache: HttpCache | None = None,
        policy: RetryPolicy = DEFAULT_POLICY,
        secrets: Sequence[str] = (),
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.client = client
        self.cache = cache
        self.policy = policy
        self.secrets = tuple(s for s in secrets if s)
        self.sleep, self.monotonic, self.wall, self.jitter = sleep, monotonic, wall, jitter
        # Requests in flight at once, whatever number of threads ask: GitHub's secondary limit,
        # and the client's pool (httpcore's queue of waiting requests is slow when long).
        self._in_flight = threading.BoundedSemaphore(max_in_flight)
        # Hosts whose name does not resolve here (an air-gapped cluster and the code host): after
        # a second failed lookup they are not asked again by this fetcher, so a hundred links cost
        # two lookups, not four hundred.
        self._unresolvable: dict[_Origin, str] = {}
        self._unresolvable_lock = threading.Lock()

    def deadline(self) -> float:
        """The monotonic moment a probe starting now must be done by."""
        return self.monotonic() + self.policy.budget

    def redact(self, text: str) -> str:
        """``text`` without the secrets this fetcher knows (a server may echo them anywhere)."""
        return scrub(text, self.secrets)

    def _clean(self, body: bytes) -> bytes:
        return scrub_bytes(body, self.secrets)

    def _fail(
        self, probe: str, url: str, reason: str, *, retryable: bool, attempts: int
    ) -> ProbeFailure:
        return ProbeFailure(
            probe, self.redact(mask_url(url)), self.redact(reason), retryable, attempts
        )

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.policy.max_backoff, self.policy.backoff * (2 ** (attempt - 1)))
        # jitter: many probes never retry in lockstep
        return ceiling * (0.5 + self.jitter() / 2)

    def _server_wait(self, headers: Mapping[str, str]) -> float | None:
        """Seconds the server asks us to wait (Retry-After or X-RateLimit-Reset), if it says."""
        retry_after = headers.get("retry-after")
        if retry_after:
            if retry_after.strip().isdigit():
                return float(retry_after)
            try:
                moment = email.utils.parsedate_to_datetime(retry_after)
                return max(0.0, moment.timestamp() - self.wall())
            except (TypeError, ValueError):
                return None
        reset = headers.get("x-ratelimit-reset")
        if reset and reset.strip().isdigit():
            return max(0.0, float(reset) - self.wall())
        return None

    def _past_deadline(self) -> _Trouble:
        return _Trouble(
            f"no complete answer within the {self.policy.budget:g}s deadline "
            "(a total per probe, not per read)",
            retryable=True,
            final=True,
        )

    def _attempt(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        content: bytes | None,
        deadline: float,
    ) -> _Reply | _Trouble:
        """One request, with same-host redirects followed, the body read under the cap and
        deadline."""
        if not self._in_flight.acquire(timeout=max(0.0, deadline - self.monotonic())):
            return self._past_deadline()
        # every read and write of the client's streams ends by the deadline, headers included
        try:
            with deadline_scope(time.monotonic() + (deadline - self.monotonic())):
                return self._attempt_in_flight(method, url, headers, content, deadline)
        finally:
            self._in_flight.release()

    def _attempt_in_flight(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        content: bytes | None,
        deadline: float,
    ) -> _Reply | _Trouble:
        current = httpx.URL(url)
        for hop in range(self.policy.max_redirects + 1):
            left = deadline - self.monotonic()
            if left <= 0:
                return self._past_deadline()
            clamped = left < self.policy.timeout
            request = self.client.build_request(
                method,
                current,
                headers=headers,
                content=content,
                timeout=min(self.policy.timeout, left),
            )
            try:
                response = self.client.send(request, stream=True, follow_redirects=False)
            except httpx.TimeoutException:
                if clamped or self.monotonic() >= deadline - 0.01:
                    return self._past_deadline()
                return _Trouble(f"timed out after {self.policy.timeout:g}s", True)
            except httpx.ConnectError as exc:
                return _Trouble(_connect_reason(exc), True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                return _Trouble(f"connection dropped ({exc or type(exc).__name__})", True)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                return _Trouble(f"bad URL ({exc})", False, final=True)
            except httpx.HTTPError as exc:
                return _Trouble(f"{type(exc).__name__}: {exc}", True)
            try:
                if response.has_redirect_location:
                    target = current.join(response.headers["location"])
                    if _origin(target) != _origin(current):
                        return _Trouble(
                            f"redirected ({response.status_code}) to another host, "
                            f"{mask_url(str(target))}: "
                            "an answer counts only from the host that was asked (point the URL "
                            "there "
                            "if that host is the right one)",
                            False,
                            final=True,
                        )
                    if method != "GET":
                        return _Trouble(
                            f"redirected ({response.status_code}) a {method} request",
                            False,
                            final=True,
                        )
                    if hop == self.policy.max_redirects:
                        return _Trouble(
                            f"more than {self.policy.max_redirects} redirects", False, final=True
                        )
                    current = target
                    continue
                body = self._read(response, deadline)
                if isinstance(body, _Trouble):
                    return body
                return _Reply(
                    response.status_code,
                    response.reason_phrase,
                    response.headers,
                    self._clean(body),
                )
            finally:
                response.close()
        # not reached: the loop returns
        return _Trouble("redirect loop", False, final=True)

    def _read(self, response: httpx.Response, deadline: float) -> bytes | _Trouble:
        """The body, streamed: counted against the cap, under a watchdog that shuts the connection
        at the deadline (per-read timeouts alone would let a one-byte-a-second trickle run on)."""
        cap = self.policy.max_body
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            return _Trouble(
                f"the body ({_size(int(declared))}) is over the {_size(cap)} cap", False, final=True
            )
        left = deadline - self.monotonic()
        if left <= 0:
            return self._past_deadline()
        ticket = WATCHDOG.arm(time.monotonic() + left, response)
        chunks, size = [], 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > cap:
                    return _Trouble(
                        f"the body is over the {_size(cap)} cap (abandoned after {_size(size)})",
                        False,
                        final=True,
                    )
                if self.monotonic() >= deadline:
                    return self._past_deadline()
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            if self.monotonic() >= deadline - 0.001:
                return self._past_deadline()
            if isinstance(exc, httpx.TimeoutException):
                return _Trouble(f"timed out after {self.policy.timeout:g}s", True)
            return _Trouble(f"connection dropped ({exc or type(exc).__name__})", True)
        finally:
            WATCHDOG.disarm(ticket)
        return b"".join(chunks)

    # -----------------------------------------------------------------------------------------

    def get(
        self,
        url: str,
        *,
        probe: str,
        headers: Mapping[str, str] | None = None,
        accept: str = "application/json",
        use_cache: bool = True,
        deadline: float | None = None,
    ) -> Fetched | ProbeFailure:
        """The response to ``GET url`` (any 2xx, 304 from cache, or a 404/410 for the caller
        to interpret), or why there is none."""
        cached = self.cache.get(url, accept) if (self.cache and use_cache) else None
        if (
            cached
            and cached.max_age is not None
            and self.wall() - cached.stored_at < cached.max_age
        ):
            return Fetched(url, 200, cached.body, {"content-type": cached.content_type or ""}, 0)
        request_headers = {"Accept": accept, **(headers or {})}
        if cached and cached.etag:
            request_headers["If-None-Match"] = cached.etag
        elif cached and cached.last_modified:
            request_headers["If-Modified-Since"] = cached.last_modified
        ask = _Exchange("GET", url, probe, request_headers, None, cached, accept)
        return self._exchange(ask, deadline)

    def post(
        self,
        url: str,
        payload: object,
        *,
        probe: str,
        headers: Mapping[str, str] | None = None,
        accept: str = "application/json",
        deadline: float | None = None,
    ) -> Fetched | ProbeFailure:
        """``POST url`` with a JSON ``payload`` (a read-only query, so it may be retried); never
        cached."""
        request_headers = {"Accept": accept, "Content-Type": "application/json", **(headers or {})}
        content = json.dumps(payload).encode()
        ask = _Exchange("POST", url, probe, request_headers, content, None, accept)
        return self._exchange(ask, deadline)

    def _exchange(self, ask: _Exchange, deadline: float | None) -> Fetched | ProbeFailure:
        """``ask`` sent until it is answered, fails for good, or runs out of attempts or time."""
        deadline = self.deadline() if deadline is None else deadline
        origin = _origin(httpx.URL(ask.url))
        attempt = 0
        while True:
            with self._unresolvable_lock:
                known = self._unresolvable.get(origin)
            if known is not None:
                return self._fail(
                    ask.probe,
                    ask.url,
                    f"{known} (not asked again: the host's name does not resolve here)",
                    retryable=True,
                    attempts=max(attempt, 1),
                )
            attempt += 1
            answer = self._attempt(ask.method, ask.url, ask.headers, ask.content, deadline)
            outcome: Fetched | ProbeFailure | _Retry
            if isinstance(answer, _Trouble):
                outcome = self._from_trouble(ask, answer, origin, attempt)
            else:
                outcome = self._from_reply(ask, answer, attempt)
            if not isinstance(outcome, _Retry):
                return outcome
            failure = self._wait_to_retry(ask, outcome, attempt, deadline)
            if failure is not None:
                return failure

    def _from_trouble(
        self, ask: _Exchange, trouble: _Trouble, origin: _Origin, attempt: int
    ) -> ProbeFailure | _Retry:
        """An attempt that got no answer: a failure when final, else one to try again."""
        if trouble.final:
            return self._fail(
                ask.probe, ask.url, trouble.reason, retryable=trouble.retryable, attempts=attempt
            )
        if trouble.reason.startswith(_DNS_FAILED) and attempt >= 2:
            with self._unresolvable_lock:
                self._unresolvable.setdefault(origin, trouble.reason)
        return _Retry(trouble.reason, trouble.retryable)

    def _from_reply(
        self, ask: _Exchange, reply: _Reply, attempt: int
    ) -> Fetched | ProbeFailure | _Retry:
        """What an answer means: the response (2xx, 304 from the cache, 404/410), a failure, or
        one to try again (rate limits, 5xx)."""
        status = reply.status
        if status == 304 and ask.cached is not None:
            # only freshness changed: rewrite just for it
            if freshness(reply.headers)[1]:
                self._store(
                    ask.url, ask.accept, reply.headers, ask.cached.body, previous=ask.cached
                )
            return Fetched(ask.url, 200, ask.cached.body, dict(reply.headers), attempt)
        if 200 <= status < 300:
            if ask.method == "GET":
                self._store(ask.url, ask.accept, reply.headers, reply.body)
            return Fetched(ask.url, status, reply.body, dict(reply.headers), attempt)
        if status in (404, 410):
            return Fetched(ask.url, status, reply.body, dict(reply.headers), attempt)
        if status == 429 or (
            status == 403
            and (
                reply.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in reply.headers
            )
        ):
            return self._rate_limited(ask, reply, attempt)
        if status >= 500:
            return _Retry(f"server error {status} {reply.reason_phrase}", True)
        if status == 401:
            why = "401 Unauthorized: the token is missing or invalid"
        else:
            why = f"HTTP {status} {reply.reason_phrase}"
        return self._fail(ask.probe, ask.url, why, retryable=False, attempts=attempt)

    def _rate_limited(self, ask: _Exchange, reply: _Reply, attempt: int) -> ProbeFailure | _Retry:
        """A 429 or 403 rate limit: wait as the server asks, unless that is longer than
        ``max_wait``."""
        wait = self._server_wait(reply.headers)
        label = "429 Too Many Requests" if reply.status == 429 else "403 rate limit exceeded"
        if wait is not None and wait > self.policy.max_wait:
            return self._fail(
                ask.probe,
                ask.url,
                f"{label}: the server asks to wait {wait:.0f}s "
                f"(more than {self.policy.max_wait:g}s); try later or set GITHUB_TOKEN",
                retryable=True,
                attempts=attempt,
            )
        asked = f" (Retry-After {wait:.0f}s)" if wait is not None else ""
        return _Retry(f"{label}{asked}", True, wait)

    def _wait_to_retry(
        self, ask: _Exchange, retry: _Retry, attempt: int, deadline: float
    ) -> ProbeFailure | None:
        """Sleep before the next attempt (None), or the failure when none is left within the
        attempts and the deadline."""
        if not retry.retryable or attempt >= self.policy.attempts:
            return self._fail(
                ask.probe, ask.url, retry.reason, retryable=retry.retryable, attempts=attempt
            )
        delay = retry.wait if retry.wait is not None else self._backoff(attempt)
        if self.monotonic() + delay > deadline:
            return self._fail(
                ask.probe,
                ask.url,
                f"{retry.reason}; gave up within the {self.policy.budget:g}s budget",
                retryable=True,
                attempts=attempt,
            )
        self.sleep(delay)
        return None

    def get_parsed(
        self,
        url: str,
        parse: Callable[[Fetched], T],
        *,
        probe: str,
        headers: Mapping[str, str] | None = None,
        accept: str = "application/json",
        deadline: float | None = None,
        payload: object = None,
    ) -> tuple[T, Fetched] | Fetched | ProbeFailure:
        """``parse(response)`` and the response; a 404/410 comes back as the bare :class:`Fetched`.

        ``parse`` raises :class:`BadBodyError`; one marked ``refetch`` is fetched again (bypassing
        the cache) at most ``json_attempts`` times in all, then reported. With ``payload`` it POSTs.
        """
        deadline = self.deadline() if deadline is None else deadline
        attempts = 0
        use_cache = True
        while True:
            attempts += 1
            if payload is None:
                fetched = self.get(
                    url,
                    probe=probe,
                    headers=headers,
                    accept=accept,
                    use_cache=use_cache,
                    deadline=deadline,
                )
            else:
                fetched = self.post(
                    url, payload, probe=probe, headers=headers, accept=accept, deadline=deadline
                )
            if isinstance(fetched, ProbeFailure) or fetched.status in (404, 410):
                return fetched
            try:
                return parse(fetched), fetched
            except BadBodyError as bad:
                if self.cache is not None and payload is None:
                    # never keep a body its reader refused
                    self.cache.drop(url, accept)
                if not bad.refetch or attempts >= self.policy.json_attempts:
                    return self._fail(
                        probe,
                        url,
                        bad.reason,
                        retryable=bad.refetch,
                        attempts=attempts if bad.refetch else fetched.attempts,
                    )
                use_cache = False

    def get_json(
        self,
        url: str,
        *,
        probe: str,
        headers: Mapping[str, str] | None = None,
        accept: str = "application/json",
        deadline: float | None = None,
        payload: object = None,
    ) -> tuple[object, Fetched] | Fetched | ProbeFailure:
        """Decoded JSON and the response (see :meth:`get_parsed`); HTML is refused, not misread."""
        return self.get_parsed(
            url,
            decode_json,
            probe=probe,
            headers=headers,
            accept=accept,
            deadline=deadline,
            payload=payload,
        )

    def _store(
        self,
        url: str,
        accept: str,
        headers: Mapping[str, str],
        body: bytes,
        previous: CacheEntry | None = None,
    ) -> None:
        if self.cache is None:
            return
        etag = headers.get("etag") or (previous.etag if previous else None)
        modified = headers.get("last-modified") or (previous.last_modified if previous else None)
        storable, max_age = freshness(headers)
        if not storable or not (etag or modified or max_age):
            return
        content_type = headers.get("content-type") or (previous.content_type if previous else None)
        self.cache.put(
            CacheEntry(url, body, etag, modified, self.wall(), max_age, content_type), accept
        )
