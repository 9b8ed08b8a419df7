"""Verdicts: the pure rules (decide) on hand-made evidence, then gather() and `patchlane verdicts`
end to end against a loopback index, the GitHub-API stand-in and a real git mirror."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest
from packaging.version import Version

from retire.commands import main as cli
from retire.evidence.floor import Floor
from retire.evidence.values import (
    Ancestry,
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
from retire.lanes.model import IndexSpec, Lane, LanePolicy
from retire.lanes.revisions import Revision
from retire.locks.trial import RaiseTrial
from retire.verdicts.actions import Bisect, LockLanes, RunLane
from retire.verdicts.gather import GatherOptions, gather
from retire.verdicts.model import ShimEvidence, Verdict
from retire.verdicts.rules import decide
from shims.gpuneeds import GpuNeeds
from shims.manifest import parse_manifest
from tests.support.codehost import CodeHost, CodeHostServer
from tests.support.faults import FaultyIndexServer
from tests.support.gitrepos import commit as gitcommit
from tests.support.gitrepos import git, make_upstream
from tests.support.index import IndexServer, PackageIndex
from tests.support.probing import FAST, toylib_index
from tests.support.retirement import (
    NOW,
    REPRODUCER_CLEAN,
    VERSION_FLOOR,
    Project,
    commit_in_tag,
    manifest_toml,
    pr_released,
)
from tests.support.wheels import build_wheel

PR = "https://github.com/org/toylib/pull/2"
ISSUE = "https://github.com/org/toylib/issues/1"
REPO = "https://github.com/org/toylib"
UTC = dt.UTC


def when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def manifest(conditions: str, shim_id: str = "toy", **options):
    return parse_manifest(
        manifest_toml(shim_id, conditions, **options), Path(f"/p/{shim_id}/manifest.toml")
    )


def lane(*shims: str, name: str = "cpu") -> Lane:
    return Lane(name=name, python="3.12", platform="linux", requirements=("toylib",), shims=shims)


def releases(*items: tuple[str, str] | tuple[str, str, str]) -> ReleaseList:
    out = []
    for version, uploaded, *yank in items:
        out.append(
            Release(
                Version(version),
                (
                    ReleaseFile(
                        f"toylib-{version}.whl",
                        when(uploaded),
                        bool(yank),
                        yank[0] if yank else None,
                    ),
                ),
            )
        )
    return ReleaseList("toylib", "http://index/simple", tuple(out))


def run(
    outcome: str,
    version: str | None,
    *,
    lane_name: str = "cpu",
    host: str = "ci-1",
    at: str = "2026-06-01",
) -> ExecutionEvidence:
    return ExecutionEvidence(
        "toy",
        lane_name,
        "without",
        outcome,
        (("toylib", version),) if version else (),
        host,
        None,
        at,
        detail="no CUDA device" if outcome == "skipped" else "",
    )


def history(*runs: ExecutionEvidence) -> ExecutionHistory:
    return ExecutionHistory("toy", runs)


RELEASES = releases(
    ("1.0", "2026-01-10"),
    ("1.1", "2026-03-01", "broken"),
    ("1.2", "2026-04-01"),
    ("1.3", "2026-05-01"),
)
LOCKED = {"cpu": {"toylib": "1.0"}}


def ev(**parts) -> ShimEvidence:
    parts.setdefault("locks", LOCKED)
    parts.setdefault("releases", {"toylib": RELEASES})
    execution = parts.get("execution")
    if isinstance(execution, ExecutionHistory):
        # the bug's window, as the gather reads it from the same runs (retire.history)
        parts.setdefault("window", read_runs(execution.runs, "toylib"))
    return ShimEvidence(**parts)


def verdict(conditions: str, evidence: ShimEvidence, *, lanes=None, **options):
    return decide(
        manifest(conditions, **options),
        lanes if lanes is not None else [lane("toy")],
        evidence,
        now=NOW,
    )


def flags(found) -> dict[str, str]:
    return {str(f.kind): f.text for f in found.flags}


# ---------------------------------------------------------------------------------------------
# drift is a flag: it needs a person, it does not decide


def test_drift_when_no_lane_lists_the_shim():
    found = verdict(VERSION_FLOOR, ev(), lanes=[lane("other")])
    assert found.decision == "unknown" and "no lane lists" in flags(found)["drift"]


def test_drift_when_the_target_is_in_no_lock():
    found = verdict(
        VERSION_FLOOR,
        ev(locks={"cpu": {"numpy": "2.0"}}, execution=history(run("bug-reproduced", "1.0"))),
    )
    assert found.decision == "keep" and "toylib is in no lock" in flags(found)["drift"]


def test_a_missing_lock_is_a_flag_and_leaves_the_lane_undecided():
    # The evidence says retire, but whether the lane is below the floor needs its lock (or an
    # exact pin): the lane is unknown, and so is the shim, with the lock to make as the action.
    found = verdict(
        VERSION_FLOOR, ev(locks={"cpu": None}, execution=history(run("fix-validated", "1.2")))
    )
    assert "nox -s lock" in flags(found)["probe-failed"]
    assert found.decision == "unknown" and found.action == "lock the lane: `nox -s lock -- cpu`"
    # the lane's action, as data, is the verdict's; so is the flag's
    assert found.next == (LockLanes(("cpu",)),)
    [flag] = [f for f in found.flags if f.kind == "probe-failed"]
    assert flag.action == LockLanes(("cpu",))
    (cpu,) = found.lane_verdicts
    assert cpu.step == "unknown" and cpu.locked is None
    # an exact pin in the lane's requirements stands in for the lock
    pinned = Lane(
        name="cpu", python="3.12", platform="linux", requirements=("toylib==1.2",), shims=("toy",)
    )
    found = verdict(
        VERSION_FLOOR,
        ev(locks={"cpu": None}, execution=history(run("fix-validated", "1.2"))),
        lanes=[pinned],
    )
    assert found.decision == "retire" and found.lane_verdicts[0].step == "drop"
    assert found.lane_verdicts[0].locked == "toylib 1.2"


# ---------------------------------------------------------------------------------------------
# execution first: a bug on the newest release decides keep, whatever a probe says


def test_a_bug_on_the_newest_locked_release_is_keep_whatever_the_probes_say():
    down = ProbeFailure("codehost", ISSUE, "DNS lookup failed", retryable=True, attempts=4)
    index_down = ProbeFailure("index", "toylib", "server error 503", retryable=True)
    found = verdict(
        VERSION_FLOOR,
        ev(
            releases={"toylib": index_down},
            links={ISSUE: down},
            execution=history(run("bug-reproduced", "1.0")),
        ),
        links=(("report", ISSUE),),
    )
    assert found.decision == "keep" and "BUG_REPRODUCED" in found.why and "toylib 1.0" in found.why
    # shown, never decisive
    assert "DNS lookup failed" in flags(found)["probe-failed"]
    assert found.action is None


def test_a_bug_on_an_old_release_with_a_fix_released_is_a_candidate_with_the_run_to_make():
    found = verdict(VERSION_FLOOR, ev(execution=history(run("bug-reproduced", "1.0"))))
    assert found.decision == "keep" and "candidate" in flags(found)
    assert "toylib>=1.2" in found.action and "run the reproducer without the shim" in found.action
    # the commands the action names, as data: a run of the lane that carries it, a bisection
    assert found.next == (RunLane("cpu"), Bisect("toy"))


def test_the_run_to_make_names_the_gpus_the_reproducer_declared():
    # a reproducer that declares two GPUs is decided on a host with two, not "any host"
    pair = dataclasses.replace(lane("toy", name="pair"), gpus=GpuNeeds(count=2))
    found = decide(
        parse_manifest(
            manifest_toml("toy", VERSION_FLOOR).replace(
                "[reproducer]\n",
                '[reproducer]\ngpus = { count = 2, min-compute-capability = "9.0" }\n',
            ),
            Path("/p/toy/manifest.toml"),
        ),
        [lane("toy"), pair],
        ev(execution=history(run("bug-reproduced", "1.0"))),
        now=NOW,
    )
    assert "on a host with 2 GPUs (compute capability ≥ 9.0)" in found.action
    # and the lane to run is the one given two GPUs, not the first that carries the shim
    assert found.next == (RunLane("pair"), Bisect("toy"))
    plain = verdict(VERSION_FLOOR, ev(execution=history(run("bug-reproduced", "1.0"))))
    assert "on any host" in plain.action


def test_runs_that_do_not_reach_the_newest_locked_release_decide_nothing():
    found = verdict(
        REPRODUCER_CLEAN,
        ev(locks={"cpu": {"toylib": "1.3"}}, execution=history(run("bug-reproduced", "1.0"))),
        status="not-applicable",
    )
    # reproducer-clean fails on the only run: keep, by the condition
    assert found.decision == "keep"
    assert "1.0" in found.why


# ---------------------------------------------------------------------------------------------
# retire needs conditions AND execution inside every floor


def test_version_floor_and_a_clean_run_on_the_new_release_retires():
    found = verdict(
        VERSION_FLOOR,
        ev(
            execution=history(
                run("bug-reproduced", "1.0"), run("fix-validated", "1.2", host="gpu-1")
            )
        ),
    )
    assert found.decision == "retire"
    assert found.floors == (Floor.parse("toylib>=1.2"),)
    assert "FIX_VALIDATED" in found.why and "gpu-1" in found.why
    assert any(isinstance(e, ReleaseList) for e in found.evidence)
    assert any(isinstance(e, ExecutionHistory) for e in found.evidence)


def test_conditions_without_execution_never_retire():
    no_runs = verdict(VERSION_FLOOR, ev(execution=history()))
    assert no_runs.decision == "unknown" and "no run of the reproducer" in no_runs.why
    assert "toylib>=1.2" in no_runs.action and "candidate" in flags(no_runs)
    skipped = verdict(VERSION_FLOOR, ev(execution=history(run("skipped", "1.2"))))
    assert (
        skipped.decision == "unknown"
        and "skipped" in skipped.why
        and "no CUDA device" in skipped.why
    )
    crashed = verdict(VERSION_FLOOR, ev(execution=history(run("crashed", "1.2"))))
    assert crashed.decision == "unknown" and "crashed" in crashed.why


def test_execution_beats_metadata_bug_still_reproduces_inside_the_floor():
    found = verdict(
        VERSION_FLOOR,
        ev(
            execution=history(
                run("fix-validated", "1.3"), run("bug-reproduced", "1.2", host="gpu-2")
            )
        ),
    )
    assert found.decision == "keep"
    assert (
        "upstream looks fixed" in found.why
        and "BUG_REPRODUCED" in found.why
        and "gpu-2" in found.why
    )
    assert "conflict" in flags(found)


def test_yanked_release_does_not_count():
    only_yanked = releases(("1.0", "2026-01-10"), ("1.2", "2026-04-01", "broken"))
    found = verdict(
        VERSION_FLOOR,
        ev(releases={"toylib": only_yanked}, execution=history(run("fix-validated", "1.2"))),
        status="not-applicable",
    )
    assert found.decision == "keep" and "no release of toylib inside >=1.2" in found.why
    # clean runs, yet the floor fails
    assert "check the retirement conditions" in flags(found)["conflict"]


def test_reproducer_clean_alone_retires_with_the_first_clean_version_as_floor():
    found = verdict(
        REPRODUCER_CLEAN,
        ev(
            execution=history(
                run("bug-reproduced", "1.0", at="2026-01-01"),
                run("fix-validated", "1.3", lane_name="nightly"),
            )
        ),
    )
    assert found.decision == "retire" and found.floors == (Floor.parse("toylib>=1.3"),)


def test_reproducer_clean_fails_when_the_newest_run_reproduces():
    found = verdict(
        REPRODUCER_CLEAN,
        ev(
            execution=history(
                run("fix-validated", "1.0"), run("bug-reproduced", "1.3", lane_name="nightly")
            )
        ),
        links=(("report", ISSUE),),
    )
    assert found.decision == "keep" and "BUG_REPRODUCED" in found.why


# ---------------------------------------------------------------------------------------------
# modes, unknowns, failures: a failed probe counts only where the decision needed it


def test_mode_all_needs_every_condition():
    conditions = VERSION_FLOOR + pr_released(PR)
    open_pr = PullState(PR, 2, "open", False, updated_at=when("2026-06-20"))
    found = verdict(
        conditions,
        ev(links={PR: open_pr}, execution=history(run("fix-validated", "1.2"))),
        mode="all",
        links=(("fix", PR),),
    )
    assert found.decision == "keep" and "PR #2 is open" in found.why


def test_mode_all_fails_beats_undecided_and_any_undecided_beats_fails():
    conditions = (
        """
