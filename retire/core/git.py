"""The engine's one way to run git: ``Git(repo).run(...)`` over ``git -C repo`` argument lists.

git runs in a known environment (no system config, no pager, no prompts, C locale, no
inherited ``GIT_DIR``-style redirections from a hook), under a timeout; every failure is one
:class:`GitError` with a one-line message. The operations the engine needs (resolve a ref, tags
containing a commit, ancestry, the commits touching a folder, worktrees, commits) are methods;
anything else is :meth:`Git.run`. A revision, ref, tag or branch is never an option: it goes to
:meth:`Git.run` as ``revs`` (after ``--end-of-options``) or, where git takes none, through
:func:`revision`, which refuses one that starts with ``-``.

Everything that writes happens in a separate worktree or creates a new ref; nothing here
touches the user's checkout, index or current branch.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from retire.core import childenv, tooltext
from retire.core.errors import PatchlaneError

__all__ = ["DEFAULT_TIMEOUT", "Git", "GitError", "environment", "revision", "toplevel"]

#: Seconds one git command may take (a push or a clone of a large mirror included).
DEFAULT_TIMEOUT = 300.0

# Variables that point git at another repository, index or object store: set by hooks and
# wrappers, they would silently redirect ``git -C <repo>``.
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES",
)


class GitError(PatchlaneError):
    """A git command failed; the message is one line with the end of git's stderr."""


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: quiet, prompt-free, no system config, C locale, and no
    secret-named variable (git's hooks run in it: a repository's ``core.hooksPath`` is its
    code)."""
    env = {name: value for name, value in childenv.for_tool().items() if name not in _REDIRECTS}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",
        GIT_OPTIONAL_LOCKS="0",
    )
    env.update(extra or {})
    return env


def _one_line(stderr: str, returncode: int) -> str:
    # a remote's or a hook's message comes through git: its escapes never reach ours
    return " / ".join(tooltext.lines(stderr)[-3:]) or f"exit {returncode}"


def _operand(text: str) -> str:
    """``text`` as one argument: never empty, no NUL (which no argument can hold) and no line
    break (which would split git's one-line answers)."""
    if not text or any(char in text for char in "\0\n\r"):
        raise GitError(
            f"{text[:80]!r} cannot be given to git: it is empty or holds a NUL or a line break"
        )
    return text


def revision(text: str) -> str:
    """``text``, checked to be a revision git cannot read as an option: refused in one line
    when it starts with ``-`` (a tag or a flag's value named ``--output=…`` would make ``git
    log`` write a file). For the places git's parser takes no ``--end-of-options`` (an option's
    value such as ``tag --contains``, ``checkout``); everywhere else revisions go to
    :meth:`Git.run` as ``revs``."""
    if _operand(text).startswith("-"):
        raise GitError(
            f"{text[:80]!r} is not a revision git may be given: it starts with '-', which git "
            "reads as an option — name the commit, tag or branch by its sha or its full ref "
            "(refs/tags/…)"
        )
    return text


def _command(
    args: tuple[str, ...], revs: Sequence[str], paths: Sequence[str] | None
) -> tuple[str, ...]:
    """``args`` with the revisions after ``--end-of-options`` and the paths after ``--``."""
    command = [*args]
    if revs:
        command += ["--end-of-options", *map(_operand, revs)]
        # without a `--`, log, show and diff take a name with a wildcard (`v1.[0]`) for a path,
        # silently: their revisions always end at one
        if paths is None and args[0] in _PATHSPECS:
            paths = ()
    if paths is not None:
        # ls-tree takes no `--`: after --end-of-options it would read one as a path
        command += [*([] if args[0] == "ls-tree" else ["--"]), *paths]
    return tuple(command)


#: The commands that read paths after their revisions.
_PATHSPECS = frozenset({"log", "show", "diff", "rev-list", "whatchanged"})


class Git:
    """git commands in one repository (``git -C repo …``).

    ``env`` adds variables (an author identity, say) to :func:`environment`. With
    ``search_parents=False`` the repository must be ``repo`` itself, never a folder above it
    (a mirror path is checked as given).
    """

    def __init__(
        self,
        repo: str | os.PathLike[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        search_parents: bool = True,
    ) -> None:
        self.repo = Path(repo)
        self.timeout = timeout
        self.env = dict(env or {})
        if not search_parents:
            self.env["GIT_CEILING_DIRECTORIES"] = os.fspath(self.repo.absolute().parent)

    def __repr__(self) -> str:
        return f"Git({os.fspath(self.repo)!r})"

    def _exec(
        self, args: tuple[str, ...], *, input: str | None, env: dict[str, str] | None
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                ["git", "-C", os.fspath(self.repo), *args],
                capture_output=True,
                text=True,
                env=environment({**self.env, **(env or {})}),
                timeout=self.timeout,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise GitError(
                f"git {args[0]} timed out after {self.timeout:g} s in {self.repo}"
            ) from None
        # no git on PATH, an unusable folder; a NUL in an argument
        except (OSError, ValueError) as exc:
            raise GitError(f"git {args[0]} could not run: {exc}") from None

    def run(
        self,
        *args: str,
        revs: Sequence[str] = (),
        paths: Sequence[str] | None = None,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        """stdout of ``git args… --end-of-options revs… -- paths…`` without the trailing newline;
        a non-zero exit raises :class:`GitError` unless ``check`` is false (then stdout, possibly
        empty).

        Every revision, ref, tag or branch goes in ``revs``: after ``--end-of-options`` git reads
        none of them as an option, whatever its text (a mirror's tag ``--output=…`` stays a tag).
        ``paths`` (None: no ``--``) follow a ``--``."""
        proc = self._exec(_command(args, revs, paths), input=input, env=env)
        if check and proc.returncode != 0:
            raise GitError(f"git {args[0]} failed: {_one_line(proc.stderr, proc.returncode)}")
        return proc.stdout.rstrip("\n")

    def test(self, *args: str, revs: Sequence[str] = ()) -> bool:
        """For commands that answer yes (exit 0) or no (exit 1); anything else is a GitError.
        ``revs`` as :meth:`run` takes them."""
        proc = self._exec(_command(args, revs, None), input=None, env=None)
        if proc.returncode not in (0, 1):
            raise GitError(f"git {args[0]} failed: {_one_line(proc.stderr, proc.returncode)}")
        return proc.returncode == 0

    # -- reading ---------------------------------------------------------------------------

    def toplevel(self) -> Path:
        """The root of the work tree ``repo`` is in."""
        try:
            return Path(self.run("rev-parse", "--show-toplevel"))
        except GitError as exc:
            raise GitError(f"{self.repo} is not inside a git repository ({exc})") from None

    def is_repository(self) -> bool:
        return self._exec(("rev-parse", "--git-dir"), input=None, env=None).returncode == 0

    def rev_parse(self, ref: str) -> str | None:
        """The object name ``ref`` resolves to, or None if it does not exist."""
        return self.run("rev-parse", "--verify", "--quiet", revs=[ref], check=False) or None

    def is_shallow(self) -> bool:
        return self.run("rev-parse", "--is-shallow-repository") == "true"

    def config(self, key: str) -> str | None:
        return self.run("config", key, check=False) or None

    def tags(self, *, containing: str | None = None) -> list[str]:
        """Every tag, or those whose history contains commit ``containing``."""
        args = ("tag", "--contains", revision(containing)) if containing else ("tag", "--list")
        return [tag for tag in self.run(*args).splitlines() if tag.strip()]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.test("merge-base", "--is-ancestor", revs=[ancestor, descendant])

    def commits_touching(self, path: str, rev: str = "HEAD") -> list[tuple[str, int]]:
        """(sha, committer time in epoch seconds) of the commits on ``rev`` that touched
        ``path``."""
        out = self.run("log", "--format=%H %ct", revs=[rev], paths=[path])
        return [
            (sha, int(when))
            for sha, when in (line.split() for line in out.splitlines() if line.strip())
        ]

    def files(self, commit: str, folder: str) -> list[PurePosixPath]:
        """Every file below ``folder`` in ``commit``'s tree, as paths relative to ``folder``."""
        out = self.run("ls-tree", "-r", "--name-only", "-z", revs=[commit], paths=[folder])
        base = PurePosixPath(folder)
        return [PurePosixPath(name).relative_to(base) for name in out.split("\0") if name]

    def ignored(self, paths: list[str]) -> dict[str, str]:
        """Which of ``paths`` (relative to ``repo``; they need not exist) git's own ignore rules
        would keep out of a commit, each with the rule that does (``.gitignore:3: *pylock.toml``).
        A tracked file is never ignored."""
        if not paths:
            return {}
        out = self.run("check-ignore", "-v", "-z", "--stdin", check=False, input="\0".join(paths))
        fields = out.split("\0")
        found: dict[str, str] = {}
        # -v -z: source, line, pattern, path per match
        for at in range(0, len(fields) - 3, 4):
            source, line, pattern, path = fields[at : at + 4]
            if source and not pattern.startswith("!"):
                found[path] = f"{source}:{line}: {pattern}"
        return found

    def worktree_paths(self) -> list[Path]:
        """Every worktree git knows of (the main one first), including ones whose folder is gone."""
        out = self.run("worktree", "list", "--porcelain")
        return [
            Path(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("worktree ")
        ]


def toplevel(path: str | os.PathLike[str]) -> Path:
    """The root of the git work tree ``path`` is in; a :class:`GitError` when there is none."""
    return Git(path).toplevel()
