"""Run one shim's reproducer as a subprocess and turn what it printed into a ValidationRecord.

The protocol (host stamp, sentinel, exit codes) is read with ``shims.reproducer.parse_output``,
the same module every reproducer writes with, so the two sides cannot drift apart.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from retire.core import childenv, secrets
from retire.evidence.validation import MODES, RunOutcome, ValidationRecord
from retire.runs import cancelling
from retire.runs.reaper import REAPER
from shims import times
from shims.manifest import ROOTS_ENV, RUNTIME_DIR
from shims.model import ShimManifest
from shims.reproducer import Mode, Sentinel, exit_code_for, parse_output

__all__ = [
    "OUTPUT_TAIL_CHARS",
    "child_environment",
    "classify",
    "finished_run",
    "prepare_run",
    "run_reproducer",
]

#: How much of the output a record keeps (the end is where tracebacks and sentinels are).
OUTPUT_TAIL_CHARS = 4000

_OUTCOME_OF = {
    Sentinel.BUG_REPRODUCED: RunOutcome.BUG_REPRODUCED,
    Sentinel.FIX_VALIDATED: RunOutcome.FIX_VALIDATED,
    Sentinel.MEMORY_SAVE_VERIFIED: RunOutcome.MEMORY_SAVE_VERIFIED,
    Sentinel.SKIPPED: RunOutcome.SKIPPED,
}


def runtime_path() -> str:
    """A folder holding the runtime alone (``shims``, a link to :data:`RUNTIME_DIR`), for a
    reproducer's ``PYTHONPATH``: the folder the engine imports it from (an environment's
    site-packages) would also put every other package of the engine's environment ahead of the
    lane's."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "patchlane"
    folder = cache / f"runtime-{hashlib.sha256(str(RUNTIME_DIR).encode()).hexdigest()[:16]}"
    link = folder / "shims"
    if link.is_symlink() and link.resolve() == RUNTIME_DIR:
        return str(folder)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".runtime-", dir=cache))
    (staging / "shims").symlink_to(RUNTIME_DIR, target_is_directory=True)
    for _attempt in range(2):
        try:
            # atomic; a concurrent run that got there first wins
            os.replace(staging, folder)
            return str(folder)
        except OSError:
            if link.is_symlink() and link.resolve() == RUNTIME_DIR:
                break
            # a stale or broken folder: replace it once
            shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    return str(folder)


def run_reproducer(
    manifest: ShimManifest,
    mode: str,
    *,
    python: str | os.PathLike[str] = sys.executable,
    env: Mapping[str, str] | None = None,
    lane: str = "local",
    timeout: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> ValidationRecord:
    """Run ``manifest``'s reproducer in ``mode`` ("without" or "with") and record what happened.

    ``env`` replaces the inherited environment when given
    (:func:`retire.core.childenv.for_reproducer`:
    never a secret-named variable). ``timeout`` defaults to the
    manifest's ``[reproducer] timeout``; past it the whole process group is killed and the
    outcome is ``timeout``. Environment values are never written into the record.
    """
    mode, limit, child_env = prepare_run(manifest, mode, env, timeout)
    command = [os.fspath(python), os.fspath(manifest.reproducer_path), "--mode", mode]
    started_at = times.now().isoformat(timespec="microseconds")
    began = time.monotonic()
    try:
        # Its own session and a marker its children inherit: a timeout or a stop kills them all.
        process = REAPER.spawn(
            command,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )
    except OSError as exc:
        return _record(
            manifest,
            mode,
            lane,
            started_at,
            began,
            host=None,
            sentinel=None,
            outcome=RunOutcome.CRASHED,
            exit_code=None,
            tail="",
            detail=f"could not start {command[0]}: {exc.strerror or exc}",
        )

    try:
        # a cancelled candidate's interpreter and all it started are killed
        with cancelling.killing(lambda: REAPER.kill(process)):
            stdout_bytes, stderr_bytes, timed_out = _answer(process, limit)
        # stopped (Ctrl-C, SIGTERM) while it ran: a killed run is no result
        REAPER.check()
    finally:
        REAPER.finish(process)
    return finished_run(
        manifest,
        mode,
        lane,
        started_at,
        began,
        stdout_bytes,
        stderr_bytes,
        process.returncode,
        timed_out=timed_out,
        limit=limit,
    )


#: Seconds a reproducer's pipes may stay open after it exited before whatever it left holding
#: them (a ``setsid`` grandchild) is ended: its answer is in what it printed before exiting.
_LINGER_S = 0.5


def _drain(pipe) -> tuple[threading.Thread, bytearray]:
    """A thread reading ``pipe`` to its end into the returned buffer (read while it grows)."""
    buffer = bytearray()

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), 65536):
                buffer.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, buffer


