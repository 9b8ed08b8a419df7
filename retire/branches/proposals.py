"""Proposed changes as branches: made in a separate worktree, committed once, never merged.

Auto-drop (retire a shim) and bump (re-lock with upgrades) both propose their change this way:

1. a detached worktree under ``.patchlane/worktrees/`` at the base commit (the user's checkout,
   index and current branch are never touched);
2. the caller's edit runs inside it;
3. the tree is committed with a message carrying a marker line, and the branch ref is created
   only if it does not exist yet (``update-ref … 0000…``), so a concurrent run cannot clobber it;
4. running again with the same change is *already proposed*; a branch holding something else
   is left alone (*exists-differs*), unless it is already merged into the base (every commit of
   it is in the base: nothing on it can be lost), which a new proposal replaces — so a shim that
   left some lanes on a merged branch can leave the rest on the next run;
5. with a token and a repository, the branch is pushed (never forced) and a pull request is
   found or opened. There is no merge code path.

Work happens in try/finally; a run killed outright leaves at most a worktree folder and a
temporary ref (the commit waits on one while its PR body is saved; the branch is moved into place
last, in one ref transaction), which :func:`cleanup_worktrees` and :func:`cleanup_refs` remove
before the next run starts: a branch is never half-made, never without its body.
"""

from __future__ import annotations

import contextlib
import enum
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from retire.branches.prstatus import PrState, PrStatus
from retire.core import childenv
from retire.core.atomic import atomic_write, locked, make_folder
from retire.core.errors import InputError
from retire.core.git import Git, GitError, revision
from retire.core.project import contained
from retire.core.secrets import scrub

WORKTREES_DIR = Path(".patchlane") / "worktrees"
PRS_DIR = Path(".patchlane") / "prs"
#: Where a proposal's commit waits while its PR body is saved, before its branch moves into place.
TEMPORARY_REFS = "refs/patchlane/proposals"


class BranchStatus(enum.StrEnum):
    """What proposing a branch did."""

    PROPOSED = "proposed"
    #: the branch already holds this very proposal
    ALREADY_PROPOSED = "already-proposed"
    #: the branch exists with other content; left as it is
    EXISTS_DIFFERS = "exists-differs"
    #: the edit changed nothing: no branch
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Branch:
    """What proposing a branch did."""

    name: str
    status: BranchStatus
    reason: str = ""
    commit: str | None = None
    # the PR body saved beside the branch (``body`` given to :func:`propose_branch`)
    body_path: Path | None = None


class PullRequests:
    """Find-or-open a pull request through the GitHub REST API. There is no merge method."""

    def __init__(
        self, client: httpx.Client, repository: str, *, api_base: str | None = None, token: str
    ) -> None:
        from retire.probes.codehost import DEFAULT_API_BASE

        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
            raise InputError(
                None, "--repo", f"not an owner/name: {repository!r}", "pass --repo owner/name"
            )
        self.client = client
        self.repository = repository
        self.api_base = (api_base or DEFAULT_API_BASE).rstrip("/")
        self.token = token

    def _headers(self) -> dict[str, str]:
        from retire.probes.codehost import auth_headers

        return {**auth_headers(self.token), "Accept": "application/vnd.github+json"}

    def _error(self, what: str, exc_or_response: object) -> str:
        text = getattr(exc_or_response, "text", None)
        status = getattr(exc_or_response, "status_code", None)
        detail = f"HTTP {status}: {text[:200]}" if text is not None else str(exc_or_response)
        return scrub(f"{what}: {detail}", [self.token])

    def find_or_open(
        self, *, head: str, base: str, title: str, body: str
    ) -> tuple[PrStatus, str | None]:
        """(status, url): ``exists`` when a PR for ``head`` is already there, else ``opened``."""
        import httpx

        owner = self.repository.split("/")[0]
        url = f"{self.api_base}/repos/{self.repository}/pulls"
        try:
            found = self.client.get(
                url, params={"head": f"{owner}:{head}", "state": "all"}, headers=self._headers()
            )
            if found.status_code == 200 and isinstance(found.json(), list) and found.json():
                return PrStatus(PrState.EXISTS), found.json()[0].get("html_url")
            if found.status_code != 200:
                return PrStatus(PrState.FAILED, self._error("listing pull requests", found)), None
            made = self.client.post(
                url,
                headers=self._headers(),
                json={
                    "title": title,
                    "head": head,
                    "base": base,
                    "body": body,
                    "maintainer_can_modify": True,
                },
            )
        except (httpx.HTTPError, ValueError) as exc:
            return PrStatus(PrState.FAILED, self._error("the code host is unreachable", exc)), None
        if made.status_code == 201:
            return PrStatus(PrState.OPENED), made.json().get("html_url")
        return PrStatus(PrState.FAILED, self._error("opening the pull request", made)), None


