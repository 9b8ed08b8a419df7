"""The lane model: one pinned environment recipe. Immutable values, no I/O."""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from retire.lanes.revisions import Revision
from shims.gpuneeds import GpuNeeds

# one rule for shim ids: the manifest reader's
from shims.manifest import MAX_SHIM_ID as MAX_SHIM_ID
from shims.manifest import SHIM_ID as SHIM_ID
from shims.times import format_span, format_utc

#: A lane name becomes a folder and file names (locks/<lane>/, .patchlane/envs/<lane>, <lane>.json):
#: capped well below a file name's 255 bytes.
LANE_NAME_MAX = 100
LANE_NAME = re.compile(rf"[a-z0-9][a-z0-9._-]{{0,{LANE_NAME_MAX - 1}}}")
INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: The CPython minor versions a lane may name (uv supports 3.8 and later; 3.19 is years away).
PYTHON_VERSION = re.compile(r"3\.(8|9|1[0-9])")
# uv's --python-platform targets (exactly the ones uv 0.13 accepts, so a lane is never refused
# later by uv); a lane locks for exactly one of them.
PLATFORM = re.compile(
    r"(linux|windows|macos"
    r"|(x86_64|aarch64)-manylinux_2_(17|28|3[1-9]|40)|(x86_64|aarch64)-manylinux2014"
    r"|(x86_64|aarch64)-unknown-linux-(gnu|musl)|riscv64-unknown-linux"
    r"|(x86_64|aarch64)-apple-darwin|(x86_64|aarch64|i686)-pc-windows-msvc)"
)
PRERELEASE_MODES = ("allow", "disallow", "if-necessary", "explicit", "if-necessary-or-explicit")

# Bump whenever the meaning of a digest input changes, so old locks read as stale.
DIGEST_VERSION = 1


@dataclass(frozen=True)
class IndexSpec:
    """A named package index. ``url`` is None when it comes from uv's configuration."""

    name: str
    url: str | None = None
    # replaces the default index (PyPI) for this lane
    default: bool = False


@dataclass(frozen=True)
class StaticMetadata:
    """Metadata given up front for an sdist that cannot be built here (uv's dependency-metadata)."""

    name: str
    version: str
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    provides_extras: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cooldown:
    """A freeze relative to lock time: nothing uploaded within ``span`` before the lock was made.

    A lock resolves it to an absolute cutoff once and records it; re-locks reuse that cutoff
    until ``--upgrade`` (see :func:`retire.locks.locking.resolve_freezes`).
    """

    span: timedelta

    def __str__(self) -> str:
        return format_span(self.span)

    def cutoff(self, at: datetime) -> datetime:
        return (at - self.span).replace(microsecond=0)


#: A freeze: an absolute cutoff, a cooldown, or None (for one package: not frozen at all).
Freeze = datetime | Cooldown | None


def freeze_text(freeze: Freeze) -> str | bool:
    """How a freeze is written in digests and provenance: a UTC time, a span, or ``False``
    (none)."""
    if freeze is None:
        return False
    return str(freeze) if isinstance(freeze, Cooldown) else format_utc(freeze)


@dataclass(frozen=True)
class PackageFreeze:
    """uv's ``exclude-newer-package``: one package's own cutoff, or none at all (a nightly index
    without upload times, a package the shop must always take fresh)."""

    # canonical
    name: str
    freeze: Freeze


class LanePolicy(enum.StrEnum):
    """What a lane does when upstream fixes a bug one of its shims works around."""

    #: the lane follows upstream: a landed fix may raise its pins, and its shims go
    FOLLOW = "follow"
    #: the lane holds its pins by policy (a floor or compatibility lane): its shims stay until
    #: the lane's own pins reach the fix
    HOLD = "hold"


@dataclass(frozen=True)
class Lane:
    name: str
    python: str
    platform: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    indexes: tuple[IndexSpec, ...] = ()
    # (package, index name): where it must come from
    sources: tuple[tuple[str, str], ...] = ()
    exclude_newer: datetime | None = None
    # exclude-newer = "7 days": relative to lock time (never with exclude_newer)
    cooldown: Cooldown | None = None
    exclude_newer_package: tuple[PackageFreeze, ...] = ()
    prerelease: str | None = None
    static_metadata: tuple[StaticMetadata, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    shims: tuple[str, ...] = ()
    needs_cuda: bool = False
    # ``gpus``: how many GPUs, of what kind; None: one where needs_cuda (raised to what its
    # shims' reproducers need, retire.runs.gpus.lane_needs), else none. Not a lock input.
    gpus: GpuNeeds | None = None
    # follow or hold upstream fixes; not a lock input (a policy edit never makes a lock stale)
    policy: LanePolicy = LanePolicy.FOLLOW
    description: str = ""
    # packages taken from a git mirror at a tag, branch or commit
    revisions: tuple[Revision, ...] = ()
    # the file (and matrix cell) it came from, for messages
    origin: str = field(default="", compare=False)
    # that file, relative to the project root where it lies inside it
    file: str = field(default="", compare=False)

    @property
    def tag(self) -> str:
        """``gpu`` or ``cpu``: where the lane runs (nox's session tag, `patchlane run --tag`, the
        Action's lane-tag)."""
        return "gpu" if self.needs_cuda else "cpu"

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def sources_dict(self) -> dict[str, str]:
        return dict(self.sources)

    def index(self, name: str) -> IndexSpec | None:
        return next((i for i in self.indexes if i.name == name), None)

    @property
    def freeze(self) -> Freeze:
        """The lane's ``exclude-newer``: a date, a cooldown, or None."""
        return self.exclude_newer or self.cooldown

    def lock_inputs(self) -> dict[str, object]:
        """Everything that decides the lock's contents, in a canonical, JSON-able form.

        Index URLs that come from the host's uv configuration are not part of the lane, so
        they are not digested: the same lane locks the same way behind a mirror. Keys added
        after digest version 1 appear only when set, so existing locks stay current.
        """
        inputs: dict[str, object] = {
            "digest-version": DIGEST_VERSION,
            "python": self.python,
            "platform": self.platform,
            "requirements": list(self.requirements),
            "constraints": list(self.constraints),
            "overrides": list(self.overrides),
            "indexes": [{"name": i.name, "url": i.url, "default": i.default} for i in self.indexes],
            "sources": sorted(self.sources),
            "exclude-newer": freeze_text(self.freeze) if self.freeze else None,
            "prerelease": self.prerelease,
            "static-metadata": [
                {
                    "name": m.name,
                    "version": m.version,
                    "requires-dist": list(m.requires_dist),
                    "requires-python": m.requires_python,
                    "provides-extras": list(m.provides_extras),
                }
                for m in self.static_metadata
            ],
        }
        if self.exclude_newer_package:
            inputs["exclude-newer-package"] = {
                p.name: freeze_text(p.freeze) for p in self.exclude_newer_package
            }
        # the revision as written: a tag or branch moved in the mirror needs --upgrade-package
        if self.revisions:
            inputs["revisions"] = {
                r.distribution: {
                    "repository": r.repository,
                    "rev": r.rev,
                    "subdirectory": r.subdirectory,
                }
                for r in self.revisions
            }
        return inputs

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.lock_inputs(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
