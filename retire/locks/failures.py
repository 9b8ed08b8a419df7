"""What a failed ``uv lock`` means: the lane failed, or this host could not reach an index.

"Unreachable" keeps the lane's previous lock and exits 0 (unless ``--require-all``); anything
else fails the lock (exit 1). An index that answered with an HTTP error status was reached, so a
500, 403 or 404 from an index is a failure, never "unreachable", even though uv words both
"Failed to fetch".
"""

from __future__ import annotations

import re

from retire.core import uv

__all__ = ["UNREACHABLE_MARKERS", "explain_failure"]

UNREACHABLE_MARKERS = (
    "Could not connect",
    "dns error",
    "Connection refused",
    "error sending request",
    "operation timed out",
    "Failed to fetch",
    "failed to lookup address",
)

#: uv's words for an index that answered with an error status (reqwest's "HTTP status server error
#: (500 …)").
_HTTP_STATUS = re.compile(
    r"HTTP status (server|client) error|\b[45]\d\d (Internal Server Error|Service Unavailable|"
    r"Bad Gateway|Forbidden|Unauthorized|Not Found|Gateway Timeout)"
)


def explain_failure(stderr: str) -> tuple[str, str]:
    """(status, one-line message) from uv's stderr; the full text stays in the result's detail."""
    lines = uv.failure_lines(stderr)
    # An index that answered with an HTTP error (500, 403, 404) was reached: that is a failure,
    # never
    # "unreachable" (which keeps the old lock and exits 0) — uv says "Failed to fetch" for both.
    answered = _HTTP_STATUS.search(stderr) is not None
    status = (
        "unreachable"
        if not answered and any(m in stderr for m in UNREACHABLE_MARKERS)
        else "failed"
    )
    errors = [line for line in lines if line.startswith(("error:", "cause:", "Caused by:", "╰─▶"))]
    summary = " / ".join((errors or lines or ["uv failed without a message"])[:4])
    return status, summary[:600]
