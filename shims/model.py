"""The shim manifest model: immutable values read from ``shims/<id>/manifest.toml``, no I/O.

:mod:`shims.manifest` reads and validates the file into these; docs/shims.md documents every key.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar, TypeAlias

from packaging.specifiers import SpecifierSet

from shims.gpuneeds import GpuNeeds
from shims.wheelbuild import WheelBuild

__all__ = [
    "CONDITION_KINDS",
    "FIX_CLASSES",
    "GUARD_STATUSES",
    "LINKED_STATUSES",
    "LINK_ROLES",
    "PATCHLESS_FIX_CLASSES",
    "RETIREMENT_MODES",
    "UPSTREAM_STATUSES",
    "CommitInTag",
    "ConditionKind",
    "Guard",
    "PrReleased",
    "ReproducerClean",
    "ReproducerSpec",
    "Retirement",
    "RetirementCondition",
    "ShimManifest",
    "Target",
    "Upstream",
    "UpstreamLink",
    "VersionFloor",
]

FIX_CLASSES = (
    "source-patch",
    "wrapper",
    "compat-gate",
    "version-floor",
    "env-constraint",
    "packaging",
)
#: Fix classes whose mitigation lives outside the process (lane pins, env), so ``patch.py`` is
#: optional.
PATCHLESS_FIX_CLASSES = frozenset({"version-floor", "env-constraint", "packaging"})
UPSTREAM_STATUSES = ("pending", "submitted", "accepted", "rejected", "not-applicable")
#: Statuses that claim an upstream conversation exists, so they must link to it.
LINKED_STATUSES = frozenset({"submitted", "accepted", "rejected"})
LINK_ROLES = ("report", "fix", "related")
RETIREMENT_MODES = ("all", "any")


class ConditionKind(enum.StrEnum):
    """How a retirement condition learns the shim can go (``[[retirement.conditions]] kind``)."""

    VERSION_FLOOR = "version-floor"
    PR_RELEASED = "pr-released"
    COMMIT_IN_TAG = "commit-in-tag"
    REPRODUCER_CLEAN = "reproducer-clean"


CONDITION_KINDS = tuple(str(kind) for kind in ConditionKind)
#: A guard keeps guarding (its lanes run the reproducer without a shim) until it is dropped.
GUARD_STATUSES = ("guarding", "dropped")


@dataclass(frozen=True)
class Target:
    """What the shim patches: the distribution that ships the bug and the module it lives in."""

    distribution: str
    module: str
    #: Versions known to carry the bug; ``None`` when unknown (the probe decides at run time).
    affected: SpecifierSet | None = None
    #: How to build a wheel from a source checkout at a commit (``[target] build``), for a
    #: target uv cannot build cheaply: what lets a bisection go on into the commits.
    build: WheelBuild | None = None


@dataclass(frozen=True)
class UpstreamLink:
    # one of LINK_ROLES
    role: str
    url: str


@dataclass(frozen=True)
class Upstream:
    """DEP-3-style state of the upstream conversation."""

    # one of UPSTREAM_STATUSES
    status: str
    links: tuple[UpstreamLink, ...] = ()


@dataclass(frozen=True)
class VersionFloor:
    """``distribution`` released at a version inside ``version`` (``>=0.18``)."""

    kind: ClassVar[ConditionKind] = ConditionKind.VERSION_FLOOR
    distribution: str
    version: SpecifierSet


@dataclass(frozen=True)
class PrReleased:
    """The pull request at ``url`` is merged and contained in a release of ``distribution``."""

    kind: ClassVar[ConditionKind] = ConditionKind.PR_RELEASED
    url: str
    distribution: str


@dataclass(frozen=True)
class CommitInTag:
    """``commit`` of ``repository`` is contained in a release tag."""

    kind: ClassVar[ConditionKind] = ConditionKind.COMMIT_IN_TAG
    repository: str
    commit: str


@dataclass(frozen=True)
class ReproducerClean:
    """The reproducer no longer reproduces without the shim."""

    kind: ClassVar[ConditionKind] = ConditionKind.REPRODUCER_CLEAN


#: One way to learn the shim can go: one type per kind, a closed union (``match`` on it).
RetirementCondition: TypeAlias = VersionFloor | PrReleased | CommitInTag | ReproducerClean


@dataclass(frozen=True)
class Retirement:
    # "all": every condition must hold; "any": one is enough
    mode: str
    conditions: tuple[RetirementCondition, ...]


#: Where a reproducer is when the manifest does not say (one value: paths are immutable).
_DEFAULT_REPRODUCER = PurePosixPath("reproduce.py")


@dataclass(frozen=True)
class ReproducerSpec:
    """Where the reproducer is (relative to the shim folder) and what the host needs to run it."""

    path: PurePosixPath = _DEFAULT_REPRODUCER
    needs_cuda: bool = False
    min_compute_capability: str | None = None
    packages: tuple[str, ...] = ()
    timeout: float = 600.0
    #: Modules a lane's launcher imports once for every run (``preload``; see docs/shims.md).
    preload: tuple[str, ...] = ()
    #: ``gpus``: how many GPUs, of what kind (None: one when ``needs_cuda``, else none).
    gpus: GpuNeeds | None = None

    @property
    def gpu_needs(self) -> GpuNeeds:
        """What the reproducer needs of a host's GPUs, with ``needs-cuda`` and
        ``min-compute-capability`` folded in."""
        if self.gpus is not None:
            return self.gpus
        if not self.needs_cuda:
            return GpuNeeds()
        return GpuNeeds(count=1, min_compute_capability=self.min_compute_capability)


@dataclass(frozen=True)
class Guard:
    """A retired shim kept as regression coverage: its reproducer, no patch, run without a shim
    in the lanes that carried it. ``[guard]`` in the manifest; docs/shims.md."""

    # one of GUARD_STATUSES
    status: str
    retired: datetime.date
    # why it retired (the retirement's verdict)
    reason: str
    # the commit that still holds patch.py: the parent of the commit that removed it
    patch_commit: str
    # the lanes that carried the shim when it retired: they keep running the reproducer
    lanes: tuple[str, ...] = ()
    dropped: datetime.date | None = None
    drop_reason: str = ""

    @property
    def guarding(self) -> bool:
        return self.status == "guarding"


@dataclass(frozen=True)
class ShimManifest:
    id: str
    title: str
    fix_class: str
    explanation: str
    numerics: str
    owner: str
    created: datetime.date
    target: Target
    upstream: Upstream
    retirement: Retirement
    reproducer: ReproducerSpec
    #: Variables an env-constraint shim sets, as sorted ``(name, value)`` pairs (hashable).
    env: tuple[tuple[str, str], ...] = ()
    #: The shim folder; ``patch.py`` and the reproducer are found relative to it.
    directory: Path = Path(".")
    #: Whether ``patch.py`` exists (recorded by the loader so the model stays free of I/O).
    has_patch: bool = False
    #: Set when the shim retired and its reproducer stays as a guard (no patch).
    guard: Guard | None = None

    @property
    def manifest_path(self) -> Path:
        return self.directory / "manifest.toml"

    @property
    def patch_path(self) -> Path | None:
        return self.directory / "patch.py" if self.has_patch else None

    @property
    def reproducer_path(self) -> Path:
        return self.directory / self.reproducer.path

    @property
    def env_vars(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def upstream_urls(self) -> tuple[str, ...]:
        """Every upstream URL the shim names, each once: its links, then the pull requests its
        ``pr-released`` conditions name (what the code host is asked about, and where a link
        finds the target's mirror)."""
        urls = [link.url for link in self.upstream.links]
        urls += [c.url for c in self.retirement.conditions if isinstance(c, PrReleased) and c.url]
        return tuple(dict.fromkeys(urls))
