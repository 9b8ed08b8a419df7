"""Run reproducers as forks of one lane interpreter that imported the heavy stack once.

``--isolation process`` (:func:`retire.runs.reproduce.run_reproducer`) starts one interpreter
per run and pays ``import torch, megatron.core`` every time. A :class:`Launcher` starts
``<lane python> -m shims.launcher --preload …`` once (the fork server in ``shims/launcher.py``,
standard library only, so it runs in any lane env) and asks it for each run; every run is a
fresh fork, so a crash, a patch or a leaked global never reaches the next one. What a run
printed becomes the same :class:`~retire.evidence.validation.ValidationRecord` as in process
isolation (:func:`retire.runs.reproduce.finished_run`), timeouts included.

If the launcher cannot start, refuses (its imports initialised CUDA) or dies, the remaining runs
fall back to process isolation and :attr:`Launcher.fallback` says why; a run the launcher was
in the middle of is run again in a fresh interpreter.

A run the launcher cannot make faithful runs in a fresh interpreter too, with a note
(:attr:`Launcher.notes`): a reproducer whose folder holds a module named like one the launcher
imported (``toylib.py`` beside ``reproduce.py`` while the launcher holds ``toylib``). In a fresh
interpreter the script's folder comes first on ``sys.path`` and that file is what ``import toylib``
gets; in a fork the launcher's module is already in ``sys.modules``, so the same reproducer would
see another module — and could report another outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Self

from retire.core import tooltext
from retire.evidence.validation import ValidationRecord
from retire.runs import cancelling
from retire.runs.isolation import ISOLATIONS, Isolation
from retire.runs.reaper import REAPER, TOKEN_ENV
from retire.runs.reproduce import (
    finished_run,
    prepare_run,
    reproducer_file,
    run_reproducer,
    runtime_path,
)
from shims import times
from shims.forked import kill_group
from shims.model import ShimManifest

__all__ = [
    "ISOLATIONS",
    "PROTOCOL_MODULES",
    "Isolation",
    "Launcher",
    "common_environment",
    "preload_of",
    "shadowing",
]


#: What every reproducer imports (the protocol's own module, its argument parser, and the module
#: that starts a run's own Python children through the launcher): always preloaded.
PROTOCOL_MODULES = ("shims.reproducer", "argparse", "shims.child")
#: How long the launcher may take to import its preloads and say it is ready.
READY_TIMEOUT_S = 600.0
#: How long past a run's own timeout the launcher may take to answer before it counts as dead.
_GRACE_S = 30.0


class _LauncherDiedError(Exception):
    """The launcher stopped answering (exited, closed its pipe, or hung)."""


def preload_of(manifests: Iterable[ShimManifest]) -> tuple[str, ...]:
    """What a launcher for these shims imports: their reproducers' ``preload`` lists, in order."""
    return tuple(
        dict.fromkeys(module for manifest in manifests for module in manifest.reproducer.preload)
    )


#: What a file or folder beside a reproducer is imported as (``name.py``, ``name.cpython-311-….so``,
#: a package ``name/__init__.py``): the part before the first dot of a module file's name.
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def shadowing(folder: Path, modules: Iterable[str]) -> list[str]:
    """The names in ``modules`` (top-level modules a launcher imported) that a module file or
    package in ``folder`` (a reproducer's, first on ``sys.path`` in a fresh interpreter) would
    shadow."""
    held = set(modules)
    found: set[str] = set()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for entry in entries:
        name = entry.name.partition(".")[0]
        if name not in held:
            continue
        module_file = entry.name.endswith(_MODULE_SUFFIXES) and entry.is_file()
        if module_file or (entry / "__init__.py").is_file():
            found.add(name)
    return sorted(found)


