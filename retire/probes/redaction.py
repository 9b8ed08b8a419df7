"""Secrets out of everything a probe returns or stores: the token replaced, URL credentials masked."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from retire.core.secrets import REDACTED, scrub

__all__ = ["REDACTED", "mask_url", "redact"]



def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` without ``secrets`` nor any secret of the environment (:func:`retire.core.secrets.scrub`)."""
    return scrub(text, secrets)


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