def author_env(repo: Path) -> dict[str, str]:
    """The repository's identity when it has one; a patchlane identity otherwise."""
    env: dict[str, str] = {}
    git = Git(repo)
    if not git.config("user.name"):
        env.update(GIT_AUTHOR_NAME="patchlane", GIT_COMMITTER_NAME="patchlane")
    if not git.config("user.email"):
        env.update(
            GIT_AUTHOR_EMAIL="patchlane@localhost", GIT_COMMITTER_EMAIL="patchlane@localhost"
        )
    return env


def cleanup_worktrees(repo: Path) -> list[Path]:
    """Remove worktrees that an earlier, interrupted run left under ``.patchlane/worktrees``."""
    # never through a link: what is under it is deleted
    root, git = contained(repo, WORKTREES_DIR), Git(repo)
    removed = []
    for path in git.worktree_paths():
        if path.resolve().is_relative_to(root):
            # twice: a run killed during `git worktree add` leaves it locked ("initializing"),
            # often with its folder gone, and a locked worktree is neither removed by one
            # --force nor pruned — every later `worktree add` there would fail
            git.run("worktree", "remove", "--force", "--force", str(path), check=False)
            removed.append(path)
    if root.is_dir():
        for leftover in root.iterdir():
            if leftover.name == "lock":
                continue
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    git.run("worktree", "prune")
    return removed


def cleanup_refs(repo: Path) -> list[str]:
    """Remove the temporary refs (:data:`TEMPORARY_REFS`) an earlier run killed before its branch
    was moved into place left behind; no branch of theirs was ever made."""
    git = Git(repo)
    stale = git.run("for-each-ref", "--format=%(refname)", f"{TEMPORARY_REFS}/").split()
    for ref in stale:
        git.run("update-ref", "-d", revs=[ref], check=False)
    return stale


def check_outputs(repo: Path, branches: Iterable[str] = ()) -> None:
    """Refuse, before the first change, an output patchlane could not write: the worktrees
    folder, the PR bodies' folder or a body of ``branches`` that is (or lies under) a link.
    Found only when the body is saved, a link there would leave a branch made and no body."""
    for path in (WORKTREES_DIR, PRS_DIR, *(body_path(branch) for branch in branches)):
        contained(repo, path)


def check_tree(repo: Path, base_commit: str, paths: Iterable[Path]) -> None:
    """Refuse, in one line, a working tree whose files under ``paths`` (absolute, inside
    ``repo``) differ from ``base_commit``: the verdicts read the working tree, the branch is
    built from the commit, and a decision about one applied to the other raises a lane the
    commit already holds (or drops one it does not)."""
    git, top = Git(repo), repo.resolve()
    inside = [path.resolve() for path in paths]
    where = [path.relative_to(top).as_posix() for path in inside if path.is_relative_to(top)]
    if not where:
        return
    changed = git.run("diff", "--name-only", "--no-renames", revs=[base_commit], paths=where)
    untracked = git.run("ls-files", "--others", "--exclude-standard", "--", *where)
    first = next((line for line in (changed + "\n" + untracked).splitlines() if line), None)
    if first is not None:
        raise InputError(
            first,
            None,
            f"differs from {base_commit[:12]}, the commit the branch is built from (the "
            "verdicts read the working tree)",
            "commit or stash the change, or pass --base naming a commit that holds it",
        )


