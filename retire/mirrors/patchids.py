"""Pull requests of rebase and squash merges, found by their patch.

Many projects land a pull request rebased (each of its commits copied onto the branch) or squashed
(one commit of its whole diff) with no ``(#N)`` in the subject, and no merge commit names it. A
mirror fetched with ``+refs/pull/*/head:refs/pull/*/head`` still has each request's head, and
``git patch-id --stable`` (the diff's hash, blind to line numbers and whitespace) of a landed
commit equals:

- for a rebase, the patch-id of the request's own commit it was copied from;
- for a squash, the patch-id of the request's combined diff (``git diff <fork point> <head>``,
  the fork point being where the head's history meets the release's).

Bounded: only the commits the cheaper rules left unnamed are asked about, only heads the newer
release does not already contain (a head on the first-parent line landed as itself) and that are
not newer than it, all at once per commit range; and the answer is kept on disk (a
``.patchlane/cache`` folder) keyed by the range and every pull-request ref's commit, so a second
bisection of the same range — or a reader of its records — computes nothing. A patch two pull
requests share names neither: never a guess.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.core.git import Git, GitError, revision

__all__ = ["pulls_by_patch"]

#: Bumped when what the cache holds changes meaning.
_CACHE_VERSION = 1


def pulls_by_patch(
    git: Git,
    commits: Sequence[str],
    old: str,
    new: str,
    heads: Mapping[str, int],
    cache: Path | None = None,
) -> dict[str, int]:
    """``{commit: pull request}`` for those of ``commits`` (landed between the commits ``old``
    and ``new``, unnamed by subject, merge or head) whose patch equals a pull request's, among
    ``heads`` (``{head commit: number}``). Never raises: a git failure names nothing."""
    if not commits or not heads:
        return {}
    key = _key(old, new, heads)
    found = _cached(cache, key)
    if found is None:
        try:
            found = _computed(git, commits, new, heads)
        except GitError:
            return {}
        _keep(cache, key, found)
    return {sha: found[sha] for sha in commits if sha in found}


def _key(old: str, new: str, heads: Mapping[str, int]) -> str:
    refs = sorted((number, sha) for sha, number in heads.items())
    text = json.dumps([_CACHE_VERSION, old, new, refs], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(cache: Path | None, key: str) -> dict[str, int] | None:
    """What an earlier computation of this range kept, or None (none kept, or unreadable)."""
    if cache is None:
        return None
    try:
        data = json.loads((cache / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {
        sha: number
        for sha, number in data.items()
        if isinstance(sha, str) and isinstance(number, int) and not isinstance(number, bool)
    }


def _keep(cache: Path | None, key: str, found: Mapping[str, int]) -> None:
    if cache is None:
        return
    try:
        cache.mkdir(parents=True, exist_ok=True)
        atomic_write(cache / f"{key}.json", json.dumps(dict(sorted(found.items()))), within=cache)
    # a cache that cannot be written costs a recomputation next time, nothing else
    except OSError:
        return


def _computed(
    git: Git, commits: Sequence[str], new: str, heads: Mapping[str, int]
) -> dict[str, int]:
    """Every one of ``commits`` whose patch-id one pull request's patch (a commit of it, or its
    combined diff) has, and only one."""
    wanted = _patch_ids(
        git, git.run("show", "--no-color", "--format=commit %H", revs=list(commits))
    )
    candidates = _candidates(git, new, heads)
    if not wanted or not candidates:
        return {}
    owners: dict[str, set[int]] = {}
    for patch, number in _pull_patches(git, new, candidates):
        owners.setdefault(patch, set()).add(number)
    found: dict[str, int] = {}
    for sha, patch in wanted.items():
        numbers = owners.get(patch, set())
        if len(numbers) == 1:
            found[sha] = next(iter(numbers))
    return found


def _candidates(git: Git, new: str, heads: Mapping[str, int]) -> dict[str, tuple[str, int]]:
    """``{ref: (head, number)}`` of the heads worth a patch: not contained in ``new`` (a head it
    contains landed as itself) and committed no later than it (a request is pushed before it
    lands)."""
    newest = int(git.run("log", "-1", "--format=%ct", revs=[new]) or 0)
    out = git.run(
        "for-each-ref",
        f"--no-merged={revision(new)}",
        "--format=%(objectname) %(committerdate:unix) %(refname)",
        "refs/pull",
    )
    found: dict[str, tuple[str, int]] = {}
    for line in out.splitlines():
        sha, when, ref = [*line.split(" ", 2), "", ""][:3]
        if sha in heads and when.isdigit() and int(when) <= newest:
            found[ref] = (sha, heads[sha])
    return found


def _pull_patches(
    git: Git, new: str, candidates: Mapping[str, tuple[str, int]]
) -> list[tuple[str, int]]:
    """(patch-id, pull request) of every candidate's own commits (rebases) and, for a request of
    more than one commit, of its combined diff (squashes)."""
    refs = list(candidates)
    # which request each commit was reached from (%S: the ref named): a commit of a stacked
    # request counts for one of them
    owner: dict[str, int] = {}
    count: dict[str, int] = {}
    for line in git.run(
        "log", "--no-merges", "--format=%H %S", revs=[*refs, f"^{new}"]
    ).splitlines():
        sha, _, ref = line.partition(" ")
        if ref in candidates:
            owner[sha] = candidates[ref][1]
            count[ref] = count.get(ref, 0) + 1
    own = git.run(
        "log", "--no-merges", "--no-color", "-p", "--format=commit %H", revs=[*refs, f"^{new}"]
    )
    found = [(patch, owner[sha]) for sha, patch in _patch_ids(git, own).items() if sha in owner]
    for ref, commits in count.items():
        head, number = candidates[ref]
        fork = git.run("merge-base", revs=[new, head], check=False) if commits > 1 else ""
        if fork:
            combined = git.run("diff", "--no-color", revs=[fork, head])
            found += [(patch, number) for patch in _patch_ids(git, combined).values()]
    return found


def _patch_ids(git: Git, patch: str) -> dict[str, str]:
    """``{commit: patch-id}`` of a stream of commits' patches (``commit <sha>`` headers); a diff
    without a header is keyed by git's zero id."""
    if not patch.strip():
        return {}
    out = git.run("patch-id", "--stable", input=patch + "\n")
    found: dict[str, str] = {}
    for line in out.splitlines():
        patch_id, _, sha = line.partition(" ")
        if patch_id and sha:
            found[sha] = patch_id
    return found
