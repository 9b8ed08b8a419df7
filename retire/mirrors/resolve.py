"""The repository of a distribution, resolved once: which mirror on this host holds the code of a
shim's target (or a culprit package), and how that was found.

In this order, the first that names a mirror on this host wins:

1. a lane's revision of the distribution (``[lane.revisions]``: its repository and subdirectory);
2. a link of the shim (its upstream links and ``pr-released`` URLs): a mirror whose repository
   the link points into (``https://github.com/o/r/pull/7`` is in ``https://github.com/o/r``);
3. the distribution's own metadata (``Project-URL``, ``Home-page``, ``Download-URL`` — of an
   installed copy, or as the index serves it beside a wheel): a mirror whose URL the metadata
   URL matches, scheme, case, ``.git``, a trailing ``/`` and a path inside the repository
   (``tree/main``) aside;
4. a mirror declared in ``patchlane.toml`` whose repository is named as the package is
   (``Liger-Kernel`` for ``liger-kernel``, ``TransformerEngine`` for ``transformer-engine``) and
   whose release tags hold the distribution's releases — one such mirror, never a choice
   between two.

The package's folder in the repository is the lane revision's ``subdirectory`` (rule 1), else the
one the mirror's ``[[mirrors.repository]]`` entry names (rules 2–4; default: the root).

A mirror is one ``patchlane.toml`` declares, or a clone found by name under its folder. The
answer (:class:`Resolved`) says how it was found, in words every command that uses it prints:
``mirror of liger-kernel: declared in patchlane.toml, matched by the liger-kernel 0.8.2 wheel's
Project-URL Source``; no answer (:class:`Unresolved`) says what was tried.

:func:`resolve` is pure but for reading the candidates' release tags (rule 4, asked only when
rules 1–3 found nothing); :func:`project_repository` gathers a project's clues (its lanes, the
shim's links) around it. Metadata, which may cost a look-up, is asked for only when rules 1 and 2
found nothing.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name, canonicalize_version

from retire.core.git import GitError
from retire.core.project import Project
from retire.evidence.coremetadata import MetadataUrl
from retire.evidence.values import ProbeFailure
from retire.lanes.revisions import Revision
from retire.mirrors.config import PROJECT_FILE, Mirror, MirrorSet, project_mirrors
from retire.mirrors.repo import open_mirror
from shims.model import ShimManifest

__all__ = [
    "Found",
    "Resolved",
    "Unresolved",
    "mirror_containing",
    "project_repository",
    "release_versions",
    "resolve",
]

_SCHEMES = ("http", "https", "git", "ssh", "file")
_SCP = re.compile(r"^[A-Za-z0-9_.-]+@(?P<host>[A-Za-z0-9_.-]+):(?P<path>[^/].*)$")


class Found(enum.StrEnum):
    """How a distribution's mirror was found."""

    LANE = "lane-revision"
    LINK = "link"
    METADATA = "metadata"
    TAGS = "name-and-tags"


@dataclass(frozen=True)
class Resolved:
    """The mirror of ``distribution`` and how it was found."""

    distribution: str
    mirror: Mirror
    found: Found
    # in words: "matched by the wheel's Project-URL Source"
    because: str
    # declared in patchlane.toml (else a clone found by name under the mirrors folder)
    declared: bool
    # where the package's build file is, when a lane's revision (else the mirror's entry) says
    subdirectory: str | None = None

    @property
    def how(self) -> str:
        """``declared in patchlane.toml, matched by …``: how it was found, one clause."""
        where = f"declared in {PROJECT_FILE}" if self.declared else f"found at {self.mirror.path}"
        return f"{where}, {self.because}"

    @property
    def says(self) -> str:
        """``mirror of liger-kernel: declared in patchlane.toml, matched by …``."""
        return f"mirror of {self.distribution}: {self.how}"

    def to_json(self) -> dict[str, object]:
        """The ``mirror`` object of a window's JSON (retire/schemas): the repository, how it was
        found (a rule's name, whether ``patchlane.toml`` declares it) and the words."""
        return {
            "repository": self.mirror.repository,
            "found": str(self.found),
            "declared": self.declared,
            "subdirectory": self.subdirectory,
            "says": self.says,
        }