[[retirement.conditions]]
kind = "version-floor"
version = ">=9"
"""
        + REPRODUCER_CLEAN
    )
    evidence = ev(execution=history())
    assert verdict(conditions, evidence, mode="all", status="not-applicable").decision == "keep"
    found = verdict(conditions, evidence, mode="any")
    assert found.decision == "unknown" and "no run of the reproducer" in found.why and found.action


def test_a_failed_informational_link_is_a_flag_and_never_stops_a_retire():
    failure = ProbeFailure("codehost", ISSUE, "timed out after 10s", retryable=True, attempts=4)
    found = verdict(
        VERSION_FLOOR,
        ev(links={ISSUE: failure}, execution=history(run("fix-validated", "1.2"))),
        links=(("report", ISSUE),),
    )
    assert found.decision == "retire" and found.floors == (Floor.parse("toylib>=1.2"),)
    assert (
        "timed out" in flags(found)["probe-failed"]
        and "after 4 attempts" in flags(found)["probe-failed"]
    )
    assert found.failures == (failure,)


def test_a_failed_probe_a_condition_needs_makes_it_unknown_with_the_action():
    failure = ProbeFailure("index", "toylib", "server error 503", retryable=True, attempts=3)
    found = verdict(
        VERSION_FLOOR,
        ev(releases={"toylib": failure}, execution=history(run("fix-validated", "1.2"))),
    )
    assert found.decision == "unknown" and "503" in found.why and "index" in found.action
    # it is the reason, in why, not a side note
    assert "probe-failed" not in flags(found)


def test_mode_any_one_holding_condition_makes_the_others_failures_flags():
    down = ProbeFailure("codehost", PR, "DNS lookup failed", retryable=True)
    found = verdict(
        VERSION_FLOOR + pr_released(PR),
        ev(links={PR: down}, execution=history(run("fix-validated", "1.2"))),
        mode="any",
        links=(("fix", PR),),
    )
    assert found.decision == "retire" and "DNS lookup failed" in flags(found)["probe-failed"]


# ---------------------------------------------------------------------------------------------
# pr-released and commit-in-tag: mirrors first, then the code host


def merged(at: str = "2026-02-15", sha: str = "m" * 40) -> PullState:
    return PullState(PR, 2, "closed", True, when(at), sha, updated_at=when(at))


ALL_TAGS = (("v1.0", "1.0"), ("v1.2", "1.2"), ("v1.3", "1.3"))


def landed(*containing: str, tags=ALL_TAGS, sha: str = "m" * 40) -> MirrorPull:
    return MirrorPull(
        REPO,
        2,
        sha,
        "squash",
        "Fix add (#2)",
        TagContainment(REPO, sha, containing, containing, tags),
        when("2026-06-30"),
    )


def test_pr_released_by_upload_time_skips_yanked_and_backports():
    backport = releases(
        ("1.0", "2026-01-10"), ("1.2", "2026-03-01"), ("1.0.1", "2026-03-05"), ("1.3", "2026-04-01")
    )
    found = verdict(
        pr_released(PR),
        ev(
            releases={"toylib": backport},
            links={PR: merged("2026-02-15")},
            execution=history(run("fix-validated", "1.3")),
        ),
        links=(("fix", PR),),
    )
    assert found.decision == "retire" and found.floors == (Floor.parse("toylib>=1.2"),)
    assert "by upload time" in found.why
    # merged after the newest release: not released yet
    later = verdict(
        pr_released(PR),
        ev(links={PR: merged("2026-05-15")}, execution=history()),
        links=(("fix", PR),),
    )
    assert later.decision == "keep" and "no toylib release since" in later.why


def test_pr_released_by_tags_when_there_is_a_mirror():
    sha = "m" * 40
    containment = TagContainment(REPO, sha, ("v1.3",), ("v1.3",), ALL_TAGS)
    found = verdict(
        pr_released(PR),
        ev(
            links={PR: merged()},
            tags={(REPO, sha): containment},
            execution=history(run("fix-validated", "1.3")),
        ),
        links=(("fix", PR),),
    )
    assert (
        found.decision == "retire"
        and found.floors == (Floor.parse("toylib>=1.3"),)
        and "release tag contains" in found.why
    )


def test_pr_released_from_the_mirror_alone_with_the_code_host_down():
    down = ProbeFailure("codehost", PR, "DNS lookup failed", retryable=True)
    found = verdict(
        pr_released(PR),
        ev(
            links={PR: down},
            mirror_pulls={PR: landed("v1.2", "v1.3")},
            execution=history(run("fix-validated", "1.2", host="h100")),
        ),
        links=(("fix", PR),),
    )
    assert (
        found.decision == "retire"
        and found.floors == (Floor.parse("toylib>=1.2"),)
        and "landed as mmmmmmmmmmmm" in found.why
    )
    assert any(isinstance(e, MirrorPull) for e in found.evidence)


def test_a_mirror_that_is_behind_never_says_not_fixed():
    # fetched before 1.2 and 1.3 were tagged
    behind = landed(tags=(("v1.0", "1.0"),))
    found = verdict(
        pr_released(PR),
        ev(mirror_pulls={PR: behind}, execution=history(run("fix-validated", "1.3"))),
        links=(("fix", PR),),
    )
    assert (
        found.decision == "unknown"
        and "release 1.2 has no tag" in found.why
        and "mirrors sync" in found.action
    )
    not_landed = MirrorPull(REPO, 2, None, "none", newest_commit_at=when("2026-01-01"))
    searched = verdict(
        pr_released(PR),
        ev(mirror_pulls={PR: not_landed}, execution=history(run("fix-validated", "1.3"))),
        links=(("fix", PR),),
    )
    assert searched.decision == "unknown" and "newest commit is from 2026-01-01" in searched.why
    released_later = verdict(
        pr_released(PR), ev(mirror_pulls={PR: landed()}, execution=history()), links=(("fix", PR),)
    )
    assert released_later.decision == "keep" and "in no release tag yet" in released_later.why


def test_pr_released_with_a_mirror_missing_the_release_tag_is_unknown():
    sha = "m" * 40
    # mirror fetched before 1.2 and 1.3
    behind = TagContainment(REPO, sha, (), (), (("v1.0", "1.0"),))
    found = verdict(
        pr_released(PR),
        ev(
            links={PR: merged()},
            tags={(REPO, sha): behind},
            execution=history(run("fix-validated", "1.3")),
        ),
        links=(("fix", PR),),
    )
    assert (
        found.decision == "unknown"
        and "release 1.2 has no tag" in found.why
        and "mirrors sync" in found.action
    )


def test_pr_released_on_a_url_that_is_an_issue_or_not_probed():
    issue = IssueState(PR, 2, "closed", updated_at=when("2026-06-01"))
    assert (
        verdict(
            pr_released(PR), ev(links={PR: issue}, execution=history()), links=(("fix", PR),)
        ).decision
        == "unknown"
    )
    other = "https://example.org/toylib/pull/2"
    found = verdict(pr_released(other), ev(execution=history()), links=(("fix", other),))
    assert found.decision == "unknown" and "only GitHub" in found.why


def test_commit_in_tag():
    sha = "c" * 40
    inside = TagContainment(
        REPO, sha, ("v1.2", "v1.3"), ("v1.2", "v1.3"), (("v1.2", "1.2"), ("v1.3", "1.3"))
    )
    found = verdict(
        commit_in_tag(REPO, sha),
        ev(tags={(REPO, sha): inside}, execution=history(run("fix-validated", "1.2"))),
        status="not-applicable",
    )
    assert found.decision == "retire" and found.floors == (Floor.parse("toylib>=1.2"),)
    outside = TagContainment(REPO, sha, (), (), ALL_TAGS)
    kept = verdict(
        commit_in_tag(REPO, sha),
        ev(tags={(REPO, sha): outside}, execution=history()),
        status="not-applicable",
    )
    assert kept.decision == "keep" and "in no release tag yet" in kept.why
    behind = TagContainment(REPO, sha, (), (), (("v1.0", "1.0"),))
    unsure = verdict(
        commit_in_tag(REPO, sha),
        ev(tags={(REPO, sha): behind}, execution=history()),
        status="not-applicable",
    )
    assert unsure.decision == "unknown" and "the mirror is behind" in unsure.why
    unprobed = verdict(commit_in_tag(REPO, sha), ev(execution=history()), status="not-applicable")
    assert unprobed.decision == "unknown" and "mirror" in unprobed.action


# ---------------------------------------------------------------------------------------------
# flags: stale, no link, not filed


def test_no_upstream_link_is_a_flag_unless_not_applicable():
    evidence = ev(execution=history(run("bug-reproduced", "1.3")))
    pending = verdict(REPRODUCER_CLEAN, evidence)
    assert pending.decision == "keep" and "file it upstream" in flags(pending)["no-link"]
    policy = verdict(REPRODUCER_CLEAN, evidence, status="not-applicable")
    assert policy.decision == "keep" and not policy.flags
    related = verdict(REPRODUCER_CLEAN, evidence, links=(("related", ISSUE),), status="pending")
    assert "nothing is filed upstream" in flags(related)["not-filed"]


def test_stale_after_days_without_movement():
    evidence = ev(
        links={ISSUE: IssueState(ISSUE, 1, "open", updated_at=when("2025-06-01"))},
        execution=history(run("bug-reproduced", "1.3")),
    )
    found = verdict(REPRODUCER_CLEAN, evidence, links=(("report", ISSUE),))
    assert found.decision == "keep" and "since 2025-06-01" in flags(found)["stale"]
    fresh = decide(
        manifest(REPRODUCER_CLEAN, links=(("report", ISSUE),)),
        [lane("toy")],
        evidence,
        now=NOW,
        stale_after_days=400,
    )
    assert fresh.decision == "keep" and "stale" not in flags(fresh)


def test_verdict_json_round_trips():
    found = verdict(VERSION_FLOOR, ev(execution=history(run("fix-validated", "1.2"))))
    data = json.loads(json.dumps(found.to_json()))
    assert data["verdict"] == "retire" and data["floors"] == ["toylib>=1.2"]
    assert {e["kind"] for e in data["evidence"]} == {"release-list", "execution-history"}
    assert data["action"] is None and data["flags"] == [
        {
            "kind": "no-link",
            "text": "no upstream link (status pending): file it upstream and link it",
        }
    ]


# ---------------------------------------------------------------------------------------------
# gather + main, end to end on loopback


@pytest.fixture
def world(tmp_path):
    index = toylib_index(tmp_path / "wheels")
    host = CodeHost()
    upstream = make_upstream(tmp_path / "upstream" / "toylib")
    # 1.1 (yanked on the index) and 1.2 contain the fix
    git(upstream.path, "tag", "v1.2", upstream.merge)
    mirrors = tmp_path / "mirrors"
    (mirrors / "org").mkdir(parents=True)
    git(
        mirrors / "org",
        "clone",
        "-q",
        "--mirror",
        str(upstream.path),
        str(mirrors / "org" / "toylib.git"),
    )
    host.add_issue(
        "org", "toylib", 1, state="closed", closed_at="2026-02-02", updated_at="2026-06-01"
    )
    host.add_pull(
        "org",
        "toylib",
        2,
        state="closed",
        merged=True,
        merged_at="2026-02-01",
        merge_commit_sha=upstream.merge,
        updated_at="2026-06-01",
    )
    host.add_pull("org", "toylib", 3, state="open", updated_at="2026-06-20")
    project = Project(tmp_path / "project")
    with FaultyIndexServer(index) as index_server, CodeHostServer(host) as api:
        yield {
            "project": project,
            "index": index_server,
            "api": api,
            "mirrors": mirrors,
            "upstream": upstream,
        }


def build_catalogue(world) -> Project:
    p, upstream = world["project"], world["upstream"]
    p.shim("floor_fixed", VERSION_FLOOR, links=(("report", ISSUE),))
    p.shim("pr_fixed", pr_released(PR), links=(("fix", PR),))
    p.shim(
        "pr_open",
        pr_released("https://github.com/org/toylib/pull/3"),
        links=(("fix", "https://github.com/org/toylib/pull/3"),),
    )
    p.shim("commit_unreleased", commit_in_tag(REPO, upstream.unreleased), status="not-applicable")
    p.shim("never_ran", VERSION_FLOOR, status="not-applicable")
    p.shim("unlisted", VERSION_FLOOR, status="not-applicable")
    p.shim("elsewhere", REPRODUCER_CLEAN, status="not-applicable", distribution="numpy")
    p.lane(
        "cpu",
        ["floor_fixed", "pr_fixed", "pr_open", "commit_unreleased", "never_ran", "elsewhere"],
        index_url=world["index"].url,
    )
    p.run("floor_fixed", "bug-reproduced", "1.0", when="2026-01-20T00:00:00.000000+00:00")
    p.run("floor_fixed", "fix-validated", "1.2", host="gpu-1")
    p.run("pr_fixed", "fix-validated", "1.2")
    p.run("pr_open", "bug-reproduced", "1.2")
    p.run("commit_unreleased", "bug-reproduced", "1.2")
    return p


def gather_world(p: Project, world, **options) -> list[Verdict]:
    """The gather of ``p``'s shims against the world's code host and mirrors, at NOW."""
    return gather(
        p.manifests(),
        p.lanes(),
        p.root / "locks",
        p.validation,
        GatherOptions(
            api_base=world["api"].url,
            token=None,
            mirrors=world["mirrors"],
            policy=FAST,
            clock=lambda: NOW,
            **options,
        ),
    )


@pytest.mark.slow
def test_gather_decides_every_shim_from_real_servers(world, tmp_path):
    p = build_catalogue(world)
    # the probes alone: a trial re-lock is uv asking the index too (tests/test_retire_lanes)
    verdicts = gather_world(p, world, cache_dir=tmp_path / "cache", resolve=False)
    by_id = {v.shim: v for v in verdicts}
    assert by_id["floor_fixed"].decision == "retire" and by_id["floor_fixed"].floors == (
        Floor.parse("toylib>=1.2"),
    )
    assert by_id["pr_fixed"].decision == "retire" and by_id["pr_fixed"].floors == (
        Floor.parse("toylib>=1.2"),
    )
    # checked against the mirror's tags
    assert "release tag contains" in by_id["pr_fixed"].why
    assert by_id["pr_open"].decision == "keep" and "BUG_REPRODUCED" in by_id["pr_open"].why
    assert any("PR #3 is open" in c.why for c in by_id["pr_open"].conditions)
    assert by_id["commit_unreleased"].decision == "keep"
    # the target's releases are always probed now, so commit-in-tag reads the index as
    # pr-released does: 1.3rc1 has no tag in the mirror, so "in no release" would be a guess
    assert any("release 1.3rc1 has no tag" in c.why for c in by_id["commit_unreleased"].conditions)
    assert by_id["never_ran"].decision == "unknown" and by_id["never_ran"].action
    assert by_id["unlisted"].decision == "unknown" and by_id["unlisted"].flagged("drift")
    assert by_id["elsewhere"].flagged("drift") and any(
        "numpy is in no lock" in f.text for f in by_id["elsewhere"].flags
    )
    # Each distinct probe ran once, though three shims need toylib's releases.
    assert world["index"].index.requests.count("/simple/toylib/") == 1


@pytest.mark.slow
def test_pr_released_with_a_mirror_behind_the_index_is_unknown(world):
    # The mirror's v1.1 contains the merge but 1.1 is yanked on the index; 1.2 is released, yet
    # the mirror has no v1.2 tag: "not released" would be a guess, so the verdict is unknown.
    p = world["project"]
    git(world["mirrors"] / "org" / "toylib.git", "tag", "-d", "v1.2")
    p.shim("pr_fixed", pr_released(PR), links=(("fix", PR),))
    p.lane("cpu", ["pr_fixed"], index_url=world["index"].url)
    p.run("pr_fixed", "fix-validated", "1.2")
    verdicts = gather_world(p, world)
    assert verdicts[0].decision == "unknown"
    assert "release 1.2 has no tag" in verdicts[0].why


@pytest.mark.slow
def test_main_prints_a_table_and_json(world, tmp_path, capsys, monkeypatch):
    p = build_catalogue(world)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    args = [
        "--root",
        str(p.root),
        "--api-url",
        world["api"].url,
        "--mirrors",
        str(world["mirrors"]),
    ]
    assert cli(["verdicts", *args]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["shim", "verdict", "why"]
    assert "floor_fixed" in out and "retire" in out and "→ toylib>=1.2" in out
    assert (p.root / ".patchlane" / "cache" / "http").is_dir()
    assert cli(["verdicts", *args, "--json", "floor_fixed", "unlisted"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["shim"], r["verdict"]) for r in rows] == [
        ("floor_fixed", "retire"),
        ("unlisted", "unknown"),
    ]
    assert [f["kind"] for f in rows[1]["flags"]] == ["drift"]
    # one line per lane under the shim: lane, step, what it locks, and why (or until / blocker /
    # action); --no-resolve leaves a raise not re-locked
    assert cli(["verdicts", *args, "--no-resolve", "floor_fixed", "pr_open"]) == 0
    lines = capsys.readouterr().out.splitlines()
    lane_line = next(line for line in lines if line.split()[:2] == ["lane", "cpu"])
    assert lane_line.split()[2:5] == ["raise", "toylib", "1.0"]
    assert lane_line.endswith("raise to toylib>=1.2 (not re-locked)")
    # a shim whose evidence decided every lane alike gets one line
    assert any(line.split()[:3] == ["lanes", "keep", "in"] for line in lines)
    assert cli(["verdicts", *args, "--json", "--no-resolve", "floor_fixed"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["lane_verdicts"] == [
        {
            "lane": "cpu",
            "step": "raise",
            "why": "locked toylib 1.0 is below 1.2: raise to toylib>=1.2 (not re-locked)",
            "policy": "follow",
            "file": "lanes/cpu.toml",
            "locked": "toylib 1.0",
            "floors": ["toylib>=1.2"],
            "blocker": None,
            "until": None,
            "action": None,
            # bug on 1.0, clean on 1.2 (recorded): the lane's 1.0 is inside the window
            "window": "inside",
        }
    ]


@pytest.mark.slow
def test_main_bad_input_is_one_line_exit_2(tmp_path, capsys, world):
    p = build_catalogue(world)
    assert cli(["verdicts", "--root", str(p.root), "no_such_shim"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown shim 'no_such_shim'" in err
    (p.root / "shims" / "pr_open" / "manifest.toml").write_text("id = 3\n")
    assert cli(["verdicts", "--root", str(p.root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchlane: error: ") and err.count("\n") == 1
    assert cli(["verdicts", "--root", str(tmp_path / "nowhere")]) == 2


def test_a_later_hang_never_hides_a_reproduced_bug():
    # A bug that shows itself as a hang: the timeout on h100-a must not leave h100-b's clean run
    # alone to decide, or the shim would be retired while it is still needed.
    from retire.evidence.validation import ValidationRecord
    from retire.probes import records as records_probe

    def rec(outcome, host, at):
        sentinel = {"bug-reproduced": "BUG_REPRODUCED", "fix-validated": "FIX_VALIDATED"}.get(
            outcome
        )
        return ValidationRecord(
            shim="toy",
            mode="without",
            lane="gpu",
            host={"hostname": host, "gpu": "H100"},
            versions={"toylib": "1.2"},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=0,
            duration_s=1.0,
            started_at=at,
        )

    runs = [
        rec("bug-reproduced", "h100-a", "2026-06-01T00:00:00"),
        rec("timeout", "h100-a", "2026-06-08T00:00:00"),
        rec("fix-validated", "h100-b", "2026-06-02T00:00:00"),
    ]
    history = records_probe.history(runs, "toy")
    assert [(r.host, r.outcome) for r in history.runs] == [
        ("h100-a", "bug-reproduced"),
        ("h100-b", "fix-validated"),
    ]
    verdict = decide(
        manifest(VERSION_FLOOR),
        [lane("toy", name="gpu")],
        ev(locks={"gpu": {"toylib": "1.2"}}, execution=history),
        now=NOW,
    )
    assert verdict.decision == "keep"


def test_every_proposed_floor_must_have_been_run():
    conditions = """
