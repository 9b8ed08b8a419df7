"""What the probes of upstream found: immutable values, no I/O.

Every probe returns one of these values **or** a :class:`ProbeFailure`; none raises into the
engine. The verdict logic (``retire.verdicts``) reads only these types, so it is a pure function
and its tests need no servers.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from retire.evidence.floor import Floor

__all__ = [
    "EVIDENCE_KINDS",
    "Ancestry",
    "BranchTip",
    "Evidence",
    "ExecutionEvidence",
    "ExecutionHistory",
    "IssueState",
    "LinkStatus",
    "MirrorPull",
    "ProbeFailure",
    "PullState",
    "Release",
    "ReleaseFile",
    "ReleaseList",
    "TagContainment",
    "nightly_date",
    "to_json",
]


@dataclass(frozen=True)
class ProbeFailure:
    """A probe could not answer. The engine turns it into an *unknown* verdict, never an action."""

    # index | codehost | git | records | lock
    probe: str
    # what was asked: a URL, "repo@commit", a file
    target: str
    # one line, secrets redacted
    reason: str
    # asking again later may succeed (timeouts, 5xx, rate limits)
    retryable: bool = False
    attempts: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", " ".join(self.reason.split()))

    def __str__(self) -> str:
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{self.probe} {self.target}: {self.reason}{tries}"


# ---------------------------------------------------------------------------------------------
# Package index


@dataclass(frozen=True)
class ReleaseFile:
    filename: str
    # PEP 700; None when the index does not say
    upload_time: _dt.datetime | None
    yanked: bool = False
    yanked_reason: str | None = None
    # PEP 503 data-requires-python / PEP 691 requires-python
    requires_python: str | None = None
    # (algorithm, hex digest): the URL fragment or PEP 691 hashes
    hashes: tuple[tuple[str, str], ...] = ()
    # PEP 658 / 714: the METADATA is served beside the file
    core_metadata: bool = False


def nightly_date(version: Version) -> _dt.date | None:
    """The date of a nightly (``2.12.0.dev20260701``), or None for anything else."""
    if version.dev is None or len(str(version.dev)) != 8:
        return None
    text = str(version.dev)
    try:
        return _dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return None


@dataclass(frozen=True)
class Release:
    """One version of a distribution on one index, from its files (PEP 592: yanked when all are)."""

    version: Version
    files: tuple[ReleaseFile, ...]

    @property
    def upload_time(self) -> _dt.datetime | None:
        """When the first file of the release appeared (what "released on" means)."""
        times = [f.upload_time for f in self.files if f.upload_time is not None]
        return min(times) if times else None

    @property
    def yanked(self) -> bool:
        return bool(self.files) and all(f.yanked for f in self.files)

    @property
    def yanked_reason(self) -> str | None:
        return next((f.yanked_reason for f in self.files if f.yanked and f.yanked_reason), None)

    @property
    def prerelease(self) -> bool:
        # a, b, rc and .dev (nightlies) alike
        return self.version.is_prerelease

    @property
    def dev(self) -> bool:
        return self.version.is_devrelease

    @property
    def nightly(self) -> _dt.date | None:
        return nightly_date(self.version)


@dataclass(frozen=True)
class ReleaseList:
    """The releases of ``distribution`` on ``index_url``, sorted by version.

    ``api`` says which simple API answered (``PEP 691 JSON`` or ``PEP 503 HTML``; '' when not
    known). A PEP 503 page carries no upload times unless the index adds ``data-upload-time``, so
    read :attr:`has_upload_times` before concluding anything from when a release appeared.
    """

    # canonical name
    distribution: str
    # credentials masked
    index_url: str
    releases: tuple[Release, ...]
    api: str = ""

    @property
    def has_upload_times(self) -> bool:
        """Whether the index said when any file appeared (PEP 700 / ``data-upload-time``)."""
        return any(f.upload_time is not None for r in self.releases for f in r.files)

    @property
    def source(self) -> str:
        """The index and its API, for messages: ``http://… (PEP 503 HTML)``."""
        return f"{self.index_url} ({self.api})" if self.api else self.index_url

    def get(self, version: str | Version) -> Release | None:
        wanted = Version(str(version))
        return next((r for r in self.releases if r.version == wanted), None)

    def available(self) -> tuple[Release, ...]:
        """Releases one can install: not yanked."""
        return tuple(r for r in self.releases if not r.yanked)

    def matching(self, specifier: SpecifierSet) -> tuple[Release, ...]:
        """Installable releases inside ``specifier``, with pip's rule for pre-releases: only when
        the specifier names one or no final release matches."""
        by_version = {r.version: r for r in self.available()}
        return tuple(by_version[v] for v in specifier.filter(sorted(by_version)))

    @property
    def latest(self) -> Release | None:
        available = self.available()
        finals = [r for r in available if not r.prerelease]
        newest = finals or list(available)
        return newest[-1] if newest else None

    def merged(self, other: ReleaseList) -> ReleaseList:
        """The union of two indexes' answers (lanes that resolve the distribution differently)."""
        files: dict[Version, dict[str, ReleaseFile]] = {}
        for release in (*self.releases, *other.releases):
            bucket = files.setdefault(release.version, {})
            for item in release.files:
                bucket.setdefault(item.filename, item)
        releases = tuple(Release(v, tuple(files[v].values())) for v in sorted(files))
        urls = (
            self.index_url
            if other.index_url == self.index_url
            else f"{self.index_url} + {other.index_url}"
        )
        api = (
            self.api if other.api == self.api else " + ".join(a for a in (self.api, other.api) if a)
        )
        return ReleaseList(self.distribution, urls, releases, api)


