"""What a failed ``uv lock`` means: the lane failed, or this host could not reach an index.

"Unreachable" keeps the lane's previous lock and exits 0 (unless ``--require-all``); anything
else fails the lock (exit 1). An index that answered with an HTTP error status was reached, so a
500, 403 or 404 from an index is a failure, never "unreachable", even though uv words both
"Failed to fetch".

A build from source uv could not start because the index serves none of its build requirements
(the build backend: setuptools, flit_core, hatchling) is told apart too
(:func:`missing_build_requirements`): no candidate of a commit search builds there.
"""

from __future__ import annotations

import re

from retire.core import uv

__all__ = ["UNREACHABLE_MARKERS", "explain_failure", "frozen_out", "missing_build_requirements"]

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


#: uv's hint when the lane's freeze hides a package: every version it would take is newer than the
#: cutoff, or its index serves no upload times (a nightly index) and uv can date none of them.
_FROZEN_OUT = re.compile(
    r"`([^`\s]+)` was filtered by `exclude-newer` to only include packages uploaded before (\S+?)\."
    r"(?:\s|$)"
)


def frozen_out(stderr: str, origin: str) -> str | None:
    """The fix, in one line, when the lane's ``exclude-newer`` hid the packages uv needed: the
    table and the package to write in the lane file ``origin``; None for any other failure."""
    found = _FROZEN_OUT.findall(stderr)
    if not found:
        return None
    names = list(dict.fromkeys(name for name, _cutoff in found))
    one = len(names) == 1
    return (
        f"exclude-newer hides every version of {', '.join(names)} the lane accepts (none "
        f"uploaded before {found[0][1]}, or the index serves no upload times) — exempt "
        f"{'it' if one else 'them'} in {origin}: [lane.exclude-newer-package] "
        f"{', '.join(f'{name} = false' for name in names)} (or give {'it' if one else 'each'} "
        f"its own date or cooldown)"
    )


#: uv's words for a build whose build requirements (``[build-system] requires``, or those the
#: backend asks for) could not be resolved
_BUILD_REQUIRES = re.compile(
    r"Failed to (resolve|install) requirements from `(build-system\.requires|get_requires_for_build)"
)
#: the requirement uv could not find at all ("Because setuptools was not found in the package
#: registry and you require setuptools>=61, …")
_NOT_FOUND = re.compile(r"\b([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the package registry")
#: what uv was resolving (`setuptools>=61`, `wheel`)
_RESOLVING = re.compile(r"No solution found when resolving: (.+)")


def missing_build_requirements(stderr: str) -> tuple[str, ...] | None:
    """The build requirements the index does not serve when uv failed building a package from
    source for want of them (its backend: ``("setuptools",)``; empty: uv named none), or None when
    that is not why it failed (an index it could not reach, the build itself failing)."""
    text = uv.plain(stderr)
    if _BUILD_REQUIRES.search(text) is None or explain_failure(text)[0] == "unreachable":
        return None
    names = _NOT_FOUND.findall(text)
    if not names and (resolving := _RESOLVING.search(text)) is not None:
        names = [_name(part) for part in resolving.group(1).split(",")]
    return tuple(dict.fromkeys(name for name in names if name))


def _name(requirement: str) -> str:
    """The project a requirement names (`setuptools>=61` → setuptools)."""
    return re.split(r"[^A-Za-z0-9._-]", requirement.strip().strip("`").strip(), maxsplit=1)[0]


def explain_failure(stderr: str, *, origin: str | None = None) -> tuple[str, str]:
    """(status, one-line message) from uv's stderr; the full text stays in the result's detail.
    ``origin`` (the lane file) lets a freeze that hid a package name its fix there."""
    if origin is not None and (fix := frozen_out(stderr, origin)) is not None:
        return "failed", fix
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