def body_path(branch: str) -> Path:
    """Where the PR body of ``branch`` is saved, relative to the repository."""
    return PRS_DIR / f"{branch}.md"


@contextlib.contextmanager
def session(repo: Path, branches: Iterable[str] = ()) -> Iterator[None]:
    """One proposing run per repository at a time, starting from a clean worktrees folder, its
    outputs checked first (:func:`check_outputs`)."""
    check_outputs(repo, branches)
    with locked(repo / WORKTREES_DIR / "lock", within=repo):
        cleanup_worktrees(repo)
        cleanup_refs(repo)
        yield


def propose_branch(
    repo: Path,
    *,
    base_commit: str,
    branch: str,
    marker: str,
    folder: str,
    edit: Callable[[Path], str | None],
    body: Callable[[], str] | None = None,
) -> Branch:
    """Make ``branch`` = ``base_commit`` + what ``edit`` does in a worktree.

    ``edit(work)`` changes files in the worktree and returns the commit message, or None when
    there is nothing to commit (the branch is then not created: *unchanged*). ``marker`` is a
    line the message must carry; finding it on an existing branch at the same base means this
    very proposal was already made. ``body()``, when given, is the PR body, saved beside the
    branch (:func:`save_body`) before the branch exists: a branch is never made without it.
    """
    ref, git = f"refs/heads/{branch}", Git(repo)
    existing = git.rev_parse(ref)
    # a branch already merged into the base holds nothing the base lacks: a new proposal replaces it
    merged = existing if existing and git.is_ancestor(existing, base_commit) else None
    if merged:
        existing = None
    if (
        existing
        and git.rev_parse(f"{existing}^") == base_commit
        and marker in git.run("log", "-1", "--format=%B", revs=[existing])
    ):
        return Branch(
            branch, BranchStatus.ALREADY_PROPOSED, "the branch holds this proposal", existing
        )
    work = contained(repo, make_folder(repo / WORKTREES_DIR, within=repo) / folder)
    try:
        git.run("worktree", "add", "--detach", "--quiet", str(work), revision(base_commit))
        message = edit(work)
        if message is None:
            return Branch(branch, BranchStatus.UNCHANGED, "nothing to change")
        if marker not in message:
            message = message.rstrip("\n") + f"\n\n{marker}\n"
        Git(work).run("add", "--all")
        tree = Git(work).run("write-tree")
        if existing:
            same = git.rev_parse(f"{existing}^{{tree}}") == tree
            return Branch(
                branch,
                BranchStatus.ALREADY_PROPOSED if same else BranchStatus.EXISTS_DIFFERS,
                "the branch already holds this change"
                if same
                else f"{branch} exists with other content; left as it is (delete it to re-propose)",
                existing,
            )
        commit = Git(work).run(
            "commit-tree", tree, "-p", revision(base_commit), input=message, env=author_env(repo)
        )
        saved = _publish(
            repo, ref, commit, merged, lambda: save_body(repo, branch, body()) if body else None
        )
        return Branch(branch, BranchStatus.PROPOSED, "", commit, saved)
    finally:
        git.run("worktree", "remove", "--force", str(work), check=False)
        shutil.rmtree(work, ignore_errors=True)
        git.run("worktree", "prune", check=False)