[[retirement.conditions]]
kind = "version-floor"
version = ">=1.2"

[[retirement.conditions]]
kind = "version-floor"
distribution = "helper"
version = ">=2.0"
"""
    helper = ReleaseList(
        "helper",
        "http://index/simple",
        releases(("1.0", "2026-01-01"), ("2.0", "2026-05-01")).releases,
    )
    run = ExecutionEvidence(
        "toy",
        "cpu",
        "without",
        "fix-validated",
        (("helper", "1.0"), ("toylib", "1.2")),
        "ci-1",
        None,
        "2026-06-01",
    )
    verdict = decide(
        manifest(conditions, mode="all"),
        [lane("toy")],
        ev(
            releases={"toylib": RELEASES, "helper": helper},
            execution=ExecutionHistory("toy", (run,)),
        ),
        now=NOW,
    )
    # helper 2.0 never ran: no retire
    assert verdict.decision == "unknown" and "helper>=2.0" in verdict.why
    assert "helper>=2.0" in verdict.action


@pytest.mark.slow
def test_retire_apply_turns_retire_verdicts_into_branches(world, capsys, monkeypatch):
    """`patchlane retire --apply`, end to end: verdicts from real servers, one branch per retire
    verdict, with the evidence (before/after runs) in the PR body; nothing else is touched."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    p = build_catalogue(world)
    git(p.root, "init", "-q", "-b", "main")
    git(p.root, "add", "-A")
    git(p.root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "shop")
    head = git(p.root, "rev-parse", "HEAD")
    args = [
        "--root",
        str(p.root),
        "--apply",
        "--no-pr",
        "--api-url",
        world["api"].url,
        "--mirrors",
        str(world["mirrors"]),
    ]
    code = cli(["retire", *args])
    out = capsys.readouterr().out
    branches = git(p.root, "branch", "--list", "patchlane/*").split()
    # Exactly the retire verdicts became branches (pr_open is keep, never_ran unknown: untouched).
    assert {"patchlane/retire-floor_fixed", "patchlane/retire-pr_fixed"} <= set(branches)
    assert not {"patchlane/retire-pr_open", "patchlane/retire-never_ran"} & set(branches)
    assert git(p.root, "rev-parse", "HEAD") == head
    assert (
        git(p.root, "show", "--stat", "--format=", "patchlane/retire-floor_fixed").count(
            "shims/floor_fixed/"
        )
        >= 1
    )
    body = (p.root / ".patchlane" / "prs" / "patchlane" / "retire-floor_fixed.md").read_text()
    assert "**Before (bug reproduces without the shim):** BUG_REPRODUCED" in body
    assert "**After (upstream fixed):** FIX_VALIDATED" in body and "toylib 1.2" in body
    assert code == 0, out
    assert "proposed          patchlane/retire-floor_fixed" in out
    # a second run creates nothing new …
    assert cli(["retire", *args]) == 0
    assert "already-proposed  patchlane/retire-floor_fixed" in capsys.readouterr().out
    assert git(p.root, "branch", "--list", "patchlane/*").split() == branches


