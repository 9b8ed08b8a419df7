"""Real git repositories for tests: the one ``git`` helper every test runs git with, an upstream
with releases, a fix branch merged by a merge commit, and tags — the shape the git probe reads in
a mirror."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from retire.core.git import Git

# a fixed identity and no user or system configuration: the same commits on every machine
_ENV = {
    "GIT_AUTHOR_NAME": "patchlane tests",
    "GIT_AUTHOR_EMAIL": "tests@example.org",
    "GIT_COMMITTER_NAME": "patchlane tests",
    "GIT_COMMITTER_EMAIL": "tests@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, when: str | None = None) -> str:
    """``git ARGS…`` in ``repo`` as the tests' identity; its output, stripped. ``when`` (ISO 8601)
    dates the commit it makes, as author and committer."""
    dated = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    return Git(repo, env={**_ENV, **dated}).run(*args).strip()


def commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Upstream:
    path: Path
    # in v1.0
    first: str
    # the fix commit on its branch
    fix: str
    # the merge commit of the fix (in v1.1)
    merge: str
    # a later fix, in no release tag
    unreleased: str


def make_upstream(path: Path) -> Upstream:
    """v1.0 → fix branch merged with a merge commit → v1.1 (+ a non-release tag) → an unreleased
    commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    first = commit(path, "toylib.py", "def add(a, b):\n    return a - b\n", "toylib 1.0")
    git(path, "tag", "v1.0")
    git(path, "checkout", "-q", "-b", "fix-add")
    fix = commit(path, "toylib.py", "def add(a, b):\n    return a + b\n", "fix add()")
    git(path, "checkout", "-q", "main")
    commit(path, "README", "toylib\n", "docs")
    git(path, "merge", "-q", "--no-ff", "-m", "Merge pull request #2 from fix-add", "fix-add")
    merge = git(path, "rev-parse", "HEAD")
    git(path, "tag", "-a", "v1.1", "-m", "toylib 1.1")
    git(path, "tag", "nightly-2026-03-01")
    unreleased = commit(path, "CHANGES", "more\n", "another fix")
    return Upstream(path, first, fix, merge, unreleased)


#: A PEP 517 backend inside the package's own repository (``backend-path``), needing nothing from an
#: index: uv builds the package from a git checkout with no network, as it would a real project.
_IN_TREE_BACKEND = """
import base64, hashlib, os, zipfile

NAME, VERSION = "toyrev", "0.1"


def _digest(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}/__init__.py": open(os.path.join(NAME, "__init__.py"), "rb").read(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode()
        ),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\\nGenerator: toy\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        ),
    }
    record = [f"{p},sha256={_digest(d)},{len(d)}" for p, d in files.items()]
    files[f"{info}/RECORD"] = ("\\n".join(record + [f"{info}/RECORD,,"]) + "\\n").encode()
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return name
"""
_PYPROJECT = """[build-system]
requires = @REQUIRES@
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "toyrev"
version = "0.1"
"""


@dataclass(frozen=True)
class PackageRepo:
    path: Path
    # tagged v1.0: toyrev.WHICH == "first"
    first: str
    # tagged v1.1: toyrev.WHICH == "second"
    second: str


def make_package_repo(path: Path, build_requires: tuple[str, ...] = ()) -> PackageRepo:
    """A tiny pure-Python package ``toyrev`` (pyproject + module) in two commits, tagged v1.0 and
    v1.1; ``build_requires`` is what its ``[build-system]`` asks a frontend to install (the
    backend needs none)."""
    (path / "_build").mkdir(parents=True)
    (path / "toyrev").mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "_build" / "backend.py").write_text(_IN_TREE_BACKEND)
    (path / "pyproject.toml").write_text(
        _PYPROJECT.replace("@REQUIRES@", repr(list(build_requires)).replace("'", '"'))
    )
    git(path, "add", "_build", "pyproject.toml")
    first = commit(path, "toyrev/__init__.py", 'WHICH = "first"\n', "toyrev: first")
    git(path, "tag", "v1.0")
    second = commit(path, "toyrev/__init__.py", 'WHICH = "second"\n', "toyrev: second")
    git(path, "tag", "-a", "v1.1", "-m", "toyrev 1.1")
    return PackageRepo(path, first, second)
