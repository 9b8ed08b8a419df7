"""Where a bisection starts, pure: the newest release the project has evidence is broken.

Three kinds of evidence, the newest release among them wins:

- *records*: the releases the bug's window on record shows broken
  (:func:`retire.history.reading.read`: every without-shim run of the shim, any lane, any host, a
  bisection's and a culprit search's own records included; a run on a commit is no release's);
- *lock*: the release of the target a lane carrying the shim locks, where that lane recorded
  the bug and the record does not say which release it ran on;
- *affected*: the newest listed release inside the manifest's ``[target] affected`` specifier,
  when the specifier has an upper bound (``<0.8.2``, ``<=0.19.2``, ``==0.19.*``).

Releases older than that are out of the range (they say nothing about where the fix landed);
``--since`` / ``--until`` override, ``--all`` searches every release.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.bisect.search import public
from retire.evidence.validation import Mode, RunOutcome, ValidationRecord
from retire.history.reading import read
from retire.probes.records import evidence_of

__all__ = ["Bounds", "BrokenEvidence", "broken_evidence", "choose_bounds"]

#: Specifier operators that bound a range from above.
_UPPER = ("<", "<=", "==", "===", "~=")


@dataclass(frozen=True)
class BrokenEvidence:
    """One release shown broken, and by what."""

    version: str
    # "record" | "lock" | "affected"
    source: str
    # "lane gpu on h100-1", "lane gpu's lock (BUG_REPRODUCED there on h100-1)", '"<0.8.2"'
    where: str

    def describe(self, distribution: str) -> str:
        if self.source == "record":
            return f"BUG_REPRODUCED on {distribution} {self.version}, {self.where}"
        if self.source == "lock":
            return f"{distribution} {self.version} locked by {self.where}"
        return (
            f"[target] affected = {self.where}: its newest listed release {distribution} "
            f"{self.version}"
        )


@dataclass(frozen=True)
class Bounds:
    """The range a bisection searches and what set it."""

    since: str | None = None
    until: str | None = None
    # the evidence's release: the search's lower bound
    known_broken: str | None = None
    # what showed ``known_broken`` broken, for people
    evidence: str = ""
    # for people: which evidence set the range
    note: str = ""


def broken_evidence(
    shim: str,
    distribution: str,
    records: Iterable[ValidationRecord],
    *,
    lane_locks: Mapping[str, str | None] | None = None,
    affected: SpecifierSet | None = None,
    releases: Iterable[str] = (),
) -> list[BrokenEvidence]:
    """Every release the project has evidence is broken, in no particular order.

    ``lane_locks``: ``{lane: version of the target it locks}`` for the lanes carrying the shim.
    """
    dist = canonicalize_name(distribution)
    lane_locks = lane_locks or {}
    records = list(records)
    # the window the records already give: where a bisection that extends it starts
    window = read(records, shim, dist)
    told = window.told if window is not None else ()
    found = [BrokenEvidence(t.item, "record", t.where) for t in told if t.broken]
    for record in records:
        if (
            record.shim != shim
            or record.mode != Mode.WITHOUT
            or record.outcome != RunOutcome.BUG_REPRODUCED
        ):
            continue
        run = evidence_of(record)
        if run.version(dist) is not None or run.revision(dist):
            continue
        if locked := _versions([lane_locks.get(run.lane) or ""]):
            # The run did not say which release it saw: the lock of its lane does.
            found.append(
                BrokenEvidence(
                    str(locked[0]),
                    "lock",
                    f"lane {run.lane}'s lock (BUG_REPRODUCED recorded on that lane on {run.host})",
                )
            )
    if affected is not None and any(spec.operator in _UPPER for spec in affected):
        inside = [v for v in _versions(releases) if affected.contains(v, prereleases=True)]
        if inside:
            found.append(BrokenEvidence(str(max(inside)), "affected", f'"{affected}"'))
    return found


def choose_bounds(
    distribution: str,
    evidence: Iterable[BrokenEvidence],
    *,
    since: str | None = None,
    until: str | None = None,
    every: bool = False,
) -> Bounds:
    """The range: ``since`` (or every release with ``every``) overrides the evidence's lower
    bound; with ``since``, the newest evidence inside the range is still the broken release the
    search starts from (``known_broken``)."""
    upto = f", up to --until {until}" if until else ""
    if every:
        return Bounds(None, until, note=f"every release (--all){upto}")
    if since:
        # evidence inside the range is the broken release a window search starts from
        inside = [e for e in evidence if _within(e.version, since, until)]
        found = max(inside, key=lambda e: Version(public(e.version)), default=None)
        if found is None:
            return Bounds(since, until, note=f"from --since {since}{upto}")
        why = found.describe(distribution)
        return Bounds(
            since, until, public(found.version), why, f"from --since {since}{upto}; {why}"
        )
    newest = max(evidence, key=lambda e: Version(public(e.version)), default=None)
    if newest is None:
        return Bounds(
            None, until, note=f"every release: no recorded evidence of a broken release{upto}"
        )
    version, why = public(newest.version), newest.describe(distribution)
    return Bounds(version, until, version, why, f"from {why}{upto}")


def _within(version: str, since: str, until: str | None) -> bool:
    try:
        v = Version(public(version))
        return Version(public(since)) <= v and (until is None or v <= Version(public(until)))
    except InvalidVersion:
        return False


def _versions(texts: Iterable[str]) -> list[Version]:
    out = []
    for text in texts:
        try:
            out.append(Version(text))
        except InvalidVersion:
            continue
    return out
