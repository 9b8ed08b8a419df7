"""Lanes pinned to upstream revisions: a package taken from a local git mirror at a tag or commit.

The seeds pin "active upstream revisions" and run reproducers "against a clean checkout of the
target library at a named SHA" — code that is on a branch or a pre-release tag and in no release
on the index (Megatron-LM's ``dev`` branch, say). A lane names them::

    [lane.revisions]
    megatron-core = { mirror = "https://github.com/NVIDIA/Megatron-LM", rev = "26.04-alpha.rc1" }

At lock time the revision is resolved in the project's mirror (``patchlane.toml``) to a full
commit, and the lane's requirement on the distribution becomes a direct git reference to it, so
uv locks that exact tree and the PEP 751 lock records a ``vcs`` entry with the commit. The lock
names the upstream repository, never a path on one host; installs read the local mirror.

A target uv cannot build from source cheaply (a compiled extension) may name its build, as a
shim does (:mod:`shims.wheelbuild`)::

    transformer-engine = { mirror = "https://github.com/NVIDIA/TransformerEngine", rev = "main",
                           build = ["bash", "{here}/build-te.sh"] }

The lock is still uv's (it reads the package's metadata at the commit); the lane's env installs
the wheel that command builds from a checkout of the mirror at the locked commit instead of
uv's build (:func:`retire.runs.envs.build`). ``{here}`` is the lane file's folder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from packaging.utils import canonicalize_name

from retire.core.errors import InputError
from shims.tomlreader import Value
from shims.wheelbuild import WheelBuild, read_wheel_build

__all__ = [
    "LocalClone",
    "MirrorLookup",
    "Revision",
    "local_urls",
    "localize_vcs",
    "mirror_path",
    "parse_revisions",
    "pinned_requirement",
    "read_subdirectory",
    "replace_urls",
    "resolve",
    "vcs_entries",
]


class LocalClone(Protocol):
    """A local clone of an upstream repository (a :class:`retire.mirrors.config.Mirror`)."""

    @property
    def path(self) -> Path: ...


class MirrorLookup(Protocol):
    """Where this host keeps its clones of upstream repositories: a
    :class:`retire.mirrors.config.MirrorSet`. Lanes sit on the floor below mirrors, so they name
    only what they ask of one."""

    def for_repository(self, url: str) -> LocalClone | None: ...


_REV = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}")
_SUBDIRECTORY = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


@dataclass(frozen=True)
class Revision:
    # canonical name
    distribution: str
    # the mirror's repository URL, as patchlane.toml declares it
    repository: str
    # a tag, a branch or a commit
    rev: str
    # where the package's pyproject.toml is, when not at the root
    subdirectory: str | None = None
    # where the lane file declares it
    key: str = field(default="lane.revisions", compare=False)
    # the command that builds its wheel from a checkout, when uv's build will not do
    build: WheelBuild | None = None

    @property
    def upstream_url(self) -> str:
        """The URL a portable lock names for it: the upstream repository's git URL."""
        return self.repository + ".git"


def read_subdirectory(value: object, path: str | Path, key: str) -> str | None:
    """A package's folder inside its repository, as a lane revision or a mirror names it: a
    relative path of plain segments (never ``..``, never absolute), or None when absent; anything
    else is a one-line InputError naming ``key``."""
    if value is None:
        return None
    if not isinstance(value, str) or not _SUBDIRECTORY.fullmatch(value) or ".." in value.split("/"):
        raise InputError(path, key, f"expected a relative folder, got {value!r}", 'e.g. "python"')
    return value


def parse_revisions(
    table: object, path: str | Path, key: str = "lane.revisions", *, here: Path | None = None
) -> tuple[Revision, ...]:
    """``[lane.revisions]`` as values; one-line ConfigErrors for anything else. ``here`` is the
    lane file's folder (what a build's ``{here}`` stands for; default: ``path``'s)."""
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        raise InputError(
            path,
            key,
            "expected a table of distribution = { mirror = …, rev = … }",
            'e.g. megatron-core = { mirror = "https://github.com/NVIDIA/Megatron-LM", rev = '
            '"26.04-alpha.rc1" }',
        )
    found = []
    for name, entry in table.items():
        where = f"{key}.{name}"
        if not isinstance(entry, Mapping):
            raise InputError(
                path, where, "expected an inline table", '{ mirror = "https://…", rev = "v1.2" }'
            )
        unknown = sorted(set(entry) - {"mirror", "rev", "subdirectory", "build"})
        if unknown:
            raise InputError(
                path,
                f"{where}.{unknown[0]}",
                "unknown key",
                "use mirror, rev, subdirectory and build",
            )
        mirror, rev, sub = entry.get("mirror"), entry.get("rev"), entry.get("subdirectory")
        if not isinstance(mirror, str) or not mirror.startswith(("https://", "http://", "file://")):
            raise InputError(
                path,
                f"{where}.mirror",
                f"expected the repository URL, got {mirror!r}",
                "name a repository declared in patchlane.toml [[mirrors.repository]]",
            )
        if not isinstance(rev, str) or not _REV.fullmatch(rev) or ".." in rev:
            raise InputError(
                path,
                f"{where}.rev",
                f"expected a tag, branch or commit, got {rev!r}",
                'e.g. rev = "26.04-alpha.rc1" or a 40-character commit',
            )
        sub = read_subdirectory(sub, path, f"{where}.subdirectory")
        build = (
            read_wheel_build(
                Value(entry["build"], f"{where}.build", str(path)),
                (here or Path(path).parent).resolve(),
                f"{path} {where}.build",
            )
            if "build" in entry
            else None
        )
        found.append(
            Revision(
                canonicalize_name(str(name)),
                mirror.rstrip("/").removesuffix(".git"),
                rev,
                sub,
                where,
                build,
            )
        )
    return tuple(sorted(found, key=lambda r: r.distribution))


