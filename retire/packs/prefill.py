"""A new-report pack started from a culprit: ``patchlane pack new ID --from-culprit LANE``.

A culprit (:mod:`retire.bisect.culprit`, recorded in ``validation/culprits.jsonl``) already says
what an upstream report needs: the package, the first broken release next to the last clean one,
the commit where a mirror told it, the reproducer. The pack written here is prefilled with them —
``[reproducer] against`` the first broken release and the one command that runs it there,
``[upstream-state] state = "new-report"`` — and says in comments where it came from and what
regressed in which release. It is only a start: ``searched`` stays unset (a person searches the
target's issues first), so ``pack check`` holds it back until they do, and nothing is filed
without ``pack approve`` (the human gate, docs/packs.md).
"""

from __future__ import annotations

from pathlib import Path

import tomlkit

from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.evidence import culprits as recorded
from retire.packs.model import CATEGORIES, github_repository
from shims.model import ShimManifest

__all__ = ["latest_culprit", "prefill"]


def latest_culprit(path: Path, shim: str, lane: str) -> dict:
    """The newest culprit recorded for ``shim`` in ``lane`` that names a package."""
    found = None
    for item in recorded.load(path):
        if item["subject"] == shim and item["lane"] == lane and item["status"] == "found":
            found = item
    if found is None:
        raise InputError(
            str(path),
            "--from-culprit",
            f"no culprit recorded for {shim} in lane {lane}",
            f"run `patchlane culprit {lane} {shim}` (or a bump) first",
        )
    named = found["packages"]
    assert isinstance(named, list)
    if len(named) != 1:
        raise InputError(
            str(path),
            "--from-culprit",
            f"the culprit recorded last for {shim} in lane {lane} names {len(named)} packages, "
            "not the one a new report is about",
            f"run `patchlane culprit {lane} {shim}` again to record it whole",
        )
    return found


def _repository(manifest: ShimManifest, given: str | None) -> str:
    if given:
        return given
    for link in manifest.upstream.links:
        if (repository := github_repository(link.url)) is not None:
            return repository
    raise InputError(
        None,
        "--repository",
        f"{manifest.id}'s upstream links name no github.com repository",
        "name the target: --repository owner/name",
    )


def prefill(
    manifest: ShimManifest, culprit: dict, *, category: str, repository: str | None
) -> Path:
    """Write ``<shim>/pack.toml`` from ``culprit``; an existing pack is never overwritten."""
    path = manifest.directory / "pack.toml"
    if path.exists():
        raise InputError(
            str(path), None, "a pack exists already", "edit it, or remove it to start again"
        )
    if category not in CATEGORIES:
        raise InputError(
            None,
            "--category",
            f"unknown category {category!r}",
            f"use one of {', '.join(CATEGORIES)}",
        )
    [package] = culprit["packages"]
    release = f"{package['name']}=={culprit.get('first_broken') or package['new']}"
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Prefilled by `patchlane pack new --from-culprit`: {culprit['line']}"))
    regressed = f"Regressed in {release.replace('==', ' ')}"
    if culprit.get("last_clean"):
        regressed += f" ({package['name']} {culprit['last_clean']} clean)"
    if culprit.get("between"):
        # the first broken release is not pinned: releases between could not be told
        regressed = (
            f"Regressed after {package['name']} {culprit.get('last_clean')}, by "
            f"{release.replace('==', ' ')} (not pinned: {', '.join(map(str, culprit['between']))})"
        )
    commit = culprit.get("commit") or {}
    if commit.get("sha"):
        regressed += f"; first broken commit {commit['sha']}" + (
            f" ({commit['pr']})" if commit.get("pr") else ""
        )
    doc.add(tomlkit.comment(regressed))
    doc["category"] = category
    doc["repository"] = _repository(manifest, repository)
    doc["kind"] = "issue"
    doc["priority"] = "report"
    upstream = tomlkit.table()
    upstream["state"] = "new-report"
    upstream.add(tomlkit.comment("search the target's issues and PRs, then set searched = DATE"))
    doc["upstream-state"] = upstream
    reproducer = tomlkit.table()
    reproducer["against"] = release
    reproducer["command"] = (
        f"uv run --no-project --with {release} python {manifest.reproducer.path} --mode without"
    )
    doc["reproducer"] = reproducer
    atomic_write(path, tomlkit.dumps(doc), within=manifest.directory)
    return path
