"""What a probe asks for and gets back: the retry policy, a fetched response, and the JSON reader
that refuses HTML and tells a truncated body (worth a second fetch) from one that never was JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["BadBodyError", "Fetched", "RetryPolicy", "decode_json"]


@dataclass(frozen=True)
class RetryPolicy:
    # tries per request, the first included
    attempts: int = 4
    # seconds before the second try; doubles each time
    backoff: float = 0.25
    max_backoff: float = 4.0
    # the total deadline of one probe: attempts, waits, redirects and bodies
    budget: float = 30.0
    # longest Retry-After / rate-limit reset honoured
    max_wait: float = 60.0
    # per connect / read, clamped to what is left of the budget
    timeout: float = 10.0
    # fetches of a body that does not decode
    json_attempts: int = 2
    # bytes of one body (a PyTorch nightly project page is a few MiB)
    max_body: int = 64 * 2**20
    # same-host redirects followed per request
    max_redirects: int = 5


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    attempts: int = 1

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters ('' when the server sent none)."""
        return (self.headers.get("content-type") or "").split(";")[0].strip().lower()


class BadBodyError(ValueError):
    """A parser's complaint about a body; ``refetch`` when asking again may heal it (truncation)."""

    def __init__(self, reason: str, *, refetch: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.refetch = reason, refetch


def decode_json(fetched: Fetched) -> object:
    """The JSON of a response; :class:`BadBodyError` for HTML (never misread) or a body that does
    not decode (truncated or invalid: worth one more fetch)."""
    if "html" in fetched.content_type:
        raise BadBodyError(f"the server answered {fetched.content_type}, not JSON")
    try:
        return json.loads(fetched.body)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "truncated JSON" if _truncated(exc, fetched.body) else "invalid JSON"
        raise BadBodyError(f"{kind} in the response ({_short(exc)})", refetch=True) from None


def _truncated(exc: Exception, body: bytes) -> bool:
    """A body that stops mid-document (as opposed to one that was never JSON)."""
    if not isinstance(exc, json.JSONDecodeError) or body.lstrip()[:1] not in (b"{", b"["):
        return False
    return exc.msg.startswith("Unterminated") or exc.pos >= len(body.rstrip()) - 1


def _short(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos}"
    return str(exc)[:120]
