"""A bug's window: the one value every reader of a bug's history takes (no I/O).

Its two edges (:mod:`retire.history.edge`) on an ordered history of releases (oldest first),
whether the bug was seen at all (when not, what ran and the stretches never tried), what the
runs told of each release, the disagreements among them (never a silent choice:
:mod:`retire.history.reading`), a fix on a followed branch in no release yet, and where the window
came from (:class:`Provenance`). :meth:`Window.place` says where a release stands against it;
:meth:`Window.line`, :meth:`Window.markdown` and :meth:`Window.to_json` are how every reader says
it — the verdicts, the report, packs, retirement branches and ``patchlane bisect``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from retire.core import mdsafe
from retire.history.edge import CommitSpan, Edge, EdgeKind, EdgeState, Place

if TYPE_CHECKING:
    # a reader of a window does not load the mirror's git (`patchlane --help` stays lean)
    from retire.mirrors.history import Commit
    from retire.mirrors.resolve import Resolved

__all__ = [
    "BranchFix",
    "Disagreement",
    "DisagreementKind",
    "Provenance",
    "Told",
    "Window",
    "unseen",
]


@dataclass(frozen=True)
class Told:
    """What the runs told of one release: broken (a run reproduced the bug) or clean, and
    ``where`` — the runs that said so (``lane gpu on h100-1 and 2 more``)."""

    item: str
    broken: bool
    where: str = ""


class DisagreementKind(enum.StrEnum):
    #: one item with runs that reproduced the bug and runs that did not: the bug wins
    SPLIT = "split"
    #: a clean item between two broken ones: placed nowhere, and no floor above the window
    NOT_MONOTONE = "not-monotone"


@dataclass(frozen=True)
class Disagreement:
    """Runs that disagree, and what the reading made of them (one line, for a flag)."""

    kind: DisagreementKind
    # the releases or commits it is about
    items: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class BranchFix:
    """A fix on a followed branch, in no release yet (or in one nobody ran): the commits from
    the newest broken release's tag to the branch's newest commit, and the commit that fixed it
    when pinned; the oldest release that contains it, once a release tag does."""

    branch: str
    span: CommitSpan
    repository: str = ""
    released_in: str | None = None

    @property
    def commit(self) -> Commit | None:
        return self.span.commit

    def describe(self) -> str:
        """``fixed on main at 0a1b2c3d4e5f (#92), in no release yet`` (``first released in
        1.9`` once a release tag contains it); the range when the commits do not pin it."""
        commit = self.commit
        if commit is None:
            return f"{self.span.describe()}, in no release yet"
        pull = f" (#{commit.pull})" if commit.pull is not None else ""
        where = f"first released in {self.released_in}" if self.released_in else "in no release yet"
        return f"fixed on {self.branch} at {commit.short}{pull}, {where}"

    def markdown(self) -> str:
        return mdsafe.text(self.describe())

    def to_json(self) -> dict[str, object]:
        commit = self.commit
        return {
            "repository": self.repository,
            "branch": self.branch,
            "sha": commit.sha if commit is not None else None,
            "subject": commit.subject if commit is not None else None,
            "pull": commit.pull if commit is not None else None,
            "released_in": self.released_in,
            "line": self.describe(),
        }


@dataclass(frozen=True)
class Provenance:
    """Where a window came from: the validation records read (how many, on which hosts, how many
    of them a bisection's or culprit search's — lane ``bisect``/``bisect:<lane>``), the mirror
    that ordered the commit runs and how the one resolver found it
    (:mod:`retire.mirrors.resolve`), and a bisection that extended it (its fresh runs, and the
    recorded broken release it started from)."""

    records: int = 0
    hosts: tuple[str, ...] = ()
    # of ``records``: runs of a bisection or a culprit search
    searched: int = 0
    # of ``records``: runs on a package built from a commit
    commit_runs: int = 0
    # the mirror that ordered the commit runs, and how it was found
    mirror: Resolved | None = None
    # a bisection that extended the history: its fresh runs (None: none)
    bisection: int | None = None
    # the broken release on record a bisection started from
    known_broken: str | None = None

    def describe(self) -> str:
        """``read from 7 records on 2 hosts (ci-1, h100-1), 4 of them bisection or culprit runs;
        commits ordered by the mirror of https://…, declared in patchlane.toml, matched by …``;
        ``a bisection of 9 runs, from the records' broken 1.5``."""
        parts = []
        if self.records:
            hosts = f" on {len(self.hosts)} host(s) ({', '.join(self.hosts)})" if self.hosts else ""
            searched = (
                f", {self.searched} of them bisection or culprit runs" if self.searched else ""
            )
            commits = f", {self.commit_runs} on commits" if self.commit_runs else ""
            parts.append(f"read from {self.records} record(s){hosts}{searched}{commits}")
        if self.mirror is not None:
            found = self.mirror
            parts.append(f"commits ordered by the mirror of {found.mirror.repository}, {found.how}")
        if self.bisection is not None:
            start = f", from the records' broken {self.known_broken}" if self.known_broken else ""
            parts.append(f"a bisection of {self.bisection} fresh run(s){start}")
        return "; ".join(parts) or "no evidence"


