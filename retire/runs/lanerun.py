"""Lane runs: build each lane from its lock, run its shims' reproducers in both modes, judge.

For every shim in a lane the reproducer runs *without* the shim (does upstream still break?)
and, unless that was skipped, *with* it (does the shim fix it?). The pair is judged into one
outcome:

==================  ===========================================================  ==========
outcome             meaning                                                      fails run
==================  ===========================================================  ==========
needed              the bug reproduces and the shim fixes it                     no
upstream-fixed      the bug no longer reproduces without the shim: retire it?   no
shim-broken         the bug reproduces and the shim does not fix it              yes
skipped             this host lacks what the reproducer needs (reason given)     no
crashed             a reproducer crashed or broke the protocol                   yes
timeout             a reproducer ran past its timeout and was killed             yes
==================  ===========================================================  ==========

A lane that cannot be built fails the run with the reason and never hides the other lanes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.core import childenv, uv
from retire.core.errors import InputError
from retire.evidence.validation import (
    FAILING,
    FAULTED,
    FIXED,
    Mode,
    RunOutcome,
    ShimOutcome,
    ValidationRecord,
)
from retire.lanes.model import Lane
from retire.locks import locking
from retire.mirrors.config import MirrorSet
from retire.runs import envs
from retire.runs.gpus import GPUS_ENV, Gpu, discover, lane_needs
from retire.runs.guards import GuardRun, guards_for, judge_guard
from retire.runs.launcher import (
    ISOLATIONS,
    PROTOCOL_MODULES,
    Isolation,
    Launcher,
    common_environment,
    preload_of,
)
from retire.runs.packing import GpuPool, unmet
from retire.runs.reaper import REAPER
from retire.runs.reproduce import child_environment, run_reproducer
from shims import times
from shims.model import ShimManifest


class LaneStatus(StrEnum):
    """How a lane run ended: its shims ran, it was skipped on this host, or it could not be
    built (a lock out of date, an unknown shim, uv's refusal)."""

    RAN = "ran"
    SKIPPED = "skipped"
    BUILD_FAILED = "build-failed"
    #: its Slurm job ended without the lane's result: refused, cancelled, timed out, killed
    JOB_FAILED = "job-failed"


@dataclass(frozen=True)
class ShimRun:
    lane: str
    shim: str
    outcome: ShimOutcome
    why: str
    without: ValidationRecord | None = None
    with_shim: ValidationRecord | None = None
    # the with-shim run's outcome where its record is not at hand (read back from a summary)
    with_outcome: RunOutcome | None = None

    @property
    def records(self) -> tuple[ValidationRecord, ...]:
        return tuple(r for r in (self.without, self.with_shim) if r is not None)

    @property
    def with_result(self) -> RunOutcome | None:
        """What the with-shim run showed (None: it did not run)."""
        if self.with_shim is not None:
            return RunOutcome(self.with_shim.outcome)
        return self.with_outcome

    @property
    def mitigated(self) -> bool:
        """Skipped without the shim here, yet the with-shim run printed FIX_VALIDATED (or
        MEMORY_SAVE_VERIFIED): the shim's mitigation is in effect on this lane."""
        return self.outcome == ShimOutcome.SKIPPED and self.with_result in FIXED


@dataclass(frozen=True)
class LaneRun:
    lane: str
    status: LaneStatus
    # the lane's shims, whether or not they ran
    planned: tuple[str, ...] = ()
    why: str = ""
    detail: str = ""
    env: envs.LaneEnv | None = None
    shims: tuple[ShimRun, ...] = ()
    seconds: float = 0.0
    # how its reproducers ran (see --isolation)
    isolation: Isolation = Isolation.PROCESS
    # why a launcher lane fell back to process isolation
    note: str = ""
    # the retired shims' reproducers this lane still runs (retire.runs.guards)
    guards: tuple[GuardRun, ...] = ()

    @property
    def failed(self) -> bool:
        return (
            self.status in (LaneStatus.BUILD_FAILED, LaneStatus.JOB_FAILED)
            or any(s.outcome in FAILING for s in self.shims)
            or any(g.failed for g in self.guards)
        )

    @property
    def regressed(self) -> tuple[GuardRun, ...]:
        """The guards whose bug came back in this lane."""
        return tuple(g for g in self.guards if g.outcome == "regressed")


def judge(
    without: ValidationRecord | None, with_shim: ValidationRecord | None
) -> tuple[ShimOutcome, str]:
    """One outcome (and why) from the two modes' records. Pure."""
    for record in (without, with_shim):
        if record is not None and record.outcome in FAULTED:
            return ShimOutcome(
                record.outcome
            ), f"{record.mode} shim: {record.detail or record.outcome}"
    if without is None:
        return ShimOutcome.CRASHED, "the reproducer did not run"
    if without.outcome == RunOutcome.SKIPPED:
        reason = without.detail or "skipped"
        if with_shim is not None and with_shim.outcome in FIXED:
            reason += f"; with the shim: {with_shim.sentinel} (the mitigation is in effect)"
        return ShimOutcome.SKIPPED, reason
    if without.outcome in FIXED:
        return (
            ShimOutcome.UPSTREAM_FIXED,
            "the bug does not reproduce without the shim: a retirement candidate",
        )
    # without: the bug reproduced
    if with_shim is None:
        return ShimOutcome.CRASHED, "the with-shim run is missing"
    if with_shim.outcome == RunOutcome.SKIPPED:
        return ShimOutcome.SKIPPED, with_shim.detail or "skipped with the shim"
    if with_shim.outcome in FIXED:
        return ShimOutcome.NEEDED, f"bug reproduces; shim gives {with_shim.sentinel}"
    return ShimOutcome.SHIM_BROKEN, "the bug reproduces with the shim applied"


@dataclass(frozen=True)
class Host:
    """What this machine offers lanes: whether a CUDA GPU is visible, and why we think so; the
    GPUs lanes are given (``()``: none known, nothing is packed — retire/runs/gpus.py)."""

    cuda: bool
    description: str
    gpus: tuple[Gpu, ...] = ()

    @classmethod
    def detect(cls) -> Host:
        forced = os.environ.get("PATCHLANE_HOST_CUDA")
        if forced in ("0", "1") and GPUS_ENV not in os.environ:
            return cls(forced == "1", f"PATCHLANE_HOST_CUDA={forced}")
        found = discover()
        if not found.gpus:
            return cls(False, found.source)
        kinds = ", ".join(dict.fromkeys(gpu.name for gpu in found.gpus))
        return cls(True, f"{len(found.gpus)} GPU(s): {kinds} ({found.source})", found.gpus)


@dataclass(frozen=True)
class RunOptions:
    locks_dir: Path
    envs_dir: Path
    # base interpreter of a GPU image: build overlay lanes on it
    overlay: str | None = None
    # per reproducer; default: each manifest's own
    timeout: float | None = None
    run_id: str = field(
        default_factory=lambda: times.now().strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    )
    host: Host | None = None
    # a reproducer still running says so this often (0: never)
    heartbeat_s: float = 20.0
    # show uv's progress while building (a terminal, one lane at a time)
    live: bool = False
    # build from this folder only: no index, no network (docs/offline.md)
    wheelhouse: Path | None = None
    # a MirrorSet: where lane revisions install from on this host
    mirrors: MirrorSet | None = None
    # process | launcher; None: launcher where the lane's shims declare preloads
    isolation: str | None = None
    # the catalogue's guards: each lane runs those that name it (retire.runs.guards)
    guards: tuple[ShimManifest, ...] = ()
    # the host's GPUs, handed to lanes as they start (run_lanes makes it from the host's)
    gpu_pool: GpuPool | None = field(default=None, compare=False)
    # Called with each record as soon as it is made (the command appends it to the manifest), so
    # an interrupted run keeps everything that finished.
    on_record: Callable[[ValidationRecord], None] | None = field(default=None, compare=False)


# (lane, message)
Progress = Callable[[str, str], None]


@dataclass(frozen=True)
class RunContext:
    """What every reproducer run of one built lane shares: the lane, the manifests its runs read,
    its environment, its fork server (None: each run its own interpreter), the options and where
    progress goes."""

    lane: Lane
    manifests: dict[str, ShimManifest]
    env: envs.LaneEnv
    launcher: Launcher | None
    options: RunOptions
    progress: Progress


def reproducer_env(
    lane: Lane,
    manifests: dict[str, ShimManifest],
    shim: str,
    mode: str,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment a reproducer runs in: the lane's variables and its env-constraint shims'.

    Without-mode leaves out the shim's own constraint: that run must see upstream as it is.
    The controller's own virtualenv and Python path never leak into the lane, nor anything the
    allow-list (:mod:`retire.core.childenv`) does not name: no token reaches lane code.
    """
    env = childenv.for_lane(base)
    for name in uv.CALLER_PYTHON_ENV:
        env.pop(name, None)
    for other in lane.shims:
        if other in manifests and (other != shim or mode == Mode.WITH):
            env.update(manifests[other].env_vars)
    env.update(lane.env_dict)
    return env


def _environment_facts(env: envs.LaneEnv, manifest: ShimManifest, lock_digest: str | None) -> dict:
    wanted = {
        str(canonicalize_name(n))
        for n in (manifest.target.distribution, *manifest.reproducer.packages)
        if n
    }
    facts: dict = {
        "kind": env.kind,
        "python": env.python_version,
        "lock": lock_digest,
        "installed": {n: env.installed.get(n) for n in sorted(wanted)},
    }
    if env.kind == "overlay":
        facts["base"] = {n: env.base.get(n) for n in sorted(wanted)}
        facts["base_python"] = env.base_python
    return facts


@contextlib.contextmanager
def heartbeat(say: Callable[[str], None], label: str, every: float) -> Iterator[None]:
    """Say ``still running LABEL, 40 s`` every ``every`` seconds until the block ends: a long
    reproducer is not a hung terminal."""
    if every <= 0:
        yield
        return
    stop, started = threading.Event(), time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            say(f"still running {label}, {time.monotonic() - started:.0f} s")

    thread = threading.Thread(target=beat, name=f"heartbeat {label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_lane(
    lane: Lane,
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    progress: Progress = lambda lane, msg: None,
) -> LaneRun:
    """Build one lane and run its shims on the GPUs it is given. Never raises for the lane's own
    failures."""
    started = time.monotonic()
    host = options.host or Host.detect()
    refused = _refusal(lane, manifests, options, host, progress)
    if refused is not None:
        return refused
    pool = options.gpu_pool
    if pool is None:
        return _run_built(lane, manifests, options, progress, started)
    needs = lane_needs(lane, manifests)
    if (why := unmet(needs, pool.gpus)) is not None:
        return _skipped(lane, f"this host {why} ({host.description})", progress)
    # a lane still waiting for GPUs when the run is stopped never starts
    with pool.hold(
        needs,
        REAPER.check,
        lambda: progress(lane.name, f"waiting for {needs}: other lanes hold this host's"),
    ) as given:
        REAPER.check()
        if given:
            progress(lane.name, f"GPUs {', '.join(str(gpu) for gpu in given)}")
        with childenv.visible_devices(",".join(gpu.id for gpu in given)):
            return _run_built(lane, manifests, options, progress, started, given)


def _run_built(
    lane: Lane,
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    progress: Progress,
    started: float,
    given: tuple[Gpu, ...] | None = None,
) -> LaneRun:
    """The lane built and its shims run (``given``: its GPUs; None where none are known)."""
    env = _build_env(lane, options, progress, started)
    if isinstance(env, LaneRun):
        return env
    progress(
        lane.name,
        f"env ready: Python {env.python_version}, {len(env.synced)} packages from the lock",
    )
    launcher = _start_launcher(lane, manifests, env, options, progress)
    context = RunContext(lane, manifests, env, launcher, options, progress)
    try:
        results = tuple(
            _shim_unmet(lane, manifests[shim], given) or _run_shim(context, shim)
            for shim in lane.shims
        )
    finally:
        if launcher is not None:
            launcher.close()
    guarded = tuple(
        _run_guard(lane, guard, env, options, progress)
        for guard in guards_for(lane, options.guards)
    )
    return LaneRun(
        lane.name,
        LaneStatus.RAN,
        lane.shims,
        env=env,
        shims=results,
        seconds=time.monotonic() - started,
        isolation=Isolation.LAUNCHER if launcher is not None else Isolation.PROCESS,
        note=_launcher_note(launcher),
        guards=guarded,
    )


def _run_guard(
    lane: Lane, guard: ShimManifest, env: envs.LaneEnv, options: RunOptions, progress: Progress
) -> GuardRun:
    """A retired shim's reproducer, without a shim (there is none), in its own interpreter."""
    context = RunContext(lane, {guard.id: guard}, env, None, options, progress)
    record = _run_mode(context, guard.id, Mode.WITHOUT)
    if options.on_record is not None:
        options.on_record(record)
    outcome, why = judge_guard(record)
    word = "REGRESSED" if outcome == "regressed" else outcome
    progress(lane.name, f"guard {guard.id}: {record.sentinel or record.outcome} — {word}")
    return GuardRun(lane.name, guard.id, outcome, why, record)


def _shim_unmet(
    lane: Lane, manifest: ShimManifest, given: tuple[Gpu, ...] | None
) -> ShimRun | None:
    """A shim skipped because the GPUs its lane was given cannot meet its reproducer's needs
    (a lane given none lets its reproducers say so themselves), else None."""
    if not given:
        return None
    why = unmet(manifest.reproducer.gpu_needs, given)
    if why is None:
        return None
    ids = ",".join(gpu.id for gpu in given)
    return ShimRun(
        lane.name,
        manifest.id,
        ShimOutcome.SKIPPED,
        f"the reproducer {why} of those lane {lane.name} was given (GPUs {ids}) — declare the "
        "lane's gpus in its lane file (docs/lanes.md, GPUs)",
    )


def _skipped(lane: Lane, why: str, progress: Progress) -> LaneRun:
    """The lane skipped on this host, every shim with it, for ``why``."""
    progress(lane.name, f"skipped: {why}")
    return LaneRun(
        lane.name,
        LaneStatus.SKIPPED,
        lane.shims,
        why,
        shims=tuple(ShimRun(lane.name, s, ShimOutcome.SKIPPED, why) for s in lane.shims),
    )


def _launcher_note(launcher: Launcher | None) -> str:
    """Why runs left the launcher: it fell back, or shims it could not run faithfully."""
    if launcher is None:
        return ""
    return "; ".join(filter(None, (launcher.fallback, *launcher.notes.values())))


def _refusal(
    lane: Lane,
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    host: Host,
    progress: Progress,
) -> LaneRun | None:
    """Why the lane cannot run here before anything is built (no CUDA, a stale lock, a shim
    the catalogue lacks), or None."""
    if lane.needs_cuda and not host.cuda and not options.overlay:
        return _skipped(lane, f"lane needs a CUDA host ({host.description})", progress)
    state = locking.lock_state(lane, options.locks_dir)
    if not state.current:
        return LaneRun(
            lane.name,
            LaneStatus.BUILD_FAILED,
            lane.shims,
            f"{state.summary}: run `nox -s lock -- {lane.name}`",
        )
    missing = [s for s in lane.shims if s not in manifests]
    if missing:
        return LaneRun(
            lane.name, LaneStatus.BUILD_FAILED, lane.shims, f"unknown shims: {', '.join(missing)}"
        )
    return None


def _build_env(
    lane: Lane, options: RunOptions, progress: Progress, started: float
) -> envs.LaneEnv | LaneRun:
    """The lane's environment, or the failed lane run that says why it could not be built."""
    lock_file = locking.lock_path(options.locks_dir, lane.name)
    kind = "overlay on " + options.overlay if options.overlay else "full"
    source = f", files from the wheelhouse {options.wheelhouse} only" if options.wheelhouse else ""
    progress(
        lane.name, f"building env ({kind}) from {lock_file.parent.name}/{lock_file.name}{source}"
    )
    try:
        return envs.build(
            lane,
            lock_file,
            options.envs_dir,
            overlay=options.overlay,
            live=options.live,
            wheelhouse=options.wheelhouse,
            mirrors=options.mirrors,
            say=lambda message: progress(lane.name, message),
        )
    # a revision whose mirror is not on this host
    except InputError as exc:
        progress(lane.name, f"build failed: {exc}")
        return LaneRun(
            lane.name,
            LaneStatus.BUILD_FAILED,
            lane.shims,
            str(exc),
            seconds=time.monotonic() - started,
        )
    except envs.BuildError as exc:
        # stopped (Ctrl-C, SIGTERM): uv was killed by the stop, the build did not fail
        REAPER.check()
        progress(lane.name, f"build failed: {exc}")
        return LaneRun(
            lane.name,
            LaneStatus.BUILD_FAILED,
            lane.shims,
            str(exc),
            exc.detail,
            seconds=time.monotonic() - started,
        )


def _run_shim(context: RunContext, shim: str) -> ShimRun:
    """One shim's reproducer without the shim, then with it (unless the first run faulted),
    judged."""
    lane, options = context.lane, context.options
    records: dict[Mode, ValidationRecord] = {}
    for mode in Mode:
        if mode == Mode.WITH and records[Mode.WITHOUT].outcome in FAULTED:
            # the reproducer is broken: a with-run would say nothing new
            break
        # A skipped without-run still gets its with-run: an env-constraint or policy shim can
        # prove its mitigation is in effect on a host where the failure itself cannot happen.
        record = _run_mode(context, shim, mode)
        records[mode] = record
        if options.on_record is not None:
            options.on_record(record)
        context.progress(
            lane.name,
            f"{shim} {mode} shim: {record.sentinel or record.outcome} ({record.duration_s:.1f}s)",
        )
    without, with_shim = records.get(Mode.WITHOUT), records.get(Mode.WITH)
    outcome, why = judge(without, with_shim)
    return ShimRun(lane.name, shim, outcome, why, without, with_shim)


def _run_mode(context: RunContext, shim: str, mode: Mode) -> ValidationRecord:
    """One reproducer run in one mode (forked from the launcher, or its own interpreter), with
    the run and environment it belongs to."""
    lane, options, launcher = context.lane, context.options, context.launcher
    manifest = context.manifests[shim]
    run_env = reproducer_env(lane, context.manifests, shim, mode)
    with heartbeat(
        lambda line: context.progress(lane.name, line),
        f"{shim} {mode} shim",
        options.heartbeat_s,
    ):
        if launcher is not None:
            record = launcher.run(
                manifest, mode, lane=lane.name, timeout=options.timeout, env=run_env
            )
        else:
            record = run_reproducer(
                manifest,
                mode,
                python=context.env.python,
                lane=lane.name,
                timeout=options.timeout,
                env=run_env,
            )
    facts = _environment_facts(context.env, manifest, lane.digest)
    return _with_context(record, options.run_id, facts)


def _start_launcher(
    lane: Lane,
    manifests: dict[str, ShimManifest],
    env: envs.LaneEnv,
    options: RunOptions,
    progress: Progress,
) -> Launcher | None:
    """The lane's fork server, when this lane runs under launcher isolation (else None)."""
    planned = [manifests[shim] for shim in lane.shims]
    preload = preload_of(planned)
    isolation = options.isolation or ("launcher" if preload else "process")
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
    if isolation == "process" or not planned:
        return None
    # Its imports see only what every run's environment shares: a variable one shim's runs set
    # reaches those runs alone (after the preload; see docs/commands.md, Isolation).
    shared = common_environment(
        child_environment(manifests[shim], reproducer_env(lane, manifests, shim, mode))
        for shim in lane.shims
        for mode in Mode
    )
    launcher = Launcher(
        env.python,
        preload,
        shared,
        targets=[m.target.module for m in planned],
        say=lambda line: progress(lane.name, line),
    )
    if launcher.alive:
        failed = "".join(f"; {name} not preloaded ({why})" for name, why in launcher.failed.items())
        # a with-shim run patches these after import (shims.activate does)
        if launcher.targets_loaded:
            failed += f"; shim targets it imported: {', '.join(launcher.targets_loaded)}"
        # e.g. a native pool started at import: forks carry only the main thread
        if launcher.threads > 1:
            failed += f"; {launcher.threads} native threads at fork"
        progress(
            lane.name,
            f"launcher: imported "
            f"{', '.join([m for m in launcher.preloaded if m not in PROTOCOL_MODULES])} once in "
            f"{launcher.startup_s:.1f}s{failed}",
        )
    return launcher


def _with_context(record: ValidationRecord, run_id: str, environment: dict) -> ValidationRecord:
    return replace(record, run=run_id, environment=environment)


def run_lanes(
    lanes: list[Lane],
    manifests: dict[str, ShimManifest],
    options: RunOptions,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
) -> list[LaneRun]:
    """Run lanes, ``jobs`` at a time; results in lane order, each lane independent of the others."""
    lock = threading.Lock()
    began = time.monotonic()

    def say(lane: str, message: str) -> None:
        if progress is None:
            return
        with lock:
            progress(lane, f"{time.monotonic() - began:6.1f}s  {message}")

    if options.host is None:
        # detect once, not per lane
        options = replace(options, host=Host.detect())
    if options.gpu_pool is None and options.host is not None and options.host.gpus:
        options = replace(options, gpu_pool=GpuPool(options.host.gpus))
    # from here on, even this process's death leaves nothing running
    REAPER.ensure_guard()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        return list(pool.map(lambda lane: run_lane(lane, manifests, options, say), lanes))
    # Ctrl-C, SIGTERM: kill every reproducer tree now, not at its timeout
    except BaseException:
        REAPER.stop_uninterrupted()
        raise
    finally:
        # prompt: the workers' reproducers are dead
        pool.shutdown(wait=True, cancel_futures=True)
        REAPER.resume()


def to_summary(run: LaneRun) -> dict:
    """What a lane run leaves for the cross-lane summary (JSON-able)."""
    return {
        "lane": run.lane,
        "status": run.status,
        "why": run.why,
        "planned": list(run.planned),
        "seconds": round(run.seconds, 2),
        "isolation": run.isolation,
        "note": run.note,
        "shims": [
            {"shim": s.shim, "outcome": s.outcome, "why": s.why, "with_shim": s.with_result}
            for s in run.shims
        ],
        "guards": [{"guard": g.guard, "outcome": g.outcome, "why": g.why} for g in run.guards],
    }


def from_summary(data: dict) -> LaneRun:
    return LaneRun(
        data["lane"],
        LaneStatus(data["status"]),
        tuple(data.get("planned", ())),
        data.get("why", ""),
        shims=tuple(
            ShimRun(
                data["lane"],
                s["shim"],
                ShimOutcome(s["outcome"]),
                s.get("why", ""),
                with_outcome=RunOutcome(s["with_shim"]) if s.get("with_shim") else None,
            )
            for s in data.get("shims", [])
        ),
        seconds=data.get("seconds", 0.0),
        isolation=Isolation(data.get("isolation", "process")),
        note=data.get("note", ""),
        guards=tuple(
            GuardRun(data["lane"], g["guard"], g["outcome"], g.get("why", ""))
            for g in data.get("guards", [])
        ),
    )
