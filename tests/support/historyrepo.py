"""A toy upstream whose history holds a bug's *window*: a pure-Python ``toylib`` in a real git
repository, built by uv from any commit (an in-tree PEP 517 backend, no network), its releases
tagged ``vX.Y`` and built as wheels for a loopback index from the same tree.

    1.0 1.1 1.2 | 1.3 1.4 1.5 | 1.6 1.7 1.8
    clean       | broken      | clean

add() breaks in a commit in the middle of 1.2..1.3 ("Rework add() (#33)") and is fixed by one in
the middle of 1.5..1.6 ("Fix add() (#63)"); with ``merges``, the fix lands on a branch merged by
a merge commit that names no pull request, and ``refs/pull/63/head`` says which one it was. With
``compiled``, the tree carries a C source (a compiled extension: not built from source cheaply).
With ``setuptools``, the package names setuptools as its build backend instead of its in-tree one
(an index that serves no setuptools cannot build any commit).

With ``quiet``, the commits that only tidy change ``docs/notes.md``, never the package: only the
breaking, the fixing and the release commits touch ``toylib/`` (what the informed commit search,
:mod:`retire.bisect.informed`, searches first).

``per_release`` commits come before each release's own commit (4: a range of five commits between
two tags) and the breaking and fixing commits are the ``at``-th of them (2: the middle). A search
that never tries the first commit after a tag, or cannot handle a range of two commits, passes
the middle case: ``at=0`` puts both changes first after their tags, ``per_release=1`` makes every
range two commits (the change and the release).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retire.mirrors.config import Mirror
from retire.mirrors.repo import MirrorRepo, open_mirror
from tests.support.gitrepos import git
from tests.support.index import PackageIndex
from tests.support.wheels import build_wheel

if TYPE_CHECKING:
    from retire.bisect.prober import Progress
    from retire.bisect.transitions import Source
    from retire.bisect.windowresult import WindowResult
    from shims.model import ShimManifest

RELEASES = [f"1.{i}" for i in range(9)]
INTRODUCED, FIXED = "1.3", "1.6"

_BACKEND = """
import base64, hashlib, os, zipfile

NAME = "toylib"


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = open("VERSION").read().strip()
    info = f"{NAME}-{version}.dist-info"
    files = {
        f"{NAME}/__init__.py": open(os.path.join(NAME, "__init__.py"), "rb").read(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {version}\\n".encode()
        ),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\\nGenerator: toy\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        ),
    }
    record = [f"{p},sha256={_digest(d)},{len(d)}" for p, d in files.items()]
    files[f"{info}/RECORD"] = ("\\n".join(record + [f"{info}/RECORD,,"]) + "\\n").encode()
    name = f"{NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return name
"""
_PYPROJECT = """[build-system]
requires = []
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "toylib"
dynamic = ["version"]
"""
#: the same package built by setuptools, which the loopback indexes never serve
_SETUPTOOLS_PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "toylib"
dynamic = ["version"]

[tool.setuptools.dynamic]
version = {file = "VERSION"}
"""
_SOURCE = '__version__ = "{version}"\n{extra}\n\ndef add(a, b):\n    return a {op} b\n'


@dataclass
class WindowRepo:
    path: Path
    # the commit that broke add(), and the one that fixed it (a merge's, with ``merges``)
    introduced: str = ""
    fixed: str = ""
    # the commit on the fix branch (``merges``)
    fix_branch_tip: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    def between(self, old: str, new: str) -> list[str]:
        """The first-parent commits after release ``old``'s tag up to ``new``'s, oldest first:
        git's own answer, for a test to set the engine's against."""
        return git(self.path, "rev-list", "--first-parent", "--reverse", f"v{old}..v{new}").split()

    def around_fix(self) -> tuple[str, str, str]:
        """(the commit before the fix, the fix, the commit after it) on the first-parent line of
        the fixed release's range (1.5..1.6)."""
        commits = self.between(RELEASES[RELEASES.index(FIXED) - 1], FIXED)
        at = commits.index(self.fixed)
        return commits[at - 1], commits[at], commits[at + 1]


class _Writer:
    """Commits to the toy repository, keeping the state of add() and the version."""

    def __init__(self, path: Path, quiet: bool = False) -> None:
        self.path, self.op, self.version, self.extra, self.n = path, "+", "1.0", "", 0
        self.quiet = quiet

    def commit(self, subject: str, *, op: str | None = None, version: str | None = None) -> str:
        self.n += 1
        if self.quiet and op is None and version is None and self.n > 1:
            # a tidy commit that leaves the package alone
            (self.path / "docs").mkdir(exist_ok=True)
            (self.path / "docs" / "notes.md").write_text(f"change {self.n}\n")
            git(self.path, "add", "-A")
            git(self.path, "commit", "-q", "-m", subject, when=f"2026-01-01T{self._at()}Z")
            return git(self.path, "rev-parse", "HEAD")
        self.op = op or self.op
        self.version = version or self.version
        self.extra = f"# change {self.n}"
        (self.path / "VERSION").write_text(self.version + "\n")
        (self.path / "toylib" / "__init__.py").write_text(
            _SOURCE.format(version=self.version, extra=self.extra, op=self.op)
        )
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", subject, when=f"2026-01-01T{self._at()}Z")
        return git(self.path, "rev-parse", "HEAD")

    def _at(self) -> str:
        """The commit's time of day: a minute apart each."""
        return f"{self.n // 60:02d}:{self.n % 60:02d}:00"


