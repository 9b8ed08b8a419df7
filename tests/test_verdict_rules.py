"""The verdict rules as a truth table (pure, no I/O): every combination of execution evidence,
release evidence, tag evidence (a local mirror) and link evidence (the code host up, down or
faulty, plus an informational issue link up or down) against the rules of docs/verdicts.md.

The expected decision comes from :func:`expected`, which restates the documented table in a few
lines; the invariants below it must hold in every row whatever the table says.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from pathlib import Path

import pytest
from packaging.version import Version

from retire.evidence.floor import Floor
from retire.evidence.values import (
    Ancestry,
    BranchTip,
    ExecutionEvidence,
    ExecutionHistory,
    IssueState,
    MirrorPull,
    ProbeFailure,
    PullState,
    Release,
    ReleaseFile,
    ReleaseList,
    TagContainment,
)
from retire.history.reading import read_runs
from retire.lanes.model import Lane, LanePolicy
from retire.locks.trial import RaiseTrial
from retire.verdicts.execution import from_window, ordering, version_of
from retire.verdicts.model import Decision, LaneStep, ShimEvidence
from retire.verdicts.rules import decide
from shims.manifest import parse_manifest
from tests.support.retirement import NOW, manifest_toml, pr_released

UTC = dt.UTC
PR = "https://github.com/org/toylib/pull/2"
ISSUE = "https://github.com/org/toylib/issues/1"
REPO = "https://github.com/org/toylib"
SHA = "a" * 40


def at(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=UTC)


def run(outcome: str, version: str, host: str = "h100-1") -> ExecutionEvidence:
    return ExecutionEvidence(
        "toy", "gpu", "without", outcome, (("toylib", version),), host, "H100", "2026-06-01"
    )


# -- the dimensions -------------------------------------------------------------------------------

EXECUTION = {
    "none": (),
    "skipped": (run("skipped", "1.3"),),
    "bug-newest": (run("bug-reproduced", "1.3"),),
    # older than the newest locked release (1.3)
    "bug-old": (run("bug-reproduced", "1.0"),),
    "clean-newest": (run("fix-validated", "1.3"),),
    "fixed-later": (run("bug-reproduced", "1.0", "h100-2"), run("fix-validated", "1.3")),
    "split-newest": (run("bug-reproduced", "1.3", "h100-2"), run("fix-validated", "1.3")),
}
RELEASES = {
    "up": ReleaseList(
        "toylib",
        "http://index/simple",
        tuple(
            Release(Version(v), (ReleaseFile(f"toylib-{v}.whl", at(d)),))
            for v, d in (("1.0", "2026-01-10"), ("1.2", "2026-03-01"), ("1.3", "2026-05-01"))
        ),
    ),
    "down": ProbeFailure("index", "toylib", "server error 503", retryable=True),
}
ALL_TAGS = (("v1.0", "1.0"), ("v1.2", "1.2"), ("v1.3", "1.3"))
# what a local mirror says of PR #2
TAGS = {
    "contains": MirrorPull(
        REPO,
        2,
        SHA,
        "squash",
        "Fix add (#2)",
        TagContainment(REPO, SHA, ("v1.2", "v1.3"), ("v1.2", "v1.3"), ALL_TAGS),
    ),
    "unreleased": MirrorPull(
        REPO, 2, SHA, "squash", "Fix add (#2)", TagContainment(REPO, SHA, (), (), ALL_TAGS)
    ),
    "behind": MirrorPull(
        REPO,
        2,
        SHA,
        "squash",
        "Fix add (#2)",
        TagContainment(REPO, SHA, (), (), (("v1.0", "1.0"),)),
    ),
    "not-landed": MirrorPull(REPO, 2, None, "none", newest_commit_at=at("2026-06-30")),
    "no-mirror": None,
    "broken": ProbeFailure("git", f"{REPO}#2", "no git repository at /srv/mirrors/org/toylib.git"),
}
# the code host's answer for PR #2
LINK = {
    "merged": PullState(PR, 2, "closed", True, at("2026-02-15"), SHA, updated_at=at("2026-06-01")),
    "open": PullState(PR, 2, "open", False, updated_at=at("2026-06-01")),
    "down": ProbeFailure("codehost", PR, "DNS lookup failed", retryable=True, attempts=4),
    "faulty": ProbeFailure(
        "codehost",
        PR,
        "answered from another host (a redirect to http://evil.example): not trusted",
    ),
}
ISSUE_LINK = {
    "up": IssueState(ISSUE, 1, "open", updated_at=at("2026-06-01")),
    "down": ProbeFailure("codehost", ISSUE, "timed out after 10s", retryable=True),
}


# -- the documented table, restated ----------------------------------------------------------------


def pr_condition(releases: str, tags: str, link: str) -> str:
    """pr-released: the mirror's tags first, then the code host; an index is needed to say
    "not released" (a mirror that is behind looks the same)."""
    if tags == "contains":
        return "holds"
    if tags == "unreleased":
        return "fails" if releases == "up" else "unknown"
    if tags == "behind":
        return "unknown"
    if link == "open":
        return "fails"
    # by upload time: 1.2 is the first release after the merge
    if link == "merged":
        return "holds" if releases == "up" else "unknown"
    return "unknown"


def expected(execution: str, releases: str, tags: str, link: str) -> str:
    # rule 1
    if execution in ("bug-newest", "split-newest"):
        return "keep"
    condition = pr_condition(releases, tags, link)
    # rules 2-3: floor toylib>=1.2 needs a clean run there
    if condition == "holds":
        return "retire" if execution in ("clean-newest", "fixed-later") else "unknown"
    # rules 4-5
    return "keep" if condition == "fails" else "unknown"


MANIFEST = parse_manifest(
    manifest_toml("toy", pr_released(PR), links=(("report", ISSUE), ("fix", PR))),
    Path("/p/toy/manifest.toml"),
)
LANES = [
    Lane(name="gpu", python="3.12", platform="linux", requirements=("toylib",), shims=("toy",))
]
ROWS = list(itertools.product(EXECUTION, RELEASES, TAGS, LINK, ISSUE_LINK))


def evidence(execution: str, releases: str, tags: str, link: str, issue: str) -> ShimEvidence:
    mirror = TAGS[tags]
    return ShimEvidence(
        locks={"gpu": {"toylib": "1.3"}},
        releases={"toylib": RELEASES[releases]},
        links={PR: LINK[link], ISSUE: ISSUE_LINK[issue]},
        mirror_pulls={} if mirror is None else {PR: mirror},
        execution=ExecutionHistory("toy", EXECUTION[execution]),
    )


@pytest.mark.parametrize("row", ROWS, ids=["-".join(r) for r in ROWS])
def test_truth_table(row):
    execution, releases, tags, link, issue = row
    verdict = decide(MANIFEST, LANES, evidence(*row), now=NOW)
    assert verdict.decision == expected(execution, releases, tags, link), verdict.why

    # Invariants of every row.
    # never without a clean run inside the floor
    if verdict.decision == "retire":
        assert execution in ("clean-newest", "fixed-later") and verdict.floors == (
            Floor.parse("toylib>=1.2"),
        )
    # execution decides; no probe turns it into unknown
    if execution in ("bug-newest", "split-newest"):
        assert verdict.decision == "keep" and "BUG_REPRODUCED" in verdict.why
    # the report can always say what to do
    if verdict.decision == "unknown":
        assert verdict.action
    # uncertain evidence is never hidden
    for failure in verdict.failures:
        assert failure.reason in verdict.why or any(
            failure.reason in f.text for f in verdict.flags
        ), failure
    # the informational link is a flag, whatever else happened
    if issue == "down":
        assert any(f.kind == "probe-failed" and "timed out" in f.text for f in verdict.flags)


def test_the_informational_link_never_changes_the_decision():
    for execution, releases, tags, link in itertools.product(EXECUTION, RELEASES, TAGS, LINK):
        up = decide(MANIFEST, LANES, evidence(execution, releases, tags, link, "up"), now=NOW)
        down = decide(MANIFEST, LANES, evidence(execution, releases, tags, link, "down"), now=NOW)
        assert (up.decision, up.floors, up.action) == (down.decision, down.floors, down.action)


def test_the_table_covers_every_decision_and_every_path():
    decisions = {decide(MANIFEST, LANES, evidence(*row), now=NOW).decision for row in ROWS}
    assert decisions == {"keep", "retire", "unknown"}
    assert len(ROWS) == 7 * 2 * 6 * 4 * 2


# -- runs on an upstream revision (a lane built from a commit of a mirror) -------------------------


def revision_run(outcome: str, version: str = "1.2+abc1234", revisions=()) -> ExecutionEvidence:
    return ExecutionEvidence(
        "toy",
        "dev",
        "without",
        outcome,
        (("toylib", version),),
        "h100-1",
        "H100",
        "2026-06-01",
        revisions=revisions,
    )


def revision_evidence(runs, tips) -> ShimEvidence:
    return ShimEvidence(
        locks={"gpu": {"toylib": "1.3"}},
        releases={"toylib": RELEASES["down"]},
        links={PR: LINK["down"], ISSUE: ISSUE_LINK["down"]},
        mirror_pulls={PR: TAGS["not-landed"]},
        execution=ExecutionHistory("toy", runs),
        tips=tips,
    )


TIP = BranchTip(REPO, "abc1234" + "0" * 33, ("dev",), at("2026-06-30"))


@pytest.mark.parametrize(
    "runs, tips, decision",
    [
        # the bug reproduces on the newest commit of dev the mirror knows: keep, whatever the probes
        # say
        ((revision_run("bug-reproduced"),), {(REPO, "abc1234"): TIP}, "keep"),
        # the host stamp's PEP 610 revision names the commit when the version carries no label
        (
            (revision_run("bug-reproduced", "1.2", (("toylib", "abc1234"),)),),
            {(REPO, "abc1234"): TIP},
            "keep",
        ),
        # the commit is in the mirror but no followed branch ends there: an old revision decides
        # nothing
        (
            (revision_run("bug-reproduced"),),
            {(REPO, "abc1234"): BranchTip(REPO, TIP.commit, ())},
            "unknown",
        ),
        # the mirror lacks the commit
        (
            (revision_run("bug-reproduced"),),
            {(REPO, "abc1234"): ProbeFailure("git", REPO, "not in the mirror")},
            "unknown",
        ),
        # clean at the tip is no reason to keep, and not enough to retire (no release holds the fix)
        ((revision_run("fix-validated"),), {(REPO, "abc1234"): TIP}, "unknown"),
        # a version label that is no commit is never looked up
        ((revision_run("bug-reproduced", "1.2+cu121"),), {(REPO, "abc1234"): TIP}, "unknown"),
    ],
)
def test_a_run_on_a_branch_tip_decides_like_a_run_on_the_newest_release(runs, tips, decision):
    verdict = decide(MANIFEST, LANES, revision_evidence(runs, tips), now=NOW)
    assert verdict.decision == decision, verdict.why
    if decision == "keep":
        assert "newest commit of dev" in verdict.why and "abc1234000" in verdict.why
    else:
        assert verdict.action
    for failure in verdict.failures:
        assert failure.reason in verdict.why or any(
            failure.reason in f.text for f in verdict.flags
        ), failure


def test_a_release_run_still_outranks_a_branch_tip():
    runs = (revision_run("fix-validated"), run("bug-reproduced", "1.3"))
    verdict = decide(MANIFEST, LANES, revision_evidence(runs, {(REPO, "abc1234"): TIP}), now=NOW)
    assert verdict.decision == "keep" and "the newest release" in verdict.why


# -- the lane dimension: what each lane carrying the shim does with it ---------------------------
#
# The shim's evidence decision (retire by a clean run inside toylib>=1.2, keep by a bug on the
# newest release, unknown without a run) × the lane's policy × where the lane's toylib stands
# against the floor × the trial re-lock of a raise × a second lane that can always let it go.

SHIM_EVIDENCE = {
    "retire": ("clean-newest", "up", "contains", "merged"),
    # retire, with the bug reproduced on the old release the lanes below the floor lock
    "retire-bug-below": ("fixed-later", "up", "contains", "merged"),
    "keep": ("bug-newest", "up", "contains", "merged"),
    "unknown": ("none", "up", "contains", "merged"),
}
# (requirements, lock of the lane: None = no lock)
LOCKED = {
    "absent": (("other",), {"other": "1.0"}),
    "below": (("toylib",), {"toylib": "1.0"}),
    "at": (("toylib",), {"toylib": "1.2"}),
    "above": (("toylib",), {"toylib": "1.3"}),
    "pinned-below": (("toylib==1.0",), None),
    "pinned-above": (("toylib==1.3",), None),
    "unlocked": (("toylib>=1.0",), None),
}
FLOOR = (Floor.parse("toylib>=1.2"),)
TRIAL = {
    "not-run": None,
    "resolved": RaiseTrial("x", FLOOR, True, {"toylib": "1.2"}),
    "blocked": RaiseTrial("x", FLOOR, False, blocker="otherlib==2.0 depends on toylib==1.0"),
    "failed": RaiseTrial("x", FLOOR, False, failure="index http://index/simple: 503"),
}


# The shim's window as the recorded runs show it (every run, not only the latest per lane),
# against lane x's toylib 1.0 (the companion locks 1.3, after every window below).
def window_of(states: dict[str, str]):
    """The window the one reading (retire.history) makes of runs on these releases."""
    outcome = {"bug": "bug-reproduced", "clean": "fix-validated"}
    return read_runs([run(outcome[state], v, "h100-9") for v, state in states.items()], "toylib")


WINDOWS = {
    "not-read": None,
    # clean on 1.0, broken on 1.1, clean again on 1.2: 1.0 is before the window
    "before": window_of({"1.0": "clean", "1.1": "bug", "1.2": "clean"}),
    # broken on 1.0: inside
    "inside": window_of({"1.0": "bug", "1.2": "clean"}),
    # clean on 0.9, broken on 1.1, 1.0 never run: not pinned, so not placed
    "unpinned": window_of({"0.9": "clean", "1.1": "bug", "1.2": "clean"}),
}
# where lane x's toylib stands in each window: 1.0 as above, 1.2 and 1.3 after
LOCKED_VERSION = {
    "below": "1.0",
    "pinned-below": "1.0",
    "at": "1.2",
    "above": "1.3",
    "pinned-above": "1.3",
}
LANE_ROWS = list(
    itertools.product(
        SHIM_EVIDENCE, LanePolicy, LOCKED, TRIAL, ("alone", "with-companion"), WINDOWS
    )
)


def place_expected(locked: str, window: str) -> str:
    """docs/verdicts.md, "Windows": where lane x stands."""
    version = LOCKED_VERSION.get(locked)
    if window == "not-read" or version is None:
        return "unknown"
    if version != "1.0":
        return "after"
    return {"before": "before", "inside": "inside", "unpinned": "unknown"}[window]


def lane_expected(shim: str, policy: str, locked: str, trial: str, window: str = "not-read") -> str:
    """The rules of docs/verdicts.md, "Per lane", restated: the evidence's step, then the
    window's (a lane before it that the evidence does not let the shim leave is not-needed)."""
    step = _evidence_step(shim, policy, locked, trial)
    if place_expected(locked, window) == "before" and step not in ("drop", "raise"):
        return "not-needed"
    return step