def common_environment(environments: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The variables every one of ``environments`` has with the same value: the launcher's own
    environment, so its imports see nothing that only some runs would."""
    environments = list(environments)
    if not environments:
        return {}
    first, rest = environments[0], environments[1:]
    return {
        name: value
        for name, value in first.items()
        if all(other.get(name) == value for other in rest)
    }


class Launcher:
    """One lane's fork server; :meth:`run` never raises for a launcher failure (it falls back).

    ``env`` is the launcher's environment (see :func:`common_environment`); each run gets its own
    in full. ``targets`` are the lanes' shim target modules: the launcher reports which of them
    its preloads imported (:attr:`targets_loaded`; a with-shim run patches those after import).
    """

    def __init__(
        self,
        python: str | os.PathLike[str],
        preload: Iterable[str],
        env: Mapping[str, str],
        *,
        targets: Iterable[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        say: Callable[[str], None] = lambda message: None,
        ready_timeout: float = READY_TIMEOUT_S,
    ) -> None:
        self.python = os.fspath(python)
        self.preload = tuple(dict.fromkeys((*PROTOCOL_MODULES, *preload)))
        self.say = say
        self.fallback: str | None = None
        self.preloaded: tuple[str, ...] = ()
        self.failed: dict[str, str] = {}
        self.targets_loaded: tuple[str, ...] = ()
        # top-level modules the launcher holds (a module file beside a reproducer cannot shadow
        # them in a fork)
        self.modules: frozenset[str] = frozenset()
        # runs that went to a fresh interpreter, and why (one line per shim)
        self.notes: dict[str, str] = {}
        self.threads = 0
        self.startup_s = 0.0
        self.runs = 0
        self._dir = Path(tempfile.mkdtemp(prefix="patchlane-launcher-"))
        self._buffer = b""
        self._next_id = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._marker: str | None = None
        env = dict(env)
        # The runtime alone (``shims.launcher`` is part of it), as a reproducer gets it.
        env["PYTHONPATH"] = os.pathsep.join(
            dict.fromkeys(
                p for p in (runtime_path(), *env.get("PYTHONPATH", "").split(os.pathsep)) if p
            )
        )
        command = [
            self.python,
            "-m",
            "shims.launcher",
            "--preload",
            ",".join(self.preload),
            "--targets",
            ",".join(dict.fromkeys(targets)),
        ]
        began = time.monotonic()
        try:
            with open(self._dir / "launcher.err", "wb") as errors:
                # Marked like a reproducer: every fork inherits the marker, so a stop, a timeout or
                # this process's death reaches the launcher and all its children
                # (retire.runs.reaper).
                self._process = REAPER.spawn(
                    command,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    cwd=os.fspath(cwd) if cwd is not None else None,
                )
        except OSError as exc:
            self.fall_back(f"the launcher could not start ({exc.strerror or exc})")
            return
        try:
            ready = self._read(began + ready_timeout)
        except _LauncherDiedError as exc:
            self.fall_back(f"the launcher did not start: {exc}")
            return
        if not ready.get("ready"):
            self.fall_back(f"the launcher refused: {ready.get('error', 'no reason given')}")
            return
        # Each run's environment carries the launcher's marker, as a spawned reproducer's does: a
        # fresh interpreter a run starts inherits it, so a stop finds that one too.
        self._marker = REAPER.marker(self._process)
        self._learn(ready)
        self.startup_s = time.monotonic() - began

    def _learn(self, ready: dict) -> None:
        """What the launcher's ready message says it holds."""
        self.preloaded = tuple(ready.get("preloaded", ()))
        self.failed = dict(ready.get("failed", {}))
        self.targets_loaded = tuple(ready.get("targets_loaded", ()))
        self.modules = frozenset(ready.get("modules", ()))
        # native threads at fork time (only the forking one survives)
        self.threads = int(ready.get("threads") or 0)

    @property
    def alive(self) -> bool:
        return self.fallback is None

    def run(
        self,
        manifest: ShimManifest,
        mode: str,
        *,
        env: Mapping[str, str] | None = None,
        lane: str = "local",
        timeout: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
        sys_path_first: Iterable[str] = (),
        python: str | os.PathLike[str] | None = None,
    ) -> ValidationRecord:
        """Run ``manifest``'s reproducer in ``mode`` as a fork; the same record as process
        isolation.

        ``sys_path_first``: site folders the run imports from before the launcher's own (a
        bisection candidate); the process fallback then runs ``python`` (the candidate's venv).
        """
        fallback_python = python if python is not None else self.python
        if self.fallback is not None or self._unfaithful(manifest):
            return run_reproducer(
                manifest, mode, python=fallback_python, env=env, lane=lane, timeout=timeout, cwd=cwd
            )
        mode, limit, child_env = prepare_run(manifest, mode, env, timeout)
        self._next_id += 1
        number = self._next_id
        out, err = self._dir / f"{number}.out", self._dir / f"{number}.err"
        run_env = child_env if self._marker is None else {**child_env, TOKEN_ENV: self._marker}
        request = {
            "id": number,
            "path": os.fspath(reproducer_file(manifest).resolve()),
            "args": ["--mode", str(mode)],
            "env": run_env,
            "cwd": os.fspath(Path(cwd).resolve()) if cwd is not None else os.getcwd(),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": limit,
            "sys_path_first": [os.fspath(p) for p in sys_path_first],
        }
        started_at = times.now().isoformat(timespec="microseconds")
        began = time.monotonic()
        pid = None
        try:
            self._send(request)
            pid = self._read(began + 60.0).get("pid")
            # a cancelled candidate's fork (and its group) is killed; the launcher serves on
            with cancelling.killing(lambda: kill_group(pid)):
                done = self._read(began + limit + _GRACE_S)
        except _LauncherDiedError as exc:
            kill_group(pid)
            # stopped (Ctrl-C, SIGTERM): the stop killed it, which is no reason to fall back
            REAPER.check()
            self.fall_back(f"the launcher died during {manifest.id} {mode} ({exc})")
            return run_reproducer(
                manifest, mode, python=fallback_python, env=env, lane=lane, timeout=timeout, cwd=cwd
            )
        # Ctrl-C: nothing this launcher started outlives us
        except BaseException:
            kill_group(pid)
            self.close()
            raise
        self.runs += 1
        try:
            stdout, stderr = out.read_bytes(), err.read_bytes()
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)
        return finished_run(
            manifest,
            mode,
            lane,
            started_at,
            began,
            stdout,
            stderr,
            done["exit"],
            timed_out=bool(done.get("timed_out")),
            limit=limit,
        )

    def _unfaithful(self, manifest: ShimManifest) -> bool:
        """Whether a fork cannot run ``manifest``'s reproducer as a fresh interpreter would (a
        module beside it shadows one the launcher imported); says so once per shim."""
        shadowed = shadowing(reproducer_file(manifest).parent, self.modules)
        if shadowed and manifest.id not in self.notes:
            self.notes[manifest.id] = (
                f"{manifest.id} runs in a fresh interpreter: its folder has "
                f"{', '.join(shadowed)}, which the launcher imported (a fork would not see the "
                "folder's own)"
            )
            self.say(self.notes[manifest.id])
        return bool(shadowed)

    def close(self) -> None:
        """Stop the launcher (closing its stdin ends it) and remove its scratch files."""
        process, self._process = self._process, None
        if process is not None:
            try:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                # REAPER.finish kills it
                pass
            if process.stdout is not None:
                process.stdout.close()
            # it, and whatever a child left running, in its session or out of it
            REAPER.finish(process)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fall_back(self, why: str) -> None:
        """Stop serving: the remaining runs use one interpreter each and :attr:`fallback` says why
        (with the launcher's last line of stderr, if it printed one)."""
        errors = self._stderr_tail()
        self.fallback = why + (f"; its stderr ends: {errors}" if errors else "")
        self.say(
            f"{self.fallback}; the remaining runs use one interpreter each (--isolation process)"
        )
        process, self._process = self._process, None
        if process is not None:
            # its group and what it left carrying its marker; no longer tracked
            REAPER.finish(process)
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()

    # -----------------------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        try:
            text = (self._dir / "launcher.err").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = tooltext.lines(text)
        return lines[-1][:300] if lines else ""

    def _send(self, message: dict) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise _LauncherDiedError("not running")
        try:
            process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _LauncherDiedError(f"its pipe is closed ({exc})") from None

    def _read(self, deadline: float) -> dict:
        """The launcher's next reply, or :class:`_LauncherDiedError` when it exits or stays silent
        past ``deadline``."""
        process = self._process
        if process is None or process.stdout is None:
            raise _LauncherDiedError("not running")
        fd = process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _LauncherDiedError("no answer in time")
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    code = process.poll()
                    raise _LauncherDiedError(
                        "it exited" + (f" with {code}" if code is not None else "")
                    )
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            raise _LauncherDiedError(f"it answered {line[:80]!r}") from None
        if not isinstance(reply, dict):
            raise _LauncherDiedError(f"it answered {line[:80]!r}")
        return reply