# ---------------------------------------------------------------------------------------------
# per lane: a fix upstream leaves each lane by its own road (docs/verdicts.md, "Per lane")


def lane_at(name: str, *, policy: str = "follow", file: str = "", requirement: str = "toylib"):
    return Lane(
        name=name,
        python="3.12",
        platform="linux",
        requirements=(requirement,),
        shims=("toy",),
        policy=LanePolicy(policy),
        file=file or f"lanes/{name}.toml",
    )


CLEAN_ON_1_2 = history(run("bug-reproduced", "1.0"), run("fix-validated", "1.2", host="gpu-1"))


def by_lane(found) -> dict:
    return {lv.lane: lv for lv in found.lane_verdicts}


def test_a_hold_lane_keeps_the_shim_until_its_own_pin_reaches_the_floor():
    found = verdict(
        VERSION_FLOOR,
        ev(
            locks={"floor": {"toylib": "1.0"}, "stable": {"toylib": "1.2"}},
            execution=CLEAN_ON_1_2,
        ),
        lanes=[
            lane_at("floor", policy="hold", requirement="toylib==1.0"),
            lane_at("stable"),
        ],
    )
    lanes = by_lane(found)
    assert found.decision == "retire-in-some" and found.floors == (Floor.parse("toylib>=1.2"),)
    assert lanes["stable"].step == "drop" and lanes["stable"].locked == "toylib 1.2"
    assert lanes["floor"].step == "hold" and lanes["floor"].policy == "hold"
    assert lanes["floor"].until == "until the lane's toylib==1.0 reaches 1.2"
    assert "can go in stable" in found.why and "floor holds" in found.why
    assert [lv.lane for lv in found.leaving] == ["stable"]


