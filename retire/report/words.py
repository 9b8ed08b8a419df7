"""How one fact reads in the report: a retirement condition of a manifest, a piece of evidence a
verdict rested on. Pure."""

from __future__ import annotations

import re
from typing import assert_never

from retire.evidence.values import (
    ExecutionHistory,
    IssueState,
    ProbeFailure,
    PullState,
    ReleaseList,
    TagContainment,
)
from shims.model import (
    CommitInTag,
    PrReleased,
    ReproducerClean,
    RetirementCondition,
    VersionFloor,
)

__all__ = ["condition_words", "evidence_line", "short_link"]


def condition_words(condition: RetirementCondition) -> str:
    match condition:
        case VersionFloor():
            return f"{condition.distribution} {condition.version} released"
        case PrReleased():
            return f"{short_link(condition.url)} merged and released"
        case CommitInTag():
            return (
                f"commit {condition.commit[:10]} of {short_link(condition.repository)} "
                "in a release tag"
            )
        case ReproducerClean():
            return "reproducer clean without the shim"
        case _:
            assert_never(condition)


def evidence_line(value: object) -> str:
    """One line for one piece of evidence (a ``retire.evidence`` value)."""
    if isinstance(value, ReleaseList):
        latest = value.latest
        when = f", {latest.upload_time.date()}" if latest and latest.upload_time else ""
        newest = f"newest {latest.version}{when}" if latest else "no installable release"
        return (
            f"index: {value.distribution} has {len(value.releases)} release(s) on "
            f"{value.index_url}; {newest}"
        )
    if isinstance(value, PullState):
        state = (
            f"merged {value.merged_at.date()}" if value.merged and value.merged_at else value.state
        )
        return f"code host: {value.label} {state}" + (f" — {value.title}" if value.title else "")
    if isinstance(value, IssueState):
        reason = f" ({value.state_reason})" if value.state_reason else ""
        return f"code host: {value.label} {value.state}{reason}" + (
            f" — {value.title}" if value.title else ""
        )
    if isinstance(value, TagContainment):
        tags = ", ".join(value.release_tags[:3]) or "no release tag"
        return f"git: {value.commit[:12]} of {value.repository} in {tags}"
    if isinstance(value, ExecutionHistory):
        runs = ", ".join(f"{r.outcome} on {r.where} {r.started_at[:10]}" for r in value.runs[-3:])
        return f"runs without the shim: {runs or 'none recorded'}"
    if isinstance(value, ProbeFailure):
        return f"probe failed: {value}"
    return f"{type(value).__name__}"


def short_link(url: str | None) -> str:
    """``Liger-Kernel#968`` for a GitHub-style issue / pull URL, else the URL without scheme."""
    if not url:
        return "?"
    found = re.match(r"https?://[^/]+/([^/]+)/([^/]+)/(?:issues|pull|pulls)/(\d+)", url)
    if found:
        return f"{found.group(2)}#{found.group(3)}"
    return re.sub(r"^https?://", "", url).rstrip("/")