@dataclass(frozen=True)
class Window:
    """Where the bug is on ``history`` (releases, oldest first).

    ``seen``: a broken release is known. When not, ``reason`` says what ran and ``untried``
    lists the stretches (oldest, newest) no run reached. ``told``: what the runs told of each
    release; ``disagreements``: where they disagree (flags for a person)."""

    history: tuple[str, ...]
    seen: bool
    introduced: Edge
    fixed: Edge
    reason: str = ""
    untried: tuple[tuple[str, str], ...] = ()
    told: tuple[Told, ...] = ()
    disagreements: tuple[Disagreement, ...] = ()
    branch_fix: BranchFix | None = None
    source: Provenance = Provenance()

    # -- what it says ----------------------------------------------------------------------------
    @property
    def broken(self) -> tuple[str, ...]:
        """The releases a run showed broken, oldest first."""
        return tuple(t.item for t in self.told if t.broken)

    @property
    def clean(self) -> tuple[str, ...]:
        """The releases only clean runs were made on, oldest first."""
        return tuple(t.item for t in self.told if not t.broken)

    @property
    def first_fixed(self) -> str | None:
        """The first clean release after the last broken one (the fixed edge's new side)."""
        return self.fixed.after if self.seen else None

    @property
    def last_broken(self) -> str | None:
        return self.fixed.before if self.seen else None

    @property
    def fix_commit(self) -> Commit | None:
        """The commit that fixed it, where the commits pin it: between two releases' tags, else
        on a followed branch."""
        if self.fixed.commit is not None:
            return self.fixed.commit
        return self.branch_fix.commit if self.branch_fix is not None else None

    @property
    def monotone(self) -> bool:
        """Whether no clean release lies between two broken ones."""
        return not any(d.kind is DisagreementKind.NOT_MONOTONE for d in self.disagreements)

    def pinned_commits(self) -> tuple[str, ...]:
        """The shas of the commits that made an edge (ancestry of a lane's commit is asked against
        these): the introduced and the fix commit, and a fix on a branch."""
        found = [self.introduced.commit, self.fixed.commit]
        if self.branch_fix is not None:
            found.append(self.branch_fix.commit)
        return tuple(dict.fromkeys(c.sha for c in found if c is not None))

    def edge(self, kind: EdgeKind) -> Edge:
        return self.introduced if kind is EdgeKind.INTRODUCED else self.fixed

    # -- where an item stands ----------------------------------------------------------------------
    def place(self, item: str) -> Place:
        """Where release ``item`` stands: before the window (the bug is not there yet: not
        needed), inside it, after it (fixed), or unknown (a stretch not pinned, a clean release
        between broken ones)."""
        if not self.seen:
            return Place.UNKNOWN
        at = self._index(item)
        if at is None or self._disputed(at):
            return Place.UNKNOWN
        intro, fixed = self.introduced, self.fixed
        fixed_from, clean_to = self._index(fixed.after), self._index(intro.before)
        if fixed.state == EdgeState.FOUND and fixed_from is not None and at >= fixed_from:
            return Place.AFTER
        if intro.state == EdgeState.FOUND and clean_to is not None and at <= clean_to:
            return Place.BEFORE
        first = 0 if intro.state == EdgeState.OPEN else self._index(intro.after)
        last = len(self.history) - 1 if fixed.state == EdgeState.OPEN else self._index(fixed.before)
        if first is not None and last is not None and first <= at <= last:
            return Place.INSIDE
        if fixed.state == EdgeState.UNPINNED and fixed_from is not None and at >= fixed_from:
            return Place.AFTER
        if intro.state == EdgeState.UNPINNED and clean_to is not None and at <= clean_to:
            return Place.BEFORE
        return Place.UNKNOWN

    def _disputed(self, at: float) -> bool:
        """Whether ``at`` is a clean release between broken ones (the runs disagree there)."""
        return any(
            self._index(item) == at
            for d in self.disagreements
            if d.kind is DisagreementKind.NOT_MONOTONE
            for item in d.items
        )

    def _index(self, item: str | None) -> float | None:
        """``item``'s position in the history; a release not in it is placed by PEP 440 order,
        half-way between its neighbours (so it is never taken for either)."""
        if item is None:
            return None
        if item in self.history:
            return self.history.index(item)
        try:
            wanted = Version(item)
            order = [Version(h) for h in self.history]
        except InvalidVersion:
            return None
        if wanted in order:
            return order.index(wanted)
        return max((i for i, v in enumerate(order) if v < wanted), default=-1) + 0.5

    # -- how it is said ----------------------------------------------------------------------------
    def line(self) -> str:
        """The window in one line of plain text: ``introduced in 1.3 (last clean 1.2), by …;
        fixed in 1.6 (last broken 1.5), by abc123def456 "Fix add() (#63)" (#63)``. An open
        introduced edge is left out (it says only where the runs began); an open fixed edge is
        the fix on a followed branch where one is pinned."""
        if not self.seen:
            return f"window not seen: {self.reason}"
        return "; ".join(self._parts(markdown=False))

    def markdown(self) -> str:
        """:meth:`line` for a Markdown document: versions and shas as code, subjects inert."""
        if not self.seen:
            return mdsafe.text(f"window not seen: {self.reason}")
        return "; ".join(self._parts(markdown=True))

    def _parts(self, *, markdown: bool) -> list[str]:
        parts = []
        for edge in (self.introduced, self.fixed):
            if edge.kind is EdgeKind.INTRODUCED and edge.state == EdgeState.OPEN:
                continue
            fix = self.branch_fix
            if edge.kind is EdgeKind.FIXED and edge.state == EdgeState.OPEN and fix is not None:
                parts.append(fix.markdown() if markdown else fix.describe())
                continue
            text = _edge_markdown(edge) if markdown else edge.describe()
            if edge.commits is not None:
                span = edge.commits.markdown() if markdown else edge.commits.describe()
                text += f", {span}"
            parts.append(text)
        return parts

    def to_json(self) -> dict[str, object]:
        """The window as every JSON document carries it (retire/schemas: the verdict's and the
        report's ``window``)."""
        commit = self.fix_commit
        return {
            "seen": self.seen,
            "broken": list(self.broken),
            "clean": list(self.clean),
            "introduced": self.introduced.evidence() if self.seen else _NOT_SEEN,
            "fixed": self.fixed.evidence() if self.seen else _NOT_SEEN,
            "first_fixed": self.first_fixed,
            "last_broken": self.last_broken,
            "commit": None
            if commit is None
            else {"sha": commit.sha, "subject": commit.subject, "pull": commit.pull},
            "line": self.line(),
            "disagreements": [d.text for d in self.disagreements],
            "source": self.source.describe(),
            "mirror": self.source.mirror.to_json() if self.source.mirror is not None else None,
        }


_NOT_SEEN = "no run without the shim reproduced the bug"


def _edge_markdown(edge: Edge) -> str:
    if edge.state == EdgeState.FOUND:
        return (
            f"{edge.kind} in {mdsafe.code(str(edge.after))} ({edge.kind.old_side} "
            f"{mdsafe.code(str(edge.before))})"
        )
    return mdsafe.text(edge.describe())


def unseen(
    history: tuple[str, ...],
    reason: str,
    *,
    untried: tuple[tuple[str, str], ...] = (),
    told: tuple[Told, ...] = (),
    source: Provenance = Provenance(),
) -> Window:
    """A window in which the bug was not seen: ``reason`` says what ran, ``untried`` the
    stretches no run reached."""
    return Window(
        history,
        False,
        Edge(EdgeKind.INTRODUCED, EdgeState.UNSEARCHED),
        Edge(EdgeKind.FIXED, EdgeState.UNSEARCHED),
        reason,
        untried,
        told,
        source=source,
    )
