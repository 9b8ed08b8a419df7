"""The one reading of validation records into a bug's window (pure: the records are read, and a
mirror's commits ordered, elsewhere: :mod:`retire.history.mirrored`).

The runs are read as evidence values (:class:`~retire.evidence.values.ExecutionEvidence`: a
record as the verdicts read it). Only runs *without* the shim that prove something count — the
bug (``BUG_REPRODUCED``) or its absence (``FIX_VALIDATED``, ``MEMORY_SAVE_VERIFIED``) — on any
lane and any host, a bisection's and a culprit search's runs (lane ``bisect`` /
``bisect:<lane>``) like any other. A run whose target
was built from a commit (the host stamp's ``revisions``, or a local version label that is a
commit) is a *commit run*: it is placed by the mirror's order of the commits between two release
tags, never by its version label; every other run is a run of the release its version names.

**The rule when runs disagree: the bug wins.** A release (or a commit) with any run that
reproduced the bug is broken, whatever another run there said — uncertain evidence never retires
a shim. Every disagreement is kept on the window as a :class:`~retire.history.window.Disagreement`,
never chosen away in silence:

- *split*: one release or commit with both outcomes (the bug wins);
- *not monotone*: a clean release (or commit) between two broken ones — placed nowhere, and
  the verdicts prove no floor above it without a person.

The window: *introduced* between the newest clean release older than every broken one and the
oldest broken one (open when no older release ran clean); *fixed* between the newest broken
release and the oldest clean one after it (open when none ran clean after it: still broken).
Clean runs before the window are its *before*, never a floor. Where a mirror ordered the commits
between an edge's two release tags (:class:`CommitOrder`), the commit runs there continue the edge
into the commits; on a followed branch past the newest broken release, they pin a fix in no
release yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.validation import PROVING, Mode, RunOutcome, ValidationRecord
from retire.evidence.values import ExecutionEvidence
from retire.history.edge import CommitSpan, Edge, EdgeKind, EdgeState
from retire.history.window import (
    BranchFix,
    Disagreement,
    DisagreementKind,
    Provenance,
    Told,
    Window,
    unseen,
)
from retire.probes.records import evidence_of, is_bisection

if TYPE_CHECKING:
    # a reader of a window does not load the mirror's git (`patchlane --help` stays lean)
    from retire.mirrors.history import Commit
    from retire.mirrors.resolve import Resolved

__all__ = ["CommitOrder", "read", "read_runs"]


@dataclass(frozen=True)
class CommitOrder:
    """A mirror's first-parent commits from one release's tag to the next release's tag — or,
    with ``branch``, to that branch's newest commit — oldest first: what orders commit runs."""

    # (older release, newer release; or the branch's name)
    releases: tuple[str, str]
    # (older tag, newer tag or refs/heads/<branch>)
    tags: tuple[str, str]
    # the older tag's commit
    base: str
    # the newer end's commit last
    commits: tuple[Commit, ...]
    branch: str | None = None


@dataclass(frozen=True)
class _Run:
    """One counted run: the release or commit it was on, and what it said."""

    item: str
    commit: bool
    broken: bool
    where: str
    host: str
    searched: bool


def _counted(runs: Iterable[ExecutionEvidence], dist: str) -> list[_Run]:
    found = []
    for run in runs:
        if run.mode != Mode.WITHOUT or run.outcome not in PROVING:
            continue
        broken = run.outcome == RunOutcome.BUG_REPRODUCED
        searched = is_bisection(run.lane)
        commit = run.revision(dist)
        if commit:
            found.append(_Run(commit.lower(), True, broken, run.where, run.host, searched))
            continue
        version = run.version(dist)
        if version is not None:
            # a local label that is no commit (``2.5.1+cu121``) is a build of the release
            found.append(_Run(version.public, False, broken, run.where, run.host, searched))
    return found


def _where(runs: Sequence[_Run]) -> str:
    more = f" and {len(runs) - 1} more" if len(runs) > 1 else ""
    return f"{runs[-1].where}{more}" if runs else ""


