"""What makes a lock trustworthy after it was written: its content digest, and versions its lane
allows.

patchlane records ``content = "sha256:…"`` in a lock's ``[tool.patchlane]`` table: the digest of
everything above that table (uv's lock and patchlane's header). A lock edited by hand — a version
changed, a hash swapped, even consistently — no longer matches it. Independently, every locked
version of a package the lane names must satisfy the lane's requirement, constraint or override
for it, so even a lock whose digest was recomputed cannot run a version the lane file forbids.

Both checks read the text only (no TOML parse of hundreds of entries): deciding whether a dozen
GPU-stack locks are current stays cheap.
"""

from __future__ import annotations

import hashlib
import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.lanes.model import Lane

__all__ = [
    "CONTENT_KEY",
    "PROVENANCE_HEADER",
    "content_digest",
    "content_problem",
    "locked_versions",
    "versions_outside",
]

CONTENT_KEY = "content"
PROVENANCE_HEADER = "\n[tool.patchlane]\n"
_PACKAGE = re.compile(
    r'^\[\[packages\]\]\nname = "([^"\n]+)"\n(?:version = "([^"\n]+)")?', re.MULTILINE
)


def content_digest(body: str) -> str:
    """``sha256:…`` of a lock's text above its provenance table (line endings normalised)."""
    return "sha256:" + hashlib.sha256(body.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def content_problem(text: str, provenance: dict) -> str | None:
    """Why ``text`` is not the lock patchlane wrote (one line), or None when its digest matches."""
    recorded = provenance.get(CONTENT_KEY)
    if not isinstance(recorded, str):
        return "it records no content digest (made by an older patchlane): re-lock it"
    text = text.replace("\r\n", "\n")
    at = text.rfind(PROVENANCE_HEADER)
    if at < 0 or content_digest(text[:at]) != recorded:
        return (
            "its content changed after patchlane wrote it (edited by hand?): re-lock it, "
            "never edit it"
        )
    return None


def locked_versions(text: str) -> dict[str, list[str]]:
    """Canonical name → the versions locked for it (several where markers split a package)."""
    found: dict[str, list[str]] = {}
    for name, version in _PACKAGE.findall(text.replace("\r\n", "\n")):
        if version:
            found.setdefault(str(canonicalize_name(name)), []).append(version)
    return found


def _rules(lane: Lane) -> list[tuple[Requirement, str]]:
    """The lane's version rules that hold on every platform: (requirement, where it is written)."""
    rules: list[tuple[Requirement, str]] = []
    overridden: set[str] = set()
    for kind, texts in (
        ("overrides", lane.overrides),
        ("constraints", lane.constraints),
        ("requirements", lane.requirements),
    ):
        for text in texts:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                # the lane reader reports it
                continue
            name = str(canonicalize_name(requirement.name))
            if requirement.marker is not None or requirement.url or not requirement.specifier:
                # platform-dependent or not a version rule: uv judged it
                continue
            if kind == "overrides":
                overridden.add(name)
            elif name in overridden:
                # an override replaces the lane's other rules for the package
                continue
            rules.append((requirement, kind))
    return rules


def versions_outside(lane: Lane, text: str) -> list[str]:
    """One line per locked version the lane file does not allow (empty when all are allowed)."""
    locked = locked_versions(text)
    problems = []
    for requirement, kind in _rules(lane):
        for version in locked.get(str(canonicalize_name(requirement.name)), ()):
            try:
                allowed = requirement.specifier.contains(Version(version), prereleases=True)
            except InvalidVersion:
                allowed = False
            if not allowed:
                problems.append(
                    f"{requirement.name} {version} is locked, but the lane's {kind} say "
                    f"{requirement}"
                )
    return problems