def test_a_follow_lane_below_the_floor_raises_and_a_hold_lane_alone_keeps():
    found = verdict(VERSION_FLOOR, ev(execution=CLEAN_ON_1_2), lanes=[lane_at("cpu")])
    (cpu,) = found.lane_verdicts
    assert found.decision == "retire" and cpu.step == "raise"
    assert cpu.floors == (Floor.parse("toylib>=1.2"),) and "not re-locked" in cpu.why
    held = verdict(VERSION_FLOOR, ev(execution=CLEAN_ON_1_2), lanes=[lane_at("cpu", policy="hold")])
    assert held.decision == "keep" and held.lane_verdicts[0].step == "hold"
    assert "upstream fixed it" in held.why and "cpu holds" in held.why


def test_a_lane_without_the_target_drops_the_id_and_moves_no_pin():
    found = verdict(
        VERSION_FLOOR,
        ev(locks={"cpu": {"numpy": "2.0"}}, execution=CLEAN_ON_1_2),
        lanes=[lane_at("cpu", requirement="numpy")],
    )
    (cpu,) = found.lane_verdicts
    assert found.decision == "retire" and cpu.step == "drop" and cpu.floors == ()
    assert "installs no toylib" in cpu.why


def test_cells_of_one_matrix_file_let_the_shim_go_together_or_not_at_all():
    matrix = "lanes/compat.toml"
    found = verdict(
        VERSION_FLOOR,
        ev(
            locks={
                "new-cell": {"toylib": "1.2"},
                "old-cell": {"toylib": "1.0"},
                "stable": {"toylib": "1.3"},
            },
            execution=CLEAN_ON_1_2,
        ),
        lanes=[
            lane_at("new-cell", policy="hold", file=matrix),
            lane_at("old-cell", policy="hold", file=matrix),
            lane_at("stable"),
        ],
    )
    lanes = by_lane(found)
    # new-cell alone would drop it, but its shim list is old-cell's too
    assert lanes["new-cell"].step == "keep"
    assert "lanes/compat.toml's cells share one shim list" in lanes["new-cell"].why
    assert "old-cell hold" in lanes["new-cell"].why
    assert lanes["old-cell"].step == "hold" and lanes["stable"].step == "drop"
    assert found.decision == "retire-in-some"
    # when every cell can go, they go together
    found = verdict(
        VERSION_FLOOR,
        ev(
            locks={"new-cell": {"toylib": "1.2"}, "old-cell": {"toylib": "1.3"}},
            execution=CLEAN_ON_1_2,
        ),
        lanes=[lane_at("new-cell", file=matrix), lane_at("old-cell", file=matrix)],
    )
    assert found.decision == "retire" and {lv.step for lv in found.lane_verdicts} == {"drop"}


