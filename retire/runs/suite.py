"""Lane-run results as pytest tests, so a broken shim reads like any failing test.

The runner has already executed every reproducer (lanes concurrently); this plugin turns each
lane build and each (shim, mode) run into a pytest item whose outcome mirrors the record:
a bug still reproducing without the shim passes, an upstream fix shows as ``xfail`` (a
retirement candidate — like a strict xfail that now passes, but it does not fail the run),
a shim that does not fix the bug fails, a crash or timeout fails with the reproducer's output.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

from retire.evidence.validation import FAULTED, FIXED, RunOutcome, ShimOutcome, ValidationRecord
from retire.runs.guards import GuardOutcome, GuardRun
from retire.runs.lanerun import LaneRun, LaneStatus, ShimRun


class ReproducerFailedError(Exception):
    """A lane that could not be built, or a reproducer run that faulted or a shim that does not
    fix its bug: the item fails with this message, not a traceback."""


def _record_text(record: ValidationRecord) -> str:
    versions = (
        ", ".join(f"{k} {v}" for k, v in sorted(record.versions.items()) if v)
        or "no versions reported"
    )
    return (
        f"{record.shim} ({record.mode} shim) on lane {record.lane}: {record.outcome}"
        f"{' — ' + record.detail if record.detail else ''}\n"
        f"  sentinel: {record.sentinel}  exit code: {record.exit_code}  [{versions}]\n"
        f"  output (tail):\n"
        + "\n".join("    " + line for line in record.output_tail.splitlines()[-30:])
    )


def _skip(reason: str) -> NoReturn:
    # Reported at the item (lane::shim::mode), not at this line of the plugin.
    raise pytest.skip.Exception(reason, _use_item_location=True)


def _check_build(run: LaneRun) -> None:
    if run.status == LaneStatus.SKIPPED:
        _skip(run.why)
    if run.status == LaneStatus.BUILD_FAILED:
        detail = "\n".join("    " + line for line in run.detail.splitlines()[-30:])
        raise ReproducerFailedError(
            f"lane {run.lane} could not be built: {run.why}" + (f"\n{detail}" if detail else "")
        )
    if run.status == LaneStatus.JOB_FAILED:
        raise ReproducerFailedError(f"lane {run.lane}: {run.why}")


def _check_ran(record: ValidationRecord | None, not_run: str) -> ValidationRecord:
    """Skip an item whose run did not happen or skipped; fail one whose run faulted."""
    if record is None:
        _skip(not_run)
    if record.outcome in FAULTED:
        raise ReproducerFailedError(_record_text(record))
    if record.outcome == RunOutcome.SKIPPED:
        _skip(record.detail or "skipped by the reproducer")
    return record


def _check_without(run: ShimRun | None, record: ValidationRecord | None, why: str) -> None:
    record = _check_ran(record, why or "not run")
    if record.outcome in FIXED:
        pytest.xfail(
            "upstream fixed: the bug no longer reproduces without the shim — a retirement candidate"
        )


def _check_with(run: ShimRun | None, record: ValidationRecord | None, why: str) -> None:
    """Fails exactly when the lane's judged outcome fails (runs.judge is the one judge)."""
    record = _check_ran(record, why or "not run: the without-shim run did not reproduce the bug")
    outcome = run.outcome if run is not None else None
    if outcome == ShimOutcome.SHIM_BROKEN:
        raise ReproducerFailedError(
            "shim broken: the bug still reproduces with the shim applied\n" + _record_text(record)
        )
    if record.outcome in FIXED:
        # the shim's fix (or a policy shim's mitigation) is in effect
        return
    if run is not None and run.outcome == ShimOutcome.SKIPPED:
        _skip(run.why)
    # judged upstream-fixed: the without-shim run was clean
    if record.outcome == RunOutcome.BUG_REPRODUCED:
        pytest.xfail(
            "the with-shim run reproduced the bug but the without-shim run did not: "
            "the lane counts it as upstream-fixed — look at both runs"
        )


def _check_guard(run: GuardRun) -> None:
    """A guard fails loudly when its bug is back (or its reproducer faulted); holds quietly."""
    if run.outcome == GuardOutcome.SKIPPED:
        _skip(run.why)
    if run.failed:
        text = _record_text(run.record) if run.record is not None else run.why
        word = "REGRESSED" if run.outcome == GuardOutcome.REGRESSED else str(run.outcome)
        raise ReproducerFailedError(f"guard {word}: {run.why}\n{text}")


class _Item(pytest.Item):
    def __init__(self, *, check, location: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self._check = check
        self._location = location

    def runtest(self) -> None:
        self._check()

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ReproducerFailedError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        # Skips and failures point at the shim's reproducer (or the lanes folder for builds).
        return self._location, 0, self.name


def _item(session, name: str, check, location: Path) -> _Item:
    return _Item.from_parent(session, name=name, nodeid=name, check=check, location=location)


class _LanePlugin:
    def __init__(self, runs: list[LaneRun], locations: dict[str, Path]) -> None:
        self.runs = runs
        self.locations = locations

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        items = []
        for run in self.runs:
            items.append(
                _item(
                    session,
                    f"lane[{run.lane}]::build",
                    lambda run=run: _check_build(run),
                    self.locations.get("lanes", Path("lanes")),
                )
            )
            by_shim = {s.shim: s for s in run.shims}
            for shim in run.planned:
                result = by_shim.get(shim)
                why = result.why if result else run.why
                without = result.without if result else None
                with_shim = result.with_shim if result else None
                where = self.locations.get(shim, Path(shim))
                items.append(
                    _item(
                        session,
                        f"lane[{run.lane}]::{shim}::without-shim",
                        lambda s=result, r=without, w=why: _check_without(s, r, w),
                        where,
                    )
                )
                items.append(
                    _item(
                        session,
                        f"lane[{run.lane}]::{shim}::with-shim",
                        lambda s=result, r=with_shim, w=why: _check_with(s, r, w),
                        where,
                    )
                )
            for guard in run.guards:
                items.append(
                    _item(
                        session,
                        f"lane[{run.lane}]::guard::{guard.guard}",
                        lambda g=guard: _check_guard(g),
                        self.locations.get(guard.guard, Path(guard.guard)),
                    )
                )
        session.items = items
        session.testscollected = len(items)
        return True


def report(
    runs: list[LaneRun],
    locations: dict[str, Path] | None = None,
    *,
    verbose: bool = True,
    colour: bool | None = None,
) -> int:
    """Print the results as a pytest session; returns pytest's exit code.

    ``locations`` maps shim ids (and ``"lanes"``) to the files that skips and failures point at;
    ``colour`` False means plain text even on a terminal (CI, ``NO_COLOR``), None pytest's choice.
    """
    with tempfile.TemporaryDirectory(prefix="patchlane-suite-") as scratch:
        # an empty config: the project's own stays out
        ini = os.path.join(scratch, "pytest.ini")
        with open(ini, "w", encoding="utf-8") as handle:
            handle.write("[pytest]\n")
        args = [
            "-c",
            ini,
            "--rootdir",
            os.getcwd(),
            "-p",
            "no:cacheprovider",
            "--no-header",
        ]
        # quiet: a letter per item and what failed; -v: a line per item and why each skipped
        args += ["-v", "-rfExs"] if verbose else ["-q", "-rfE"]
        if colour is not None:
            args.append(f"--color={'yes' if colour else 'no'}")
        return int(pytest.main(args, plugins=[_LanePlugin(runs, locations or {})]))