def resolve(
    revision: Revision, mirrors: MirrorLookup | None, origin: str | Path = "lane file"
) -> tuple[Path, str]:
    """(local mirror path, full commit) of ``revision``. A missing mirror or revision is a one-line
    InputError naming ``origin`` (the lane file), the revision's key and the fix."""
    from retire.core.git import Git, GitError

    def fail(problem: str, fix: str) -> InputError:
        return InputError(origin, revision.key, problem, fix)

    path = mirror_path(revision, mirrors, origin)
    try:
        commit = Git(path, search_parents=False).rev_parse(f"{revision.rev}^{{commit}}")
    except GitError as exc:
        raise fail(
            f"cannot read the mirror {path}: {exc}", "check the mirror, or sync it again"
        ) from None
    if commit is None:
        raise fail(
            f"{revision.rev!r} is not in the mirror of {revision.repository} ({path})",
            "run `patchlane mirrors sync`, or fix the lane's rev",
        )
    return path, commit


def pinned_requirement(revision: Revision, mirror_path: Path, commit: str) -> str:
    """The PEP 508 direct reference uv locks: the local mirror at the full commit."""
    sub = f"#subdirectory={revision.subdirectory}" if revision.subdirectory else ""
    return f"{revision.distribution} @ git+{mirror_path.as_uri()}@{commit}{sub}"


def vcs_entries(lock: Mapping) -> dict[str, Mapping]:
    """The ``vcs`` table of every package a lock takes from a repository, by canonical name."""
    return {
        canonicalize_name(str(p.get("name", ""))): p["vcs"]
        for p in lock.get("packages", [])
        if isinstance(p, Mapping) and isinstance(p.get("vcs"), Mapping)
    }


def replace_urls(text: str, urls: Mapping[str, str]) -> str:
    """A lock's text with each quoted ``url = "old"`` made ``url = "new"``: how a lock made from a
    mirror names the upstream repository, and how an install reads the mirror again."""
    for old, new in urls.items():
        text = text.replace(f'url = "{old}"', f'url = "{new}"')
    return text


def localize_vcs(lock: Mapping, urls: Mapping[str, str]) -> dict:
    """The lock (as a dict) with each ``vcs.url`` found in ``urls`` replaced by its local mirror
    (pure)."""
    if not urls:
        return dict(lock)
    packages = []
    for package in lock.get("packages", []):
        vcs = package.get("vcs") if isinstance(package, Mapping) else None
        if isinstance(vcs, Mapping) and vcs.get("url") in urls:
            package = {**package, "vcs": {**vcs, "url": urls[vcs["url"]]}}
        packages.append(package)
    return {**lock, "packages": packages}


def mirror_path(revision: Revision, mirrors: MirrorLookup | None, origin: str | Path) -> Path:
    """This host's mirror of ``revision``'s repository; a one-line InputError naming ``origin``
    (the lane file), the revision's key and the fix when there is none."""
    mirror = mirrors.for_repository(revision.repository) if mirrors is not None else None
    if mirror is None:
        raise InputError(
            origin,
            revision.key,
            f"no mirror of {revision.repository} on this host",
            "declare it in patchlane.toml as [[mirrors.repository]] url = "
            f'"{revision.repository}", then run `patchlane mirrors sync`',
        )
    if not mirror.path.exists():
        raise InputError(
            origin,
            revision.key,
            f"the mirror of {revision.repository} is missing ({mirror.path})",
            "run `patchlane mirrors sync` (or copy the mirror there)",
        )
    return mirror.path.resolve()


def local_urls(
    revisions: tuple[Revision, ...], mirrors: MirrorLookup | None, origin: str | Path
) -> dict[str, str]:
    """``{upstream git URL: local mirror file:// URL}`` for installing a lane's revisions from the
    mirrors on this host; a one-line InputError (lane file, key, fix) when one is missing."""
    return {r.upstream_url: mirror_path(r, mirrors, origin).as_uri() for r in revisions}