def _tell(item: str, runs: Sequence[_Run], label: str) -> tuple[Told, Disagreement | None]:
    """What ``runs`` (all on ``item``) tell of it: the bug wins; both outcomes disagree."""
    bugs = [r for r in runs if r.broken]
    clean = [r for r in runs if not r.broken]
    told = Told(item, bool(bugs), _where(bugs or clean))
    if not (bugs and clean):
        return told, None
    text = (
        f"{label}: BUG_REPRODUCED ({_where(bugs)}) and clean ({_where(clean)}) without the shim "
        "— the bug wins"
    )
    return told, Disagreement(DisagreementKind.SPLIT, (item,), text)


def _releases(runs: Sequence[_Run], dist: str) -> tuple[list[Told], list[Disagreement]]:
    """Each release run, oldest first (two spellings of one version are one release)."""
    by_version: dict[Version, list[_Run]] = {}
    names: dict[Version, str] = {}
    for run in runs:
        if run.commit:
            continue
        version = Version(run.item)
        by_version.setdefault(version, []).append(run)
        names.setdefault(version, run.item)
    told, flags = [], []
    for version in sorted(by_version):
        said, flag = _tell(names[version], by_version[version], f"{dist} {names[version]}")
        told.append(said)
        flags += [flag] if flag is not None else []
    return told, flags


def _not_monotone(told: Sequence[Told], dist: str) -> Disagreement | None:
    broken = [i for i, t in enumerate(told) if t.broken]
    inside = [t.item for t in told[broken[0] : broken[-1]] if not t.broken] if broken else []
    if not inside:
        return None
    first, last = told[broken[0]].item, told[broken[-1]].item
    text = (
        f"{dist} {', '.join(inside)} ran clean without the shim between broken releases "
        f"({first} … {last}): not placed, and no floor is proven above them without a person"
    )
    return Disagreement(DisagreementKind.NOT_MONOTONE, tuple(inside), text)


def _edges(told: Sequence[Told]) -> tuple[Edge, Edge]:
    """(introduced, fixed) over the releases run, at least one of them broken."""
    broken = [i for i, t in enumerate(told) if t.broken]
    first, last = broken[0], broken[-1]
    clean_below = [t.item for t in told[:first] if not t.broken]
    clean_above = [t.item for t in told[last + 1 :] if not t.broken]
    introduced = (
        Edge(EdgeKind.INTRODUCED, EdgeState.FOUND, clean_below[-1], told[first].item)
        if clean_below
        else Edge(
            EdgeKind.INTRODUCED,
            EdgeState.OPEN,
            None,
            told[first].item,
            note=f"broken from the oldest release run, {told[first].item}",
        )
    )
    fixed = (
        Edge(EdgeKind.FIXED, EdgeState.FOUND, told[last].item, clean_above[0])
        if clean_above
        else Edge(
            EdgeKind.FIXED,
            EdgeState.OPEN,
            told[last].item,
            note=f"still broken at the newest release run, {told[last].item}",
        )
    )
    return introduced, fixed


def _same(a: str | None, b: str) -> bool:
    if a is None:
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _states(order: CommitOrder, runs: Sequence[_Run]) -> tuple[dict[int, bool], list[_Run]]:
    """{index in the order: broken?} of the commit runs there (the bug wins), and the runs."""
    shas = [c.sha.lower() for c in order.commits]
    placed: dict[int, list[_Run]] = {}
    for run in runs:
        if not run.commit or len(run.item) < 7:
            continue
        at = next((i for i, sha in enumerate(shas) if sha.startswith(run.item)), None)
        if at is not None:
            placed.setdefault(at, []).append(run)
    return {i: any(r.broken for r in rs) for i, rs in placed.items()}, [
        r for rs in placed.values() for r in rs
    ]


