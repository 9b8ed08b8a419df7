"""Which commits of a release range touch what a shim patches: the target's module files in the
mirror's tree, and the first-parent commits between two revisions that change them. Read-only.

What a shim touches is its ``[target] module`` and the modules of the same package its
``patch.py`` imports (:func:`shim_modules`); each is found in the trees of the range's two ends as
a file (``…/liger_kernel/ops/fused_linear_cross_entropy.py``) or a package folder
(:func:`module_paths`). :func:`touching_commits` is ``git log --first-parent --format=%H
<old>..<new> -- <paths>`` (a merge counts when it changes them against its first parent): the
commits the informed search (:mod:`retire.bisect.informed`) tries first. Paths are literal (no
glob or pathspec magic), and a revision is never read as an option: revisions go to git after
``--end-of-options`` (:meth:`retire.core.git.Git.run`'s ``revs``), so a mirror's tag named
``--output=…`` is read as the tag it is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retire.core.git import Git
from shims.errors import InputError
from shims.filereading import read_text
from shims.model import ShimManifest

__all__ = ["Touching", "module_paths", "shim_modules", "touching", "touching_commits"]

#: git reads pathspecs as literal paths: a file named ``*.py`` is that file, not a glob.
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


@dataclass(frozen=True)
class Touching:
    """The paths a shim touches in a range's trees, and the first-parent commits of the range
    (the newer end included) that change any of them."""

    paths: tuple[str, ...]
    commits: frozenset[str]


def shim_modules(manifest: ShimManifest) -> tuple[str, ...]:
    """The target's module, then the modules of its package that ``patch.py`` imports (in the
    order they appear); a patch that cannot be read or parsed adds none."""
    source = None
    if (patch := manifest.patch_path) is not None:
        try:
            source = read_text(patch, missing_ok=True)
        except InputError:
            source = None
    return imported_modules(manifest.target.module, source)


def imported_modules(module: str, source: str | None) -> tuple[str, ...]:
    """``module``, then every module of its top-level package that ``source`` imports
    (``from pkg.a import b`` names both ``pkg.a`` and ``pkg.a.b``: either may be a module)."""
    package = module.split(".")[0]
    found = [module]
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return (module,)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names if a.name != "*")]
        found += [name for name in names if name.split(".")[0] == package]
    return tuple(dict.fromkeys(found))


def module_paths(
    git: Git, commits: Iterable[str], modules: Sequence[str], subdirectory: str | None = None
) -> tuple[str, ...]:
    """The files and package folders of ``modules`` in the trees of ``commits`` (below
    ``subdirectory``), as paths from the repository's root, sorted; a module found in none of
    them adds nothing."""
    found: set[str] = set()
    for commit in commits:
        listing = git.run(
            "ls-tree", "-r", "--name-only", "-z", revs=[commit], paths=[subdirectory or "."]
        )
        files = [name for name in listing.split("\0") if name]
        for module in modules:
            found.update(_module_files(files, module))
    return tuple(sorted(found))


def _module_files(files: Sequence[str], module: str) -> set[str]:
    """Where ``module`` is among ``files``: ``a/b/c.py``, or the folder ``a/b/c`` of a package,
    at any depth (``src/``, a subdirectory)."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return set()
    as_file, as_folder = "/" + "/".join(parts) + ".py", "/" + "/".join(parts) + "/"
    found = set()
    for name in files:
        rooted = "/" + name
        if rooted.endswith(as_file):
            found.add(name)
        elif (at := rooted.find(as_folder)) >= 0:
            found.add(rooted[1 : at + len(as_folder) - 1])
    return found


def touching_commits(git: Git, old: str, new: str, paths: Sequence[str]) -> frozenset[str]:
    """The first-parent commits in ``old..new`` that change any of ``paths`` (none: no
    commit)."""
    if not paths:
        return frozenset()
    span = f"{old}^{{commit}}..{new}^{{commit}}"
    out = git.run("log", "--first-parent", "--format=%H", revs=[span], paths=paths, env=_LITERAL)
    return frozenset(line for line in out.splitlines() if line.strip())


def touching(
    git: Git, old: str, new: str, modules: Sequence[str], subdirectory: str | None = None
) -> Touching:
    """The paths of ``modules`` in ``old``'s and ``new``'s trees, and the commits of
    ``old..new`` that change them. A :class:`GitError` when a revision is not in the
    repository."""
    paths = module_paths(git, (old, new), modules, subdirectory)
    return Touching(paths, touching_commits(git, old, new, paths))
