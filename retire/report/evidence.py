"""Verdict evidence as the weekly report keeps it: each release list summarised.

A verdict's evidence holds what the probes returned, release lists included: every file of every
release of every target (for torch, thousands). The report keeps what a reader checks a decision
against — how many releases, the newest, the latest final, and the releases the verdict's
conditions and floors name — and leaves the full lists to the probes' HTTP cache. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = ["summarise_verdict"]


def summarise_verdict(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict's JSON with each release list summarised: how many releases, the newest, the
    latest final, and the releases its conditions and floors name. The full lists (every file of
    every release of torch …) are what the probes' cache holds; a report needs what was decided
    on."""
    evidence = verdict.get("evidence")
    if not isinstance(evidence, list):
        return verdict
    said = " ".join(
        str(c.get(key) or "")
        for c in verdict.get("conditions") or []
        if isinstance(c, dict)
        for key in ("why", "floor", "action")
    )
    said += (
        " " + " ".join(map(str, verdict.get("floors") or [])) + " " + str(verdict.get("why") or "")
    )
    named = _versions_in(said)
    return {
        **verdict,
        "evidence": [
            _summarise_releases(item, named)
            if isinstance(item, dict) and item.get("kind") == "release-list"
            else item
            for item in evidence
        ],
    }


def _versions_in(text: str) -> set[Version]:
    found: set[Version] = set()
    for token in re.findall(r"(?<![\w.])v?\d+(?:\.[0-9A-Za-z]+)+", text):
        try:
            found.add(Version(token))
        except InvalidVersion:
            continue
    return found


def _release_line(release: dict[str, Any]) -> dict[str, object]:
    return {
        "version": release.get("version"),
        "upload_time": release.get("upload_time"),
        "yanked": bool(release.get("yanked")),
        "files": len(release.get("files") or []),
    }


def _summarise_releases(item: dict[str, Any], named: set[Version]) -> dict[str, object]:
    releases = [r for r in item.get("releases") or [] if isinstance(r, dict)]
    available = [r for r in releases if not r.get("yanked")]
    finals = [r for r in available if not r.get("prerelease")]

    def named_here(release: dict[str, Any]) -> bool:
        try:
            return Version(str(release.get("version"))) in named
        except InvalidVersion:
            return False

    return {
        "kind": "release-list",
        "distribution": item.get("distribution"),
        "index_url": item.get("index_url"),
        "summarised": True,
        "count": len(releases),
        "yanked": len(releases) - len(available),
        "newest": _release_line(releases[-1]) if releases else None,
        "latest": _release_line((finals or available)[-1]) if available else None,
        "used": [_release_line(r) for r in releases if named_here(r)],
    }
