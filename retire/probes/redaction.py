"""Secrets out of everything a probe returns or stores: the token replaced, URL credentials masked."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "mask_url", "redact"]

REDACTED = "<redacted>"


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def mask_url(url: str) -> str:
    """``url`` with the credentials of its userinfo masked (a token often sits there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    masked = f"{user}:{REDACTED}" if colon else REDACTED
    return urlunsplit(parts._replace(netloc=f"{masked}@{hostport}"))
