"""The few git operations auto-drop needs, as plain ``git`` subprocesses (argument lists only).

Everything that writes happens in a separate worktree or creates a new ref; nothing here
touches the user's checkout, index or current branch.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from retire.core.errors import PatchlaneError

__all__ = ["GitError", "git", "rev_parse", "toplevel", "worktree_paths"]


class GitError(PatchlaneError):
    """A git command failed; the message carries its stderr (last lines)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    return env


def git(repo: str | os.PathLike[str], *args: str, check: bool = True, input: str | None = None,
        env: dict[str, str] | None = None) -> str:
    """``git -C repo args…``; stdout without the trailing newline. Raises :class:`GitError`.

    ``env`` adds variables (an author identity, say) to git's usual quiet, prompt-free environment.
    """
    proc = subprocess.run(["git", "-C", os.fspath(repo), *args], capture_output=True, text=True,
                          env={**_env(), **(env or {})},
                          input=input, stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        raise GitError(f"git {args[0]} failed: {' / '.join(lines[-3:]) or f'exit {proc.returncode}'}")
    return proc.stdout.rstrip("\n")


def toplevel(path: str | os.PathLike[str]) -> Path:
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except (GitError, FileNotFoundError) as exc:
        raise GitError(f"{path} is not inside a git repository ({exc})") from None


def rev_parse(repo: str | os.PathLike[str], ref: str) -> str | None:
    """The object name ``ref`` resolves to, or None if it does not exist."""
    out = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", ref, check=False)
    return out or None


def worktree_paths(repo: str | os.PathLike[str]) -> list[Path]:
    """Every worktree git knows of (the main one first), including ones whose folder is gone."""
    out = git(repo, "worktree", "list", "--porcelain")
    return [Path(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("worktree ")]
