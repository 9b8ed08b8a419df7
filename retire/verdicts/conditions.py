"""Each retirement condition, judged from the evidence: holds, fails or undecided (pure).

- ``version-floor``: an installable (not yanked) release inside the specifier is on the lane's
  index; floor = the first such release.
- ``pr-released``: the pull request landed and a release contains it. A local mirror answers
  first (release tags beat the code host's PR state): the commit that landed ``#N`` and the
  release tags that contain it. Without a mirror, the code host's merge commit is looked up in the
  mirror's tags if there is one, else the first release uploaded after the merge that was the
  newest version when it appeared stands in (a backport to an old branch is passed over).
- ``commit-in-tag``: a release tag of the local mirror contains the commit.
- ``reproducer-clean``: the bug's window (every recorded run without the shim, the bug winning
  where runs disagree) has a fixed edge: floor = the first clean release after the last broken
  one (clean runs before the window never lower it). Still broken at the newest release run, or
  clean releases between broken ones (the runs disagree), fails; no run reproduced the bug at
  all: floor = the oldest clean release.

A mirror that is behind (the index has a release the mirror has no tag for) never makes a
condition fail: it is undecided, and the action says to sync the mirror.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from typing import assert_never

from packaging.utils import canonicalize_name
from packaging.version import Version

from retire.evidence.floor import Floor
from retire.evidence.values import (
    IssueState,
    MirrorPull,
    ProbeFailure,
    PullState,
    Release,
    ReleaseList,
    TagContainment,
)
from retire.verdicts.execution import from_window
from retire.verdicts.model import ConditionResult, ConditionState, ExecutionState, ShimEvidence
from retire.verdicts.used import Used
from shims.model import (
    CommitInTag,
    ConditionKind,
    PrReleased,
    ReproducerClean,
    RetirementCondition,
    VersionFloor,
)

__all__ = ["combine", "evaluate"]

HOLDS, FAILS, UNDECIDED = ConditionState.HOLDS, ConditionState.FAILS, ConditionState.UNDECIDED


def _day(moment: _dt.datetime | None) -> str:
    return moment.date().isoformat() if moment else "?"


def _sync(repository: str) -> str:
    return (
        f"sync the mirror of {repository} (`patchlane mirrors sync`) where the network allows, "
        f"or copy a fresher one here"
    )


def _failure_action(failure: ProbeFailure, *, mirror_of: str | None = None) -> str:
    if failure.probe == "codehost" and mirror_of:
        return (
            f"reach the code host (a GITHUB_TOKEN helps with rate limits) or add a mirror of "
            f"{mirror_of} "
            "to patchlane.toml and run `patchlane mirrors sync`"
        )
    if failure.probe == "index":
        return f"make the index reachable from this host: {failure.reason}"
    if failure.probe == "git":
        return failure.reason
    return f"fix the {failure.probe} probe: {failure.reason}"


def evaluate(
    condition: RetirementCondition, target_dist: str, ev: ShimEvidence, used: Used
) -> ConditionResult:
    """One condition's result; ``used`` collects the evidence and failures it rested on."""
    match condition:
        case VersionFloor():
            return _version_floor(condition, ev, used)
        case PrReleased():
            return _pr_released(condition, ev, used)
        case CommitInTag():
            return _commit_in_tag(condition, target_dist, ev, used)
        case ReproducerClean():
            return _reproducer_clean(target_dist, ev, used)
        case _:
            assert_never(condition)


def _version_floor(condition: VersionFloor, ev: ShimEvidence, used: Used) -> ConditionResult:
    kind = condition.kind
    dist = canonicalize_name(condition.distribution)
    specifier = condition.version
    releases = ev.releases.get(dist)
    used.add(releases)
    if releases is None:
        return ConditionResult(
            kind,
            UNDECIDED,
            f"releases of {dist} not probed",
            action=f"list {dist} on a lane that carries this shim",
        )
    if isinstance(releases, ProbeFailure):
        return ConditionResult(
            kind,
            UNDECIDED,
            f"releases of {dist}: {releases.reason}",
            action=_failure_action(releases),
        )
    inside = releases.matching(specifier)
    if inside:
        first = inside[0]
        return ConditionResult(
            kind,
            HOLDS,
            f"{dist} {first.version} released {_day(first.upload_time)} (inside {specifier})",
            Floor(dist, first.version),
        )
    newest = releases.latest
    return ConditionResult(
        kind,
        FAILS,
        f"no release of {dist} inside {specifier} (newest {newest.version if newest else 'none'})",
    )


