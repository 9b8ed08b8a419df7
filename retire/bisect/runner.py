"""The overlay runner: a shim's reproducer ``--mode without`` against one candidate release.

Per candidate, a throwaway venv sees a base interpreter's packages and has only the target
distribution changed to the candidate version (``uv pip install --no-deps``). What the run
printed becomes a :class:`~retire.bisect.search.CandidateRun` for the search and, like any
reproducer run, a :class:`~retire.evidence.validation.ValidationRecord` handed to ``on_record``.
The runner is built from the bisection's :class:`~retire.bisect.job.BisectJob` (its index, cache,
timeout, isolation, lane) and is a :class:`~retire.bisect.prober.Prober` of width 1.

Under launcher isolation (the default when the reproducer declares ``preload``) the base
interpreter imports the preloads once, and each candidate's run is a fork of it whose
``sys.path`` puts the candidate's overlay folder first (:class:`retire.runs.launcher.Launcher`).
A module of the target distribution that the launcher had already imported could not be swapped
that way, so the target's own top-level package is never preloaded (only its dependencies, such
as torch); if a preload imports it anyway, the runs fall back to one interpreter each.

How an outcome reads: BUG_REPRODUCED is broken, FIX_VALIDATED / MEMORY_SAVE_VERIFIED fixed; a
SKIPPED run, an ImportError, or a release uv cannot install for this interpreter (no matching
file) is *not applicable*; a crash, a timeout, an unreachable index, or a run that saw another
version than the one installed is *unknown*.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from retire.bisect.cache import ResultCache, reproducer_hash
from retire.bisect.job import BisectJob
from retire.bisect.prober import OneAtATime
from retire.bisect.search import (
    BROKEN,
    ENV_FAILED,
    FIXED,
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    State,
    normal,
)
from retire.bisect.sidebyside import serialized
from retire.core import tooltext
from retire.core.errors import PatchlaneError
from retire.evidence.validation import Mode, RunOutcome, ValidationRecord
from retire.locks.failures import UNREACHABLE_MARKERS
from retire.runs import cancelling, envs
from retire.runs.isolation import Isolation
from shims.model import ShimManifest

if TYPE_CHECKING:
    # at run time only where a launcher is started: a cached bisection never loads it
    from retire.runs.launcher import Launcher
    from retire.runs.launcherpool import LauncherPool

__all__ = [
    "BaseEnv",
    "OverlayRunner",
    "base_fingerprint",
    "inspect_base",
    "isolation_of",
    "launcher_pool",
    "preload_of",
]

#: How a reproducer outcome reads for the search.
_STATE_OF: dict[str, State] = {
    RunOutcome.BUG_REPRODUCED: BROKEN,
    RunOutcome.FIX_VALIDATED: FIXED,
    RunOutcome.MEMORY_SAVE_VERIFIED: FIXED,
    RunOutcome.SKIPPED: NOT_APPLICABLE,
}
#: The last line of a traceback that says the reproducer could not import what it tests.
_IMPORT_ERROR = re.compile(r"^(ImportError|ModuleNotFoundError)\b")


_BASE_PROBE = (
    "import json, platform, site, sys, os;"
    "dirs = list(site.getsitepackages()) if hasattr(site, 'getsitepackages') else [];"
    "u = site.getusersitepackages() if site.ENABLE_USER_SITE else None;"
    "dirs += [u] if u and os.path.isdir(u) else [];"
    "print(json.dumps({'executable': sys.executable, 'site_dirs': [d for d in dirs if "
    "os.path.isdir(d)],"
    " 'machine': platform.machine(), 'system': platform.system(), 'implementation': "
    "sys.implementation.name}))"
)


@dataclass(frozen=True)
class BaseEnv:
    """The interpreter candidates are overlaid on, and its identity for the cache."""

    python: str
    executable: str
    site_dirs: tuple[str, ...]
    python_version: str
    packages: Mapping[str, str]
    fingerprint: str


def inspect_base(python: str | os.PathLike[str], distribution: str) -> BaseEnv:
    """Describe the base interpreter; the fingerprint ignores the distribution being bisected."""
    from retire.runs.envs import describe

    info = describe(python)
    proc = subprocess.run(
        [os.fspath(python), "-c", _BASE_PROBE],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=envs.inspect_env(),
    )
    if proc.returncode != 0:
        raise PatchlaneError(
            f"cannot inspect the base interpreter {python}: "
            f"{tooltext.plain(proc.stderr).strip()[-300:]}"
        )
    extra = json.loads(proc.stdout)
    return BaseEnv(
        python=os.fspath(python),
        executable=extra["executable"],
        site_dirs=tuple(extra["site_dirs"]),
        python_version=info["python"],
        packages=info["packages"],
        fingerprint=base_fingerprint(
            info["python"],
            info["packages"],
            distribution,
            host=f"{extra['implementation']}-{extra['system']}-{extra['machine']}",
        ),
    )


def base_fingerprint(
    python_version: str, packages: Mapping[str, str], distribution: str, *, host: str = ""
) -> str:
    """sha256 of what the base brings: interpreter, platform and every other package's version."""
    target = canonicalize_name(distribution)
    others = sorted(
        (canonicalize_name(k), v) for k, v in packages.items() if canonicalize_name(k) != target
    )
    blob = json.dumps([python_version, host, others], separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def preload_of(manifest: ShimManifest) -> tuple[str, ...]:
    """What a bisection's launcher imports once: the reproducer's preloads, less the target's own
    package (a candidate must replace it)."""
    top = manifest.target.module.split(".")[0]
    return tuple(m for m in manifest.reproducer.preload if m.split(".")[0] != top)


def isolation_of(manifest: ShimManifest, job: BisectJob) -> Isolation:
    """How a bisection's candidates run: as the job says, else forks of a launcher when the
    reproducer declares preloads."""
    return job.isolation or (Isolation.LAUNCHER if preload_of(manifest) else Isolation.PROCESS)


def launcher_pool(
    manifest: ShimManifest,
    base: BaseEnv,
    env: Mapping[str, str] | None,
    slots: int,
    say: Callable[[str], None],
) -> LauncherPool[Launcher]:
    """Up to ``slots`` launchers of ``base`` that imported ``manifest``'s preloads: one pool for
    every runner of a bisection (releases and commits: a candidate is a fork whose ``sys.path``
    puts its overlay first, whose ``CUDA_VISIBLE_DEVICES`` picks its GPUs). Each says what it
    imported, or why the runs it serves fall back to one interpreter each."""
    from retire.runs.launcherpool import LauncherPool

    preload = preload_of(manifest)
    top = manifest.target.module.split(".")[0]
    # the slots start on threads of their own
    say = serialized(say) or say

    def start() -> Launcher:
        from retire.runs.launcher import Launcher
        from retire.runs.reproduce import child_environment

        launcher = Launcher(
            base.python, preload, child_environment(manifest, env), targets=[top], say=say
        )
        if launcher.alive and launcher.targets_loaded:
            launcher.fall_back(
                f"preloading {', '.join(preload)} imported the target "
                f"{launcher.targets_loaded[0]}, which a candidate must replace"
            )
        elif launcher.alive:
            say(f"launcher: imported {', '.join(preload)} once in {launcher.startup_s:.1f}s")
        return launcher

    return LauncherPool(start, slots)


class OverlayRunner(OneAtATime):
    """Runs a shim's reproducer ``--mode without`` against one candidate release.

    Per candidate: a throwaway venv of the base's interpreter whose ``.pth`` adds the base's
    site folders *after* its own (so a venv base works too, and the candidate wins), then
    ``uv pip install --no-deps <dist>==<version>`` — only that one distribution changes.
    ``job`` says where from (its index), how (its timeout, isolation, env) and under which lane
    the runs are recorded (``bisect``, ``bisect:<lane>`` on a lane's env); ``on_record`` takes
    each fresh run's record, ``say`` the runner's notes.
    """

    def __init__(
        self,
        manifest: ShimManifest,
        base: BaseEnv,
        job: BisectJob,
        *,
        on_record: Callable[[ValidationRecord], None] | None = None,
        say: Callable[[str], None] | None = None,
        launchers: LauncherPool[Launcher] | None = None,
    ) -> None:
        self.manifest = manifest
        self.base = base
        self.distribution = manifest.target.distribution
        self.index_url = job.index
        self.cache = ResultCache(job.cache) if job.cache is not None else None
        self.work_dir = Path(job.work_dir) if job.work_dir else None
        self.timeout = job.timeout
        self.env = job.env
        self.lane = job.record_lane
        self.lock_digest = job.lock_digest
        self.on_record = on_record
        # reproducer runs actually made
        self.runs = 0
        self._repro_hash = reproducer_hash(manifest)
        #: What the base launcher imports once: the reproducer's preloads, less the target's own
        #: package.
        self.preload = preload_of(manifest)
        self.isolation = isolation_of(manifest, job)
        self.say = say or (lambda message: None)
        # the bisection's warm launchers (shared with its other runners), else one of its own
        # made at the first fresh run, so a cached bisection starts nothing
        self.launchers = launchers
        self._own: LauncherPool[Launcher] | None = None

    @property
    def note(self) -> str:
        """Why launcher isolation fell back to process isolation, if it did (the first of the
        launchers it borrows from to say so)."""
        pool = self.launchers or self._own
        made = pool.made if pool is not None else ()
        return next((launcher.fallback for launcher in made if launcher.fallback), "")

    def _key(self, version: str) -> str:
        return ResultCache.key(
            self.manifest.id, self._repro_hash, self.distribution, version, self.base.fingerprint
        )

    def cached(self, version: str, /) -> CandidateRun | None:
        """What the cache already knows of ``version`` (no run), or None."""
        if self.cache is None or (hit := self.cache.get(self._key(version))) is None:
            return None
        return replace(hit, cached=True, version=version)

    def run(self, version: str, /) -> CandidateRun:
        """The reproducer's run on ``version`` (the cache's answer when it has one)."""
        if (hit := self.cached(version)) is not None:
            return hit
        run = self._run(version)
        # the index may gain a file for it
        if self.cache is not None and run.outcome != ENV_FAILED:
            self.cache.put(
                self._key(version),
                run,
                {
                    "shim": self.manifest.id,
                    "reproducer": self._repro_hash,
                    "distribution": self.distribution,
                    "version": version,
                    "base": self.base.fingerprint,
                },
            )
        return run

    def _run(self, version: str) -> CandidateRun:
        began = time.monotonic()
        parent = self.work_dir or Path(tempfile.gettempdir())
        parent.mkdir(parents=True, exist_ok=True)
        folder = Path(
            tempfile.mkdtemp(prefix=f"overlay-{canonicalize_name(self.distribution)}-", dir=parent)
        )
        # the launchers start while the overlay builds
        if (pool := self._pool()) is not None:
            pool.warm_soon()
        try:
            try:
                python = self.build_overlay(folder, version)
            except PatchlaneError as exc:
                # a build killed by a cancel says nothing of the candidate
                cancelling.check()
                state, detail = self.not_built(exc, version)
                seconds = round(time.monotonic() - began, 3)
                return CandidateRun(version, state, ENV_FAILED, detail, seconds)
            # cancelled while its overlay was built (retire.bisect.sidebyside): it never runs
            cancelling.check()
            self.runs += 1
            record = self._reproduce(folder, python)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        # cancelled while it ran: killed, neither recorded nor cached; else no cancel comes now
        cancelling.commit()
        record = self._recorded(record, version)
        if self.on_record is not None:
            self.on_record(record)
        return self.read(record, version)

    def not_built(self, exc: PatchlaneError, version: str) -> tuple[State, str]:
        """How ``version`` reads when its overlay could not be made (no reproducer ran), and why:
        a release uv cannot install here (no file for this interpreter, none at all) is not
        applicable; an index that could not be reached, or a venv that could not be made, is
        unknown."""
        return _build_failure_state(exc), str(exc)

    def read(self, record: ValidationRecord, version: str) -> CandidateRun:
        """How the run on ``version`` reads for the search."""
        return _read(record, version, self.distribution)

    def requirement(self, version: str) -> str:
        """What uv installs as the candidate ``version``."""
        return f"{self.distribution}=={version}"

    def _recorded(self, record: ValidationRecord, version: str) -> ValidationRecord:
        """The record with what the overlay was: the installed release (also in ``versions`` when
        the reproducer's host stamp does not list the target), and the base it sat on."""
        dist = str(canonicalize_name(self.distribution))
        stamped = {str(canonicalize_name(k)) for k in record.versions}
        versions = dict(record.versions) if dist in stamped else {**record.versions, dist: version}
        environment = {
            "kind": "overlay",
            "python": self.base.python_version,
            "lock": self.lock_digest,
            "installed": {dist: version},
            "base": {dist: self.base.packages.get(dist)},
            "base_python": self.base.executable,
        }
        return replace(record, versions=versions, environment=environment)

    def _pool(self) -> LauncherPool[Launcher] | None:
        """The launchers this runner borrows from, or None under process isolation."""
        if self.isolation != Isolation.LAUNCHER:
            return None
        if self.launchers is None and self._own is None:
            self._own = launcher_pool(self.manifest, self.base, self.env, 1, self.say)
        return self.launchers or self._own

    def _reproduce(self, folder: Path, python: Path) -> ValidationRecord:
        """The reproducer's run on the overlay in ``folder``: a fork of a borrowed launcher, or
        an interpreter of its own (``python``) under process isolation."""
        from retire.runs.reproduce import run_reproducer

        if (pool := self._pool()) is None:
            return run_reproducer(
                self.manifest,
                Mode.WITHOUT,
                python=python,
                env=self.env,
                lane=self.lane,
                timeout=self.timeout,
            )
        with pool.borrow() as launcher:
            return launcher.run(
                self.manifest,
                Mode.WITHOUT,
                env=self.env,
                lane=self.lane,
                timeout=self.timeout,
                sys_path_first=[str(self.overlay_site(folder))],
                python=python,
            )

    def close(self) -> None:
        """Stop the runner's own launcher, if it started one (a shared pool is closed by whoever
        made it)."""
        if self._own is not None:
            self._own.close()

    def overlay_site(self, folder: Path) -> Path:
        """The site folder of the overlay venv in ``folder`` (where the candidate is installed)."""
        major_minor = ".".join(self.base.python_version.split(".")[:2])
        # uv's POSIX venv layout
        purelib = folder / "lib" / f"python{major_minor}" / "site-packages"
        # another layout (Windows, PyPy): ask the interpreter
        if not purelib.is_dir():
            purelib = Path(envs.describe_paths(folder / "bin" / "python")["purelib"])
        return purelib

    def build_overlay(self, folder: Path, version: str) -> Path:
        """A venv in ``folder`` = the base's packages + ``<dist>==<version>``; returns its
        python."""
        python = self.overlay_venv(folder)
        self.install(python, self.requirement(version))
        return python

    def overlay_venv(self, folder: Path) -> Path:
        """An empty venv in ``folder`` that sees the base's packages; returns its python."""
        envs.run_uv(
            ["venv", "--quiet", "--python", self.base.executable, str(folder)],
            "cannot create the overlay venv",
        )
        envs.link_base(self.overlay_site(folder), list(self.base.site_dirs))
        return folder / "bin" / "python"

    def install(self, python: Path, requirement: str) -> None:
        """``uv pip install --no-deps requirement`` into the overlay venv of ``python``."""
        args = ["pip", "install", "--quiet", "--python", str(python), "--no-deps", requirement]
        if self.index_url:
            args[2:2] = ["--default-index", self.index_url]
        try:
            envs.run_uv(args, f"cannot install {requirement}")
        except envs.BuildError as exc:
            raise _InstallFailed(str(exc), exc.detail) from None


class _InstallFailed(envs.BuildError):
    """uv could not install the candidate into a venv that was built."""


def _build_failure_state(exc: PatchlaneError) -> State:
    """:meth:`OverlayRunner.not_built`'s state."""
    if not isinstance(exc, _InstallFailed):
        return UNKNOWN
    return (
        UNKNOWN if any(marker in exc.detail for marker in UNREACHABLE_MARKERS) else NOT_APPLICABLE
    )


def _read(record: ValidationRecord, version: str, distribution: str) -> CandidateRun:
    """How one reproducer run reads for the search."""
    state, detail = _STATE_OF.get(record.outcome, UNKNOWN), record.detail
    if record.outcome == RunOutcome.CRASHED and (failure := _import_failure(record.output_tail)):
        state, detail = NOT_APPLICABLE, f"cannot import what it tests: {failure}"
    target = str(canonicalize_name(distribution))
    seen = next(
        (v for k, v in record.versions.items() if str(canonicalize_name(k)) == target), None
    )
    if seen is not None and normal(seen) != normal(version):
        # The overlay did not take: whatever it printed is not about this release.
        state, detail = UNKNOWN, f"the reproducer saw {distribution} {seen}, not {version}"
    return CandidateRun(
        version, state, record.outcome, detail, record.duration_s, False, record.output_tail
    )


def _import_failure(output: str) -> str | None:
    """The ImportError a crashed run ended with (its traceback's last line), or None."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines and _IMPORT_ERROR.match(lines[-1]) else None
