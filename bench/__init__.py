"""patchlane's benchmarks: ratios measured side by side in one run (``python -m bench``).

Convention: every module ``bench/<topic>.py`` (names starting with ``_`` are helpers, not
benchmarks) exposes ``run() -> list[dict]``, one row per measurement::

    {"name": "locks.noop-vs-scratch", "value": 63.2, "goal": ">= 50x", "unit": "x",
     "ok": True, "detail": "no-op 0.21 s vs from scratch 13.3 s (median of 3)"}

``value`` is ``math.nan`` when a row could not be measured on this host (``ok`` is False and
``detail`` says why); the table shows it as SKIP, never as a number. Build rows with
:func:`row` / :func:`not_measured`. Modules may honour :func:`quick` (``--quick``) by doing
fewer repetitions. These machines are noisy: compare two things measured in the same run,
interleaved, and take medians (:func:`interleaved`); do not quote absolute seconds as truth.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable

__all__ = [
    "QUICK_ENV",
    "ROW_KEYS",
    "interleaved",
    "median",
    "not_measured",
    "quick",
    "row",
    "timed",
]

#: Set by ``python -m bench --quick``: modules do the fewest repetitions that still mean something.
QUICK_ENV = "PATCHLANE_BENCH_QUICK"
ROW_KEYS = ("name", "value", "goal", "unit", "ok", "detail")


def quick() -> bool:
    return os.environ.get(QUICK_ENV, "") == "1"


def row(name: str, value: float, goal: str, unit: str, ok: bool, detail: str = "") -> dict:
    return {
        "name": name,
        "value": float(value),
        "goal": goal,
        "unit": unit,
        "ok": bool(ok),
        "detail": detail,
    }


def not_measured(name: str, goal: str, unit: str, reason: str) -> dict:
    """A row for something this host cannot measure: shown as SKIP with the reason."""
    return row(name, math.nan, goal, unit, False, f"not measured: {reason}")


def median(values: list[float]) -> float:
    return statistics.median(values)


def timed(action: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def interleaved(actions: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Run each action ``repeats`` times, A B A B …, alternating which goes first per round, so a
    slow phase of the machine hits every contender alike. An action that returns a float reports
    its own measured seconds (e.g. a time taken inside a subprocess); otherwise its wall time is
    taken, whatever it returns."""
    samples: dict[str, list[float]] = {name: [] for name in actions}
    names = list(actions)
    for round_number in range(repeats):
        order = names if round_number % 2 == 0 else names[::-1]
        for name in order:
            started = time.perf_counter()
            reported = actions[name]()
            samples[name].append(
                reported if isinstance(reported, float) else time.perf_counter() - started
            )
    return samples