def _released_by_tags(
    kind: ConditionKind,
    subject: str,
    containment: TagContainment,
    releases: ReleaseList | ProbeFailure | None,
    dist: str,
    since: _dt.datetime | None,
) -> ConditionResult:
    """Whether a release contains ``subject`` (a landed PR's commit, or a fix commit), by the
    mirror's release tags. Saying "in no release yet" needs the index too: without it a mirror
    that is behind looks the same."""
    failure = releases if isinstance(releases, ProbeFailure) else None
    releases = releases if isinstance(releases, ReleaseList) else None
    inside = [v for v in containment.released_versions() if _installable(releases, v)]
    if inside:
        return ConditionResult(
            kind,
            HOLDS,
            f"{subject} is in release {inside[0]} (a release tag contains it: "
            f"{', '.join(containment.release_tags[:3])})",
            Floor(dist, inside[0]),
        )
    if releases is None:
        reason = failure.reason if failure else "not probed"
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{subject} is in no release tag of the mirror; releases of {dist}: "
            f"{reason} (a mirror that is behind looks the same)",
            action=_failure_action(failure) if failure else f"list {dist} on a lane's index",
        )
    behind = _untagged_releases(containment, releases, since)
    if behind:
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{subject}; release {behind[0]} has no tag in the mirror of "
            f"{containment.repository} (the mirror is behind)",
            action=_sync(containment.repository),
        )
    newest = max(containment.known_versions(), default=None)
    return ConditionResult(
        kind, FAILS, f"{subject} is in no release tag yet (newest release tag {newest or 'none'})"
    )


def _installable(releases: ReleaseList | None, version: Version) -> bool:
    """Without the index's list every tagged release counts; with it, a yanked one does not."""
    if releases is None:
        return True
    release = releases.get(version)
    return release is not None and not release.yanked


def _untagged_releases(
    containment: TagContainment, releases: ReleaseList | None, since: _dt.datetime | None
) -> list[Version]:
    """Releases on the index newer than the mirror knows: newer than every mapped tag, or uploaded
    after ``since`` with no tag. Either means the mirror cannot say "not released"."""
    if releases is None:
        return []
    known = containment.known_versions()
    newest_tag = max(known, default=None)
    out = []
    for release in releases.available():
        if release.version in known:
            continue
        newer = newest_tag is None or release.version > newest_tag
        after = (
            since is not None and release.upload_time is not None and release.upload_time > since
        )
        if newer or after:
            out.append(release.version)
    return out


def _pr_released(condition: PrReleased, ev: ShimEvidence, used: Used) -> ConditionResult:
    kind = condition.kind
    dist = canonicalize_name(condition.distribution)
    url = condition.url
    releases = ev.releases.get(dist)
    mirror = ev.mirror_pulls.get(url)
    state = ev.links.get(url)

    # 1. The mirror first: the commit that landed the PR and the release tags that contain it.
    if (
        isinstance(mirror, MirrorPull)
        and mirror.commit is not None
        and mirror.containment is not None
    ):
        used.add(mirror)
        used.add(releases)
        merged_at = state.merged_at if isinstance(state, PullState) else None
        return _released_by_tags(
            kind,
            f"{mirror.label} landed as {mirror.commit[:12]}",
            mirror.containment,
            releases,
            dist,
            merged_at,
        )

    # 2. The code host's answer.
    used.add(state)
    if isinstance(state, IssueState):
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{url} is an issue, not a pull request",
            action="point the pr-released condition at the pull request that fixes it",
        )
    if isinstance(state, PullState):
        if not state.merged:
            how = "open" if state.state == "open" else "closed without merging"
            return ConditionResult(kind, FAILS, f"{state.label} is {how}")
        return _merged_by_code_host(kind, state, dist, ev, used)

    # 3. Neither answered: say which look-up would decide it.
    repository = _repository_of(url)
    if isinstance(mirror, ProbeFailure):
        used.add(mirror)
        host = f"; code host: {state.reason}" if isinstance(state, ProbeFailure) else ""
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{url}: mirror: {mirror.reason}{host}",
            action=f"repair the mirror: {mirror.reason}",
        )
    # searched, not landed: not merged yet, or the mirror is behind
    if isinstance(mirror, MirrorPull):
        used.add(mirror)
        fresh = (
            f" (its newest commit is from {_day(mirror.newest_commit_at)})"
            if mirror.newest_commit_at
            else ""
        )
        why = f"{mirror.label} has landed on no branch of the mirror of {mirror.repository}{fresh}"
        if isinstance(state, ProbeFailure):
            why += f"; code host: {state.reason}"
        return ConditionResult(
            kind, UNDECIDED, why, action=_sync(mirror.repository) + " or reach the code host"
        )
    if isinstance(state, ProbeFailure):
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{url}: {state.reason}",
            action=_failure_action(state, mirror_of=repository),
        )
    return ConditionResult(
        kind,
        UNDECIDED,
        f"{url} not probed (only GitHub pull requests are)",
        action=f"add a mirror of {repository} to patchlane.toml" if repository else None,
    )