# ---------------------------------------------------------------------------------------------
# Code host

#: An issue's or pull request's state on the code host (a merged pull request is closed).
LinkStatus = Literal["open", "closed"]


@dataclass(frozen=True)
class PullState:
    # the web URL the manifest names
    url: str
    number: int
    state: LinkStatus
    merged: bool
    merged_at: _dt.datetime | None = None
    merge_commit_sha: str | None = None
    updated_at: _dt.datetime | None = None
    closed_at: _dt.datetime | None = None
    title: str = ""

    @property
    def label(self) -> str:
        return f"PR #{self.number}"


@dataclass(frozen=True)
class IssueState:
    url: str
    number: int
    state: LinkStatus
    # completed | not_planned | reopened
    state_reason: str | None = None
    updated_at: _dt.datetime | None = None
    closed_at: _dt.datetime | None = None
    title: str = ""

    @property
    def label(self) -> str:
        return f"issue #{self.number}"


# ---------------------------------------------------------------------------------------------
# Git


@dataclass(frozen=True)
class TagContainment:
    """Which tags of a local mirror contain ``commit``.

    ``release_tags`` are the containing tags that look like releases; ``tag_versions`` maps every
    release-looking tag of the mirror (containing or not) to its version, so a reader can tell
    "not released yet" from "the mirror has not fetched that release's tag".
    """

    repository: str
    # the full sha
    commit: str
    tags: tuple[str, ...]
    release_tags: tuple[str, ...]
    tag_versions: tuple[tuple[str, str], ...] = ()

    @property
    def contained(self) -> bool:
        return bool(self.release_tags)

    def version_of(self, tag: str) -> Version | None:
        text = dict(self.tag_versions).get(tag)
        try:
            return Version(text) if text else None
        except ValueError:
            return None

    def released_versions(self) -> tuple[Version, ...]:
        """Versions of the release tags that contain the commit, ascending."""
        return tuple(
            sorted({v for t in self.release_tags if (v := self.version_of(t)) is not None})
        )

    def known_versions(self) -> frozenset[Version]:
        return frozenset(v for t, _ in self.tag_versions if (v := self.version_of(t)) is not None)


@dataclass(frozen=True)
class BranchTip:
    """Where a commit a reproducer ran on stands in a local mirror: ``branches`` are the followed
    branches whose newest commit it is (empty: it is in the mirror, but no followed branch ends
    there). A run on a branch's newest commit is to that branch what a run on the newest locked
    release is to the releases."""

    repository: str
    # the full sha
    commit: str
    branches: tuple[str, ...]
    newest_commit_at: _dt.datetime | None = None

    @property
    def is_tip(self) -> bool:
        return bool(self.branches)


@dataclass(frozen=True)
class Ancestry:
    """Where a commit stands among a local mirror's release tags, by git ancestry.

    ``contains`` is the newest release (by version) whose tag is an ancestor of the commit: the
    commit has everything that release has. ``within`` is the oldest release whose tag has the
    commit as an ancestor: the commit is part of that release. A commit on a branch that split
    from the release line (``main`` beside ``core_r0.19.0``) may have neither above a given
    release: then it is neither at nor below that release, and only a run on it can say.
    ``branch`` is the branch asked for, when ``commit`` is that branch's newest commit.
    """

    repository: str
    # the full sha
    commit: str
    # (tag, version) of the newest release the commit contains
    contains: tuple[str, str] | None = None
    # (tag, version) of the oldest release that contains the commit
    within: tuple[str, str] | None = None
    branch: str | None = None

    @property
    def contained_version(self) -> Version | None:
        return Version(self.contains[1]) if self.contains else None

    @property
    def within_version(self) -> Version | None:
        return Version(self.within[1]) if self.within else None

    def reaches(self, floor: Version) -> bool | None:
        """True: the commit contains a release at or above ``floor``; False: it is part of a
        release at or below ``floor`` (and contains none at or above it); None: neither — the
        ancestry does not order it against ``floor``."""
        contained, within = self.contained_version, self.within_version
        if contained is not None and contained >= floor:
            return True
        if within is not None and within <= floor:
            return False
        return None

    @property
    def order(self) -> Version:
        """A version that sorts the commit among releases by ancestry: just above the newest
        release it contains (``0.15.0rc7+gd98e8a64d``), below every later release."""
        base = self.contains[1] if self.contains else "0"
        return Version(f"{base}+g{self.commit[:9]}")

    def label(self) -> str:
        """``d98e8a64dd (main)``: the commit and the branch it was asked as."""
        return f"{self.commit[:10]}" + (f" ({self.branch})" if self.branch else "")


