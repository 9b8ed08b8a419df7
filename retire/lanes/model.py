"""The lane model: one pinned environment recipe. Immutable values, no I/O."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from retire.core.times import format_utc

LANE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
SHIM_ID = re.compile(r"[a-z][a-z0-9_]*")
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
PYTHON_VERSION = re.compile(r"3\.\d{1,2}")
# uv's --python-platform targets; a lane locks for exactly one of them.
PLATFORM = re.compile(
    r"(linux|windows|macos"
    r"|(x86_64|aarch64)-manylinux_2_\d{1,2}|(x86_64|aarch64)-manylinux20(10|14)"
    r"|(x86_64|aarch64|i686)-unknown-linux-(gnu|musl)"
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
    default: bool = False  # replaces the default index (PyPI) for this lane


@dataclass(frozen=True)
class StaticMetadata:
    """Metadata given up front for an sdist that cannot be built here (uv's dependency-metadata)."""

    name: str
    version: str
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    provides_extras: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lane:
    name: str
    python: str
    platform: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    indexes: tuple[IndexSpec, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # (package, index name): where it must come from
    exclude_newer: datetime | None = None
    prerelease: str | None = None
    static_metadata: tuple[StaticMetadata, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    shims: tuple[str, ...] = ()
    needs_cuda: bool = False
    description: str = ""
    origin: str = field(default="", compare=False)  # the file (and matrix cell) it came from

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def sources_dict(self) -> dict[str, str]:
        return dict(self.sources)

    def index(self, name: str) -> IndexSpec | None:
        return next((i for i in self.indexes if i.name == name), None)

    def lock_inputs(self) -> dict:
        """Everything that decides the lock's contents, in a canonical, JSON-able form.

        Index URLs that come from the host's uv configuration are not part of the lane, so
        they are not digested: the same lane locks the same way behind a mirror.
        """
        return {
            "digest-version": DIGEST_VERSION,
            "python": self.python,
            "platform": self.platform,
            "requirements": list(self.requirements),
            "constraints": list(self.constraints),
            "overrides": list(self.overrides),
            "indexes": [
                {"name": i.name, "url": i.url, "default": i.default} for i in self.indexes
            ],
            "sources": sorted(self.sources),
            "exclude-newer": format_utc(self.exclude_newer) if self.exclude_newer else None,
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

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.lock_inputs(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

