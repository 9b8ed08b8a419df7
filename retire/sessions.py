"""The patch lane's nox sessions, shared by every shop's ``noxfile.py`` (``patchlane init`` writes
one that imports this module; this repository's adds its own test sessions).

    nox -s lane                      every lane: built from its lock, suites run, then the summary
    nox -s lane summary -j N         lanes N at a time (each in its own nox process), then the table
    nox -s "lane(name='cpu')"        one lane (or: nox -s lane -- cpu)
    nox -s lock [-- --check]         write or check locks/<lane>/pylock.toml
    nox -s lanes                     list the expanded lanes
    nox -s retire [-- --apply]       the weekly retirement report / auto-drop branches
    nox -s bump                      lockfile bump branch (and PR with a token)

Importing a session's name registers it with nox (``from retire.sessions import lane, lock``), for
the project in the folder nox runs the noxfile from: a name the noxfile does not import is not
registered, so a shop's own ``lock`` session keeps its name, and a noxfile that nox loads a second
time (``./noxfile.py -l`` runs it as a script, then nox loads it) registers them again. Every
session is a thin call into the engine (``python -m retire``) in nox's own Python,
where ``pip install "patchlane[engine]"`` put it; lane environments are built by patchlane with uv.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import nox
import nox.registry
from nox._decorators import Func

__all__ = ["ROOT", "RUN_ID", "bump", "lane", "lanes", "lock", "patchlane", "retire", "summary"]

# The sessions, declared for readers and type checkers only: importing one registers it
# (``__getattr__`` at the end).
bump: Func
lane: Func
lanes: Func
lock: Func
retire: Func
summary: Func

#: The project: nox runs a noxfile from its own folder.
ROOT = Path.cwd().resolve()

# No nox.options here: a shop's noxfile keeps its own defaults (which sessions `nox` alone runs, its
# venv backend) when it imports these sessions; patchlane's own sessions need no venv
# (venv_backend="none"), and `patchlane init`'s noxfile sets `nox.options.sessions = ["lane"]`.


def _lane_params() -> tuple[list[nox.param], str | None]:
    """One parameter per lane, tagged gpu/cpu so CI can route it (`nox --list --json`, `nox -t
    cpu`)."""
    from retire.core.errors import InputError
    from retire.core.project import Project
    from retire.lanes.lanefile import load_lanes

    try:
        lanes = load_lanes(Project(ROOT).lanes_dir, root=ROOT)
    # shown by every session instead of a traceback at import
    except InputError as exc:
        return [], str(exc)
    return [nox.param(lane.name, tags=[lane.tag]) for lane in lanes], None


LANES, LANE_ERROR = _lane_params()
# one placeholder, so `nox -s lane` runs, reports the error and fails (not skips)
if LANE_ERROR:
    LANES = [nox.param("", id="invalid-lanes")]
# One id per nox invocation: the lane sessions record under it, the summary reads it back. Put in
# the environment so that `nox -j N`'s session processes (which import the noxfile again) share it.
RUN_ID = os.environ.setdefault("PATCHLANE_RUN_ID", uuid.uuid4().hex[:12])


def patchlane(session: nox.Session, *args: str) -> None:
    """Run ``patchlane --root ROOT ARGS…`` with nox's Python; a missing engine is one line."""
    from retire.commands import missing_engine

    if LANE_ERROR:
        session.error(LANE_ERROR)
    if missing_engine():
        session.error(
            f"patchlane's engine is not installed for nox's Python ({sys.executable}): "
            f"run `{sys.executable} -m pip install 'patchlane[engine]'`"
        )
    session.run(sys.executable, "-m", "retire", "--root", str(ROOT), *args, external=True)