def test_conflict_names_the_condition_and_the_run_and_the_floor_comes_from_execution():
    # PR #2 is in release 1.2 by the mirror's tags, but the bug reproduced without the shim on
    # 1.2; 1.3 is clean: the floor is 1.3, from execution, and the flag names both sides.
    found = verdict(
        pr_released(PR) + REPRODUCER_CLEAN,
        ev(
            locks={"cpu": {"toylib": "1.3"}},
            mirror_pulls={PR: landed("v1.2", "v1.3")},
            links={PR: merged()},
            execution=history(
                run("bug-reproduced", "1.2", lane_name="mamba3", host="h100-1"),
                run("fix-validated", "1.3", host="h100-2"),
            ),
        ),
        mode="all",
        links=(("fix", PR),),
    )
    assert found.decision == "retire" and found.floors == (Floor.parse("toylib>=1.3"),)
    conflict = flags(found)["conflict"]
    assert "PR #2" in conflict and "is in release 1.2" in conflict
    assert "BUG_REPRODUCED without the shim on toylib 1.2 (lane mamba3 on h100-1)" in conflict
    assert "the floor comes from execution: toylib>=1.3" in conflict
    # no conflict where the runs agree with the condition
    quiet = verdict(
        pr_released(PR) + REPRODUCER_CLEAN,
        ev(
            locks={"cpu": {"toylib": "1.3"}},
            mirror_pulls={PR: landed("v1.2", "v1.3")},
            links={PR: merged()},
            execution=history(run("bug-reproduced", "1.0"), run("fix-validated", "1.2")),
        ),
        mode="all",
        links=(("fix", PR),),
    )
    assert quiet.decision == "retire" and "conflict" not in flags(quiet)


def many_releases(root: Path, versions: list[str]) -> PackageIndex:
    index = PackageIndex()
    for day, version in enumerate(versions, start=1):
        index.add(build_wheel(root, "toylib", version), f"2026-03-{day:02d}")
    return index


