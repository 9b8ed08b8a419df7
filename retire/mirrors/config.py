"""Which local git mirrors answer for which upstream repositories (values, and where they are
declared).

Mirrors are how an air-gapped host learns what the code host would have said: which commit
landed a pull request and which release tags contain it. They are declared in the project file
``patchlane.toml``::

    [mirrors]
    folder = ".patchlane/mirrors"     # default home of clones: <folder>/<owner>/<repo>.git

    [[mirrors.repository]]
    url = "https://github.com/NVIDIA/Megatron-LM"
    tags = 'core_v(?P<version>\\d+\\.\\d+\\.\\d+(?:rc\\d+)?)'   # release tag → version
    branches = ["main", "dev", "core_r*"]    # where merged pull requests land (default: every
branch)
    # path = "/srv/mirrors/Megatron-LM.git"  # default: <folder>/<owner>/<repo>.git
    # fetch = "https://github.com/NVIDIA/Megatron-LM.git"   # what `patchlane mirrors sync` fetches
    # subdirectory = "python"   # the package's folder in the repository (default: its root)

A repository that is not declared is still found under ``folder`` (or ``--mirrors DIR``) as
``<owner>/<repo>`` or ``<owner>/<repo>.git``, with the default tag pattern.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from retire.core.errors import InputError
from retire.core.project import Project, contained
from retire.lanes.revisions import read_subdirectory
from retire.mirrors.tagpattern import MAX_TAG_LENGTH, pattern_problem
from shims import tomlreader

__all__ = [
    "DEFAULT_TAGS",
    "PROJECT_FILE",
    "Mirror",
    "MirrorSet",
    "load_mirrors",
    "project_mirrors",
    "repository_key",
]

PROJECT_FILE = "patchlane.toml"
#: A release tag is ``v1.2`` or ``1.2.3`` unless a mirror says otherwise.
DEFAULT_TAGS = r"v?(?P<version>\d+(?:\.\d+)*)"
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")
_BRANCH = re.compile(r"[A-Za-z0-9_./*-]+")


def repository_key(url: str) -> tuple[str, str] | None:
    """``(owner, repo)`` of ``https://host/owner/repo[.git]``, lowercased; None if it is not one.

    Names become folder names, so only plain segments are accepted (never ``..``)."""
    try:
        parts = urlsplit(url.strip())
    # an unclosed [IPv6] host
    except ValueError:
        return None
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme not in ("http", "https", "ssh", "git", "file") or len(segments) < 2:
        return None
    owner, repo = segments[-2], segments[-1].removesuffix(".git")
    if not all(_SEGMENT.fullmatch(s) and s not in (".", "..") for s in (owner, repo)):
        return None
    return owner.lower(), repo.lower()


@dataclass(frozen=True)
class Mirror:
    """One upstream repository and its local clone."""

    # https://host/owner/repo, as links name it
    repository: str
    path: Path
    # regex; the group named ``version`` (else the first group) is the version
    tags: str = DEFAULT_TAGS
    # ref patterns under refs/heads where pull requests land; () = every branch
    branches: tuple[str, ...] = ()
    # the URL `mirrors sync` fetches from (default: repository + ".git")
    fetch: str | None = None
    # the package's folder in the repository, when not its root (a lane revision names its own)
    subdirectory: str | None = None

    @property
    def named_branches(self) -> tuple[str, ...]:
        """The followed branches named outright (``main``), not by a pattern (``release/*``)."""
        return tuple(b for b in self.branches if not any(c in b for c in "*?["))

    @property
    def fetch_url(self) -> str:
        return self.fetch or self.repository.rstrip("/") + ".git"

    def tag_version(self, tag: str) -> str | None:
        """The version a release tag stands for, or None when ``tag`` is not a release tag (one
        longer than :data:`MAX_TAG_LENGTH` never is: the pattern was checked up to that length)."""
        if len(tag) > MAX_TAG_LENGTH:
            return None
        found = re.fullmatch(self.tags, tag)
        if not found:
            return None
        if "version" in found.groupdict():
            return found.group("version")
        return found.group(1) if found.groups() else tag


@dataclass(frozen=True)
class MirrorSet:
    """Every mirror this project knows, by repository; plus a folder of clones found by name."""

    mirrors: tuple[Mirror, ...] = ()
    folder: Path | None = None
    # where answers computed from a mirror are kept (the project's .patchlane/cache/mirrors)
    cache: Path | None = None

    def for_repository(self, url: str) -> Mirror | None:
        key = repository_key(url)
        if key is None:
            return None
        for mirror in self.mirrors:
            if repository_key(mirror.repository) == key:
                return mirror
        if self.folder is None:
            return None
        owner, repo = _segments(url)
        for candidate in (self.folder / owner / repo, self.folder / owner / f"{repo}.git"):
            if candidate.exists():
                return Mirror(url.rstrip("/").removesuffix(".git"), candidate)
        return None

    @classmethod
    def coerce(
        cls, value: MirrorSet | Mapping[str, str | os.PathLike[str]] | str | Path | None
    ) -> MirrorSet:
        """A MirrorSet from what callers pass: a set, ``{url: path}``, a folder, or None."""
        if isinstance(value, MirrorSet):
            return value
        if value is None:
            return cls()
        if isinstance(value, Mapping):
            return cls(
                tuple(
                    Mirror(url.rstrip("/").removesuffix(".git"), Path(path))
                    for url, path in value.items()
                )
            )
        return cls(folder=Path(value))


def _segments(url: str) -> tuple[str, str]:
    segments = [s for s in urlsplit(url).path.split("/") if s]
    return segments[-2], segments[-1].removesuffix(".git")


def _fail(path: Path, key: str | None, problem: str, fix: str) -> InputError:
    return InputError(path, key, problem, fix)


def _string(table: Mapping[str, object], key: str, where: str, path: Path) -> str | None:
    """The stripped string at ``key``, None when absent; anything else is an error."""
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(
            path,
            f"{where}.{key}",
            f"expected a non-empty string, got {value!r}",
            f'write {key} = "…"',
        )
    return value.strip()


def _required_string(table: Mapping[str, object], key: str, where: str, path: Path) -> str:
    value = _string(table, key, where, path)
    if value is None:
        raise _fail(path, f"{where}.{key}", "missing", f'add {key} = "…"')
    return value


def _mirror(entry: object, index: int, folder: Path, root: Path, path: Path) -> Mirror:
    where = f"mirrors.repository[{index}]"
    if not isinstance(entry, Mapping):
        raise _fail(path, where, "expected a table", 'write [[mirrors.repository]] with url = "…"')
    unknown = sorted(set(entry) - {"url", "tags", "branches", "path", "fetch", "subdirectory"})
    if unknown:
        raise _fail(
            path,
            f"{where}.{unknown[0]}",
            "unknown key",
            "use url, tags, branches, path, fetch or subdirectory",
        )
    url = _required_string(entry, "url", where, path)
    key = repository_key(url)
    if key is None:
        raise _fail(
            path,
            f"{where}.url",
            f"not a repository URL: {url[:200]!r}",
            "write it like https://github.com/owner/repo",
        )
    tags = _string(entry, "tags", where, path) or DEFAULT_TAGS
    try:
        compiled = re.compile(tags)
    except re.error as exc:
        raise _fail(
            path,
            f"{where}.tags",
            f"not a regular expression: {exc}",
            "e.g. tags = 'v(?P<version>\\d+\\.\\d+\\.\\d+)'",
        ) from None
    if "version" not in compiled.groupindex and compiled.groups < 1:
        raise _fail(
            path, f"{where}.tags", "the pattern captures no version", "add a group: (?P<version>…)"
        )
    slow = pattern_problem(compiled)
    if slow is not None:
        raise _fail(
            path,
            f"{where}.tags",
            slow,
            "quantify a group only where its repetitions cannot overlap, e.g. "
            "tags = 'v(?P<version>\\d+(?:\\.\\d+)*)'",
        )
    branches = entry.get("branches", [])
    if not isinstance(branches, list) or not all(
        isinstance(b, str) and _BRANCH.fullmatch(b) for b in branches
    ):
        raise _fail(
            path,
            f"{where}.branches",
            f"expected a list of branch names or patterns, got {branches!r}",
            'e.g. branches = ["main", "release/*"]',
        )
    explicit = _string(entry, "path", where, path)
    owner, repo = _segments(url)
    clone = (
        _placed(root, explicit, path, f"{where}.path")
        if explicit
        else folder / owner / f"{repo}.git"
    )
    return Mirror(
        url.rstrip("/").removesuffix(".git"),
        clone,
        tags,
        tuple(branches),
        _string(entry, "fetch", where, path),
        read_subdirectory(entry.get("subdirectory"), path, f"{where}.subdirectory"),
    )


def _placed(root: Path, text: str, path: Path, key: str) -> Path:
    """Where a configured folder is: inside the project, never through a link on the way (a
    clone is written there); outside it (``/srv/mirrors/…``), where it says."""
    try:
        where = Path(os.path.normpath(root.absolute() / text))
    # a NUL in the path
    except ValueError:
        raise _fail(path, key, f"not a path: {text[:80]!r}", "write a folder path") from None
    if not where.is_relative_to(root.absolute()):
        return where.resolve()
    try:
        return contained(root.absolute(), where, key=key)
    except InputError as exc:
        raise _fail(path, key, f"{exc.path}: {exc.problem}", exc.fix or "") from None


def load_mirrors(root: Path, *, folder: Path | None = None) -> MirrorSet:
    """The mirrors of the project at ``root`` (its ``patchlane.toml``); ``folder`` (``--mirrors``)
    replaces the configured folder for repositories that are not declared with a path."""
    path = root / PROJECT_FILE
    data: dict = {}
    if path.exists():
        # the one safe reader: a FIFO, a huge file, bad UTF-8, deep nesting or an integer too
        # long for Python is one line
        data = tomlreader.read(path, str(path)).data
    section = data.get("mirrors", {})
    if not isinstance(section, Mapping):
        raise _fail(path, "mirrors", "expected a table", "write [mirrors]")
    unknown = sorted(set(section) - {"folder", "repository"})
    if unknown:
        raise _fail(
            path, f"mirrors.{unknown[0]}", "unknown key", "use folder or [[mirrors.repository]]"
        )
    configured = _string(section, "folder", "mirrors", path)
    home = (
        folder.resolve()
        if folder is not None
        else _placed(root, configured or ".patchlane/mirrors", path, "mirrors.folder")
    )
    entries = section.get("repository", [])
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise _fail(
            path,
            "mirrors.repository",
            "expected an array of tables",
            "write [[mirrors.repository]]",
        )
    mirrors = tuple(_mirror(entry, i, home, root, path) for i, entry in enumerate(entries))
    keys = [repository_key(m.repository) for m in mirrors]
    duplicate = next((k for k in keys if keys.count(k) > 1), None)
    if duplicate:
        raise _fail(
            path,
            "mirrors.repository",
            f"{'/'.join(duplicate)} is declared twice",
            "keep one entry per repository",
        )
    return MirrorSet(mirrors, home)


def project_mirrors(project: Project, folder: Path | None = None) -> MirrorSet:
    """The git mirrors the project's ``patchlane.toml`` declares (``folder``, from ``--mirrors``,
    replaces its folder), with the project's cache of what is computed from them."""
    return replace(load_mirrors(project.root, folder=folder), cache=project.mirror_cache)