def _problem(posargs: list[str]) -> str:
    """Why `patchlane run` would refuse these arguments on every lane: a lane name that is none,
    a lane file whose shim ids name no shim (one line, as `patchlane run` says it); "" when it
    would not, or cannot tell here."""
    import argparse

    from retire.commands import run
    from retire.core.errors import InputError
    from retire.core.project import Project
    from retire.lanes import lanefile

    if LANE_ERROR:
        return LANE_ERROR
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    run.add_arguments(parser)
    try:
        named = parser.parse_known_intermixed_args(posargs)[0].lanes
        lanefile.select(lanefile.project_lanes(Project(ROOT)), named)
    except (argparse.ArgumentError, SystemExit):
        # a bad option: `patchlane run` says which
        return ""
    except InputError as exc:
        return str(exc)
    return ""


def _lane(session: nox.Session, name: str) -> None:
    """Build one lane from its lock and run its shim suites (`-- NAME…`: only those lanes)."""
    names = {param.args[0] for param in LANES}
    wanted = [arg for arg in session.posargs if arg in names]
    # a lane name that is none, a shim id in a lane file that names no shim: the one line, and
    # nox stops there — no lane session aborted in its name, none skipped "see the error above",
    # no summary asked for (it would say "no lane results")
    problem = _problem(session.posargs)
    if problem:
        _stop(problem)
    if wanted and name not in wanted:
        session.skip(f"not selected ({', '.join(wanted)})")
    # `nox -j N` runs each session in its own process with --no-dependencies, where nox refuses
    # notify(): `nox -s lane summary -j N` names the summary, which runs alone, after the lanes.
    options = [arg for arg in session.posargs if arg not in names]
    try:
        session.notify("summary")
    except ValueError:
        pass
    else:
        # the summary session prints the table once, for every lane of this invocation
        options.append("--no-summary")
    patchlane(session, "run", name, "--run-id", RUN_ID, *options)


def _stop(problem: str) -> NoReturn:
    """Stop nox with one line that is about no lane session (SystemExit passes through nox's
    session runner, which would have reported it as that session's failure)."""
    from nox.logger import logger

    logger.error(f"lane: {problem} (no lane ran)")
    raise SystemExit(1)


def _summary(session: nox.Session) -> None:
    """The lane × shim table of this invocation's lane sessions, printed after them.

    None after an interrupted lane: no summary of a partial run."""
    from retire.core.project import Project

    if Project(ROOT).interrupted_mark(RUN_ID).exists():
        session.skip("a lane was interrupted: no summary of a partial run (run the lanes again)")
    patchlane(session, "summary", "--run-id", RUN_ID)


def _lanes(session: nox.Session) -> None:
    """List the expanded lanes and the state of their locks."""
    patchlane(session, "lanes", *session.posargs)


def _lock(session: nox.Session) -> None:
    """Lock every lane (`-- NAME…`: those); `-- --check` fails on stale locks.

    `--upgrade` and `--upgrade-package NAME` as uv takes them."""
    patchlane(session, "lock", *session.posargs)


def _retire(session: nox.Session) -> None:
    """The weekly retirement report; `-- --apply` proposes one branch per retire verdict."""
    patchlane(session, "retire", *session.posargs)


def _bump(session: nox.Session) -> None:
    """The weekly lock bump: re-lock with upgrades on a branch, and its pull request.

    `-- LANE…`, `--package NAME`, `--cooldown N`; `-- --dry-run` writes nothing."""
    patchlane(session, "bump", *session.posargs)


# name -> the function; only the lanes run by default, and in parallel
_SESSIONS: dict[str, Callable[..., None]] = {
    "lane": nox.parametrize("name", LANES)(_lane),
    "summary": _summary,
    "lanes": _lanes,
    "lock": _lock,
    "retire": _retire,
    "bump": _bump,
}


def __getattr__(name: str) -> Func:
    """``from retire.sessions import NAME`` registers session NAME with nox (again, where nox
    loaded the noxfile anew), and gives it."""
    if name not in _SESSIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    func = _SESSIONS[name]
    registered = nox.registry.get().get(name)
    if registered is not None and registered.func is func:
        return registered
    if name == "lane":
        # `nox` alone runs the lanes, and `nox -s lane -j N` runs them N at a time
        return nox.session(name=name, venv_backend="none", allow_parallel=True)(func)
    return nox.session(name=name, venv_backend="none", default=False)(func)