def test_a_keep_on_an_old_pin_with_newer_releases_on_the_index_is_a_candidate(tmp_path):
    # A small pure-Python shop pins toylib 1.0, where the bug reproduces; the index has 13 newer
    # releases no run or lock covers: one bisection would decide.
    newer = [f"1.{n}" for n in range(1, 14)]
    index = many_releases(tmp_path / "wheels", ["1.0", *newer, "2.0rc1"])
    p = Project(tmp_path / "project")
    p.shim("toy", REPRODUCER_CLEAN, status="not-applicable")
    with IndexServer(index) as server:
        p.lane("cpu", ["toy"], index_url=server.url)
        p.run("toy", "bug-reproduced", "1.0")
        (found,) = gather(
            p.manifests(),
            p.lanes(),
            p.root / "locks",
            p.validation,
            GatherOptions(token=None, policy=FAST, clock=lambda: NOW, resolve=False),
        )
    assert found.decision == "keep"
    candidate = flags(found)["candidate"]
    assert "13 release(s) of toylib newer than any run or lock covers (1.0)" in candidate
    assert "1.1, 1.2, 1.3, …" in candidate and "2.0rc1" not in candidate
    assert candidate.endswith("`patchlane bisect toy --since 1.0`")
    # the flag carries the bisection as data: the weekly budget runs it, never the text
    [flag] = [f for f in found.flags if f.kind == "candidate"]
    assert flag.action == Bisect("toy", Version("1.0"))
    assert any(isinstance(e, ReleaseList) for e in found.evidence)


def test_no_candidate_when_the_runs_cover_the_newest_release(tmp_path):
    index = many_releases(tmp_path / "wheels", ["1.0", "1.1"])
    p = Project(tmp_path / "project")
    p.shim("toy", REPRODUCER_CLEAN, status="not-applicable")
    with IndexServer(index) as server:
        p.lane("cpu", ["toy"], index_url=server.url)
        p.run("toy", "bug-reproduced", "1.1")
        (found,) = gather(
            p.manifests(),
            p.lanes(),
            p.root / "locks",
            p.validation,
            GatherOptions(token=None, policy=FAST, clock=lambda: NOW, resolve=False),
        )
    assert found.decision == "keep" and "candidate" not in flags(found)


def write_lock(p: Project, lane_name: str, packages: dict[str, str]) -> None:
    lock = p.root / "locks" / lane_name / "pylock.toml"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n'
        + "".join(
            f'\n[[packages]]\nname = "{name}"\nversion = "{version}"\n'
            for name, version in packages.items()
        )
    )


class Trials:
    """A resolver for gather: lane ``blocked`` does not resolve, every other lane does; it
    records each call, as the real trial re-lock would be called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    def __call__(self, lane: Lane, floors) -> RaiseTrial:
        self.calls.append((lane.name, dict(floors)))
        wanted = tuple(Floor(d, v) for d, v in sorted(floors.items()))
        if lane.name == "blocked":
            return RaiseTrial(
                lane.name, wanted, False, blocker="otherlib==2.0 depends on toylib==1.0"
            )
        return RaiseTrial(lane.name, wanted, True, {"toylib": floors["toylib"]})


@pytest.mark.slow
def test_gather_re_locks_each_proposed_raise_once_and_a_refusal_blocks_the_lane(world):
    p = world["project"]
    p.shim("floor_fixed", VERSION_FLOOR, status="not-applicable")
    p.shim("also_fixed", VERSION_FLOOR, status="not-applicable")
    shims = ["floor_fixed", "also_fixed"]
    for name in ("raised", "blocked", "current"):
        p.lane(name, shims, index_url=world["index"].url)
    write_lock(p, "current", {"toylib": "1.2"})
    for shim in shims:
        p.run(shim, "fix-validated", "1.2")
    resolver = Trials()

    def verdicts(**options):
        return {
            v.shim: v
            for v in gather(
                p.manifests(),
                p.lanes(),
                p.root / "locks",
                p.validation,
                GatherOptions(token=None, policy=FAST, clock=lambda: NOW, **options),
            )
        }

    found = verdicts(resolver=resolver)
    # two shims propose the same raise of each lane: one trial each
    assert sorted(resolver.calls) == [
        ("blocked", {"toylib": "1.2"}),
        ("raised", {"toylib": "1.2"}),
    ]
    for shim in shims:
        lanes = by_lane(found[shim])
        assert found[shim].decision == "retire-in-some", found[shim].why
        assert lanes["current"].step == "drop"
        assert lanes["raised"].step == "raise" and "trial re-lock resolved" in lanes["raised"].why
        assert lanes["blocked"].step == "blocked"
        assert lanes["blocked"].blocker == "otherlib==2.0 depends on toylib==1.0"
        assert "blocked is blocked (otherlib==2.0 depends on toylib==1.0)" in found[shim].why
    # --no-resolve: no trial, the raise is shown as not re-locked and counts as proposed
    resolver.calls.clear()
    quick = verdicts(resolver=resolver, resolve=False)
    assert resolver.calls == []
    assert quick["floor_fixed"].decision == "retire"
    assert "not re-locked" in by_lane(quick["floor_fixed"])["blocked"].why


def revision_lane(name: str, rev: str, index_url: str, *, policy: str = "follow") -> Lane:
    return Lane(
        name=name,
        python="3.12",
        platform="linux",
        requirements=("toylib",),
        indexes=(IndexSpec("main", index_url, default=True),),
        shims=("toy",),
        policy=LanePolicy(policy),
        revisions=(Revision("toylib", REPO, rev),),
        file=f"lanes/{name}.toml",
    )


def write_revision_lock(locks: Path, lane_name: str, commit: str) -> None:
    lock = locks / lane_name / "pylock.toml"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "test"\n\n[[packages]]\nname = "toylib"\n'
        # the version label says 1.3: only ancestry tells where the commit really is
        f'version = "1.3+g{commit[:7]}"\n'
        f'vcs = {{ type = "git", url = "{REPO}.git", commit-id = "{commit}" }}\n'
    )


@pytest.mark.slow
def test_revision_lanes_are_placed_by_ancestry_in_a_real_mirror(world, tmp_path):
    """v1.0 → B → v1.2 → D on main; a `stale` branch from v1.0; a `side` branch that left the
    release line. Each revision lane's step comes from git ancestry, never its version label."""
    work = tmp_path / "rev-upstream"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    first = gitcommit(work, "toylib.py", "0\n", "toylib 1.0")
    git(work, "tag", "v1.0")
    before = gitcommit(work, "toylib.py", "1\n", "work")
    gitcommit(work, "toylib.py", "2\n", "fix add (#2)")
    git(work, "tag", "v1.2")
    newest = gitcommit(work, "toylib.py", "3\n", "more")
    git(work, "checkout", "-q", "-b", "stale", first)
    gitcommit(work, "stale.py", "s\n", "a stale branch")
    git(work, "checkout", "-q", "-b", "side", first)
    experiment = gitcommit(work, "side.py", "e\n", "an experiment")
    side = gitcommit(work, "side.py", "f\n", "another experiment")
    mirrors = tmp_path / "rev-mirrors" / "org"
    mirrors.mkdir(parents=True)
    git(mirrors, "clone", "-q", "--mirror", str(work), str(mirrors / "toylib.git"))

    p = world["project"]
    p.shim("toy", VERSION_FLOOR, status="not-applicable")
    p.run("toy", "fix-validated", "1.2")
    # the bug reproduced on the side commit, in the lane locked there
    record = p.run("toy", "bug-reproduced", f"1.3+g{side[:7]}", lane="ran")
    assert record.versions["toylib"].endswith(side[:7])
    url = world["index"].url
    lanes = [
        revision_lane("ahead", "main", url),
        revision_lane("behind", "main", url),
        revision_lane("behind-hold", "main", url, policy="hold"),
        revision_lane("stuck", "stale", url),
        revision_lane("diverged", "side", url),
        revision_lane("ran", "side", url),
    ]
    locks = p.root / "locks"
    for name, commit in (
        ("ahead", newest),
        ("behind", before),
        ("behind-hold", before),
        ("stuck", first),
        ("diverged", experiment),
        ("ran", side),
    ):
        write_revision_lock(locks, name, commit)
    resolver = Trials()
    (found,) = gather(
        p.manifests(),
        lanes,
        locks,
        p.validation,
        GatherOptions(
            token=None,
            policy=FAST,
            clock=lambda: NOW,
            mirrors=tmp_path / "rev-mirrors",
            resolver=resolver,
        ),
    )
    steps = {lv.lane: lv for lv in found.lane_verdicts}
    assert steps["ahead"].step == "drop" and "contains release v1.2" in steps["ahead"].why
    assert steps["ahead"].locked == f"toylib @ {newest[:10]}"
    assert steps["behind"].step == "raise"
    assert f"move it to main's newest commit {newest[:10]}" in steps["behind"].why
    assert steps["behind-hold"].step == "hold" and "v1.2" in steps["behind"].why
    assert steps["stuck"].step == "blocked"
    assert steps["stuck"].blocker.startswith("stale's newest commit")
    assert "contains no release ≥ 1.2" in steps["stuck"].blocker
    assert steps["diverged"].step == "unknown"
    assert steps["diverged"].action.endswith("`patchlane run diverged`")
    assert steps["ran"].step == "keep" and "BUG_REPRODUCED" in steps["ran"].why
    # a revision raise moves the lock, no requirement: nothing for the trial re-lock to try
    assert resolver.calls == []
    # the run on the side commit (label 1.3+g…, above every release) speaks for its lane only
    assert found.decision == "retire-in-some" and found.floors == (Floor.parse("toylib>=1.2"),)
    assert any(isinstance(e, Ancestry) for e in found.evidence)

    # Without a mirror only the version label orders the run on the side commit: 1.3+g… is above
    # every release, and a bug there keeps the shim everywhere (uncertain evidence never retires).
    (blind,) = gather(
        p.manifests(),
        lanes,
        locks,
        p.validation,
        GatherOptions(token=None, policy=FAST, clock=lambda: NOW, resolve=False),
    )
    assert blind.decision == "keep" and f"toylib 1.3+g{side[:7]}" in blind.why


