"""patchlane's front door. Each session is a thin call into the engine (`patchlane`, retire.cli).

    nox -s lane                      every lane: build from its lock, run its shim suites
    nox -s "lane(name='cpu')"        one lane (or: nox -s lane -- cpu)
    nox -s lock [-- --check]         write or check locks/<lane>/pylock.toml
    nox -s lanes                     list the expanded lanes
    nox -s retire [-- --apply]       the weekly retirement report / auto-drop branches
    nox -s bump                      lockfile bump branch (and PR with a token)
    nox -s tests / nox -s bench      the project's own tests and benchmarks

Engine sessions run in nox's own Python, where `pip install -e ".[engine]"` put patchlane (the
engine extra brings nox); the lane environments themselves are built by patchlane with uv. Tests
and benchmarks get a clean virtualenv of their own.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # lanes are read with retire.lanefile (stdlib + packaging only)

nox.options.sessions = ["lane"]
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"


def _lane_params() -> tuple[list[nox.Param], str | None]:
    """One parameter per lane, tagged gpu/cpu so CI can route it (`nox --list --json`)."""
    from retire.core.errors import ConfigError
    from retire.lanes.lanefile import load_lanes

    try:
        lanes = load_lanes(ROOT / "lanes", root=ROOT)
    except ConfigError as exc:  # shown by every session instead of a traceback at import
        return [], str(exc)
    return [nox.param(lane.name, tags=["gpu" if lane.needs_cuda else "cpu"]) for lane in lanes], None


LANES, LANE_ERROR = _lane_params()
if LANE_ERROR:  # one placeholder, so `nox -s lane` runs, reports the error and fails (not skips)
    LANES = [nox.param("", id="invalid-lanes")]
# One id per nox invocation: the lane sessions record under it, the summary reads it back.
RUN_ID = os.environ.get("PATCHLANE_RUN_ID") or uuid.uuid4().hex[:12]


def patchlane(session: nox.Session, *args: str) -> None:
    if LANE_ERROR:
        session.error(LANE_ERROR)
    missing = [m for m in ("uv", "tomlkit", "httpx") if importlib.util.find_spec(m) is None]
    if missing:
        session.error(f"patchlane's engine is not installed for nox's Python ({sys.executable}): "
                      f"run `{sys.executable} -m pip install -e '.[engine]'`")
    session.run(sys.executable, "-m", "retire", "--root", str(ROOT), *args, external=True)


@nox.session(venv_backend="none", allow_parallel=True)
@nox.parametrize("name", LANES)
def lane(session: nox.Session, name: str) -> None:
    """Build one lane from its lock and run its shim suites (`-- NAME…` keeps only those lanes)."""
    names = {param.args[0] for param in LANES}
    wanted = [arg for arg in session.posargs if arg in names]
    if wanted and name not in wanted:
        session.skip(f"not selected ({', '.join(wanted)})")
    session.notify("summary")
    options = [arg for arg in session.posargs if arg not in names]  # e.g. --overlay PY, --manifest F
    patchlane(session, "run", name, "--run-id", RUN_ID, *options)


@nox.session(venv_backend="none", default=False)
def summary(session: nox.Session) -> None:
    """The lane × shim table of this invocation's lane sessions (run after them)."""
    patchlane(session, "summary", "--run-id", RUN_ID)


@nox.session(venv_backend="none")
def lanes(session: nox.Session) -> None:
    """List the expanded lanes and the state of their locks."""
    patchlane(session, "lanes", *session.posargs)


@nox.session(venv_backend="none")
def lock(session: nox.Session) -> None:
    """Lock every lane (or `-- NAME…`); `-- --check` fails on stale locks; `--upgrade[-package]`."""
    patchlane(session, "lock", *session.posargs)


@nox.session(venv_backend="none", default=False)
def retire(session: nox.Session) -> None:
    """The weekly retirement report; `-- --apply` proposes one branch per retire verdict."""
    patchlane(session, "retire", *session.posargs)


@nox.session(venv_backend="none", default=False)
def bump(session: nox.Session) -> None:
    """Lockfile bump: re-lock with upgrades on a branch (`-- LANE…`, `--package NAME`, `--cooldown N`)."""
    patchlane(session, "bump", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The project's test suite, in a fresh environment."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python="3.12", default=False)
def catalogue(session: nox.Session) -> None:
    """The catalogue's tests on the real stack: the `cpu` lane's lock (torch, Megatron-Core) + pytest."""
    from retire.core import uv

    session.run_install(uv.binary(), "pip", "sync", "--preview-features", "pylock", "--python", session.virtualenv.location,
                        "locks/cpu/pylock.toml", external=True)
    session.install("--no-deps", "-e", ".")
    session.install("pytest")
    session.run("pytest", "tests/test_catalogue.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: ratios measured side by side in one run (see README, Performance)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "bench", *session.posargs)
