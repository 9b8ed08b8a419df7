"""The culprit runner: a lane's old lock with some packages moved, built and run.

The base is the lane's environment built from the *old* lock (hash-checked, like any lane env).
A candidate that moves nothing runs there; one that moves packages runs in a throwaway venv that
sees the base's packages behind its own, with exactly the moved packages installed
(``uv pip install --no-deps name==version …`` from the lane's indexes). The reproducer runs in
the search's mode and is recorded like any bisection run (lane ``bisect:<lane>``). Conclusive
answers are kept in the bisection cache (:class:`retire.bisect.cache.ResultCache`), keyed by the
reproducer, the old lock and the move: a search stopped by its budget resumes there next time
and never runs a decided candidate again. An unknown answer (a crash, a time-out, a skip, an
overlay that could not be installed) is not kept there — the next search asks again, as the
bisection does — and one search asks each candidate once (:mod:`retire.bisect.culprit`).

:func:`search_culprit` ties it together with :func:`retire.bisect.culprit.find_culprit`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retire.bisect.budget import Budget, Meter
from retire.bisect.cache import ResultCache, reproducer_hash
from retire.bisect.culprit import CommitSearch, Culprit, Move, find_culprit, label
from retire.bisect.search import (
    BROKEN,
    ENV_FAILED,
    FIXED,
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    State,
)
from retire.core.errors import PatchlaneError
from retire.evidence.validation import Mode, RunOutcome, ValidationRecord
from retire.lanes.model import Lane
from retire.locks import lockdiff
from retire.probes.records import bisection_lane
from retire.runs import envs
from retire.runs.lanerun import reproducer_env
from shims.model import ShimManifest

__all__ = ["CulpritRunner", "lock_changes", "search_culprit"]

_STATE_OF: dict[str, State] = {
    RunOutcome.BUG_REPRODUCED: BROKEN,
    RunOutcome.FIX_VALIDATED: FIXED,
    RunOutcome.MEMORY_SAVE_VERIFIED: FIXED,
    RunOutcome.SKIPPED: NOT_APPLICABLE,
}


def lock_changes(
    old_lock: dict[str, Any] | None, new_lock: dict[str, Any] | None
) -> list[tuple[str, str | None, str]]:
    """(name, old, new) for every package the new lock moves or adds (a removal cannot be put on
    the old lock's env by installing, so it is no candidate)."""
    return [
        (change.name, change.old, change.new)
        for change in lockdiff.diff(old_lock, new_lock)
        if change.new is not None and change.old != change.new
    ]


class CulpritRunner:
    """Runs ``manifest``'s reproducer in ``mode`` against the old lock with packages moved."""

    def __init__(
        self,
        lane: Lane,
        manifest: ShimManifest,
        mode: Mode,
        old_lock: Path,
        *,
        work_dir: Path,
        cache: ResultCache | None = None,
        timeout: float | None = None,
        on_record: Callable[[ValidationRecord], object] | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.lane, self.manifest, self.mode = lane, manifest, Mode(mode)
        self.old_lock, self.work_dir, self.cache = old_lock, work_dir, cache
        self.timeout, self.on_record, self.say = timeout, on_record, say
        self._base: envs.LaneEnv | None = None
        lock_sha = hashlib.sha256(old_lock.read_bytes()).hexdigest()
        self._identity = f"{lane.name}:{self.mode}:{lock_sha}"
        self._repro = reproducer_hash(manifest)
        # fresh reproducer runs made
        self.runs = 0

    def _key(self, move: Move) -> str:
        # the cache's "distribution" slot names the question, its "version" slot the move
        return ResultCache.key(
            self.manifest.id, self._repro, f"culprit-{self.mode}", label(move), self._identity
        )

    def __call__(self, move: Move) -> CandidateRun:
        key = self._key(move)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return CandidateRun(label(move), hit.state, hit.outcome, hit.detail, 0.0, True)
        run = self._run(move)
        if self.cache is not None and run.outcome != ENV_FAILED:
            inputs = {"shim": self.manifest.id, "move": label(move), "base": self._identity}
            self.cache.put(key, run, inputs)
        return run

    def base(self) -> envs.LaneEnv:
        """The old lock's environment, built once."""
        if self._base is None:
            self.say(f"building {self.lane.name}'s env from the old lock")
            self._base = envs.build(self.lane, self.old_lock, self.work_dir / "envs")
        return self._base

    def _run(self, move: Move) -> CandidateRun:
        began = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="culprit-", dir=self.work_dir))
        try:
            # said as it starts: an overlay install and a reproducer run take seconds each
            self.say(f"{self.manifest.id} {self.mode} shim on {label(move)}")
            try:
                python = self._overlay(folder, move) if move else self.base().python
            except PatchlaneError as exc:
                # no reproducer ran: unknown (never clean), said as such
                self.say(f"{label(move)} could not be installed: {str(exc).splitlines()[0]}")
                return CandidateRun(
                    label(move), UNKNOWN, ENV_FAILED, str(exc), time.monotonic() - began
                )
            self.runs += 1
            record = self._reproduce(python)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if self.on_record is not None:
            self.on_record(record)
        state = _STATE_OF.get(record.outcome, UNKNOWN)
        return CandidateRun(
            label(move),
            state,
            record.outcome,
            record.detail,
            record.duration_s,
            False,
            record.output_tail,
        )

    def _reproduce(self, python: Path) -> ValidationRecord:
        from retire.runs.reproduce import run_reproducer

        env = reproducer_env(
            self.lane, {self.manifest.id: self.manifest}, self.manifest.id, self.mode
        )
        return run_reproducer(
            self.manifest,
            self.mode,
            python=python,
            env=env,
            lane=bisection_lane(self.lane.name),
            timeout=self.timeout,
        )

    def _overlay(self, folder: Path, move: Move) -> Path:
        """A venv over the base env with exactly the moved packages installed."""
        base = self.base()
        envs.run_uv(
            ["venv", "--quiet", "--python", str(base.python), str(folder)],
            "cannot create the culprit's overlay venv",
        )
        python = folder / "bin" / "python"
        envs.link_base(
            envs.describe_paths(python)["purelib"], [envs.describe_paths(base.python)["purelib"]]
        )
        args = ["pip", "install", "--quiet", "--python", str(python), "--no-deps"]
        # a moved package is found on whichever of the lane's indexes has that release
        args += ["--index-strategy", "unsafe-best-match"]
        for index in self.lane.indexes:
            # an index without a URL is the host's uv configuration: uv finds it itself
            if index.url:
                args += ["--default-index" if index.default else "--index", index.url]
        args += [f"{name}=={version}" for name, version in sorted(move.items())]
        envs.run_uv(args, f"cannot install {label(move)}")
        return python


def _releases(lane: Lane) -> Callable[[str], Sequence[str]]:
    """A package's releases on the lane's indexes (yanked ones left out)."""
    from retire.bisect.bisection import list_releases

    def releases(name: str) -> Sequence[str]:
        found: set[str] = set()
        for index in lane.indexes:
            if not index.url:
                continue
            try:
                versions, yanked = list_releases(index.url, name)
            except PatchlaneError:
                continue
            found.update(v for v in versions if v not in yanked)
        return sorted(found)

    return releases


def search_culprit(
    runner: CulpritRunner,
    changes: Sequence[tuple[str, str | None, str]],
    *,
    meter: Meter | None = None,
    commits: CommitSearch | None = None,
) -> Culprit:
    """The culprit of ``runner``'s lane breaking, within what ``meter`` (shared by the searches of
    one command) has left; no meter: no limit."""
    meter = meter or Meter(Budget())

    def probe(move: Move) -> CandidateRun:
        run = runner(move)
        meter.count(run)
        return run

    return find_culprit(
        runner.lane.name,
        runner.manifest.id,
        str(runner.mode),
        changes,
        probe,
        releases=_releases(runner.lane),
        commits=commits,
        stop=meter.stop,
        say=runner.say,
    )