def _evidence_step(shim: str, policy: str, locked: str, trial: str) -> str:
    if shim == "unknown":
        return "unknown"
    if shim == "keep":
        return "keep"
    if locked == "absent":
        return "drop"
    if locked == "unlocked":
        return "unknown"
    if locked in ("at", "above", "pinned-above"):
        return "drop"
    if policy == "hold":
        return "hold"
    return {"not-run": "raise", "resolved": "raise", "blocked": "blocked", "failed": "unknown"}[
        trial
    ]


def shim_expected(shim: str, steps: list[str]) -> str:
    if shim in ("keep", "unknown"):
        return shim
    going = [s for s in steps if s in ("drop", "raise")]
    if len(going) == len(steps):
        return "retire"
    if going:
        return "retire-in-some"
    return "unknown" if "unknown" in steps else "keep"


def lane_evidence(shim: str, locked: str, trial: str, window: str = "not-read") -> ShimEvidence:
    execution, releases, tags, link = SHIM_EVIDENCE[shim]
    base = evidence(execution, releases, tags, link, "up")
    chosen = TRIAL[trial]
    return dataclasses.replace(
        base,
        locks={"x": LOCKED[locked][1], "gpu": {"toylib": "1.3"}},
        trials={} if chosen is None else {("x", FLOOR): chosen},
        window=WINDOWS[window],
    )


