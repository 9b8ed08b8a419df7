"""Which environment variables hold secrets, and the one redaction every outgoing string passes.

A secret comes from the environment (``GITHUB_TOKEN``, ``UV_INDEX_X_PASSWORD``, ``MY_API_KEY``…)
or is handed to :func:`remember` by the code that read it. :func:`scrub` replaces each known
secret value with ``<redacted>``; it is applied at the boundaries where text leaves the process:
:func:`retire.core.atomic.atomic_write` (every report, cache, lock and manifest file) and the
CLI's printer (:func:`retire.commands.base.say` / ``emit_json``). Reproducers' output is scrubbed
before it becomes a record, so the tail of a run never carries one either.
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import quote

__all__ = [
    "REDACTED",
    "SECRET_MARKERS",
    "looks_secret",
    "remember",
    "scrub",
    "scrub_bytes",
    "secret_values",
]

REDACTED = "<redacted>"
#: A variable whose name contains one of these (upper-cased) holds a secret.
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "COOKIE")
#: ``AUTH`` as a word of the name (``AUTH_HEADER``, ``PROXY_AUTHORIZATION``), not
#: ``GIT_AUTHOR_NAME``.
_AUTH = re.compile(r"(?:^|_)AUTH(?:$|_|ORIZATION|ENTICATION|TOKEN)")
#: Names that carry a marker but hold no secret (a socket path, a keyring's location, a NCCL knob).
NOT_SECRET = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "UV_KEYRING_PROVIDER",
        "KEYRING_BACKEND",
        "PYTHON_KEYRING_BACKEND",
        "GPG_AGENT_INFO",
        "NCCL_IB_PKEY",
    }
)
#: Values shorter than this are not scrubbed: replacing "1", "true" or "python" everywhere would
#: mangle
#: files (real tokens are far longer).
MIN_SECRET_LENGTH = 8

_remembered: set[str] = set()
_lock = threading.Lock()


def looks_secret(name: str) -> bool:
    """Whether an environment variable called ``name`` holds a secret (by its name)."""
    upper = name.upper()
    return upper not in NOT_SECRET and (
        any(marker in upper for marker in SECRET_MARKERS) or bool(_AUTH.search(upper))
    )


def remember(*values: str | None) -> None:
    """Scrub ``values`` too from now on (a secret read from a file or a flag, not the
    environment)."""
    with _lock:
        _remembered.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret value known now, longest first (so a secret that contains another goes
    whole)."""
    env = os.environ if environ is None else environ
    found = {
        value
        for name, value in env.items()
        if looks_secret(name) and len(value) >= MIN_SECRET_LENGTH
    }
    with _lock:
        found |= _remembered
    return tuple(sorted(found, key=len, reverse=True))


def _forms(extra: Iterable[str]) -> list[str]:
    """Each secret as written plainly, and as JSON, HTML and URLs escape it."""
    forms: dict[str, None] = {}
    for secret in (*secret_values(), *extra):
        if secret:
            for form in (
                secret,
                json.dumps(secret)[1:-1],
                html.escape(secret),
                quote(secret, safe=""),
            ):
                forms.setdefault(form)
    return list(forms)


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every known secret (and ``extra``) replaced by ``<redacted>``."""
    for secret in _forms(extra):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_bytes(data: bytes, extra: Iterable[str] = ()) -> bytes:
    """:func:`scrub` for bytes (UTF-8 encoded secrets)."""
    for secret in _forms(extra):
        encoded = secret.encode("utf-8", errors="surrogateescape")
        if encoded in data:
            data = data.replace(encoded, REDACTED.encode())
    return data