def _publish(
    repo: Path, ref: str, commit: str, merged: str | None, before: Callable[[], Path | None]
) -> Path | None:
    """Move ``commit`` into place as ``ref``, the last step: the commit is held by a temporary
    ref while ``before`` (the PR body's save) runs, then one transaction creates the branch — only
    if it did not appear (or move) meanwhile — and drops the temporary ref. A run killed before
    that leaves no branch, only the temporary ref the next session removes
    (:func:`cleanup_refs`)."""
    git, temporary = Git(repo), f"{TEMPORARY_REFS}/{ref.removeprefix('refs/heads/')}"
    git.run("update-ref", revs=[temporary, commit])
    try:
        saved = before()
        git.run(
            "update-ref",
            "--stdin",
            input=f"update {ref} {commit} {merged or '0' * 40}\ndelete {temporary} {commit}\n",
        )
    except BaseException:
        git.run("update-ref", "-d", revs=[temporary], check=False)
        raise
    return saved


@contextlib.contextmanager
def scratch_worktree(repo: Path, base_commit: str, folder: str) -> Iterator[Path]:
    """A detached worktree at ``base_commit`` under ``.patchlane/worktrees/``, removed after: a
    look at what a proposal would change (``bump --dry-run``) — no commit, no branch."""
    git = Git(repo)
    work = contained(repo, make_folder(repo / WORKTREES_DIR, within=repo) / folder)
    try:
        git.run("worktree", "add", "--detach", "--quiet", str(work), revision(base_commit))
        yield work
    finally:
        git.run("worktree", "remove", "--force", str(work), check=False)
        shutil.rmtree(work, ignore_errors=True)
        git.run("worktree", "prune", check=False)


def save_body(repo: Path, branch: str, body: str) -> Path:
    """The PR body beside the branch (``.patchlane/prs/<branch>.md``), for a human or a later PR."""
    path = repo / body_path(branch)
    atomic_write(path, body, within=repo)
    return path


def open_pull_request(
    repo: Path,
    *,
    branch: str,
    base_branch: str,
    title: str,
    body: str,
    repository: str | None,
    api_base: str | None = None,
    remote: str = "origin",
    client: httpx.Client | None = None,
    token: str | None = None,
) -> tuple[PrStatus, str | None]:
    """Push ``branch`` (never forced) and find or open its pull request: (status, url)."""
    from retire.probes.codehost import token_from_env
    from retire.probes.http import make_client

    token = token or token_from_env()
    if not token:
        why = "no GITHUB_TOKEN; the PR body is saved beside the branch"
        return PrStatus(PrState.SKIPPED, why), None
    if not repository:
        return PrStatus(PrState.SKIPPED, "no repository (owner/name) to open the PR in"), None
    try:
        # the one git command that authenticates gets the caller's secrets (a credential helper
        # such as gh's reads GITHUB_TOKEN), and runs no hook, which is the repository's code
        Git(repo).run(
            "push",
            "--quiet",
            "--no-verify",
            remote,
            f"refs/heads/{branch}:refs/heads/{branch}",
            env=childenv.secrets_for_push(),
        )
    except GitError as exc:
        return PrStatus(PrState.FAILED, scrub(str(exc), [token])), None
    owned = client is None
    client = client or make_client()
    try:
        return PullRequests(client, repository, api_base=api_base, token=token).find_or_open(
            head=branch, base=base_branch, title=title, body=body
        )
    finally:
        if owned:
            client.close()


def base_of(repo: Path, base: str, pr_base: str | None) -> tuple[str, str]:
    """(commit, branch a PR targets) for a ``--base`` the user named."""
    git = Git(repo)
    commit = git.rev_parse(f"{base}^{{commit}}")
    if commit is None:
        raise InputError(
            None, "--base", f"{base!r} is not a commit in {repo}", "name a branch, tag or commit"
        )
    full = git.run(
        "rev-parse", "--symbolic-full-name", "--verify", "--quiet", revs=[base], check=False
    )
    return commit, pr_base or (
        full.removeprefix("refs/heads/") if full.startswith("refs/heads/") else "main"
    )
