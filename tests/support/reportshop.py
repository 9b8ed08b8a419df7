"""A throwaway shop for the weekly report: shims (``tests.support.shimtree``), lanes, locks,
validation records, a real git history spread over several ISO weeks, and earlier reports.

The story (ISO weeks of 2026; "now" is Wednesday 2026-11-18, week W47):

====  ==========  ===============================================  ===========
week  date        commit                                           shims
====  ==========  ===============================================  ===========
W44   2026-10-27  alpha, beta, gamma                               3
W45   2026-11-04  + delta                                          4
W46   —           (no commit: still 4)                             4
W47   2026-11-17  - gamma, + epsilon                               4
====  ==========  ===============================================  ===========

The previous report (W46) said: alpha keep, beta unknown, gamma keep, delta keep; alpha needed
on lane gpu. This week alpha's shim no longer fixes the bug on gpu (newly broken), beta became
a retire candidate, delta's probe fails (unknown), epsilon is new, has no upstream link and has
never been proven (its only run was skipped); delta has never run at all.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from retire.evidence import validation
from retire.evidence.floor import Floor
from retire.evidence.validation import ValidationRecord
from retire.evidence.values import ProbeFailure
from retire.verdicts.model import ConditionResult, Flag, LaneVerdict, Verdict
from shims.model import ConditionKind
from tests.support.gitrepos import git
from tests.support.shimtree import manifest_text, write_shim

NOW = _dt.datetime(2026, 11, 18, 12, 0, tzinfo=_dt.UTC)
WEEK = "2026-W47"

LANES = {
    "cpu": ["alpha", "beta", "delta", "epsilon"],
    "gpu": ["alpha", "delta"],
}


def shim_manifest(
    shim_id: str,
    *,
    linked: bool = True,
    links: list[tuple[str, str]] | None = None,
    conditions: str | None = None,
    owner: str = "kernels@example.org",
) -> str:
    """A valid manifest; ``linked=False`` makes it pending with no upstream link; ``links``
    replaces the default ones; ``conditions`` replaces the [retirement] tables."""
    text = manifest_text(shim_id).replace('owner = "kernels@example.org"', f'owner = "{owner}"')
    head, _, rest = text.partition("[upstream]")
    upstream_end = rest.index("[retirement]")
    retirement, _, tail = rest[upstream_end:].partition("[reproducer]")
    if not linked:
        upstream = 'status = "pending"\n\n'
    elif links is not None:
        upstream = 'status = "submitted"\n\n' + "".join(
            f'[[upstream.links]]\nrole = "{role}"\nurl = "{url}"\n\n' for role, url in links
        )
    else:
        upstream = rest[:upstream_end]
    if conditions is not None:
        retirement = conditions
    return f"{head}[upstream]\n{upstream}{retirement}\n[reproducer]{tail}"


def lane_toml(name: str, shims: list[str]) -> str:
    listed = ", ".join(f'"{s}"' for s in shims)
    return (
        f'[lane]\ndescription = "{name} lane"\npython = "3.12"\nplatform = '
        f'"x86_64-manylinux_2_28"\n'
        f'requirements = ["toylib==1.0"]\nshims = [{listed}]\n'
    )


def write_lanes(root: Path, lanes: dict[str, list[str]]) -> None:
    for name, shims in lanes.items():
        (root / "lanes").mkdir(parents=True, exist_ok=True)
        (root / "lanes" / f"{name}.toml").write_text(lane_toml(name, shims))
        lock = root / "locks" / name / "pylock.toml"
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(
            'lock-version = "1.0"\ncreated-by = "test"\n\n[[packages]]\nname = "toylib"\nversion = '
            '"1.0"\n'
        )


def record(
    shim: str,
    lane: str,
    mode: str,
    outcome: str,
    when: str,
    *,
    host: str = "ci-box",
    gpu: str | None = None,
    detail: str = "",
    run: str = "",
    version: str = "1.0",
) -> ValidationRecord:
    sentinel = {
        "bug-reproduced": "BUG_REPRODUCED",
        "fix-validated": "FIX_VALIDATED",
        "memory-save-verified": "MEMORY_SAVE_VERIFIED",
        "skipped": "SKIPPED",
    }.get(outcome)
    code = {
        "bug-reproduced": 10,
        "fix-validated": 0,
        "memory-save-verified": 0,
        "skipped": 77,
        "crashed": 1,
    }.get(outcome)
    return ValidationRecord(
        shim=shim,
        mode=mode,
        lane=lane,
        host={"hostname": host, "gpu": gpu, "python": "3.12.1", "platform": "linux-x86_64"},
        versions={"toylib": version},
        sentinel=sentinel,
        outcome=outcome,
        exit_code=code,
        duration_s=0.5,
        started_at=when,
        detail=detail,
        run=run,
    )


def shop_records() -> list[ValidationRecord]:
    return [
        record(
            "alpha",
            "cpu",
            "without",
            "bug-reproduced",
            "2026-11-16T08:00:00.000000+00:00",
            run="r1",
        ),
        record(
            "alpha", "cpu", "with", "fix-validated", "2026-11-16T08:00:05.000000+00:00", run="r1"
        ),
        record(
            "alpha",
            "gpu",
            "without",
            "bug-reproduced",
            "2026-11-16T09:00:00.000000+00:00",
            host="gpu-box",
            gpu="NVIDIA H100",
            run="r2",
        ),
        record(
            "alpha",
            "gpu",
            "with",
            "bug-reproduced",
            "2026-11-16T09:00:05.000000+00:00",
            host="gpu-box",
            gpu="NVIDIA H100",
            run="r2",
        ),
        record(
            "alpha",
            "h200-overlay",
            "without",
            "bug-reproduced",
            "2026-11-17T10:00:00.000000+00:00",
            host="gpu-node",
            gpu="NVIDIA H200",
        ),
        record(
            "alpha",
            "h200-overlay",
            "with",
            "fix-validated",
            "2026-11-17T10:00:04.000000+00:00",
            host="gpu-node",
            gpu="NVIDIA H200",
        ),
        record(
            "beta",
            "cpu",
            "without",
            "fix-validated",
            "2026-11-16T08:01:00.000000+00:00",
            run="r1",
            version="1.1",
        ),
        record(
            "epsilon",
            "cpu",
            "without",
            "skipped",
            "2026-11-16T08:02:00.000000+00:00",
            detail="no CUDA device",
            run="r1",
        ),
    ]


def shop_verdicts() -> list[Verdict]:
    failure = ProbeFailure(
        "codehost", "https://example.org/toylib/pull/2", "server error 500 Internal Server Error"
    )
    return [
        Verdict(
            "alpha",
            "keep",
            "pr-released: PR #2 is open",
            lanes=("cpu", "gpu"),
            conditions=(ConditionResult(ConditionKind.PR_RELEASED, "fails", "PR #2 is open"),),
        ),
        Verdict(
            "beta",
            "retire",
            "version-floor: toylib 1.1 released; confirmed: FIX_VALIDATED without the shim",
            lanes=("cpu",),
            conditions=(
                ConditionResult(
                    ConditionKind.VERSION_FLOOR,
                    "holds",
                    "toylib 1.1 released",
                    Floor.parse("toylib>=1.1"),
                ),
            ),
            floors=(Floor.parse("toylib>=1.1"),),
        ),
        Verdict(
            "delta",
            "unknown",
            str(failure),
            action="make the code host reachable",
            lanes=("cpu", "gpu"),
            failures=(failure,),
        ),
        Verdict(
            "epsilon",
            "keep",
            "reproducer-clean: BUG_REPRODUCED without the shim",
            lanes=("cpu",),
            flags=(
                Flag("stale", "no upstream movement since 2026-01-02 (318 days)"),
                Flag("no-link", "no upstream link (status pending): file it upstream and link it"),
            ),
        ),
    ]


#: The title of beta in the per-lane story: Markdown a manifest may carry.
TRICKY_TITLE = "`LigerFusedLinearCrossEntropy` with reduction='none' | `a|b` <sums>"

#: tilelang's blocker as uv explains it (one line), and the conflict naming both sides.
BLOCKER = "mamba-ssm==2.3.2.post1 depends on toylib==1.0"
CONFLICT = (
    "pr-released: PR #2 is in 1.0.post1, but BUG_REPRODUCED without the shim on toylib 1.0 "
    "(lane gpu on gpu-box); the floor comes from execution: 1.1"
)


def per_lane_verdicts() -> list[Verdict]:
    """The shop's verdicts with lanes (issue 19): beta goes from cpu and nightly, holds on the
    floor lane, is blocked on stable and mamba3 by mamba-ssm's pin and has no decision on
    megatron-main; alpha carries a conflict."""
    alpha, beta, delta, epsilon = shop_verdicts()
    lanes = (
        LaneVerdict(
            "cpu", "drop", "the lane's locked toylib 1.1 is at or above 1.1", locked="toylib 1.1"
        ),
        LaneVerdict(
            "nightly",
            "raise",
            "toylib 1.0 < 1.1; the trial re-lock resolved toylib 1.1",
            locked="toylib 1.0",
            floors=(Floor.parse("toylib>=1.1"),),
        ),
        LaneVerdict(
            "floor",
            "hold",
            "the lane holds its pins (policy hold); toylib 1.0 < 1.1",
            policy="hold",
            file="lanes/floor.toml",
            locked="toylib 1.0",
            until="until the lane's toylib==1.0 reaches 1.1",
        ),
        *(
            LaneVerdict(
                name,
                "blocked",
                "raising toylib to 1.1 does not resolve",
                file=f"lanes/{name}.toml",
                locked="toylib 1.0",
                floors=(Floor.parse("toylib>=1.1"),),
                blocker=BLOCKER,
            )
            for name in ("stable", "mamba3")
        ),
        LaneVerdict(
            "megatron-main",
            "unknown",
            "the locked commit abc1234 neither contains v1.1 nor has a run",
            locked="toylib @ abc1234",
            action="run `patchlane run megatron-main`",
        ),
    )
    beta = Verdict(
        "beta",
        "retire-in-some",
        "version-floor: toylib 1.1 released; retire in cpu, nightly; floor holds, stable and "
        "mamba3 are blocked, megatron-main is unknown",
        lanes=tuple(lane.lane for lane in lanes),
        conditions=beta.conditions,
        floors=beta.floors,
        lane_verdicts=lanes,
    )
    alpha = Verdict(
        alpha.shim,
        alpha.decision,
        alpha.why,
        lanes=alpha.lanes,
        conditions=alpha.conditions,
        flags=(Flag("conflict", CONFLICT),),
        lane_verdicts=tuple(
            LaneVerdict(name, "keep", alpha.why, locked="toylib 1.0") for name in alpha.lanes
        ),
    )
    return [alpha, beta, delta, epsilon]


def sample_bisections():
    """What ``--bisect-budget 6`` made of two candidates: one bisection ran, one was left."""
    from retire.report.model import BisectionLeft, BisectionRan, Bisections

    return Bisections(
        6,
        None,
        (
            BisectionRan(
                "delta",
                "patchlane bisect delta --since 1.0",
                "found",
                "toylib 1.6 is the first fixed release (last broken: 1.5). 4 conclusive "
                "reproducer run(s) for 9 release(s) in range (bound 5); 0 from cache.",
                4,
                "toylib>=1.6",
            ),
        ),
        (BisectionLeft("epsilon", "patchlane bisect epsilon", "the 6-run budget is spent"),),
    )


def previous_report(week: str = "2026-W46") -> dict:
    """What the report of ``week`` said (the parts a later report reads)."""
    return {
        "kind": "patchlane-report",
        "schema": 1,
        "week": week,
        "headline": {"carried": 4, "retire": 0, "newly_broken": 0, "unknown": 1},
        "shims": [
            {"shim": "alpha", "verdict": "keep"},
            {"shim": "beta", "verdict": "unknown"},
            {"shim": "gamma", "verdict": "keep"},
            {"shim": "delta", "verdict": "keep"},
        ],
        "matrix": {
            "alpha": {"cpu": {"outcome": "needed"}, "gpu": {"outcome": "needed"}},
            "gamma": {"cpu": {"outcome": "crashed"}},
        },
    }


def _remove_shim(root: Path, shim_id: str) -> None:
    folder = root / "shims" / shim_id
    for item in sorted(folder.rglob("*"), reverse=True):
        item.unlink() if item.is_file() else item.rmdir()
    folder.rmdir()


def build_shop(
    root: Path, *, with_git: bool = True, with_previous: bool = True, beta_title: str | None = None
) -> Path:
    """The whole shop under ``root`` (see the module docstring); returns ``root``.
    ``beta_title`` replaces beta's title."""
    root.mkdir(parents=True, exist_ok=True)
    shims = root / "shims"
    if with_git:
        git(root, "init", "-q", "-b", "main")
    for shim in ("alpha", "beta", "gamma"):
        text = shim_manifest(shim)
        if shim == "beta" and beta_title is not None:
            quoted = json.dumps(beta_title)
            text = text.replace('title = "toylib add() subtracts"', f"title = {quoted}")
        write_shim(shims, shim, manifest=text)
    if with_git:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "alpha, beta, gamma", when="2026-10-27T10:00:00+00:00")
    write_shim(shims, "delta", manifest=shim_manifest("delta", owner="numerics@example.org"))
    if with_git:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "delta", when="2026-11-04T10:00:00+00:00")
    _remove_shim(root, "gamma")
    write_shim(shims, "epsilon", manifest=shim_manifest("epsilon", linked=False))
    if with_git:
        git(root, "add", "-A")
        git(
            root,
            "commit",
            "-q",
            "-m",
            "retire gamma, add epsilon",
            when="2026-11-17T10:00:00+00:00",
        )
    write_lanes(root, LANES)
    validation.append(root / "validation" / "manifest.jsonl", shop_records())
    if with_previous:
        (root / "reports").mkdir(exist_ok=True)
        (root / "reports" / "2026-W46.json").write_text(json.dumps(previous_report()))
    return root