@pytest.mark.parametrize("row", LANE_ROWS, ids=["-".join(map(str, r)) for r in LANE_ROWS])
def test_lane_truth_table(row):
    shim, policy, locked, trial, companion, window = row
    lane = Lane(
        name="x",
        python="3.12",
        platform="linux",
        requirements=LOCKED[locked][0],
        shims=("toy",),
        policy=policy,
        file="lanes/x.toml",
    )
    lanes = [lane] + (LANES if companion == "with-companion" else [])
    verdict = decide(MANIFEST, lanes, lane_evidence(shim, locked, trial, window), now=NOW)
    by_lane = {lv.lane: lv for lv in verdict.lane_verdicts}
    subject = by_lane["x"]
    assert subject.step == lane_expected(shim, policy, locked, trial, window), subject.why
    assert subject.window == place_expected(locked, window), subject.why
    steps = [lv.step for lv in verdict.lane_verdicts]
    assert verdict.decision == shim_expected(shim, steps), verdict.why

    # Invariants of every row.
    evidence_retires = shim in ("retire", "retire-bug-below")
    # no lane lets the shim go unless the evidence retires it
    if not evidence_retires:
        assert not verdict.leaving
    # a hold lane below the floor never lets it go
    if policy == "hold" and locked in ("below", "pinned-below"):
        assert not subject.leaves
        assert shim != "retire" or subject.step == ("not-needed" if window == "before" else "hold")
    # a bug on the lane's own locked release never drops it there (a raise moves the pin past it)
    if shim == "retire-bug-below" and locked in ("below", "pinned-below"):
        assert subject.step != "drop"
        if subject.step == "raise":
            assert subject.floors == FLOOR
    # a lane is not-needed only before the window, never leaves, and says why and from what
    if subject.step == "not-needed":
        assert subject.window == "before" and not subject.leaves
        assert "not needed here now" in subject.why and "1.1 (broken)" in subject.why
    # before the window is never taken for after it (fixed), nor counts as a retirement
    if subject.window == "before":
        assert subject.step != "drop"
    # where the evidence retires, the shim's why says why the lane stays
    if subject.step == "not-needed" and shim.startswith("retire"):
        assert "x is before the bug's window" in verdict.why
    # each step says what it rests on, and what would change it
    for lv in verdict.lane_verdicts:
        assert lv.why and lv.policy in tuple(LanePolicy)
        if lv.step == "unknown":
            assert lv.action
        if lv.step == "blocked":
            assert lv.blocker and lv.blocker in lv.why
        if lv.step == "hold":
            assert lv.until and "1.2" in lv.until
        if lv.step == "raise":
            assert lv.floors == FLOOR
            assert ("not re-locked" in lv.why) == (trial == "not-run")
    # the why names the lanes that stay when only some can go
    if verdict.decision == "retire-in-some":
        assert "x" in verdict.why and "can go in gpu" in verdict.why
    if verdict.decision == "unknown":
        assert verdict.action


