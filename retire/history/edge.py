"""The edges of a bug's window, and where an item stands against a window (values, no I/O).

A window has two edges: *introduced* (the first broken item after a clean one) and *fixed* (the
first clean item after a broken one). Each says how much is known of it (:class:`EdgeState`),
the item on each side, what could not be told or was not tried between them, and — where the
edge lies between two adjacent releases and a mirror ordered the commits between their tags —
the same edge in the commits (:class:`CommitSpan`), naming the commit and its pull request only
when they are pinned: an unpinned commit edge names its range, never a commit.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retire.core import mdsafe

if TYPE_CHECKING:
    # a reader of a window does not load the mirror's git (`patchlane --help` stays lean)
    from retire.mirrors.history import Commit

__all__ = [
    "CommitSearch",
    "CommitSpan",
    "Edge",
    "EdgeKind",
    "EdgeState",
    "Place",
    "commit_words",
]


class EdgeKind(enum.StrEnum):
    """Which edge of the window: where the bug came in, or where it went."""

    INTRODUCED = "introduced"
    FIXED = "fixed"

    @property
    def old_side(self) -> str:
        """What the item on the old side is: ``last clean`` (introduced), ``last broken``."""
        return "last clean" if self is EdgeKind.INTRODUCED else "last broken"


class EdgeState(enum.StrEnum):
    """How much is known of one edge of the window."""

    #: its two sides are neighbours (not counting items the reproducer cannot run against)
    FOUND = "found"
    #: items that could not be told, or were not tried, lie between its sides
    UNPINNED = "unpinned"
    #: broken from the oldest item on (introduced), still broken at the newest (fixed)
    OPEN = "open"
    #: a budget ended the search first, or no search was made
    UNSEARCHED = "unsearched"


class CommitSearch(enum.StrEnum):
    """How an edge's commits were searched (:mod:`retire.bisect.informed`)."""

    #: every first-parent commit of the range, by a binary search
    FULL = "full"
    #: the commits that touch the target's files first; the edge is at one of them, confirmed by
    #: the commit before it
    TOUCHING = "touching"
    #: the touching commits first, then, the confirmation failed (or could not run), the full
    #: search of what was left
    FELL_BACK = "fell-back"
    #: nothing in the range touches the target's files: the full search
    UNINFORMED = "uninformed"


class Place(enum.StrEnum):
    """Where an item (a lane's release or commit) stands against the window."""

    BEFORE = "before"
    INSIDE = "inside"
    AFTER = "after"
    UNKNOWN = "unknown"


def commit_words(commit: Commit) -> str:
    """``abc123def456 "Fix add() (#63)" (#63)`` (plain text: the subject is upstream's)."""
    pull = f" (#{commit.pull})" if commit.pull is not None else ""
    return f'{commit.short} "{commit.subject}"{pull}'


def _commit_markdown(commit: Commit) -> str:
    pull = f" (#{commit.pull})" if commit.pull is not None else ""
    return f'{mdsafe.code(commit.short)} "{mdsafe.text(commit.subject, 120)}"{pull}'