def _merged_by_code_host(
    kind: ConditionKind, state: PullState, dist: str, ev: ShimEvidence, used: Used
) -> ConditionResult:
    releases = ev.releases.get(dist)
    used.add(releases)
    containment = (
        ev.tags.get((_repository_of(state.url), state.merge_commit_sha))
        if state.merge_commit_sha
        else None
    )
    used.add(containment)
    listed = releases if isinstance(releases, ReleaseList) else None
    if isinstance(containment, TagContainment):
        return _released_by_tags(
            kind,
            f"{state.label} merged as {containment.commit[:12]}",
            containment,
            releases,
            dist,
            state.merged_at,
        )
    if listed is None:
        reason = releases.reason if isinstance(releases, ProbeFailure) else "not probed"
        action = _failure_action(releases) if isinstance(releases, ProbeFailure) else None
        return ConditionResult(
            kind, UNDECIDED, f"{state.label} merged; releases of {dist}: {reason}", action=action
        )
    # the mirror lacks the merge commit: behind, or the sha is wrong
    if isinstance(containment, ProbeFailure):
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{state.label} merged; {containment.reason}",
            action=_sync(_repository_of(state.url)),
        )
    if state.merged_at is None:
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{state.label} merged, but the code host gave no merge time",
            action=f"add a mirror of {_repository_of(state.url)} so release tags can decide",
        )
    timed = [r for r in listed.available() if r.upload_time is not None]
    if not timed:
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{state.label} merged; the index {listed.source} gives no upload "
            f"times for {dist}, so which release first contains the merge cannot be told by date",
            action=f"add a mirror of {_repository_of(state.url)} so release tags can decide",
        )
    first = _first_release_after(timed, state.merged_at, finals_only=True) or _first_release_after(
        timed, state.merged_at, finals_only=False
    )
    if first is None:
        return ConditionResult(
            kind, FAILS, f"{state.label} merged {_day(state.merged_at)}, no {dist} release since"
        )
    return ConditionResult(
        kind,
        HOLDS,
        f"{state.label} merged {_day(state.merged_at)}, {dist} {first.version} released "
        f"{_day(first.upload_time)} (by upload time: no mirror to check tags)",
        Floor(dist, first.version),
    )


def _first_release_after(
    timed: Iterable[Release], moment: _dt.datetime, *, finals_only: bool
) -> Release | None:
    """The first release uploaded after ``moment`` that was the newest version at its upload:
    a backport (1.0.1 uploaded after 1.2) is on an old branch and may well lack the fix."""
    newest: Version | None = None
    uploads = [(r.upload_time, r) for r in timed if r.upload_time is not None]
    for uploaded, release in sorted(uploads, key=lambda pair: (pair[0], pair[1].version)):
        if finals_only and release.prerelease:
            continue
        if uploaded > moment and (newest is None or release.version > newest):
            return release
        newest = release.version if newest is None else max(newest, release.version)
    return None


def _commit_in_tag(
    condition: CommitInTag, target_dist: str, ev: ShimEvidence, used: Used
) -> ConditionResult:
    kind = condition.kind
    repository, commit = condition.repository, condition.commit
    containment = ev.tags.get((repository, commit))
    used.add(containment)
    if containment is None:
        return ConditionResult(
            kind,
            UNDECIDED,
            f"{repository}@{commit[:12]} not probed",
            action=f"add a mirror of {repository} to patchlane.toml",
        )
    if isinstance(containment, ProbeFailure):
        return ConditionResult(
            kind,
            UNDECIDED,
            containment.reason,
            action=_sync(repository) if containment.retryable else containment.reason,
        )
    releases = ev.releases.get(canonicalize_name(target_dist))
    used.add(releases)
    return _released_by_tags(
        kind, f"commit {containment.commit[:12]}", containment, releases, target_dist, None
    )


_STATE_OF_RUNS = {
    ExecutionState.CLEAN: HOLDS,
    ExecutionState.BUG: FAILS,
    ExecutionState.NONE: UNDECIDED,
}


def _reproducer_clean(dist: str, ev: ShimEvidence, used: Used) -> ConditionResult:
    kind = ConditionKind.REPRODUCER_CLEAN
    used.add(ev.execution)
    if ev.execution is None:
        return ConditionResult(kind, UNDECIDED, "execution records not probed")
    if isinstance(ev.execution, ProbeFailure):
        return ConditionResult(
            kind,
            UNDECIDED,
            ev.execution.reason,
            action=f"repair the validation manifest: {ev.execution.reason}",
        )
    # the bug's window, every recorded run read once (retire.history): the floor is the first
    # clean release after the last broken one
    found = from_window(ev.window, ev.execution, dist)
    state = _STATE_OF_RUNS[found.state]
    return ConditionResult(
        kind,
        state,
        found.why,
        Floor(dist, found.floor) if found.floor else None,
        action=None
        if state != UNDECIDED
        else "run the reproducer without the shim where it can run",
    )


def _repository_of(url: str) -> str:
    """``https://github.com/o/r`` of a ``…/o/r/pull/N`` URL ('' when it is not one)."""
    parts = url.split("/")
    return (
        "/".join(parts[:5]) if len(parts) >= 7 and parts[5] in ("pull", "pulls", "issues") else ""
    )


def combine(mode: str, states: Sequence[ConditionState]) -> ConditionState:
    """Three-valued: ``all`` fails if one fails; ``any`` holds if one holds."""
    if mode == "any":
        return HOLDS if HOLDS in states else (UNDECIDED if UNDECIDED in states else FAILS)
    return FAILS if FAILS in states else (UNDECIDED if UNDECIDED in states else HOLDS)