@dataclass(frozen=True)
class Unresolved:
    """No mirror of ``distribution`` on this host, and what was tried."""

    distribution: str
    why: str


def _parts(url: str) -> tuple[str, tuple[str, ...]] | None:
    """(host, path segments as written) of a repository or web URL: scheme, ``git+``, a
    ``@ref``, ``.git``, ``www.`` and empty segments aside (compare them with :func:`_same`)."""
    text = url.strip().removeprefix("git+")
    scp = _SCP.match(text)
    if scp is not None:
        host, path = scp.group("host"), scp.group("path")
    else:
        try:
            split = urlsplit(text)
        # an unclosed [IPv6] host
        except ValueError:
            return None
        if split.scheme.lower() not in _SCHEMES:
            return None
        host, path = split.hostname or "", split.path
    segments = [s for s in path.partition("@")[0].split("/") if s]
    if not segments:
        return None
    segments[-1] = segments[-1].removesuffix(".git")
    return host.lower().removeprefix("www."), tuple(segments)


def _same(a: Sequence[str], b: Sequence[str]) -> bool:
    """Path segments equal as a code host compares them (case aside)."""
    return len(a) == len(b) and all(x.lower() == y.lower() for x, y in zip(a, b, strict=True))


def mirror_containing(mirrors: MirrorSet, url: str) -> Mirror | None:
    """The mirror whose repository ``url`` is, or points into (an issue, a pull request, a
    ``tree/main`` page): a declared one, else a clone named ``<owner>/<repo>`` (the URL's first
    two segments) under the mirrors folder."""
    found = _parts(url)
    if found is None:
        return None
    host, segments = found
    for mirror in mirrors.mirrors:
        declared = _parts(mirror.repository)
        if declared and declared[0] == host and _same(segments[: len(declared[1])], declared[1]):
            return mirror
    if len(segments) >= 2 and urlsplit(url.strip()).scheme in ("http", "https"):
        return mirrors.for_repository(f"https://{host}/{segments[0]}/{segments[1]}")
    return None


def _declared(mirrors: MirrorSet, mirror: Mirror) -> bool:
    return mirror in mirrors.mirrors


def _found(name: str, mirrors: MirrorSet, mirror: Mirror, found: Found, because: str) -> Resolved:
    """A mirror found by rule 2, 3 or 4: the package's folder in it is the one its
    ``[[mirrors.repository]]`` entry names (``subdirectory``), if any."""
    declared = _declared(mirrors, mirror)
    return Resolved(name, mirror, found, because, declared, mirror.subdirectory)


