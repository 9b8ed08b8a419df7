"""The commit runner: a shim's reproducer ``--mode without`` against the target built from its
mirror at one commit.

The same overlay as a release's (:class:`~retire.bisect.runner.OverlayRunner`), with the candidate
installed as a revision lane installs it: ``<dist> @ git+file://<mirror>@<commit>`` (uv builds it
from the local mirror, no network), :func:`retire.lanes.revisions.pinned_requirement`'s form. The
record's host stamp names the commit (the install's ``direct_url.json``), so the verdicts order
the run by ancestry like any revision lane's.

Where a shim or lane names its build (:class:`shims.wheelbuild.WheelBuild`, for a target with
compiled sources), the candidate is instead the wheel that command builds from a checkout of the
mirror at the commit (:mod:`retire.runs.wheelbuild`), installed into the same overlay; the
install's ``direct_url.json`` then says the commit it was built from, as uv's git install does.

A candidate that could not be built — uv's build or the named one — is ``unknown``, with the reason
and the fix: never broken or fixed, and never *not applicable* (that is a release with no file for
this interpreter; a commit that does not build here says nothing of the bug). Where uv's build
cannot start because the index serves none of the package's build requirements (its backend:
setuptools, flit_core, hatchling), or the index cannot be reached, no other commit builds either:
the runner is then :attr:`~retire.bisect.prober.Prober.blocked` and the search stops there,
after one build.

A mirror that lacks some files' contents (a snapshot without its large files) cannot be fetched by
uv; the candidate is then the package built by uv from a checkout of the commit without them
(:func:`retire.runs.wheelbuild.checkout`: only files the package's build never reads may be left
out, and the run says which), stamped with the upstream commit all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.bisect.cache import ResultCache
from retire.bisect.job import BisectJob
from retire.bisect.runner import BaseEnv, OverlayRunner, _InstallFailed, _read
from retire.bisect.search import UNKNOWN, CandidateRun, State
from retire.core.errors import PatchlaneError
from retire.core.git import Git, GitError
from retire.evidence.validation import ValidationRecord
from retire.lanes.revisions import Revision, pinned_requirement
from retire.locks.failures import explain_failure, missing_build_requirements
from retire.mirrors.packagetree import missing_files
from retire.runs.envs import BuildError
from retire.runs.wheelbuild import WheelBuildError, build_wheel, checkout, stamp_commit
from shims.model import ShimManifest
from shims.wheelbuild import WheelBuild

__all__ = ["RevisionRunner"]


class RevisionRunner(OverlayRunner):
    """An overlay runner whose candidates are commits of ``mirror`` (a local clone of
    ``repository``); ``subdirectory`` is where the package's build file is, when not at the
    root; ``build``, when given, is the named command that builds each candidate's wheel."""

    def __init__(
        self,
        manifest: ShimManifest,
        base: BaseEnv,
        job: BisectJob,
        *,
        mirror: Path,
        repository: str,
        subdirectory: str | None = None,
        build: WheelBuild | None = None,
        on_record: Callable[[ValidationRecord], None] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(manifest, base, job, on_record=on_record, say=say)
        self.mirror = mirror
        self.repository = repository
        self.subdirectory = subdirectory
        self.build = build

    def requirement(self, version: str) -> str:
        revision = Revision(
            canonicalize_name(self.distribution), self.repository, version, self.subdirectory
        )
        return pinned_requirement(revision, self.mirror.resolve(), version)

    def _key(self, version: str) -> str:
        # a commit is never a release: its own key space; a named build's wheel is another
        # candidate than uv's build of the same commit
        candidate = f"git:{self.repository}@{version}"
        if self.build is not None:
            named = json.dumps(list(self.build.command)).encode()
            candidate += f"+build:{hashlib.sha256(named).hexdigest()[:16]}"
        return ResultCache.key(
            self.manifest.id, self._repro_hash, self.distribution, candidate, self.base.fingerprint
        )

    def build_overlay(self, folder: Path, version: str) -> Path:
        """The overlay with the candidate commit: uv's build of it from the mirror, or the wheel
        the named build made of a checkout (in ``folder``: nothing shared between candidates). A
        mirror that lacks some files at the commit cannot be fetched by uv: the package is then
        built from a checkout without them (those the build never reads; one it reads makes the
        commit unknown), and the run still names the upstream commit."""
        if self.build is None and not self._damaged(version):
            return super().build_overlay(folder, version)
        python = self.overlay_venv(folder)
        source = checkout(self.mirror, version, folder / "checkout", self.subdirectory)
        if source.says:
            self.say(f"{version[:12]}: {source.says}")
        if self.build is None:
            self.install(python, f"{self.distribution} @ {source.package.as_uri()}")
        else:
            self._named_build(python, folder, version, source.package)
        stamp_commit(
            self.overlay_site(folder), self.distribution, self.mirror, version, self.subdirectory
        )
        return python

    def _damaged(self, version: str) -> bool:
        """Whether the mirror lacks some file of the commit (a snapshot without its large
        files); a commit it lacks altogether is uv's to report."""
        try:
            git = Git(self.mirror, search_parents=False)
            return bool(missing_files(git, version, self.subdirectory))
        except GitError:
            return False

    def _named_build(self, python: Path, folder: Path, version: str, source: Path) -> None:
        """The named build's wheel of the checkout ``source``, installed into the overlay."""
        assert self.build is not None
        handle, name = tempfile.mkstemp(
            prefix=f"build-{self.manifest.id}-{version[:12]}-", suffix=".log", dir=folder.parent
        )
        os.close(handle)
        log = Path(name)
        built = build_wheel(
            self.build,
            source,
            folder / "wheel",
            log,
            python=python,
            commit=version,
            distribution=self.distribution,
        )
        try:
            self.install(python, str(built.wheel))
        except _InstallFailed as exc:
            # the named build's own product does not install: a build failure, not a release
            # without a file for this interpreter
            raise WheelBuildError(f"the wheel the named build made: {exc}; log {log}") from None
        # a build that worked leaves no log behind (a failed one's is named in its detail)
        log.unlink(missing_ok=True)
        self.say(
            f"built {self.distribution} at {version[:12]} with {self.build.describe()} "
            f"in {built.seconds:.1f}s"
        )

    def not_built(self, exc: PatchlaneError, version: str) -> tuple[State, str]:
        """A commit that could not be built is unknown, saying why and what would build it; one
        whose build could not start for want of what every commit's build needs (the backend on
        the index, the index itself) blocks the runner."""
        at = f"{self.distribution} at {version[:12]}"
        if self.build is not None:
            return UNKNOWN, (
                f"no wheel of {at}: {exc} — if no commit builds, fix the named build "
                "(`[target] build`)"
            )
        uv_said = exc.detail if isinstance(exc, BuildError) else ""
        missing = missing_build_requirements(uv_said)
        if missing is not None:
            what = ", ".join(missing) or "build requirement of the package"
            self.blocked = (
                f"uv cannot build {at} from the mirror: the index serves no {what}, which its "
                f"build needs — add {'them' if len(missing) > 1 else 'it'} to the index, or name "
                "a build (`[target] build`)"
            )
            return UNKNOWN, self.blocked
        if uv_said and explain_failure(uv_said)[0] == "unreachable":
            self.blocked = f"uv cannot build {at} from the mirror: the index could not be reached"
            return UNKNOWN, f"{self.blocked} ({exc})"
        return UNKNOWN, (
            f"uv could not build {at} from the mirror: {exc} — if no commit builds, name a build "
            "(`[target] build`)"
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
