"""Unproven shims (retire/runs/proof.py): a lane proves a shim when its latest runs of the shim's
reproducer are judged needed or upstream-fixed; a reproducer that still skips, a target the lane
lacks, a crash, a broken shim, no run, no lane — prove nothing."""

from __future__ import annotations

from retire.evidence.validation import ValidationRecord
from retire.lanes.model import Lane
from retire.runs.proof import assess

SENTINEL = {
    "bug-reproduced": "BUG_REPRODUCED",
    "fix-validated": "FIX_VALIDATED",
    "memory-save-verified": "MEMORY_SAVE_VERIFIED",
    "skipped": "SKIPPED",
}


def _lane(name: str, *shims: str) -> Lane:
    return Lane(name=name, python="3.12", platform="linux", requirements=("toylib",), shims=shims)


def _run(shim: str, lane: str, day: int, without: str, with_: str | None, detail: str = ""):
    """One lane run of ``shim``: its without-shim record, and its with-shim record if any."""
    records = []
    for mode, outcome in (("without", without), ("with", with_)):
        if outcome is None:
            continue
        records.append(
            ValidationRecord(
                shim=shim,
                mode=mode,
                lane=lane,
                host={"hostname": "box"},
                versions={},
                sentinel=SENTINEL.get(outcome),
                outcome=outcome,
                exit_code=0,
                duration_s=0.1,
                started_at=f"2026-11-{day:02d}T10:00:0{0 if mode == 'without' else 1}.000000+00:00",
                detail=detail,
                run=f"run-{day}",
            )
        )
    return records


def _why(proofs) -> dict[str, str | None]:
    return {p.shim: (None if p.proven else p.why) for p in proofs}


def test_a_shim_is_proven_where_a_lane_reproduces_the_bug_and_the_shim_fixes_it():
    lanes = [_lane("cpu", "fixed", "gone", "stub", "broken"), _lane("gpu", "stub")]
    records = [
        *_run("fixed", "cpu", 1, "bug-reproduced", "fix-validated"),
        *_run("gone", "cpu", 1, "fix-validated", "fix-validated"),
        *_run("stub", "cpu", 1, "skipped", "skipped", "stub: the reproducer is not written yet"),
        *_run("broken", "cpu", 1, "bug-reproduced", "bug-reproduced"),
    ]
    proofs = assess(["fixed", "gone", "stub", "broken", "loose"], lanes, records)
    assert _why(proofs) == {
        "fixed": None,
        # upstream-fixed: the reproducer proves the bug is gone (a retirement candidate)
        "gone": None,
        "stub": "cpu: skipped — stub: the reproducer is not written yet; gpu: no run recorded",
        "broken": "cpu: shim-broken — the bug reproduces with the shim applied",
        "loose": "no lane lists it: add it to a lane's shims",
    }
    assert proofs[0].proven_on == ("cpu",)


def test_the_latest_runs_count_and_one_lane_is_enough():
    lanes = [_lane("cpu", "x"), _lane("gpu", "x"), _lane("old", "y")]
    # proven on cpu last week, skipping there since; proven on gpu: still proven (by gpu)
    records = [
        *_run("x", "cpu", 1, "bug-reproduced", "fix-validated"),
        *_run("x", "cpu", 8, "skipped", "skipped", "no CUDA device"),
        *_run("x", "gpu", 2, "bug-reproduced", "memory-save-verified"),
        # a proof on a lane that no longer lists the shim does not count
        *_run("y", "gone-lane", 3, "bug-reproduced", "fix-validated"),
    ]
    proofs = assess(["x", "y"], lanes, records)
    assert [(p.shim, p.proven_on) for p in proofs] == [("x", ("gpu",)), ("y", ())]
    assert _why(proofs)["y"] == "old: no run recorded"
    # without the gpu lane's runs, the cpu lane's latest (a skip) decides
    alone = assess(["x"], lanes, records[:4])
    assert _why(alone) == {"x": "cpu: skipped — no CUDA device; gpu: no run recorded"}


def test_a_policy_shim_whose_without_run_skips_is_unproven_even_when_its_mitigation_holds():
    records = _run("env", "cpu", 1, "skipped", "fix-validated", "no CUDA device")
    (proof,) = assess(["env"], [_lane("cpu", "env")], records)
    assert not proof.proven and proof.why.startswith("cpu: skipped — no CUDA device; with the shim")
