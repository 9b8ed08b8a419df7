"""The verdict for one shim: a decision from the evidence, plus flags for a person (pure, no I/O).

Evidence decides in this order: execution (reproducer runs) over release and tag evidence over
issue and pull-request states. ``docs/verdicts.md`` has the rules as a table; in short:

1. **keep** when, without the shim, the bug reproduces on the newest version any run covers
   (at least the newest version a lane locks) — or, where no run reaches that release, on the
   newest commit of a branch a local mirror follows (a lane built from an upstream revision).
   Nothing a probe says can change that.
2. **retire** when the retirement conditions hold (``mode`` all / any, three-valued) **and** a
   run without the shim printed FIX_VALIDATED (or MEMORY_SAVE_VERIFIED) on a release inside every
   proposed floor, with no run there reproducing the bug.
3. conditions hold but no such run → **unknown**, the action names the run that would decide it;
   a run there that reproduces → **keep**.
4. conditions fail → **keep**.
5. conditions undecided → **unknown**: a failed probe counts only here, where a condition the
   decision rests on needed its answer; the action names the look-up that would decide it.

Everything else is a flag: drift, stale, not filed, no link, failures of look-ups the decision
did not need, a retirement candidate waiting for its run, execution and metadata that disagree.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.evidence.values import ExecutionHistory, IssueState, ProbeFailure, PullState
from retire.verdicts import execution
from retire.verdicts.conditions import FAILS, HOLDS, UNDECIDED, combine, evaluate, floor_text
from retire.verdicts.model import ConditionResult, Decision, Flag, FlagKind, ShimEvidence, Verdict

__all__ = ["DEFAULT_STALE_DAYS", "decide", "link_urls"]

DEFAULT_STALE_DAYS = 180


class _Used:
    """The evidence and failures a verdict met, each once, in the order met."""

    def __init__(self) -> None:
        self.evidence: list[object] = []
        self.failures: list[ProbeFailure] = []

    def add(self, value: object) -> None:
        bucket = self.failures if isinstance(value, ProbeFailure) else self.evidence
        if value is not None and not any(value is seen for seen in bucket):
            bucket.append(value)


def link_urls(manifest) -> list[str]:
    """Every upstream URL of a shim: its links, then pull requests its conditions name."""
    urls = [link.url for link in manifest.upstream.links]
    urls += [c.url for c in manifest.retirement.conditions if c.kind == "pr-released" and c.url]
    return list(dict.fromkeys(urls))


def _newest_locked(dist: str, locks: Mapping[str, Mapping[str, str] | None]) -> Version | None:
    versions = []
    for packages in locks.values():
        text = (packages or {}).get(dist)
        try:
            versions.append(Version(text)) if text else None
        except InvalidVersion:
            continue
    return max(versions, default=None)


def _highest_floors(results: Iterable[ConditionResult]) -> dict[str, Version]:
    floors: dict[str, Version] = {}
    for result in results:
        if result.state == HOLDS and result.floor:
            dist, _, version = result.floor.partition(">=")
            floors[dist] = max(floors.get(dist, Version(version)), Version(version))
    return floors


def _run_action(manifest, floors: Mapping[str, Version], lanes: Sequence = ()) -> str:
    """The run that would decide: where (the host it needs), on what (the floors), how (a lane)."""
    where = "a host with a CUDA GPU" if manifest.reproducer.needs_cuda else "any host"
    if manifest.reproducer.min_compute_capability:
        where += f" of compute capability ≥ {manifest.reproducer.min_compute_capability}"
    wanted = ", ".join(floor_text(d, v) for d, v in sorted(floors.items()))
    carrying = [lane.name for lane in lanes if manifest.id in lane.shims]
    how = f"`patchlane run {carrying[0]}`" if carrying else "a lane that lists it"
    if floors:
        how += f" with {wanted} in its lock, or `patchlane bisect {manifest.id}`"
    return (
        f"run the reproducer without the shim on {wanted or 'the newest locked release'} on "
        f"{where} "
        f"({how}) and merge its records (`patchlane validation merge`)"
    )


def _drift(manifest, dist: str, listing: Sequence[str], ev: ShimEvidence) -> list[Flag]:
    if not listing:
        return [
            Flag(
                FlagKind.DRIFT,
                "no lane lists this shim: it is dead code — add it to a lane or delete it",
            )
        ]
    locks = {name: ev.locks.get(name) for name in listing}
    unlocked = [name for name, packages in locks.items() if packages is None]
    holding = [
        name for name, packages in locks.items() if packages is not None and dist in packages
    ]
    if not holding and not unlocked:
        return [
            Flag(
                FlagKind.DRIFT,
                f"{dist} is in no lock of the lanes that list this shim ({', '.join(listing)})",
            )
        ]
    if unlocked:
        return [
            Flag(
                FlagKind.PROBE_FAILED,
                f"no lock for {', '.join(unlocked)}: run `nox -s lock -- {' '.join(unlocked)}`",
            )
        ]
    return []


def _upstream_flags(
    manifest,
    link_states: Sequence[object],
    decision: Decision,
    now: _dt.datetime,
    stale_after_days: int,
) -> list[Flag]:
    status, links = manifest.upstream.status, manifest.upstream.links
    if status == "not-applicable":
        return []
    flags = []
    if not links:
        flags.append(
            Flag(
                FlagKind.NO_LINK,
                f"no upstream link (status {status}): file it upstream and link it",
            )
        )
    elif status == "pending" and not any(link.role in ("report", "fix") for link in links):
        flags.append(
            Flag(
                FlagKind.NOT_FILED,
                "status pending and only related links: nothing is filed upstream yet",
            )
        )
    if decision == Decision.KEEP:
        moments = [
            m
            for s in link_states
            if isinstance(s, (PullState, IssueState)) and (m := s.updated_at or s.closed_at)
        ]
        if moments:
            last = max(moments)
            idle = (now - last).days
            if idle > stale_after_days:
                flags.append(
                    Flag(FlagKind.STALE, f"no upstream movement since {last.date()} ({idle} days)")
                )
    return flags


def decide(
    manifest,
    lanes: Sequence,
    evidence: ShimEvidence,
    *,
    now: _dt.datetime,
    stale_after_days: int = DEFAULT_STALE_DAYS,
) -> Verdict:
    """The verdict for one shim; see the module docstring and ``docs/verdicts.md``."""
    shim, dist = manifest.id, canonicalize_name(manifest.target.distribution)
    listing = tuple(lane.name for lane in lanes if manifest.id in lane.shims)
    used = _Used()
    flags = _drift(manifest, dist, listing, evidence)
    results = [
        evaluate(condition, dist, evidence, used) for condition in manifest.retirement.conditions
    ]
    combined = combine(manifest.retirement.mode, [r.state for r in results])
    history = evidence.execution
    used.add(history)
    runs = history if isinstance(history, ExecutionHistory) else ExecutionHistory(shim, ())
    locked = _newest_locked(dist, {name: evidence.locks.get(name) for name in listing})
    newest = execution.newest(runs, dist, locked)
    scope = "the newest release any run or lock covers"
    # no release reaches it: a run on a branch's newest commit may
    if newest.state == "none":
        at_tip = execution.at_branch_tip(runs, dist, evidence.tips)
        if at_tip.state == "bug":
            newest, scope = at_tip, "the newest revision the mirror knows"
    for tip in evidence.tips.values():
        used.add(tip)
    floors = _highest_floors(r for r in results if r.state == HOLDS) if combined == HOLDS else {}
    held = "; ".join(f"{r.kind}: {r.why}" for r in results if r.state == HOLDS)
    failing = "; ".join(f"{r.kind}: {r.why}" for r in results if r.state == FAILS)
    undecided = [r for r in results if r.state == UNDECIDED]

    decision, why, action, proposal = Decision.UNKNOWN, "", None, ()
    # 1. execution first: nothing can turn this into unknown
    if newest.state == "bug":
        decision, why = Decision.KEEP, f"{newest.why} — {scope}"
        ahead = {
            d: v
            for d, v in floors.items()
            if newest.version is None or d != dist or v > newest.version
        }
        if combined == HOLDS and ahead:
            flags.append(Flag(FlagKind.CANDIDATE, f"upstream looks fixed ({held})"))
            action = _run_action(manifest, ahead, lanes)
        elif combined == HOLDS:
            flags.append(
                Flag(
                    FlagKind.CONFLICT,
                    f"the conditions say fixed ({held}) but the bug reproduces there: "
                    "the fix did not work, or a condition is wrong",
                )
            )
    # 2 and 3: conditions hold; a run inside every floor decides
    elif combined == HOLDS:
        checked = dist if dist in floors else next(iter(floors), dist)
        if isinstance(history, ProbeFailure):
            why, action = (
                f"conditions hold ({held}) but {history.reason}",
                f"repair the validation manifest: {history.reason}",
            )
        else:
            found = execution.first_clean(runs, checked, floors)
            if found.state == "clean":
                if not floors and found.floor is not None:
                    floors[checked] = found.floor
                decision, why = Decision.RETIRE, f"{held}; confirmed: {found.why}"
                proposal = tuple(floor_text(d, v) for d, v in sorted(floors.items()))
            elif found.state == "bug":
                decision, why = Decision.KEEP, f"upstream looks fixed ({held}) but {found.why}"
                flags.append(
                    Flag(
                        FlagKind.CONFLICT,
                        "the conditions say fixed but a run inside the new floor reproduces the bug",
                    )
                )
            else:
                why, action = (
                    f"conditions hold ({held}) but nothing confirms it: {found.why}",
                    _run_action(manifest, floors, lanes),
                )
                flags.append(
                    Flag(
                        FlagKind.CANDIDATE, "upstream looks fixed; one run without the shim decides"
                    )
                )
    # 4
    elif combined == FAILS:
        decision, why = Decision.KEEP, failing
        if newest.state == "clean":
            flags.append(
                Flag(
                    FlagKind.CONFLICT,
                    f"{newest.why} but {failing}: check the retirement conditions",
                )
            )
    # 5
    else:
        why = "; ".join(f"{r.kind}: {r.why}" for r in undecided)
        # The strongest evidence first: a missing run is decided by running it.
        if any(r.kind == "reproducer-clean" for r in undecided) and not isinstance(
            history, ProbeFailure
        ):
            action = _run_action(manifest, {}, lanes)
        else:
            action = next((r.action for r in undecided if r.action), None)

    # Every failure met is shown: in ``why`` when the decision rests on it, else as a flag.
    link_states = [evidence.links[url] for url in link_urls(manifest) if url in evidence.links]
    for state in link_states:
        used.add(state)
    for failure in used.failures:
        if decision != Decision.UNKNOWN or failure.reason not in why:
            flags.append(Flag(FlagKind.PROBE_FAILED, str(failure)))
    flags += _upstream_flags(manifest, link_states, decision, now, stale_after_days)
    return Verdict(
        shim,
        decision,
        why,
        action,
        tuple(flags),
        listing,
        tuple(results),
        tuple(used.evidence),
        tuple(used.failures),
        proposal,
    )