def _squashed(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _by_name_and_tags(
    distribution: str,
    mirrors: MirrorSet,
    versions: Sequence[str],
    tags_of: Callable[[Mirror], Sequence[str] | None],
) -> Resolved | str:
    """Rule 4: the one declared mirror named as the package whose tags hold its releases; or
    why none is."""
    named = [
        m
        for m in mirrors.mirrors
        if (parts := _parts(m.repository)) and _squashed(parts[1][-1]) == _squashed(distribution)
    ]
    held: list[tuple[Mirror, int]] = []
    for mirror in named:
        tagged = tags_of(mirror)
        if tagged is None:
            continue
        wanted = {canonicalize_version(v) for v in versions}
        have = {canonicalize_version(v) for v in tagged}
        common = len(wanted & have) if versions else len(have)
        if common:
            held.append((mirror, common))
    if len(held) > 1:
        return f"{' and '.join(m.repository for m, _ in held)} are both named as {distribution}"
    if not held:
        return ""
    mirror, common = held[0]
    what = f"{common} of its {len(versions)} releases tagged" if versions else "release tags"
    because = f"matched by its name and release tags ({what})"
    return _found(distribution, mirrors, mirror, Found.TAGS, because)


def resolve(
    distribution: str,
    mirrors: MirrorSet,
    *,
    revisions: Sequence[Revision] = (),
    links: Sequence[str] = (),
    metadata: Callable[[], Sequence[MetadataUrl]] = tuple,
    versions: Sequence[str] = (),
    tags_of: Callable[[Mirror], Sequence[str] | None] = lambda mirror: None,
) -> Resolved | Unresolved:
    """The mirror of ``distribution`` by the module's four rules: ``revisions`` (the lanes'
    revisions of it), ``links`` (URLs the shim names), ``metadata`` (asked only when those two
    found none), ``versions`` (its releases) and ``tags_of`` (a mirror's release versions, None
    when it cannot be read)."""
    name = canonicalize_name(distribution)
    unmirrored: dict[str, None] = {}
    for revision in revisions:
        if canonicalize_name(revision.distribution) != name:
            continue
        mirror = mirrors.for_repository(revision.repository)
        if mirror is not None:
            because = f"named by the lane revision {revision.key}"
            declared = _declared(mirrors, mirror)
            return Resolved(name, mirror, Found.LANE, because, declared, revision.subdirectory)
        unmirrored[revision.repository] = None
    for url in links:
        if (mirror := mirror_containing(mirrors, url)) is not None:
            because = f"named by the link {url}"
            return _found(name, mirrors, mirror, Found.LINK, because)
    for entry in metadata():
        if (mirror := mirror_containing(mirrors, entry.url)) is not None:
            because = f"matched by {entry.named} ({entry.url})"
            return _found(name, mirrors, mirror, Found.METADATA, because)
    by_name = _by_name_and_tags(name, mirrors, versions, tags_of)
    if isinstance(by_name, Resolved):
        return by_name
    return Unresolved(name, _why_not(name, unmirrored, by_name))


def _why_not(name: str, unmirrored: Iterable[str], ambiguous: str) -> str:
    named = ", ".join(unmirrored)
    if ambiguous:
        return (
            f"no mirror of {name} is named, and {ambiguous}: add a lane revision "
            "([lane.revisions]) or a link naming one"
        )
    if named:
        return (
            f"{named} is not mirrored on this host ({PROJECT_FILE} [[mirrors.repository]], "
            "then `patchlane mirrors sync`)"
        )
    return (
        f"no repository of {name} is named (a lane revision, a link, the package's metadata "
        f"URLs, or a mirror in {PROJECT_FILE} named as the package with its release tags)"
    )


def release_versions(mirror: Mirror, cache: Path | None = None) -> tuple[str, ...] | None:
    """The versions a mirror's release tags stand for, or None when it cannot be read."""
    opened = open_mirror(mirror, cache)
    if isinstance(opened, ProbeFailure):
        return None
    try:
        return tuple(version for _, version in opened.tag_versions())
    # an unreadable mirror (or tags past their budget) is no candidate, never a failure
    except GitError:
        return None


def project_repository(
    project: Project,
    manifest: ShimManifest,
    *,
    folder: Path | None = None,
    metadata: Callable[[], Sequence[MetadataUrl]] = tuple,
    versions: Sequence[str] = (),
    links: Sequence[str] = (),
) -> Resolved | Unresolved:
    """The mirror of ``manifest``'s target on this host (:func:`resolve` with the project's
    lanes and mirrors, the shim's links and ``links`` besides)."""
    from retire.lanes import lanefile

    mirrors = project_mirrors(project, folder)
    lanes = lanefile.project_lanes(project) if project.lanes_dir.is_dir() else ()
    return resolve(
        manifest.target.distribution,
        mirrors,
        revisions=[revision for lane in lanes for revision in lane.revisions],
        links=[*manifest.upstream_urls, *links],
        metadata=metadata,
        versions=versions,
        tags_of=lambda mirror: release_versions(mirror, mirrors.cache),
    )
