"""A verdict's why says each thing once (issue 21, item 10): a retirement resting on the
reproducer-clean condition held *and* confirmed by the same clean run names that run once."""

from __future__ import annotations

from pathlib import Path

from retire.evidence.values import ExecutionEvidence, ExecutionHistory
from retire.history.reading import read_runs
from retire.lanes.model import Lane
from retire.verdicts.model import ShimEvidence
from retire.verdicts.rules import decide
from shims.manifest import parse_manifest
from tests.support.retirement import NOW, manifest_toml

CLEAN_ONLY = '\n[[retirement.conditions]]\nkind = "reproducer-clean"\n'
VERSION_FLOOR = (
    '\n[[retirement.conditions]]\nkind = "version-floor"\ndistribution = "toylib"\n'
    'version = ">=1.2"\n'
)
LANES = [Lane(name="cpu", python="3.12", platform="linux", requirements=(), shims=("toy",))]


def clean_run(version: str) -> ExecutionEvidence:
    return ExecutionEvidence(
        "toy", "cpu", "without", "fix-validated", (("toylib", version),), "ci-1", None, "2026-06-01"
    )


def verdict(conditions: str, mode: str = "all"):
    manifest = parse_manifest(manifest_toml("toy", conditions, mode=mode), Path("/p/toy/m.toml"))
    runs = (clean_run("1.3"),)
    evidence = ShimEvidence(
        locks={"cpu": {"toylib": "1.3"}},
        execution=ExecutionHistory("toy", runs),
        window=read_runs(runs, "toylib"),
    )
    return decide(manifest, LANES, evidence, now=NOW)


def test_a_clean_reproducer_is_named_once_in_the_why():
    found = verdict(CLEAN_ONLY)
    assert found.decision == "retire", found.why
    assert found.why.count("FIX_VALIDATED without the shim on toylib 1.3") == 1, found.why


def test_a_confirmation_that_adds_something_is_still_said():
    found = verdict(VERSION_FLOOR)
    assert found.decision in ("retire", "retire-in-some", "unknown"), found.why
    if found.decision != "unknown":
        assert "confirmed: FIX_VALIDATED" in found.why, found.why
