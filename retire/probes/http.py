"""The HTTP layer every probe shares: retries with backoff, rate limits, an on-disk cache.

A :class:`Fetcher` wraps an injected ``httpx.Client`` (tests hand it a client pointed at a
loopback server, or one with a custom transport). ``get`` returns a :class:`Fetched` or a
:class:`~retire.evidence.ProbeFailure` — it never raises.

- **Retried**, with exponential backoff and full jitter: timeouts, connection refused, DNS
  failures, dropped connections, 5xx, 429 and 403 rate limits. Every request has a total time
  budget; a ``Retry-After`` or ``X-RateLimit-Reset`` further away than ``max_wait`` is not slept
  on: the probe ends at once as unknown (a weekly report must not hang for an hour).
- **Not retried**: other 4xx, and a body that is not valid JSON is fetched at most twice
  (a truncating proxy may heal; a broken server will not).
- **Cache**: responses carrying an ``ETag`` or ``Last-Modified`` are stored (atomically, one
  file per URL); the next request is conditional (``If-None-Match``) and a 304 serves the stored
  body. Within ``Cache-Control: max-age`` no request is made at all (like uv's cache).
"""

from __future__ import annotations

import base64
import email.utils
import functools
import hashlib
import json
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from retire.core.atomic import atomic_write
from retire.evidence.values import ProbeFailure

__all__ = ["DEFAULT_CACHE_DIR", "Fetched", "Fetcher", "HttpCache", "RetryPolicy", "make_client", "redact"]

#: Relative to the project root.
DEFAULT_CACHE_DIR = Path(".patchlane") / "cache" / "http"
USER_AGENT = "patchlane-probe/0.1"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # tries per request, the first included
    backoff: float = 0.25  # seconds before the second try; doubles each time
    max_backoff: float = 4.0
    budget: float = 30.0  # total seconds one request may take, waits included
    max_wait: float = 60.0  # longest Retry-After / rate-limit reset honoured
    timeout: float = 10.0  # per attempt (connect, read)
    json_attempts: int = 2  # fetches of a body that does not decode


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    from_cache: bool = False  # served without a request (fresh) or after a 304
    attempts: int = 1


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return text


#: GitHub's secondary rate limit allows 100 concurrent requests; stay at it, never above.
MAX_IN_FLIGHT = 100


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: loading the CA bundle costs ~50 ms, more than a warm run's requests."""
    return ssl.create_default_context()


def make_client(*, timeout: float = 10.0, transport: httpx.BaseTransport | None = None,
                max_connections: int = MAX_IN_FLIGHT) -> httpx.Client:
    """The client probes use when none is injected: pooled, redirects followed."""
    return httpx.Client(
        timeout=timeout,
        follow_redirects=True,
        transport=transport,
        verify=_tls(),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        headers={"User-Agent": USER_AGENT},
    )


# ---------------------------------------------------------------------------------------------
# Cache


@dataclass(frozen=True)
class CacheEntry:
    url: str
    body: bytes
    etag: str | None
    last_modified: str | None
    stored_at: float  # wall-clock seconds
    max_age: float | None
    content_type: str | None


