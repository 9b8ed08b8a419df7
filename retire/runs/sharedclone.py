"""One working clone per commit runner: each candidate commit checked out in it, its wheel built
there once and kept (:mod:`retire.runs.wheelcache`).

A bisection over the commits between two tags used to start every candidate afresh: uv fetched
the mirror into its own git cache and built ``<dist> @ git+file://<mirror>@<commit>``, or a named
build cloned the mirror into the candidate's folder. A :class:`SharedClone` makes one clone of the
mirror (``git clone --shared``: no object copied, the mirror only read) and moves it from
candidate to candidate: ``git checkout --force --detach <sha>``, then ``git clean -fdx`` (the
previous build's outputs, ignored files included, never reach the next). The commit is resolved to
its full sha first (``rev-parse --end-of-options``), so no value reaches ``checkout`` as an
option.

:meth:`SharedClone.wheel_for` is the candidate's wheel: the one kept for (repository, commit,
build, subdirectory), else built in the clone — by uv or by the shim's named build
(:func:`retire.runs.wheelbuild.build_wheel`) — kept, and returned; it says each build's progress
through ``say`` (its start, how long it has run every :data:`TICK_S` seconds, its end). uv builds
in one warm build environment per clone (``build-env`` beside it, ``uv build
--no-build-isolation``): the commit's ``[build-system] requires`` installed once, the environment
made again from nothing whenever they change (so no package of another commit's build can reach
this one), uv's isolated build where they cannot be read. One clone serves one candidate at a
time, and every range of one bisection: the commit runner
(:class:`retire.bisect.revision.RevisionRunner`) keeps one, and candidates run side by side
(``bisect -j``) take a runner, so a clone, each.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

from retire.core.git import Git, GitError
from retire.mirrors.packagetree import missing_files
from retire.runs import envs
from retire.runs.wheelbuild import WheelBuildError, build_wheel, check_out, package_folder
from retire.runs.wheelcache import WheelCache, WheelKey
from shims.wheelbuild import WheelBuild

__all__ = ["TICK_S", "SharedClone", "build_description", "build_requires"]

#: How often a build in progress says how long it has run: a commit's build takes seconds to
#: minutes, and a bisection must not look hung meanwhile.
TICK_S = 15.0


def build_description(build: WheelBuild | None, environment: str = "") -> str:
    """The build part of a wheel's key: uv's build or the named command (by its digest), and the
    interpreter the wheel is for (``environment``: a base environment's fingerprint)."""
    if build is None:
        how = "uv-build"
    else:
        named = json.dumps(list(build.command)).encode()
        how = f"named:{hashlib.sha256(named).hexdigest()[:16]}"
    return f"{how}|{environment}" if environment else how


class SharedClone:
    """The candidates of one range, checked out in turn in ``folder`` (a clone of ``mirror``,
    made on first use) and built for the interpreter ``python``; ``repository`` names the mirror
    in the wheels' keys, ``subdirectory`` is where the package's build file is; ``cache`` keeps
    the wheels (None: built every time); ``environment`` (a base environment's fingerprint) and
    ``index_url`` (where uv finds a build's requirements) as the runner's; ``logs``: where a
    failed named build's log stays (default: beside the clone)."""

    def __init__(
        self,
        mirror: Path,
        folder: Path,
        *,
        repository: str,
        python: Path,
        distribution: str,
        subdirectory: str | None = None,
        cache: WheelCache | None = None,
        environment: str = "",
        index_url: str | None = None,
        logs: Path | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.mirror, self.folder = Path(mirror), Path(folder)
        self.repository, self.python, self.distribution = repository, Path(python), distribution
        self.subdirectory, self.cache, self.environment = subdirectory, cache, environment
        self.index_url = index_url
        # where a failed named build's log stays (named in its error)
        self.logs = Path(logs) if logs is not None else self.folder.parent
        self.say = say or (lambda line: None)
        #: how often a build in progress says how long it has run (seconds)
        self.tick = TICK_S
        self.at: str | None = None
        self.builds = 0
        # the build requirements installed in the range's build environment
        self._requires: tuple[str, ...] | None = None
        # whether the last checkout left a damaged mirror's files out
        self._sparse = False

    def _git(self) -> Git:
        return Git(self.folder, search_parents=False)

    def resolve(self, commit: str) -> str:
        """``commit``'s full sha in the mirror (read after ``--end-of-options``: never an
        option); a :class:`WheelBuildError` when there is none."""
        try:
            sha = Git(self.mirror, search_parents=False).rev_parse(f"{commit}^{{commit}}")
        except GitError:
            sha = None
        if sha is None:
            raise WheelBuildError(f"no commit {commit[:40]!r} in {self.mirror}")
        return sha

    def checkout(self, commit: str) -> Path:
        """The tree at ``commit`` in the clone, nothing else in it; the package's folder."""
        return self._checkout(self.resolve(commit))

    def _checkout(self, sha: str) -> Path:
        if not (self.folder / ".git").exists():
            try:
                Git(self.mirror, search_parents=False).run(
                    "clone", "--quiet", "--shared", "--no-checkout", "--",
                    os.fspath(self.mirror), os.fspath(self.folder),
                )  # fmt: skip
            except GitError as exc:
                raise WheelBuildError(f"cannot clone {self.mirror}: {exc}") from None
        try:
            missing = missing_files(Git(self.mirror, search_parents=False), sha, self.subdirectory)
            if missing.needed:
                raise WheelBuildError(missing.why_not(sha))
            self._move(sha, missing.left_out)
        except GitError as exc:
            raise WheelBuildError(
                f"cannot check out {sha[:12]} from {self.mirror}: {exc}"
            ) from None
        if missing:
            self.say(f"{sha[:7]}: {missing.says}")
        self.at = sha
        return self._package()

    def _move(self, sha: str, left_out: tuple[str, ...]) -> None:
        """The clone's tree made ``sha``'s (:func:`retire.runs.wheelbuild.check_out`: a damaged
        mirror's missing files, none of them read by the build, left out), after a checkout that
        left files out from a fresh index too; nothing a build left behind stays."""
        git = self._git()
        check_out(git, sha, left_out, from_tree=self._sparse)
        git.run("clean", "--quiet", "-fdx")
        self._sparse = bool(left_out)

    def _package(self) -> Path:
        return package_folder(self.folder, self.subdirectory, self.at or "")

    def key(self, commit: str, build: WheelBuild | None) -> WheelKey:
        return WheelKey(
            self.repository,
            commit,
            build_description(build, self.environment),
            self.subdirectory or "",
        )

    def cached(self, commit: str, build: WheelBuild | None = None) -> Path | None:
        """The wheel kept for ``commit`` (a full sha) and ``build``, or None."""
        return self.cache.get(self.key(commit, build)) if self.cache is not None else None

    def wheel_for(self, commit: str, build: WheelBuild | None = None, *, label: str = "") -> Path:
        """The wheel of the package at ``commit``: kept from before, else built in the clone
        (uv's build, or ``build``) and kept. A :class:`WheelBuildError` when it cannot be built
        (the log's tail in the message). ``label`` (``(2 of ~6)``) follows the commit in what it
        says: the build's start, every :attr:`tick` seconds while it runs, and its end."""
        sha = self.resolve(commit)
        at = f"{self.distribution} at {sha[:7]}" + (f" {label}" if label else "")
        if (hit := self.cached(sha, build)) is not None:
            self.say(f"{at}: the wheel built before")
            return hit
        source = self._checkout(sha)
        began = time.monotonic()
        out = Path(tempfile.mkdtemp(prefix=f"wheel-{sha[:12]}-", dir=self.folder.parent))
        try:
            with _ticking(self.say, f"building {at}…", self.tick):
                wheel = self._build(source, out, sha, build)
        except WheelBuildError:
            # a failed build's log (named in the error) is beside the folder, not in it
            shutil.rmtree(out, ignore_errors=True)
            raise
        self.builds += 1
        self.say(f"built {at} in {time.monotonic() - began:.1f} s")
        kept = self.cache.put(self.key(sha, build), wheel) if self.cache is not None else None
        if kept is None:
            return wheel
        shutil.rmtree(out, ignore_errors=True)
        return kept

    def _build(self, source: Path, out: Path, sha: str, build: WheelBuild | None) -> Path:
        if build is not None:
            # a file of its own (never a name another process could have put there first)
            handle, name = tempfile.mkstemp(
                prefix=f"build-{sha[:12]}-", suffix=".log", dir=self.logs
            )
            os.close(handle)
            log = Path(name)
            built = build_wheel(
                build, source, out, log, python=self.python, commit=sha,
                distribution=self.distribution,
            )  # fmt: skip
            log.unlink(missing_ok=True)
            return built.wheel
        return self._uv_build(source, out, sha)

    def _uv_build(self, source: Path, out: Path, sha: str) -> Path:
        """uv's build of ``source``: in the range's warm build environment where its build
        requirements are known, else in an isolated one of uv's own."""
        index = ["--default-index", self.index_url] if self.index_url else []
        warm = self._warm(source, index)
        if warm is not None:
            how = ["--no-build-isolation", "--python", os.fspath(warm)]
        else:
            how = ["--python", os.fspath(self.python), *index]
        args = ["build", "--wheel", "--quiet", *how, "--out-dir", os.fspath(out), os.fspath(source)]
        try:
            envs.run_uv(args, "uv build")
        except envs.BuildError as exc:
            raise WheelBuildError(
                f"cannot build {self.distribution} at {sha[:12]}: {exc}", exc.detail
            ) from None
        wheels = sorted(out.glob("*.whl"))
        if len(wheels) != 1:
            raise WheelBuildError(f"uv build wrote {len(wheels)} wheels at {sha[:12]}")
        return wheels[0]

    def _warm(self, source: Path, index: list[str]) -> Path | None:
        """The range's build environment with ``source``'s build requirements, made again (from
        nothing: no package of another commit's build stays) when they change; None where they
        cannot be read or installed."""
        requires = build_requires(source)
        if requires is None:
            return None
        folder = self.folder.parent / "build-env"
        python = folder / "bin" / "python"
        if requires == self._requires and python.exists():
            return python
        self._requires = None
        try:
            envs.run_uv(
                ["venv", "--quiet", "--clear", "--python", os.fspath(self.python), str(folder)],
                "cannot create the build environment",
            )
            if requires:
                install = ["pip", "install", "--quiet", "--python", str(python), *index]
                envs.run_uv([*install, *requires], "cannot install the build requirements")
        except envs.BuildError as exc:
            self.say(f"building in uv's own isolated environments: {exc}")
            return None
        self._requires = requires
        return python


def build_requires(source: Path) -> tuple[str, ...] | None:
    """``source``'s build requirements (``[build-system] requires``; setuptools for a
    ``setup.py`` without one, as PEP 517 says), or None when they cannot be told."""
    try:
        with open(source / "pyproject.toml", "rb") as handle:
            system = tomllib.load(handle).get("build-system")
    except FileNotFoundError:
        system = None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    if system is None:
        return ("setuptools>=40.8.0",) if (source / "setup.py").is_file() else None
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        return None
    return tuple(requires)


@contextlib.contextmanager
def _ticking(say: Callable[[str], None], line: str, every: float) -> Iterator[None]:
    """``line`` said now, then again with the seconds since every ``every`` seconds until the
    block ends (``building toylib at 9ac26bb (2 of ~6)… 15 s``)."""
    say(line)
    began = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(every):
            say(f"{line} {time.monotonic() - began:.0f} s")

    ticker = threading.Thread(target=tick, name="patchlane-build-ticker", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