def _answer(process: subprocess.Popen, limit: float) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr, timed out) of a reproducer: taken when *it* exits, not when the last
    process holding its pipes does — what it left running is ended then (its group and every
    process carrying its marker), so a lingering grandchild never turns an answer into a
    timeout. Past ``limit`` the whole tree is killed."""
    readers = [_drain(process.stdout), _drain(process.stderr)]
    timed_out = False
    try:
        process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        # the group, and any grandchild that left it (by its marker)
        REAPER.kill(process)
        process.wait()
    for thread, _ in readers:
        thread.join(_LINGER_S)
    if any(thread.is_alive() for thread, _ in readers):
        # something it started still holds a pipe: end it (its group, which outlives the
        # reaped leader while a member lives, and what carries its marker): the pipe closes
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        REAPER.finish(process)
        for thread, _ in readers:
            # something unmarked holds the pipes: what was read so far is the output
            thread.join(10)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    stdout, stderr = (bytes(buffer) for _, buffer in readers)
    return stdout, stderr, timed_out


def finished_run(
    manifest: ShimManifest,
    mode: str,
    lane: str,
    started_at: str,
    began: float,
    stdout_bytes: bytes,
    stderr_bytes: bytes,
    exit_code: int,
    *,
    timed_out: bool,
    limit: float,
) -> ValidationRecord:
    """The record of a run that ended (or was killed): what any isolation mode hands back.

    ``exit_code`` as :mod:`subprocess` reports it (``-N`` for a signal), ``began`` a
    :func:`time.monotonic` reading from before the run started.
    """
    # Redacted before anything is cut or parsed: a secret must not survive in a tail's first
    # characters, nor in a skip reason.
    stdout = secrets.scrub(stdout_bytes.decode("utf-8", errors="replace"))
    stderr = secrets.scrub(stderr_bytes.decode("utf-8", errors="replace"))
    host, sentinel, skip_reason = parse_output(stdout)
    if timed_out:
        outcome, detail = RunOutcome.TIMEOUT, f"killed after {limit:g} s"
    else:
        outcome, detail = classify(host, sentinel, skip_reason, exit_code)
    tail = _tail(stdout, stderr)
    return _record(
        manifest,
        mode,
        lane,
        started_at,
        began,
        host=host,
        sentinel=sentinel,
        outcome=outcome,
        exit_code=exit_code,
        tail=tail,
        detail=detail,
    )


def classify(
    host: Mapping[str, object] | None,
    sentinel: Sentinel | None,
    skip_reason: str | None,
    exit_code: int,
) -> tuple[RunOutcome, str]:
    """``(outcome, detail)`` for a finished run; anything off-protocol counts as ``crashed``."""
    if sentinel is None:
        return RunOutcome.CRASHED, f"exit code {exit_code} and no single sentinel line"
    expected = exit_code_for(sentinel)
    if exit_code != expected:
        return (
            RunOutcome.CRASHED,
            f"printed {sentinel} but exited {exit_code} (the protocol says {expected})",
        )
    if host is None:
        return RunOutcome.CRASHED, "no PATCHLANE-HOST stamp on the first line"
    return _OUTCOME_OF[sentinel], skip_reason or ""


def prepare_run(
    manifest: ShimManifest, mode: str, env: Mapping[str, str] | None, timeout: float | None
) -> tuple[Mode, float, dict[str, str]]:
    """What a run checks and works out before it starts, in either isolation: the mode (a
    ValueError for anything but "without" or "with"), its time limit (the manifest's unless
    ``timeout`` is given) and its environment (:func:`child_environment`). A reproduce.py linked
    out of its shim folder is refused here, before anything runs it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    reproducer_file(manifest)
    limit = manifest.reproducer.timeout if timeout is None else timeout
    return Mode(mode), limit, child_environment(manifest, env)


def child_environment(manifest: ShimManifest, env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment a reproducer of ``manifest`` runs with: ``env`` (or ours) through the
    allow-list (:func:`retire.core.childenv.for_reproducer`: never a secret-named variable), plus
    the runtime alone on ``PYTHONPATH`` and the manifest's catalogue."""
    child = childenv.for_reproducer(env)
    # The reproducer imports `shims` from this runtime (lane envs also have it installed), and
    # nothing else of the engine's environment.
    child["PYTHONPATH"] = os.pathsep.join(
        p for p in (runtime_path(), child.get("PYTHONPATH", "")) if p
    )
    # The shim's catalogue is named, never implied: activate() in the child finds exactly it.
    root = manifest.directory.resolve().parent
    configured = [p for p in child.get(ROOTS_ENV, "").split(os.pathsep) if p]
    if str(root) not in configured:
        child[ROOTS_ENV] = os.pathsep.join([str(root), *configured])
    # keep partial output if it hangs and is killed
    child.setdefault("PYTHONUNBUFFERED", "1")
    return child


def _tail(stdout: str, stderr: str) -> str:
    text = stdout if not stderr.strip() else f"{stdout.rstrip()}\n--- stderr ---\n{stderr}"
    return text[-OUTPUT_TAIL_CHARS:]


def _record(
    manifest: ShimManifest,
    mode: str,
    lane: str,
    started_at: str,
    began: float,
    *,
    host: Mapping[str, object] | None,
    sentinel: str | None,
    outcome: str,
    exit_code: int | None,
    tail: str,
    detail: str,
) -> ValidationRecord:
    host = dict(host or {})
    # a run that died before its stamp still says which GPUs it was given (the engine set them)
    given = childenv.given_devices()
    if given is not None:
        host.setdefault("visible_devices", given)
    packages = host.get("packages")
    return ValidationRecord(
        shim=manifest.id,
        mode=mode,
        lane=lane,
        host=host,
        versions=dict(packages) if isinstance(packages, dict) else {},
        sentinel=sentinel,
        outcome=outcome,
        exit_code=exit_code,
        duration_s=round(time.monotonic() - began, 3),
        started_at=started_at,
        output_tail=tail,
        detail=detail,
    )


def reproducer_file(manifest: ShimManifest):
    """The reproducer of ``manifest``, checked before anything runs it (any isolation): neither the
    file nor its shim folder may be a symbolic link (:func:`retire.core.project.contained`)."""
    from retire.core.project import contained

    return contained(
        manifest.directory.parent, manifest.reproducer_path.absolute(), key="reproducer.path"
    )