class HttpCache:
    """One JSON file per (URL, Accept) under ``folder``; written atomically, safe across threads."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, url: str, accept: str) -> Path:
        key = hashlib.sha256(f"{url}\n{accept}".encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def get(self, url: str, accept: str) -> CacheEntry | None:
        try:
            data = json.loads(self._path(url, accept).read_text(encoding="utf-8"))
            return CacheEntry(
                url=data["url"], body=base64.b64decode(data["body"]), etag=data.get("etag"),
                last_modified=data.get("last_modified"), stored_at=float(data["stored_at"]),
                max_age=data.get("max_age"), content_type=data.get("content_type"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or corrupt: fetch again

    def put(self, entry: CacheEntry, accept: str) -> None:
        data = {
            "url": entry.url, "body": base64.b64encode(entry.body).decode(), "etag": entry.etag,
            "last_modified": entry.last_modified, "stored_at": entry.stored_at,
            "max_age": entry.max_age, "content_type": entry.content_type,
        }
        try:
            atomic_write(self._path(entry.url, accept), json.dumps(data))
        except OSError:
            pass  # a cache that cannot be written only costs speed


def _max_age(headers: Mapping[str, str]) -> tuple[bool, float | None]:
    """(storable, max-age seconds) from Cache-Control."""
    control = (headers.get("cache-control") or "").lower()
    if "no-store" in control:
        return False, None
    if "no-cache" in control:
        return True, 0.0
    found = re.search(r"max-age=(\d+)", control)
    return True, (float(found.group(1)) if found else None)


# ---------------------------------------------------------------------------------------------
# Fetching


def _connect_reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if any(m in lowered for m in ("name or service not known", "nodename nor servname", "name resolution",
                                  "getaddrinfo", "no address associated", "not known")):
        return f"DNS lookup failed ({text})"
    if "refused" in lowered:
        return "connection refused"
    return f"cannot connect ({text})"


class Fetcher:
    """GET with retries, rate-limit handling and the conditional cache; never raises."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        cache: HttpCache | None = None,
        policy: RetryPolicy = RetryPolicy(),
        secrets: Sequence[str] = (),
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.cache = cache
        self.policy = policy
        self.secrets = tuple(s for s in secrets if s)
        self.sleep, self.monotonic, self.wall, self.jitter = sleep, monotonic, wall, jitter

    def _fail(self, probe: str, url: str, reason: str, *, retryable: bool, attempts: int) -> ProbeFailure:
        return ProbeFailure(probe, redact(url, self.secrets), redact(reason, self.secrets), retryable, attempts)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.policy.max_backoff, self.policy.backoff * (2 ** (attempt - 1)))
        return ceiling * (0.5 + self.jitter() / 2)  # jitter: many probes never retry in lockstep

    def _server_wait(self, response: httpx.Response) -> float | None:
        """Seconds the server asks us to wait (Retry-After or X-RateLimit-Reset), if it says."""
        retry_after = response.headers.get("retry-after")
        if retry_after:
            if retry_after.strip().isdigit():
                return float(retry_after)
            try:
                moment = email.utils.parsedate_to_datetime(retry_after)
                return max(0.0, moment.timestamp() - self.wall())
            except (TypeError, ValueError):
                return None
        reset = response.headers.get("x-ratelimit-reset")
        if reset and reset.strip().isdigit():
            return max(0.0, float(reset) - self.wall())
        return None

    def get(self, url: str, *, probe: str, headers: Mapping[str, str] | None = None,
            accept: str = "application/json", use_cache: bool = True) -> Fetched | ProbeFailure:
        """The response to ``GET url`` (any 2xx, 304 from cache, or a 404/410 for the caller
        to interpret), or why there is none."""
        cached = self.cache.get(url, accept) if (self.cache and use_cache) else None
        if cached and cached.max_age is not None and self.wall() - cached.stored_at < cached.max_age:
            return Fetched(url, 200, cached.body, {"content-type": cached.content_type or ""}, True, 0)
        request_headers = {"Accept": accept, **(headers or {})}
        if cached and cached.etag:
            request_headers["If-None-Match"] = cached.etag
        elif cached and cached.last_modified:
            request_headers["If-Modified-Since"] = cached.last_modified

        deadline = self.monotonic() + self.policy.budget
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                response = self.client.get(url, headers=request_headers, timeout=self.policy.timeout)
            except httpx.TimeoutException:
                reason, retryable = f"timed out after {self.policy.timeout:g}s", True
            except httpx.ConnectError as exc:
                reason, retryable = _connect_reason(exc), True
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                reason, retryable = f"connection dropped ({exc or type(exc).__name__})", True
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                return self._fail(probe, url, f"bad URL ({exc})", retryable=False, attempts=attempt)
            except httpx.HTTPError as exc:
                reason, retryable = f"{type(exc).__name__}: {exc}", True
            else:
                status = response.status_code
                if status == 304 and cached is not None:
                    if _max_age(response.headers)[1]:  # only freshness changed: rewrite just for it
                        self._store(url, accept, response, cached.body, previous=cached)
                    return Fetched(url, 200, cached.body, dict(response.headers), True, attempt)
                if 200 <= status < 300:
                    self._store(url, accept, response, response.content)
                    return Fetched(url, status, response.content, dict(response.headers), False, attempt)
                if status in (404, 410):
                    return Fetched(url, status, response.content, dict(response.headers), False, attempt)
                limited = status == 429 or (
                    status == 403 and (response.headers.get("x-ratelimit-remaining") == "0"
                                       or "retry-after" in response.headers))
                if limited:
                    wait = self._server_wait(response)
                    label = "429 Too Many Requests" if status == 429 else "403 rate limit exceeded"
                    if wait is not None and wait > self.policy.max_wait:
                        return self._fail(probe, url, f"{label}: the server asks to wait {wait:.0f}s "
                                          f"(more than {self.policy.max_wait:g}s); try later or set GITHUB_TOKEN",
                                          retryable=True, attempts=attempt)
                    reason, retryable = (f"{label}" + (f" (Retry-After {wait:.0f}s)" if wait is not None else "")), True
                elif status >= 500:
                    reason, retryable = f"server error {status} {response.reason_phrase}", True
                elif status == 401:
                    return self._fail(probe, url, "401 Unauthorized: the token is missing or invalid",
                                      retryable=False, attempts=attempt)
                else:
                    return self._fail(probe, url, f"HTTP {status} {response.reason_phrase}",
                                      retryable=False, attempts=attempt)
            # A retryable failure: wait and go again, within the attempts and the time budget.
            if not retryable or attempt >= self.policy.attempts:
                return self._fail(probe, url, reason, retryable=retryable, attempts=attempt)
            delay = wait if wait is not None else self._backoff(attempt)
            if self.monotonic() + delay > deadline:
                return self._fail(probe, url, f"{reason}; gave up within the {self.policy.budget:g}s budget",
                                  retryable=True, attempts=attempt)
            self.sleep(delay)

    def get_json(self, url: str, *, probe: str, headers: Mapping[str, str] | None = None,
                 accept: str = "application/json") -> tuple[object, Fetched] | Fetched | ProbeFailure:
        """Decoded JSON and the response; a 404/410 comes back as the bare :class:`Fetched`.

        A body that does not decode is fetched again (bypassing the cache) at most
        ``json_attempts`` times in all, then reported as invalid.
        """
        attempts = 0
        use_cache = True
        while True:
            attempts += 1
            fetched = self.get(url, probe=probe, headers=headers, accept=accept, use_cache=use_cache)
            if isinstance(fetched, ProbeFailure) or fetched.status in (404, 410):
                return fetched
            content_type = (fetched.headers.get("content-type") or "").lower()
            if "html" in content_type:
                return self._fail(probe, url, f"the server answered {content_type.split(';')[0]}, not JSON",
                                  retryable=False, attempts=fetched.attempts)
            try:
                return json.loads(fetched.body), fetched
            except (ValueError, UnicodeDecodeError) as exc:
                if attempts >= self.policy.json_attempts:
                    kind = "truncated JSON" if _truncated(exc, fetched.body) else "invalid JSON"
                    return self._fail(probe, url, f"{kind} in the response ({_short(exc)})",
                                      retryable=True, attempts=attempts)
                use_cache = False

    def _store(self, url: str, accept: str, response: httpx.Response, body: bytes,
               previous: CacheEntry | None = None) -> None:
        if self.cache is None:
            return
        etag = response.headers.get("etag") or (previous.etag if previous else None)
        modified = response.headers.get("last-modified") or (previous.last_modified if previous else None)
        storable, max_age = _max_age(response.headers)
        if not storable or not (etag or modified or max_age):
            return
        if not _decodes(body, response.headers.get("content-type")):
            return  # never keep a broken body: the next run must ask again
        content_type = response.headers.get("content-type") or (previous.content_type if previous else None)
        self.cache.put(CacheEntry(url, body, etag, modified, self.wall(), max_age, content_type), accept)


def _decodes(body: bytes, content_type: str | None) -> bool:
    if content_type and "json" not in content_type:
        return True
    try:
        json.loads(body)
        return True
    except (ValueError, UnicodeDecodeError):
        return False


def _truncated(exc: Exception, body: bytes) -> bool:
    """A body that stops mid-document (as opposed to one that was never JSON)."""
    if not isinstance(exc, json.JSONDecodeError) or not body.lstrip()[:1] in (b"{", b"["):
        return False
    return exc.msg.startswith("Unterminated") or exc.pos >= len(body.rstrip()) - 1


def _short(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos}"
    return str(exc)[:120]
