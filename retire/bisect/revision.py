"""The commit runner: a shim's reproducer ``--mode without`` against the target built from its
mirror at one commit.

The same overlay as a release's (:class:`~retire.bisect.runner.OverlayRunner`), with the candidate
installed as a revision lane installs it: ``<dist> @ git+file://<mirror>@<commit>`` (uv builds it
from the local mirror, no network), :func:`retire.lanes.revisions.pinned_requirement`'s form. The
record's host stamp names the commit (the install's ``direct_url.json``), so the verdicts order
the run by ancestry like any revision lane's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from retire.bisect.cache import ResultCache
from retire.bisect.runner import BaseEnv, OverlayRunner, _read
from retire.bisect.search import UNKNOWN, CandidateRun
from retire.evidence.validation import ValidationRecord
from retire.lanes.revisions import Revision, pinned_requirement
from shims.model import ShimManifest

__all__ = ["RevisionRunner"]


class RevisionRunner(OverlayRunner):
    """An overlay runner whose candidates are commits of ``mirror`` (a local clone of
    ``repository``); ``subdirectory`` is where the package's build file is, when not at the
    root."""

    def __init__(
        self,
        manifest: ShimManifest,
        base: BaseEnv,
        *,
        mirror: Path,
        repository: str,
        subdirectory: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(manifest, base, **options)
        self.mirror = mirror
        self.repository = repository
        self.subdirectory = subdirectory

    def requirement(self, version: str) -> str:
        revision = Revision(
            canonicalize_name(self.distribution), self.repository, version, self.subdirectory
        )
        return pinned_requirement(revision, self.mirror.resolve(), version)

    def _key(self, version: str) -> str:
        # a commit is never a release: its own key space
        return ResultCache.key(
            self.manifest.id,
            self._repro_hash,
            self.distribution,
            f"git:{self.repository}@{version}",
            self.base.fingerprint,
        )

    def read(self, record: ValidationRecord, version: str) -> CandidateRun:
        """A run reads as the commit it was built from; one whose stamp names another commit is
        unknown (the overlay did not take)."""
        target = str(canonicalize_name(self.distribution))
        built = next(
            (c for k, c in record.revisions.items() if str(canonicalize_name(k)) == target), None
        )
        seen = next(
            (v for k, v in record.versions.items() if str(canonicalize_name(k)) == target), None
        )
        run = replace(_read(record, seen or version, self.distribution), version=version)
        if built is not None and not version.startswith(built) and not built.startswith(version):
            return replace(run, state=UNKNOWN, detail=f"the reproducer saw commit {built[:12]}")
        return run