@dataclass(frozen=True)
class MirrorPull:
    """What a local git mirror says of pull request ``#number`` of ``repository``.

    ``commit`` is the commit that landed it on a branch the mirror follows — a squash whose
    subject ends in ``(#N)``, or a merge commit ``Merge pull request #N`` — or None when the
    mirror has none: not merged yet, or the mirror is behind (``newest_commit_at`` says how fresh
    it is; a reader never concludes "not merged" from an old mirror alone). ``containment`` is
    the release tags that contain ``commit``.
    """

    repository: str
    number: int
    commit: str | None
    # squash | merge | none
    how: str
    subject: str = ""
    containment: TagContainment | None = None
    newest_commit_at: _dt.datetime | None = None

    @property
    def landed(self) -> bool:
        return self.commit is not None

    @property
    def label(self) -> str:
        return f"PR #{self.number}"


# ---------------------------------------------------------------------------------------------
# Execution

#: A local version label that names a commit: 7 to 40 hex digits, setuptools-scm's ``g`` prefix
#: allowed, possibly after other dot-separated parts (``dev5.gd48bd6b``).
_LOCAL_COMMIT = re.compile(r"(?:.*\.)?g?([0-9a-f]{7,40})")


@dataclass(frozen=True)
class ExecutionEvidence:
    """One recorded reproducer run (from the validation manifest, any host)."""

    shim: str
    lane: str
    # a shims.reproducer.Mode
    mode: str
    # a validation.RunOutcome
    outcome: str
    # (canonical distribution, version)
    versions: tuple[tuple[str, str | None], ...]
    # the host stamp's hostname ("?" when the run printed none)
    host: str
    gpu: str | None
    # UTC ISO
    started_at: str
    sentinel: str | None = None
    detail: str = ""
    record_id: str = ""
    #: (canonical distribution, commit) of packages installed from a VCS checkout (the host
    #: stamp's PEP 610 ``revisions``).
    revisions: tuple[tuple[str, str], ...] = ()

    def version(self, distribution: str) -> Version | None:
        text = dict(self.versions).get(distribution)
        try:
            return Version(text) if text else None
        except ValueError:
            return None

    def revision(self, distribution: str) -> str | None:
        """The commit ``distribution`` was built from: the host stamp's VCS revision, else a local
        version label that is a commit (``0.19.0+d48bd6b``, setuptools-scm's ``+gd48bd6b``)."""
        recorded = dict(self.revisions).get(distribution)
        if recorded:
            return recorded
        version = self.version(distribution)
        label = version.local if version is not None else None
        found = _LOCAL_COMMIT.fullmatch(label or "")
        return found.group(1) if found else None

    @property
    def where(self) -> str:
        return f"lane {self.lane} on {self.host}"


@dataclass(frozen=True)
class ExecutionHistory:
    """The latest without-shim run of one shim per (lane, host), oldest first."""

    shim: str
    runs: tuple[ExecutionEvidence, ...]


Evidence = (
    ReleaseList | PullState | IssueState | TagContainment | BranchTip | Ancestry | ExecutionHistory
)


#: The ``kind`` each evidence value carries in JSON, so a reader tells them apart
#: (retire/schemas/verdicts.schema.json); the values inside them (a release, a file, a run, a
#: condition, a probe failure) carry none: where they sit says what they are.
EVIDENCE_KINDS: dict[type, str] = {
    ReleaseList: "release-list",
    PullState: "pull-request",
    IssueState: "issue",
    TagContainment: "tag-containment",
    BranchTip: "branch-tip",
    Ancestry: "ancestry",
    MirrorPull: "mirror-pull",
    ExecutionHistory: "execution-history",
}


def to_json(value: object) -> object:
    """Any evidence / verdict value as plain JSON data (versions and times as strings); evidence
    values are tagged with their :data:`EVIDENCE_KINDS` ``kind``, never a class name."""
    # a floor is written as the requirement it stands for
    if isinstance(value, Floor):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = EVIDENCE_KINDS.get(type(value))
        data: dict[str, object] = {} if kind is None else {"kind": kind}
        for item in dataclasses.fields(value):
            data[item.name] = to_json(getattr(value, item.name))
        # derived, but what readers look for
        for name in ("upload_time", "yanked", "prerelease"):
            if isinstance(value, Release):
                data[name] = to_json(getattr(value, name))
        return data
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, (Version, SpecifierSet)):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return [to_json(v) for v in value]
    return value
