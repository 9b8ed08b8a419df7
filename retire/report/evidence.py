"""Verdict evidence as the weekly report keeps it: each release list summarised.

A verdict's evidence holds what the probes returned, release lists included: every file of every
release of every target (for torch, thousands). The report keeps what a reader checks a decision
against — how many releases, the newest, the latest final, and the releases the verdict's
floors name (typed values: nothing is read back from its prose) — and leaves the full lists to
the probes' HTTP cache. Pure.
"""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from retire.verdicts.model import Verdict

__all__ = ["summarise_verdict"]


def summarise_verdict(verdict: Verdict) -> dict[str, Any]:
    """A verdict's JSON with each release list summarised: how many releases, the newest, the
    latest final, and the releases its floors name (its own, its conditions', its lanes'). The
    full lists (every file of every release of torch …) are what the probes' cache holds; a
    report needs what was decided on."""
    data = verdict.to_json()
    named = {floor.version for floor in verdict.floors}
    named |= {c.floor.version for c in verdict.conditions if c.floor is not None}
    named |= {floor.version for lane in verdict.lane_verdicts for floor in lane.floors}
    evidence = data.get("evidence")
    if not isinstance(evidence, list):
        return data
    return {
        **data,
        "evidence": [
            _summarise_releases(item, named)
            if isinstance(item, dict) and item.get("kind") == "release-list"
            else item
            for item in evidence
        ],
    }


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
