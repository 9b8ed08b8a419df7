"""URL credentials masked in what a probe reports or stores (secret values themselves are
scrubbed by :func:`retire.core.secrets.scrub`)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from retire.core.secrets import REDACTED

__all__ = ["REDACTED", "mask_url"]


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
