"""The one placer of lanes against a bug's window (pure: the ancestry answers are gathered
elsewhere — :mod:`retire.history.mirrored` for ``patchlane bisect``, the verdicts' gather for
``patchlane verdicts``).

A release lane is placed by the release it locks (else pins exactly): :meth:`Window.place`. A
revision lane is placed by the commit it locks, first against the commits that made the window's
edges (at or past the fix commit — a fix in no release included — is *after*; not containing the
commit that brought the bug in is *before*), then against the mirror's release tags
(:class:`~retire.evidence.values.Ancestry`): part of a release before the window is *before*,
containing a release after it is *after*, part of and containing releases inside it is *inside*.
What the answers do not pin is *unknown*: never guessed, and an unknown place changes no step.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from retire.evidence.values import Ancestry
from retire.history.edge import Place
from retire.history.window import Window

__all__ = ["Placement", "Target", "place"]


@dataclass(frozen=True)
class Target:
    """What one lane carrying the shim locks of the window's distribution, and what a mirror
    answered about it: ``ancestry`` (where the locked commit stands among release tags) and
    ``contains`` ((pinned commit, whether the locked commit contains it) for the window's
    :meth:`~Window.pinned_commits`)."""

    lane: str
    distribution: str
    version: str | None = None
    commit: str | None = None
    ancestry: Ancestry | None = None
    contains: tuple[tuple[str, bool], ...] = ()
    # why the locked commit was not placed among releases (no mirror, not in it), when it was not
    unplaced: str = ""

    @property
    def locked(self) -> str | None:
        """``toylib 1.0``, ``megatron-core @ d98e8a64dd``."""
        if self.commit:
            return f"{self.distribution} @ {self.commit[:10]}"
        if self.version:
            return f"{self.distribution} {self.version}"
        return None


@dataclass(frozen=True)
class Placement:
    """One lane against the window: where, and the clause that says so (``toylib 1.0 is before
    the window — the bug came in after 1.0 (clean), by 1.2 (broken)``)."""

    lane: str
    place: Place
    says: str
    locked: str | None = None
    version: str | None = None
    commit: str | None = None

    def sentence(self) -> str:
        """``lane old: toylib 1.1 is before the window — …: the shim is not needed there``."""
        return f"lane {self.lane}: {self.says}{_MEANS[self.place]}"


_MEANS = {
    Place.BEFORE: ": the shim is not needed there",
    Place.INSIDE: ": the shim is needed",
    Place.AFTER: ": the shim can go there",
    Place.UNKNOWN: "",
}


def _placed(target: Target, place: Place, says: str) -> Placement:
    return Placement(target.lane, place, says, target.locked, target.version, target.commit)


def place(window: Window | None, target: Target) -> Placement:
    """Where ``target`` stands against ``window`` (the module docstring says when)."""
    if target.commit:
        return _by_commit(window, target)
    if target.version is None:
        return _placed(target, Place.UNKNOWN, f"the lane locks no {target.distribution}")
    return _by_release(window, target, target.version)


def _said(window: Window, subject: str, where: Place) -> str:
    intro, fixed = window.introduced.evidence(), window.fixed.evidence()
    if where == Place.BEFORE:
        return f"{subject} is before the window — {intro}"
    if where == Place.AFTER:
        return f"{subject} is after the window — {fixed}"
    if where == Place.INSIDE:
        branch = f"; {window.branch_fix.describe()}" if window.branch_fix is not None else ""
        return f"{subject} is inside the window ({intro}; {fixed}){branch}"
    return f"{subject} is not placed against the window (the runs do not pin it)"


def _by_release(window: Window | None, target: Target, version: str) -> Placement:
    locked = target.locked or version
    if window is None:
        return _placed(target, Place.UNKNOWN, f"{locked} is not placed: no window on record")
    try:
        Version(version)
    except InvalidVersion:
        return _placed(target, Place.UNKNOWN, f"{locked} is not a release")
    where = window.place(version)
    return _placed(target, where, _said(window, locked, where))


def _by_commit(window: Window | None, target: Target) -> Placement:
    locked = target.locked or ""
    if window is None or not window.seen:
        why = "no window on record" if window is None else "the window is not seen"
        return _placed(target, Place.UNKNOWN, f"{locked} is not placed: {why}")
    found = _by_pinned_commits(window, target, locked)
    if found is not None:
        return found
    ancestry = target.ancestry
    if ancestry is not None:
        within, contains = ancestry.within_version, ancestry.contained_version
        if within is not None and window.place(str(within)) == Place.BEFORE:
            says = f"{locked} (part of release {within}) is before the window — "
            return _placed(target, Place.BEFORE, says + window.introduced.evidence())
        if contains is not None and window.place(str(contains)) == Place.AFTER:
            says = f"{locked} (contains release {contains}) is after the window — "
            return _placed(target, Place.AFTER, says + window.fixed.evidence())
        if (
            within is not None
            and contains is not None
            and window.place(str(within)) == Place.INSIDE
            and window.place(str(contains)) == Place.INSIDE
        ):
            return _placed(target, Place.INSIDE, _said(window, locked, Place.INSIDE))
    fix = window.fix_commit
    if fix is not None and dict(target.contains).get(fix.sha) is False:
        return _placed(target, Place.INSIDE, f"{locked} is before the fix {fix.short}")
    why = target.unplaced or "the runs and the mirror do not pin it"
    return _placed(target, Place.UNKNOWN, f"{locked} is not placed against the window ({why})")


def _by_pinned_commits(window: Window, target: Target, locked: str) -> Placement | None:
    """At or past the fix commit (after), or without the commit that brought the bug in
    (before), by the ancestry answers for the window's pinned commits."""
    contains = dict(target.contains)
    fix, introduced = window.fix_commit, window.introduced.commit
    if fix is not None and contains.get(fix.sha) is True:
        branch = window.branch_fix
        more = f": {branch.describe()}" if branch is not None and branch.commit == fix else ""
        return _placed(target, Place.AFTER, f"{locked} is at or past the fix {fix.short}{more}")
    if introduced is not None and contains.get(introduced.sha) is False:
        says = f"{locked} is before {introduced.short} brought the bug in"
        return _placed(target, Place.BEFORE, says)
    return None
