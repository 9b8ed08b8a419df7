"""Which files of a commit's tree the package's build reads, and which of them a mirror lacks.

A snapshot of a real repository is not always whole: an archive that leaves out files of 4 MiB or
more (a test data file, a docs image) still holds every commit and tree, but not those blobs, and
git then refuses to clone it or check the commit out. The package's build reads only its own
folder — ``subdirectory``, or the whole tree when the package sits at the root — less what no
wheel of it holds: tests, benchmarks, examples and docs, and a separate project in the tree (a
folder with a build file of its own, such as Liger-Kernel's CMake ``liger_cute_kernels``). A
missing file outside that is left out of the checkout and said so; a missing file inside it makes
the commit a clear unknown, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from retire.core.git import Git

__all__ = [
    "BUILD_FILES",
    "NOT_SHIPPED",
    "MissingFiles",
    "beyond_the_package",
    "missing_files",
    "projects",
]

BUILD_FILES = ("pyproject.toml", "setup.py")
#: Folders whose files no wheel of the package holds.
NOT_SHIPPED = frozenset({"test", "tests", "bench", "benchmark", "benchmarks", "examples", "docs"})
#: How many left-out paths a message names before "and N more".
_SHOWN = 3


def projects(root: PurePosixPath, paths: Iterable[PurePosixPath]) -> set[PurePosixPath]:
    """The folders below ``root`` that hold a separate project (a build file of their own)."""
    return {p.parent for p in paths if p.name in BUILD_FILES and p.parent != root}


def beyond_the_package(
    path: PurePosixPath, root: PurePosixPath, separate: set[PurePosixPath]
) -> bool:
    """Whether the package's build rooted at ``root`` never reads ``path``: it lies outside
    ``root``, or in a folder below it that no wheel holds or that is a ``separate`` project."""
    if root != PurePosixPath(".") and root not in path.parents:
        return True
    folders = [parent for parent in path.parents if parent != root and root in parent.parents]
    return any(folder in separate or folder.name in NOT_SHIPPED for folder in folders)


@dataclass(frozen=True)
class MissingFiles:
    """The files of one commit whose contents the mirror lacks, split by whether the package's
    build reads them."""

    # outside what the build reads: left out of the checkout
    left_out: tuple[str, ...] = ()
    # inside it: the commit cannot be built from this mirror
    needed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.left_out or self.needed)

    @property
    def says(self) -> str:
        """``3 files missing from the mirror were left out: test/a.bin, docs/b.gif, …``; "" when
        none was."""
        if not self.left_out:
            return ""
        count = len(self.left_out)
        files = "file" if count == 1 else "files"
        were = "was" if count == 1 else "were"
        return f"{count} {files} missing from the mirror {were} left out: {_listed(self.left_out)}"

    def why_not(self, commit: str) -> str:
        """Why the commit cannot be built: the files the build reads that the mirror lacks."""
        count = len(self.needed)
        files = "file" if count == 1 else "files"
        return (
            f"{count} {files} the package's build reads {'is' if count == 1 else 'are'} missing "
            f"from the mirror at {commit[:12]}: {_listed(self.needed)} — the mirror is damaged "
            "(a snapshot without its large files?): fetch it again (`patchlane mirrors sync`)"
        )


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_SHOWN])
    return shown + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")


def missing_files(git: Git, commit: str, subdirectory: str | None = None) -> MissingFiles:
    """The files of ``commit``'s tree whose blobs the repository of ``git`` lacks (two git
    commands: the tree, then every blob asked about at once). Raises GitError when the commit or
    one of its trees is not there."""
    listing = git.run("ls-tree", "-r", "-z", "--full-tree", revs=[commit])
    blobs: dict[str, list[str]] = {}
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        # submodules (commit entries) have no blob here
        if len(fields) == 3 and fields[1] == "blob":
            blobs.setdefault(fields[2], []).append(path)
    if not blobs:
        return MissingFiles()
    answer = git.run("cat-file", "--batch-check", input="".join(f"{sha}\n" for sha in blobs))
    absent = [line.split()[0] for line in answer.splitlines() if line.endswith(" missing")]
    if not absent:
        return MissingFiles()
    root = PurePosixPath(subdirectory or ".")
    every = [PurePosixPath(path) for paths in blobs.values() for path in paths]
    separate = projects(root, every)
    left_out: list[str] = []
    needed: list[str] = []
    for sha in absent:
        for path in blobs.get(sha, []):
            beyond = beyond_the_package(PurePosixPath(path), root, separate)
            (left_out if beyond else needed).append(path)
    return MissingFiles(tuple(sorted(left_out)), tuple(sorted(needed)))