@pytest.mark.slow
def test_the_lane_table_covers_every_step_and_every_derived_decision():
    steps, decisions = set(), set()
    for shim, policy, locked, trial, companion, window in LANE_ROWS:
        lane = Lane(
            name="x",
            python="3.12",
            platform="linux",
            requirements=LOCKED[locked][0],
            shims=("toy",),
            policy=policy,
        )
        lanes = [lane] + (LANES if companion == "with-companion" else [])
        verdict = decide(MANIFEST, lanes, lane_evidence(shim, locked, trial, window), now=NOW)
        steps |= {str(lv.step) for lv in verdict.lane_verdicts}
        decisions.add(str(verdict.decision))
    assert steps == {str(s) for s in LaneStep}
    assert decisions == {str(d) for d in Decision}


# -- revision runs among releases ----------------------------------------------------------------


def _on_commit(outcome: str, label: str, commit: str) -> ExecutionEvidence:
    return dataclasses.replace(run(outcome, label), revisions=(("toylib", commit),))


@pytest.mark.parametrize(
    ("outcome", "contains", "within", "placed"),
    [
        # a bug outlived every release its commit contains
        ("bug-reproduced", "1.0", "1.2", "1.0+gbbbbbbbbb"),
        # a clean commit is carried by the oldest release that contains it
        ("fix-validated", "1.0", "1.2", "1.2"),
        # a clean commit no release contains (a branch that left the release line): no place
        ("fix-validated", "1.0", None, None),
    ],
)
def test_ancestry_places_each_outcome_where_it_is_safe(outcome, contains, within, placed):
    commit = "b" * 40
    ancestry = Ancestry(
        REPO, commit, ("v" + contains, contains), ("v" + within, within) if within else None
    )
    history = ExecutionHistory("toy", (_on_commit(outcome, "2.0.0+bbbbbbb", commit),))
    order = ordering(history, "toylib", {(REPO, commit): ancestry})
    placed_at = version_of(history.runs[0], "toylib", order)
    assert placed_at == (Version(placed) if placed else None)


