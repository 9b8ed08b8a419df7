"""A toy upstream whose first-parent history touches its target module in only some commits: the
history the informed commit search (:mod:`retire.bisect.informed`) reads with real git.

``make_touch_repo(path, commits, touching)`` makes a tag ``v1.0``, then ``commits`` commits on
``main`` (the last one tagged ``v1.1``); commit ``i`` (0-based) changes ``src/toypkg/ops/target.py``
when ``i`` is in ``touching``, else ``src/toypkg/other.py`` or ``docs/notes.md``. With ``merge_at``
that commit is instead a merge of a branch whose own commit changed the target.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from tests.support.gitrepos import git

TARGET = "src/toypkg/ops/target.py"
HELPER = "src/toypkg/ops/helpers/__init__.py"


@dataclass(frozen=True)
class TouchRepo:
    path: Path
    # the commits of v1.0..v1.1 on the first-parent chain, oldest first (the last is v1.1)
    commits: tuple[str, ...]


def _write(path: Path, name: str, text: str) -> None:
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(text)


def make_touch_repo(
    path: Path, commits: int, touching: Collection[int], *, merge_at: int | None = None
) -> TouchRepo:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    _write(path, TARGET, "def f():\n    return 0\n")
    _write(path, HELPER, "")
    _write(path, "src/toypkg/other.py", "")
    _write(path, "pyproject.toml", '[project]\nname = "toypkg"\nversion = "1.0"\n')
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "toypkg 1.0", when="2026-01-01T00:00:00Z")
    git(path, "tag", "v1.0")
    made = []
    for i in range(commits):
        when = f"2026-01-02T00:{i // 60:02d}:{i % 60:02d}Z"
        if i == merge_at:
            made.append(_merge(path, i, when))
            continue
        name = TARGET if i in touching else ("src/toypkg/other.py", "docs/notes.md")[i % 2]
        _write(path, name, f"# change {i}\ndef f():\n    return {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"change {i}", when=when)
        made.append(git(path, "rev-parse", "HEAD"))
    git(path, "tag", "v1.1")
    return TouchRepo(path, tuple(made))


def _merge(path: Path, i: int, when: str) -> str:
    git(path, "checkout", "-q", "-b", f"branch-{i}")
    _write(path, TARGET, f"# branch {i}\ndef f():\n    return -{i}\n")
    git(path, "commit", "-q", "-am", f"branch change {i}", when=when)
    git(path, "checkout", "-q", "main")
    git(path, "merge", "-q", "--no-ff", "-m", f"Merge branch-{i}", f"branch-{i}")
    return git(path, "rev-parse", "HEAD")