@dataclass(frozen=True)
class CommitSpan:
    """One release edge continued in the first-parent commits between its two releases' tags (or,
    for a fix in no release, from the newest broken release's tag to a branch's newest commit).

    ``before`` and ``after`` are the shas on each side (``before`` is the older tag's commit when
    the range's first commit made the change); ``between`` the commits not told or not tried.
    ``commit`` is the commit that made the edge — the first broken (introduced) or the first clean
    (fixed) one — and is set only when ``state`` is found."""

    kind: EdgeKind
    # (older tag, newer tag or branch ref)
    tags: tuple[str, str]
    # commits in the range, the newer end's included
    count: int
    state: EdgeState
    before: str | None = None
    after: str | None = None
    between: tuple[str, ...] = ()
    note: str = ""
    commit: Commit | None = None
    # the named build that made each commit's wheel (``WheelBuild.describe()``), when not uv's
    build: str | None = None
    # why the edge stayed unpinned where its candidates could not be built here (the build
    # backend missing from the index, a failed build), else None
    unbuilt: str | None = None
    # how its commits were searched, the sentence that says so, the target's files read for it
    # and how many commits of the range touch them
    search: CommitSearch = CommitSearch.FULL
    search_note: str = ""
    paths: tuple[str, ...] = ()
    touching: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EdgeKind(self.kind))
        object.__setattr__(self, "state", EdgeState(self.state))
        object.__setattr__(self, "search", CommitSearch(self.search))
        if self.commit is not None and self.state != EdgeState.FOUND:
            # an unpinned edge names its range: a commit would be read as the answer
            raise ValueError(f"a {self.state} commit edge names no commit")

    def describe(self) -> str:
        """``by abc123def456 "Fix add() (#63)" (#63)``; not pinned, the range and the commits
        left in it: ``fixed in v1.5..v1.6, not pinned (one of …)``."""
        if self.commit is not None:
            return f"by {commit_words(self.commit)}"
        return f"{self._range()}{_note(self.note)}"

    def markdown(self) -> str:
        if self.commit is not None:
            return f"by {_commit_markdown(self.commit)}"
        return mdsafe.text(f"{self._range()}{_note(self.note)}")

    def _range(self) -> str:
        left = [sha[:12] for sha in (*self.between, self.after) if sha]
        shown = ", ".join(left[:_SHOWN]) + (
            f", … ({len(left)} in all)" if len(left) > _SHOWN else ""
        )
        old, new = (tag.removeprefix("refs/heads/") for tag in self.tags)
        return f"{self.kind} in {old}..{new}, not pinned (one of {shown})"

    def search_json(self) -> dict[str, object]:
        """How its commits were searched (``search`` of a commit edge in
        retire/schemas/bisect.schema.json)."""
        return {
            "how": str(self.search),
            "note": self.search_note,
            "paths": list(self.paths),
            "touching": self.touching,
        }

    def to_json(self) -> dict[str, object]:
        """The commit-level edge (the keys of an edge, retire/schemas/bisect.schema.json)."""
        return _edge_keys(self)


#: How many of an unpinned edge's commits its line names.
_SHOWN = 8


def _note(note: str) -> str:
    return f" — {note}" if note else ""


@dataclass(frozen=True)
class Edge:
    """One edge over an ordered history: ``before`` is the last item on the old side, ``after``
    the first on the new side (introduced: clean → broken; fixed: broken → clean); ``between``
    what could not be told or was not tried between them; ``commits`` the same edge in the
    commits between the two releases' tags, where a mirror ordered them."""

    kind: EdgeKind
    state: EdgeState
    before: str | None = None
    after: str | None = None
    between: tuple[str, ...] = ()
    note: str = ""
    commits: CommitSpan | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EdgeKind(self.kind))
        object.__setattr__(self, "state", EdgeState(self.state))

    @property
    def commit(self) -> Commit | None:
        """The commit that made the edge, when the commits pin it."""
        return self.commits.commit if self.commits is not None else None

    def describe(self) -> str:
        """``fixed in 1.6 (last broken 1.5)``, ``introduced: open — broken from …``."""
        verb, old = str(self.kind), self.kind.old_side
        if self.state == EdgeState.FOUND:
            return f"{verb} in {self.after} ({old} {self.before})"
        if self.state == EdgeState.UNPINNED:
            return (
                f"{verb} in {', '.join(self.between)} or {self.after} ({old} "
                f"{self.before or 'not seen'}){_note(self.note)}"
            )
        if self.state == EdgeState.OPEN:
            return f"{verb}: open{_note(self.note)}"
        return f"{verb}: not searched{_note(self.note)}"

    def evidence(self) -> str:
        """What the runs say of the edge, as a clause: ``the bug came in after 1.0 (clean), by
        1.2 (broken)``, ``fixed after 1.4 (broken), by 1.6 (clean)``, ``still broken at the newest
        release run, 1.3``."""
        if self.kind is EdgeKind.INTRODUCED:
            if self.before is not None and self.after is not None:
                return f"the bug came in after {self.before} (clean), by {self.after} (broken)"
            if self.after is not None:
                return f"the bug reproduced on {self.after}; no older release was run clean"
            return "no run without the shim reproduced the bug"
        if self.before is not None and self.after is not None:
            return f"fixed after {self.before} (broken), by {self.after} (clean)"
        if self.before is not None:
            return f"still broken at the newest release run, {self.before}"
        return "no run without the shim reproduced the bug"

    def to_json(self) -> dict[str, object]:
        """The edge over releases (the keys of an edge, retire/schemas/bisect.schema.json)."""
        return _edge_keys(self)


def _edge_keys(edge: Edge | CommitSpan) -> dict[str, object]:
    """The keys an edge has in JSON, over releases or over commits: which, how much is known,
    the two sides, what lies between them and the note."""
    return {
        "kind": str(edge.kind),
        "state": str(edge.state),
        "before": edge.before,
        "after": edge.after,
        "between": list(edge.between),
        "note": edge.note,
    }