def test_a_clean_run_off_the_release_line_never_lowers_the_floor():
    """main left the release line after 1.0 and is clean there; releases were clean only from
    1.3: the floor the runs prove is 1.3, never "just above 1.0" — a commit run is placed by a
    mirror's order of the commits between two tags, never as a release."""
    side = "c" * 40
    runs = (
        run("bug-reproduced", "1.2"),
        run("fix-validated", "1.3"),
        _on_commit("fix-validated", "2.0.0+ccccccc", side),
    )
    found = from_window(read_runs(runs, "toylib"), ExecutionHistory("toy", runs), "toylib")
    assert found.state == "clean" and found.floor == Version("1.3")
    # alone, it proves nothing about releases
    alone = runs[2:]
    said = from_window(read_runs(alone, "toylib"), ExecutionHistory("toy", alone), "toylib")
    assert said.state != "clean"


def test_a_condition_outside_the_closed_union_is_never_read_as_reproducer_clean():
    """Every kind has its own type; anything else is a programming error, not a silent
    reproducer-clean (which is what an unknown kind string used to fall through to)."""
    from retire.verdicts.conditions import evaluate
    from retire.verdicts.model import ShimEvidence
    from retire.verdicts.used import Used

    with pytest.raises(AssertionError):
        evaluate(object(), "toylib", ShimEvidence(), Used())  # type: ignore[arg-type]


