"""The lane × shim table at the end of `patchlane run` and from `patchlane summary` (issue 29,
item 9): within 100 columns (lanes as rows when there are many), each reason a cell skipped said
once in the legend, a shim whose with-shim run validated the fix never shown as `skipped`, and
the pytest view's line per item kept behind -v."""

from __future__ import annotations

import pytest

from retire.evidence import validation
from retire.evidence.validation import RunOutcome, ShimOutcome
from retire.runs import lanerun
from retire.runs.lanerun import LaneRun, LaneStatus, ShimRun
from retire.runs.summarytable import MITIGATED, WIDTH, summary_table

NO_GPU = "no CUDA device: the reproducer needs a GPU (torch.cuda.is_available() is False)"
LANES = (
    "cpu",
    "stable",
    "nightly",
    "floor",
    "mamba3",
    "megatron-main",
    "torch2.11-te2.20",
    "torch2.10-te2.18",
    "h200-overlay",
    "rocm6.4",
    "cu130-preview",
    "py3.13-free",
)
SHIMS = tuple(f"shim_number_{n}" for n in range(11))


def _run(lane: str) -> LaneRun:
    results = []
    for n, shim in enumerate(SHIMS):
        if n == 0:
            # a policy shim: nothing to reproduce here, its mitigation in effect
            results.append(
                ShimRun(
                    lane, shim, ShimOutcome.SKIPPED, NO_GPU, with_outcome=RunOutcome.FIX_VALIDATED
                )
            )
        elif n % 2:
            results.append(ShimRun(lane, shim, ShimOutcome.SKIPPED, NO_GPU))
        else:
            results.append(ShimRun(lane, shim, ShimOutcome.NEEDED, "bug reproduces"))
    return LaneRun(lane, LaneStatus.RAN, SHIMS, shims=tuple(results))


def test_a_dozen_lanes_fit_100_columns_as_rows():
    text = summary_table([_run(lane) for lane in LANES])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, text
    assert lines[0].startswith("lane ") and "shims by outcome" in lines[0]
    assert sum(line.startswith(lane + " ") for line in lines for lane in LANES) == len(LANES)
    # the reason, once, in the legend; the cells carry its mark
    assert text.count(NO_GPU) == 1 and f"skipped¹: {NO_GPU}" in text
    assert "skipped¹: shim_number_1, shim_number_3" in text


def test_few_lanes_keep_shims_down_and_lanes_across():
    text = summary_table([_run(lane) for lane in LANES[:3]])
    lines = text.splitlines()
    assert lines[0].split() == ["shim", "cpu", "stable", "nightly"]
    assert lines[2].split() == ["shim_number_1", "skipped¹", "skipped¹", "skipped¹"]
    assert max(len(line) for line in lines) <= WIDTH


def test_a_validated_with_shim_run_is_not_shown_as_skipped():
    text = summary_table([_run("cpu")])
    row = next(line for line in text.splitlines() if line.startswith("shim_number_0 "))
    assert row.split() == ["shim_number_0", MITIGATED]
    assert "FIX_VALIDATED: the shim's mitigation is in effect" in " ".join(text.split())
    # and so it reads back from the run's summary file, which `patchlane summary` prints from
    again = lanerun.from_summary(lanerun.to_summary(_run("cpu")))
    assert summary_table([again]) == text


def test_the_judged_record_pair_says_mitigated():
    def record(mode: str, outcome: RunOutcome) -> validation.ValidationRecord:
        return validation.ValidationRecord(
            shim="s",
            mode=mode,
            lane="cpu",
            host={},
            versions={},
            sentinel="SKIPPED" if outcome == RunOutcome.SKIPPED else "FIX_VALIDATED",
            outcome=outcome,
            exit_code=0,
            duration_s=0.1,
            started_at="2026-01-01T00:00:00",
        )

    without, with_shim = (
        record("without", RunOutcome.SKIPPED),
        record("with", RunOutcome.FIX_VALIDATED),
    )
    outcome, why = lanerun.judge(without, with_shim)
    run = LaneRun(
        "cpu",
        LaneStatus.RAN,
        ("s",),
        shims=(ShimRun("cpu", "s", outcome, why, without, with_shim),),
    )
    assert summary_table([run]).splitlines()[1].split() == ["s", MITIGATED]


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [False, True])
def test_the_pytest_view_keeps_its_line_per_item_behind_verbose(verbose, capsys):
    from retire.runs import suite

    runs = [_run(lane) for lane in LANES[:2]]
    assert suite.report(runs, verbose=verbose, colour=False) == 0
    out = capsys.readouterr().out
    per_item = "lane[cpu]::shim_number_1::without-shim SKIPPED" in out
    skips = out.count("SKIPPED [")
    assert per_item is verbose
    assert (skips > 0) is verbose
    assert "passed" in out and "skipped" in out


def test_a_reason_several_lanes_share_is_said_once_naming_them():
    # issue 36: "lane needs a CUDA host (no nvidia-smi on PATH)" was printed once per lane
    why = "lane needs a CUDA host (no nvidia-smi on PATH)"
    gpu = [f"gpu-lane-{n}" for n in range(13)]
    runs = [
        LaneRun(lane, LaneStatus.SKIPPED, ("s",), why, shims=(ShimRun(lane, "s", "skipped", why),))
        for lane in gpu
    ]
    runs.append(LaneRun("cpu", LaneStatus.RAN, ("s",), shims=(ShimRun("cpu", "s", "needed", ""),)))
    runs.append(LaneRun("odd", LaneStatus.BUILD_FAILED, ("s",), "uv failed"))
    text = summary_table(runs)
    assert text.count(why) == 1, text
    legend = " ".join(text.split())
    assert f"skipped¹: {why} — 13 lanes: {', '.join(gpu)}" in legend, text
    # a reason of one lane is said as before
    assert "odd: build-failed — uv failed" in text
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    # lanes that did not run, for a reason no cell says: once too
    text = summary_table([LaneRun(lane, LaneStatus.SKIPPED, (), why) for lane in gpu])
    assert f"13 lanes skipped — {why}: {', '.join(gpu)}" in " ".join(text.split()), text


def test_every_word_a_cell_or_a_guard_can_say_is_in_the_readmes_outcome_table():
    # issue 36: `mitigated` was printed but explained nowhere
    from retire.runs.guards import GuardOutcome
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| outcome | meaning | fails the run |") :].split("\n\n")[0]
    words = {
        *map(str, ShimOutcome),
        MITIGATED,
        *(str(s) for s in LaneStatus if s not in (LaneStatus.RAN, LaneStatus.SKIPPED)),
        *map(str, GuardOutcome),
    }
    explained = {word for word in words if f"`{word}`" in table}
    assert explained == words, sorted(words - explained)