def _span(
    order: CommitOrder, kind: EdgeKind, runs: Sequence[_Run]
) -> tuple[CommitSpan | None, list[Disagreement]]:
    """The edge in ``order``'s commits, as the commit runs there pin it (None: none ran there)."""
    states, placed = _states(order, runs)
    if not states:
        return None, []
    flags = []
    shas = [c.sha for c in order.commits]
    for i in sorted(states):
        on = [r for r in placed if shas[i].lower().startswith(r.item)]
        _, flag = _tell(shas[i], on, f"commit {shas[i][:12]}")
        flags += [flag] if flag is not None else []
    old = kind is EdgeKind.FIXED
    if order.branch is None:
        # the newer tag's commit is the newer release, told by its release runs
        states.setdefault(len(shas) - 1, not old)
    last_old = max((i for i, broken in states.items() if broken == old), default=-1)
    early = [shas[i] for i, broken in states.items() if broken != old and i < last_old]
    if early:
        text = (
            f"commit(s) {', '.join(s[:12] for s in sorted(early))} ran "
            f"{'clean' if old else 'broken'} before {shas[last_old][:12]} ran "
            f"{'broken' if old else 'clean'}: not placed"
        )
        flags.append(Disagreement(DisagreementKind.NOT_MONOTONE, tuple(early), text))
    first_new = min((i for i, b in states.items() if b != old and i > last_old), default=None)
    if first_new is None:
        return None, flags
    between = tuple(shas[last_old + 1 : first_new])
    found = not between
    span = CommitSpan(
        kind,
        order.tags,
        len(shas),
        EdgeState.FOUND if found else EdgeState.UNPINNED,
        shas[last_old] if last_old >= 0 else order.base,
        shas[first_new],
        between,
        "" if found else "the commits between were not run",
        order.commits[first_new] if found else None,
    )
    return span, flags


def _unseen_reason(told: Sequence[Told], runs: Sequence[_Run]) -> str:
    clean = f" (clean: {', '.join(t.item for t in told)})" if told else ""
    on_commits = sum(r.commit for r in runs)
    commits = (
        f"; {on_commits} run(s) on commits, which only a mirror's order places"
        if on_commits
        else ""
    )
    return f"no release run without the shim reproduced the bug{clean}{commits}"


def _provenance(runs: Sequence[_Run], mirror: Resolved | None) -> Provenance:
    return Provenance(
        records=len(runs),
        hosts=tuple(sorted({r.host for r in runs})),
        searched=sum(r.searched for r in runs),
        commit_runs=sum(r.commit for r in runs),
        mirror=mirror if any(r.commit for r in runs) else None,
    )


def read(
    records: Iterable[ValidationRecord],
    shim: str,
    distribution: str,
    *,
    orders: Sequence[CommitOrder] = (),
    mirror: Resolved | None = None,
) -> Window | None:
    """``shim``'s window on ``distribution`` as ``records`` show it (every lane, every host): the
    records read as evidence values (:func:`retire.probes.records.evidence_of`), then
    :func:`read_runs`."""
    mine = (evidence_of(record) for record in records if record.shim == shim)
    return read_runs(mine, distribution, orders=orders, mirror=mirror)


def read_runs(
    runs: Iterable[ExecutionEvidence],
    distribution: str,
    *,
    orders: Sequence[CommitOrder] = (),
    mirror: Resolved | None = None,
) -> Window | None:
    """The window on ``distribution`` as the recorded ``runs`` of one shim show it (the module
    docstring has the rule); ``orders``: the commits a mirror (``mirror``, and how it was found)
    ordered between an edge's release tags, or from the newest broken release's tag along a
    followed branch. None when no run counts at all."""
    dist = canonicalize_name(distribution)
    counted = _counted(runs, dist)
    if not counted:
        return None
    told, flags = _releases(counted, dist)
    source = _provenance(counted, mirror)
    history = tuple(t.item for t in told)
    if not any(t.broken for t in told):
        return unseen(history, _unseen_reason(told, counted), told=tuple(told), source=source)
    if (disorder := _not_monotone(told, dist)) is not None:
        flags.append(disorder)
    introduced, fixed = _edges(told)
    edges = {EdgeKind.INTRODUCED: introduced, EdgeKind.FIXED: fixed}
    branch_fix = None
    for order in orders:
        if order.branch is not None:
            if fixed.state != EdgeState.OPEN or not _same(fixed.before, order.releases[0]):
                continue
            span, more = _span(order, EdgeKind.FIXED, counted)
            flags += more
            if span is not None and span.commit is not None and branch_fix is None:
                named = mirror.mirror.repository if mirror is not None else ""
                branch_fix = BranchFix(order.branch, span, named)
            continue
        for kind, edge in edges.items():
            if (
                edge.state == EdgeState.FOUND
                and _same(edge.before, order.releases[0])
                and edge.after is not None
                and _same(edge.after, order.releases[1])
            ):
                span, more = _span(order, kind, counted)
                flags += more
                edges[kind] = replace(edge, commits=span)
    return Window(
        history,
        True,
        edges[EdgeKind.INTRODUCED],
        edges[EdgeKind.FIXED],
        told=tuple(told),
        disagreements=tuple(flags),
        branch_fix=branch_fix,
        source=source,
    )