# -- a fix on a followed branch, in no release -----------------------------------------------------

FIX = "f" * 40
PAST, BEHIND = "c" * 40, "d" * 40


@pytest.mark.parametrize(
    ("locked", "own_run", "shim", "step", "decision"),
    [
        # at or past the fix: the lane drops the shim whatever the release evidence keeps
        (PAST, None, "keep", "drop", "retire-in-some"),
        (PAST, None, "unknown", "drop", "retire-in-some"),
        (PAST, None, "retire", "drop", "retire"),
        # before the fix: the evidence decides
        (BEHIND, None, "keep", "keep", "keep"),
        # the mirror was not asked about the lane's commit: nothing is guessed
        ("e" * 40, None, "keep", "keep", "keep"),
        # a run without the shim on the lane's own commit reproduced the bug
        (PAST, "bug-reproduced", "keep", "keep", "keep"),
    ],
)
def test_a_revision_lane_past_a_fix_on_its_branch_drops_the_shim(
    locked, own_run, shim, step, decision
):
    from retire.lanes.revisions import Revision
    from tests.support.windows import branch_fixed

    execution, releases, tags, link = SHIM_EVIDENCE[shim]
    base = evidence(execution, releases, tags, link, "up")
    runs = base.execution.runs if isinstance(base.execution, ExecutionHistory) else ()
    if own_run is not None:
        runs = (*runs, revision_run(own_run, "1.3", (("toylib", locked),)))
    ev = dataclasses.replace(
        base,
        execution=ExecutionHistory("toy", runs),
        locks={"dev": {"toylib": "1.3"}, "rel": {"toylib": "1.3"}},
        commits={"dev": {"toylib": locked}},
        window=branch_fixed(REPO, FIX, "Fix add() (#92)", 92),
        contains={PAST: ((FIX, True),), BEHIND: ((FIX, False),)},
    )
    lanes = [
        Lane(
            name="dev",
            python="3.12",
            platform="linux",
            requirements=("toylib",),
            shims=("toy",),
            revisions=(Revision("toylib", REPO, "main"),),
        ),
        Lane(name="rel", python="3.12", platform="linux", requirements=("toylib",), shims=("toy",)),
    ]
    verdict = decide(MANIFEST, lanes, ev, now=NOW)
    by_lane = {lv.lane: lv for lv in verdict.lane_verdicts}
    assert by_lane["dev"].step == step, by_lane["dev"].why
    assert verdict.decision == decision, verdict.why
    if step == "drop" and shim != "retire":
        assert "fixed on main at ffffffffffff (#92), in no release yet" in by_lane["dev"].why
        assert by_lane["dev"].window == "after"
        # the release lane is told, and keeps it while the evidence does
        assert by_lane["rel"].why.endswith("fixed on main at ffffffffffff (#92), in no release yet")
        assert not by_lane["rel"].leaves