def test_a_revision_lane_no_mirror_places_is_unknown_never_dropped_on_its_label():
    commit = "d" * 40
    found = verdict(
        VERSION_FLOOR,
        ev(
            locks={"main-lane": {}},
            commits={"main-lane": {"toylib": commit}},
            ancestry={(REPO, commit): ProbeFailure("git", REPO, "no mirror of org/toylib")},
            execution=CLEAN_ON_1_2,
        ),
        lanes=[revision_lane("main-lane", "main", "http://index/simple")],
    )
    (lane,) = found.lane_verdicts
    assert lane.step == "unknown" and lane.locked == f"toylib @ {commit[:10]}"
    assert "no mirror of org/toylib" in lane.why and "`patchlane run main-lane`" in lane.action
    assert found.decision == "unknown" and found.action == lane.action


def test_lanes_an_unknown_decided_alike_take_one_line_and_the_action_once(capsys):
    from retire.commands.base import configure
    from retire.commands.verdicts import _print_table
    from retire.verdicts.model import LaneStep, LaneVerdict, Verdict

    action = "repair the mirror: no mirror of https://github.com/org/toylib"
    lanes = tuple(
        LaneVerdict(name, LaneStep.UNKNOWN, "no mirror", action=action) for name in ("a", "b")
    )
    configure()
    _print_table([Verdict("toy", "unknown", "pr-released: no mirror", action, lane_verdicts=lanes)])
    out = capsys.readouterr().out
    assert "unknown in a, b" in out and out.count(action) == 1


def test_a_text_said_under_several_shims_is_printed_once_with_them(capsys):
    """Issue 29 item 7: the same mirror reason and the same host fact under every shim are one
    fact; each shim's line shows its mark, the fact is said once with the shims it touches."""
    from retire.commands.base import configure
    from retire.commands.verdicts import _print_table
    from retire.verdicts.model import Flag, LaneStep, LaneVerdict, Verdict

    mirror = "no mirror of https://github.com/org/toylib: declare one in patchlane.toml " * 3
    host = "no lock for nightly: run `nox -s lock -- nightly`"
    verdicts = [
        Verdict(
            shim,
            "unknown",
            f"pr-released: {mirror}",
            flags=(Flag("drift", host),),
            lane_verdicts=(
                LaneVerdict("cpu", LaneStep.UNKNOWN, "nothing decides", action=f"repair {shim}"),
                LaneVerdict("gpu", LaneStep.KEEP, "needed"),
            ),
        )
        for shim in ("alpha", "beta", "gamma")
    ]
    configure()
    _print_table(verdicts)
    out = capsys.readouterr().out
    # the reason (three sentences long) printed once, not under each shim
    assert out.count("no mirror of https://github.com/org/toylib") == 3
    assert out.count(host) == 1
    assert f"[1] pr-released: {mirror.strip()} (alpha, beta, gamma)" in " ".join(out.split())
    assert f"[2] drift: {host} (alpha, beta, gamma)" in out
    # what differs per shim stays on its line
    assert "repair beta" in out


@pytest.mark.slow
def test_a_recorded_commit_the_mirror_lacks_is_a_flag_on_its_own_shim_only(world, tmp_path):
    """A run built from a commit the mirror does not have (a re-committed copy, a mirror behind)
    is flagged where it was recorded — never on every shim whose target the mirror serves."""
    from retire.evidence.validation import ValidationRecord, append

    p = build_catalogue(world)
    stranger = "ab" * 20
    mirror = (world["mirrors"] / "org" / "toylib.git").as_uri()
    record = ValidationRecord(
        shim="pr_open",
        mode="without",
        lane="cpu",
        host={"hostname": "gpu-2", "gpu": None, "revisions": {"toylib": f"{mirror}@{stranger}"}},
        versions={"toylib": "1.2"},
        sentinel="BUG_REPRODUCED",
        outcome="bug-reproduced",
        exit_code=10,
        duration_s=0.1,
        started_at="2026-06-02T00:00:00.000000+00:00",
    )
    append(p.validation, [record])
    verdicts = gather_world(p, world, cache_dir=tmp_path / "cache", resolve=False)
    lacks = f"commit {stranger[:12]} is not in the mirror"
    said = {v.shim: [f.text for f in v.flags if lacks in f.text] for v in verdicts}
    assert said["pr_open"], said
    # the other shims linking the same repository name no commit of it
    assert not said["pr_fixed"] and not said["floor_fixed"], said
