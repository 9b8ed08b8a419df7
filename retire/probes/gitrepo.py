"""The git probe: is a fix commit contained in a release tag of a local clone or mirror?

Read-only on the repository (``git rev-parse``, ``git tag --contains``); nothing is fetched here,
so a mirror that is behind shows up as a missing tag or commit, reported as a failure with what
to fetch — never as "not fixed".
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from retire.core.git import Git, GitError
from retire.evidence.values import ProbeFailure, TagContainment

__all__ = ["DEFAULT_RELEASE_TAG", "mirror_for", "probe_containment", "probe_tag_contains", "tag_version"]

#: A release tag: ``v1.2``, ``1.2.3``. The first group, if any, is the version.
DEFAULT_RELEASE_TAG = r"v?(\d+(?:\.\d+)*)"
_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")


def tag_version(tag: str, pattern: str | re.Pattern[str] = DEFAULT_RELEASE_TAG) -> str | None:
    """The version a release tag stands for, or None when ``tag`` is not a release tag."""
    found = re.fullmatch(pattern, tag)
    if not found:
        return None
    return found.group(1) if found.groups() and found.group(1) else tag.lstrip("v")


def mirror_for(repository: str, mirrors: Mapping[str, str | os.PathLike[str]] | str | os.PathLike[str] | None) -> Path | None:
    """The local mirror of ``repository``: an explicit ``{url: path}`` entry, or
    ``<mirrors>/<owner>/<repo>`` (or ``<repo>.git``) under a mirrors folder."""
    if mirrors is None:
        return None
    if isinstance(mirrors, Mapping):
        wanted = repository.rstrip("/").removesuffix(".git")
        for url, path in mirrors.items():
            if url.rstrip("/").removesuffix(".git") == wanted:
                return Path(path)
        return None
    segments = [s for s in urlsplit(repository).path.split("/") if s]
    if len(segments) < 2 or not all(_SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments[-2:]):
        return None  # names become paths: never let one climb out
    owner, repo = segments[-2], segments[-1].removesuffix(".git")
    for candidate in (Path(mirrors) / owner / repo, Path(mirrors) / owner / f"{repo}.git"):
        if candidate.exists():
            return candidate
    return None


def _open(path: Path, target: str) -> Git | ProbeFailure:
    if not path.exists():
        return ProbeFailure("git", target, f"no local mirror at {path}: clone the repository there")
    repo = Git(path, search_parents=False)  # the mirror itself, never a checkout it sits in
    if not repo.is_repository():
        return ProbeFailure("git", target, f"{path} is not a git repository")
    return repo


def _resolve(repo: Git, commit: str, target: str, path: Path) -> str | ProbeFailure:
    if not _COMMIT.fullmatch(commit):
        return ProbeFailure("git", target, f"not a commit sha: {commit!r}")
    return repo.rev_parse(f"{commit}^{{commit}}") or ProbeFailure(
        "git", target, f"commit {commit[:12]} is not in the mirror at {path}: "
        "fetch it (git fetch --tags) or check the sha", retryable=True)


def _failed(target: str, exc: GitError) -> ProbeFailure:
    return ProbeFailure("git", target, f"git failed: {' '.join(str(exc).split())[:200]}")


def probe_containment(path: str | os.PathLike[str], commit: str, *, repository: str = "",
                      release_tag: str = DEFAULT_RELEASE_TAG) -> TagContainment | ProbeFailure:
    """Which tags of the mirror at ``path`` contain ``commit``; never raises."""
    path = Path(path)
    target = f"{repository or path}@{commit[:12]}"
    try:
        repo = _open(path, target)
        if isinstance(repo, ProbeFailure):
            return repo
        full = _resolve(repo, commit, target, path)
        if isinstance(full, ProbeFailure):
            return full
        containing = tuple(repo.tags(containing=full))
        every = repo.tags()
    except GitError as exc:
        return _failed(target, exc)
    try:
        pattern = re.compile(release_tag)
    except re.error as exc:
        return ProbeFailure("git", target, f"bad release tag pattern {release_tag!r}: {exc}")
    versions = tuple((t, v) for t in every if (v := tag_version(t, pattern)) is not None)
    release_tags = tuple(t for t in containing if tag_version(t, pattern) is not None)
    return TagContainment(repository or str(path), full, containing, release_tags, versions)


def probe_tag_contains(path: str | os.PathLike[str], commit: str, tag: str, *,
                       repository: str = "") -> bool | ProbeFailure:
    """Whether ``tag`` contains ``commit``; a tag or commit that does not exist is a failure."""
    path = Path(path)
    target = f"{repository or path}@{tag}"
    try:
        repo = _open(path, target)
        if isinstance(repo, ProbeFailure):
            return repo
        full = _resolve(repo, commit, target, path)
        if isinstance(full, ProbeFailure):
            return full
        tagged = repo.rev_parse(f"refs/tags/{tag}^{{commit}}")
        if tagged is None:
            return ProbeFailure("git", target, f"tag {tag!r} does not exist in the mirror at {path}: "
                                "fetch tags (git fetch --tags) or check the release tag pattern", retryable=True)
        return repo.is_ancestor(full, tagged)
    except GitError as exc:
        return _failed(target, exc)