def make_window_repo(
    path: Path,
    *,
    merges: bool = False,
    compiled: bool = False,
    released: bool = True,
    setuptools: bool = False,
    at: int = 2,
    per_release: int = 4,
    quiet: bool = False,
) -> WindowRepo:
    """The toy upstream; with ``released`` False the fix is in no release: it lands on main after
    the last tag, between two other commits. ``at`` and ``per_release``: where in its range each
    change lands (the module's docstring)."""
    assert 0 <= at < per_release
    (path / "toylib").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if setuptools:
        (path / "pyproject.toml").write_text(_SETUPTOOLS_PYPROJECT)
    else:
        (path / "_build").mkdir()
        (path / "_build" / "backend.py").write_text(_BACKEND)
        (path / "pyproject.toml").write_text(_PYPROJECT)
    if compiled:
        (path / "toylib" / "_speedups.c").write_text("/* a compiled extension */\n")
    repo, w = WindowRepo(path), _Writer(path, quiet)
    for i, version in enumerate(RELEASES):
        for k in range(per_release):
            number = int(f"{i}{k + 1}")
            if version == INTRODUCED and k == at:
                repo.introduced = w.commit(f"Rework add() (#{number})", op="-")
            elif version == FIXED and not released:
                w.commit(f"Tidy {version} (#{number})")
            elif version == FIXED and k == at and merges:
                repo.fixed, repo.fix_branch_tip = _merged_fix(path, w, number)
            elif version == FIXED and k == at:
                repo.fixed = w.commit(f"Fix add() (#{number})", op="+")
            else:
                w.commit(f"Tidy {version} (#{number})")
        w.commit(f"Release {version}", version=version)
        git(path, "tag", "-a", f"v{version}", "-m", f"toylib {version}")
        repo.tags[version] = git(path, "rev-parse", "HEAD")
    if not released:
        w.commit("Tidy main (#91)")
        repo.fixed = w.commit("Fix add() (#92)", op="+")
        w.commit("Tidy main (#93)")
    return repo


def _merged_fix(path: Path, w: _Writer, number: int) -> tuple[str, str]:
    """The fix on a branch (two commits), merged with a merge commit naming no pull request;
    ``refs/pull/N/head`` at the branch's tip names it."""
    git(path, "checkout", "-q", "-b", "fix-add")
    w.commit("Start on add()")
    tip = w.commit("Fix add()", op="+")
    git(path, "checkout", "-q", "main")
    git(path, "merge", "-q", "--no-ff", "-m", "Merge branch 'fix-add'", "fix-add")
    git(path, "update-ref", f"refs/pull/{number}/head", tip)
    return git(path, "rev-parse", "HEAD"), tip


def mirrored_window_repo(
    base: Path, url: str = "https://git.example/acme/toylib", **options: Any
) -> tuple[WindowRepo, MirrorRepo]:
    """The toy upstream (:func:`make_window_repo` with ``options``) at ``base/upstream``, and its
    mirror cloned at ``base/mirror.git`` and opened as ``url``'s."""
    repo = make_window_repo(base / "upstream", **options)
    git(base, "clone", "-q", "--mirror", str(repo.path), str(base / "mirror.git"))
    opened = open_mirror(Mirror(url, base / "mirror.git"))
    assert isinstance(opened, MirrorRepo)
    return repo, opened


def release_index(repo: WindowRepo, wheels: Path, *, crash_below: int = 0) -> PackageIndex:
    """Every release as a wheel built from its tag's tree; releases 0.1 … 0.N (``crash_below``)
    before them whose import raises (a crash zone: old releases under today's dependencies)."""
    index = PackageIndex()
    for i in range(1, crash_below + 1):
        files = {"toylib/__init__.py": 'raise RuntimeError("toylib too old for this torch")\n'}
        index.add(build_wheel(wheels, "toylib", f"0.{i}", files=files), f"2025-06-{i:02d}")
    for i, version in enumerate(RELEASES):
        source = git(repo.path, "show", f"v{version}:toylib/__init__.py") + "\n"
        wheel = build_wheel(wheels, "toylib", version, files={"toylib/__init__.py": source})
        index.add(wheel, f"2026-02-{i + 1:02d}")
    return index


def bisect_releases(
    shim: ShimManifest,
    repo: WindowRepo,
    source: Source,
    folder: Path,
    *,
    cache: Path | None = None,
    records: bool = True,
    progress: Progress | None = None,
) -> WindowResult:
    """``patchlane bisect``'s window search for ``shim``, no evidence given, over every release
    of the toy upstream (a loopback index of :func:`release_index`) and ``source``'s commits;
    ``folder`` holds the wheels, the work, the result cache (unless ``cache``) and, with
    ``records``, the validation records."""
    # the bisection is loaded by the tests that search, not by every reader of the toy upstream
    from retire.bisect.bisection import list_releases
    from retire.bisect.job import BisectJob
    from retire.bisect.transitions import bisect_window
    from tests.support.index import IndexServer

    with IndexServer(release_index(repo, folder / "wheels")) as server:
        versions, yanked = list_releases(server.url, "toylib")
        job = BisectJob(
            shim.id,
            yanked=frozenset(yanked),
            index=server.url,
            cache=cache or folder / "cache",
            work_dir=folder / "work",
            records=folder / "validation.jsonl" if records else None,
        )
        return bisect_window(shim, versions, job, source=source, progress=progress)
