"""The commit runner: a shim's reproducer ``--mode without`` against the target built from its
mirror at one commit.

The same overlay as a release's (:class:`~retire.bisect.runner.OverlayRunner`), with the candidate
the wheel of the package at the commit, installed ``--no-deps``. The wheel comes from the runner's
one clone of the mirror (:class:`retire.runs.sharedclone.SharedClone`, made at its first commit
and moved from commit to commit): built there by uv in one warm build environment, or by the
command a shim or lane names for a target with compiled sources
(:class:`shims.wheelbuild.WheelBuild`), and kept (:class:`retire.runs.wheelcache.WheelCache`, the
job's ``wheels``: ``.patchlane/cache/wheels``) keyed by repository, commit, build and
interpreter — a rerun of the bisection, or another shim's over the same range, builds nothing.
Each build says where it is (``building liger-kernel at 9ac26bb (2 of ~6)… 15 s``: the count
shared by the runners of one search, :class:`BuildCount`). The install's ``direct_url.json`` is
then made to name the upstream commit (:func:`retire.runs.wheelbuild.stamp_commit`), as uv's
install from git does, so the record's host stamp names it and the verdicts order the run by
ancestry like any revision lane's.

A candidate that could not be built — uv's build or the named one — is ``unknown``, with the reason
and the fix: never broken or fixed, and never *not applicable* (that is a release with no file for
this interpreter; a commit that does not build here says nothing of the bug). Where uv's build
cannot start because the index serves none of the package's build requirements (its backend:
setuptools, flit_core, hatchling), or the index cannot be reached, no other commit builds either:
the runner is then :attr:`~retire.bisect.prober.Prober.blocked` and the search stops there,
after one build.

A mirror that lacks some files' contents (a snapshot without its large files) is checked out
without them (only files the package's build never reads may be left out, and the run says
which), and the record still names the upstream commit.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from retire.bisect.cache import ResultCache
from retire.bisect.job import BisectJob
from retire.bisect.runner import BaseEnv, OverlayRunner, _InstallFailed, _read
from retire.bisect.search import UNKNOWN, CandidateRun, State
from retire.core.errors import PatchlaneError
from retire.evidence.validation import ValidationRecord
from retire.locks.failures import explain_failure, missing_build_requirements
from retire.runs.envs import BuildError
from retire.runs.sharedclone import SharedClone
from retire.runs.wheelbuild import WheelBuildError, stamp_commit
from retire.runs.wheelcache import WheelCache
from shims.model import ShimManifest
from shims.wheelbuild import WheelBuild

if TYPE_CHECKING:
    from retire.runs.launcher import Launcher
    from retire.runs.launcherpool import LauncherPool

__all__ = ["BuildCount", "RevisionRunner"]


class BuildCount:
    """How many commit candidates one search has started, of about how many it needs: the
    ``(2 of ~6)`` of a build's progress, shared by the runners of a search run side by side."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = 0
        self.expected = 0

    def expect(self, items: int, *, runs: int | None = None) -> None:
        """A new search over ``items`` commits: about ``runs`` candidates (default: a binary
        search's, ``⌈log2(items + 1)⌉``)."""
        with self._lock:
            self.started = 0
            self.expected = runs if runs is not None else math.ceil(math.log2(items + 1))

    def next(self) -> str:
        """The next candidate's place: ``(2 of ~6)`` (``(2)`` when nothing is expected)."""
        with self._lock:
            self.started += 1
            if not self.expected:
                return f"({self.started})"
            return f"({self.started} of ~{max(self.expected, self.started)})"


class RevisionRunner(OverlayRunner):
    """An overlay runner whose candidates are commits of ``mirror`` (a local clone of
    ``repository``); ``subdirectory`` is where the package's build file is, when not at the
    root; ``build``, when given, is the named command that builds each candidate's wheel;
    ``count`` the search's :class:`BuildCount` (shared by runners side by side); ``launchers``
    as the release runner's."""

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
        count: BuildCount | None = None,
        on_record: Callable[[ValidationRecord], None] | None = None,
        say: Callable[[str], None] | None = None,
        launchers: LauncherPool[Launcher] | None = None,
    ) -> None:
        super().__init__(manifest, base, job, on_record=on_record, say=say, launchers=launchers)
        self.mirror = mirror
        self.repository = repository
        self.subdirectory = subdirectory
        self.build = build
        self.count = count or BuildCount()
        self.wheels = WheelCache(job.wheels) if job.wheels is not None else None
        # made at the first commit built: one clone (and build environment) for every range
        self._shared: SharedClone | None = None

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

    def shared(self) -> SharedClone:
        """The runner's clone of the mirror, made on first use beside its overlays; the
        interpreter builds run with is an empty venv that sees the base's packages (an
        extension builds against the base's torch), made once."""
        if self._shared is None:
            parent = self.work_dir or Path(tempfile.gettempdir())
            parent.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="commits-", dir=parent))
            python = self.overlay_venv(folder / "build-python")
            self._shared = SharedClone(
                self.mirror,
                folder / "clone",
                repository=self.repository,
                python=python,
                distribution=self.distribution,
                subdirectory=self.subdirectory,
                cache=self.wheels,
                environment=self.base.fingerprint,
                index_url=self.index_url,
                # a failed build's log outlives the clone: it is named in the run's detail
                logs=parent,
                say=self.say,
            )
        return self._shared

    def build_overlay(self, folder: Path, version: str) -> Path:
        """The overlay with the package's wheel at the commit (kept, or built in the runner's
        clone), and its install stamped with the upstream commit."""
        shared = self.shared()
        wheel = shared.wheel_for(version, self.build, label=self.count.next())
        python = self.overlay_venv(folder)
        try:
            self.install(python, str(wheel))
        except _InstallFailed as exc:
            # the build's own product does not install: a build failure, not a release without
            # a file for this interpreter
            raise WheelBuildError(f"the wheel built at {version[:12]}: {exc}") from None
        stamp_commit(
            self.overlay_site(folder),
            self.distribution,
            self.mirror,
            shared.resolve(version),
            self.subdirectory,
        )
        return python

    def close(self) -> None:
        """Stop what the runs started, and remove the clone (the kept wheels stay)."""
        super().close()
        if self._shared is not None:
            shutil.rmtree(self._shared.folder.parent, ignore_errors=True)
            self._shared = None

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
        uv_said = exc.detail if isinstance(exc, BuildError | WheelBuildError) else ""
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
