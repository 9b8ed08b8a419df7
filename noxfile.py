"""patchlane's front door: the patch lane's sessions (retire/sessions.py, the same ones every shop's
noxfile imports) and this repository's own tests and benchmarks.

    nox -s lane                      every lane: build from its lock, run its shim suites
    nox -s "lane(name='cpu')"        one lane (or: nox -s lane -- cpu)
    nox -s lane summary -j N         lanes N at a time, then the lane × shim table
    nox -s lock [-- --check]         write or check locks/<lane>/pylock.toml
    nox -s lanes                     list the expanded lanes
    nox -s retire [-- --apply]       the weekly retirement report / auto-drop branches
    nox -s bump                      lockfile bump branch (and PR with a token)
    nox -s lint                      ruff, mypy and the code's shape (docs/architecture.md)
    nox -s tests / nox -s bench      the project's own tests and benchmarks
    nox -s tests -- -m "not slow"    the fast tier, for every change (about 60 s on 2 busy cores)

Engine sessions run in nox's own Python, where `pip install -e ".[engine]"` put patchlane (the
engine extra brings nox); the lane environments themselves are built by patchlane with uv. Tests
and benchmarks get a clean virtualenv of their own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# this checkout's engine, whatever else is installed
sys.path.insert(0, str(ROOT))

# imported to register them with nox, after sys.path names this checkout's engine
from retire.sessions import bump, lane, lanes, lock, retire, summary  # noqa: E402,F401

# `nox` alone runs the lanes; tests and benchmarks get uv's virtualenvs, reused between runs.
nox.options.sessions = ["lane"]
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"


@nox.session
def lint(session: nox.Session) -> None:
    """The gate every change passes: ruff's rules and format, mypy, and the code's shape."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/test_architecture.py")


@nox.session
def tests(session: nox.Session) -> None:
    """The project's test suite, in a fresh environment."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python="3.12", default=False)
def catalogue(session: nox.Session) -> None:
    """The catalogue's tests on the real stack: the `cpu` lane's lock (torch, Megatron-Core) +
    pytest."""
    from retire.core import uv

    session.run_install(
        uv.binary(),
        "pip",
        "sync",
        "--preview-features",
        "pylock",
        "--python",
        session.virtualenv.location,
        "locks/cpu/pylock.toml",
        external=True,
    )
    session.install("--no-deps", "-e", ".")
    session.install("pytest")
    session.run("pytest", "tests/test_catalogue.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: ratios measured side by side in one run (see README, Performance)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "bench", *session.posargs)
