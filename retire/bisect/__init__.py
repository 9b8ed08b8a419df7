"""Release bisection: the first release of a shim's target in which its reproducer stops
reproducing.

``search`` (pure: candidates, the search over their states), ``result`` (the value it ends in),
``culprit`` (pure: the smallest change between two locks that breaks a lane), ``culpritrun``
(its candidates built on the old lock's env and run), ``bounds`` (pure: the range, from the
evidence of where the bug is known), ``job`` (one bisection as asked, parsed once: the range,
the overlay envs, the width and budget, where runs are recorded), ``prober`` (what every search
talks to: the prober that runs candidates, the progress that hears them), ``budget`` (how many
runs and minutes the bisections of a weekly run may spend), ``runner`` (overlay
envs and the reproducer run), ``cache`` (answers on disk), ``bisection`` (``bisect()`` tying them
together, ``project_bounds``, ``list_releases``).

A bug's *window* (introduced, then fixed) is :mod:`retire.history`'s value; bisect is the search
that extends it: ``window`` (pure: both edges on any ordered history, looking for a broken item
when none is known), ``windowresult`` (the bisection's result: the window, with the commits, and
the runs that placed it), ``revision`` (the runner whose candidates are commits built from a
mirror), ``transitions`` (``bisect_window()``: releases first, then the commits between two
adjacent releases' tags), ``sidebyside`` (a round of candidates run at once, each on a runner and
GPUs of its own: ``patchlane bisect -j N``), ``started`` (pure: an edge search that starts the
next candidate as soon as a slot frees, cancelling those its results leave outside the edge),
``informed`` (pure: the commits that touch the target's files searched first, the edge confirmed
by its predecessor, the full search when it is not).

The names below are loaded on first use: the CLI imports this package to build its parser, and
every ``patchlane`` command must not pay for uv, lock and probe modules it does not run
(``tests/test_bisect_exports.py`` resolves every one of them, so none goes stale).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "bisection": ("bisect", "list_releases", "project_bounds"),
    "bounds": ("Bounds", "BrokenEvidence", "broken_evidence", "choose_bounds"),
    "budget": ("Budget", "Meter"),
    "cache": ("ResultCache",),
    "job": ("BisectJob",),
    "prober": ("Prober", "Progress", "prober_of"),
    "result": ("BisectResult",),
    "runner": ("OverlayRunner", "base_fingerprint", "inspect_base"),
    "revision": ("BuildCount", "RevisionRunner"),
    "transitions": ("Source", "bisect_window"),
    "window": ("EdgeSearch", "WindowSearch", "locate_edge", "locate_window"),
    "windowresult": ("WindowResult",),
    "search": (
        "BROKEN",
        "FIXED",
        "NOT_APPLICABLE",
        "UNKNOWN",
        "CandidateRun",
        "Candidates",
        "Limits",
        "State",
        "Status",
        "find_boundary",
        "select_candidates",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "BROKEN",
    "FIXED",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "BisectJob",
    "BisectResult",
    "Bounds",
    "BrokenEvidence",
    "Budget",
    "BuildCount",
    "CandidateRun",
    "Candidates",
    "EdgeSearch",
    "Limits",
    "Meter",
    "OverlayRunner",
    "Prober",
    "Progress",
    "ResultCache",
    "RevisionRunner",
    "Source",
    "State",
    "Status",
    "WindowResult",
    "WindowSearch",
    "base_fingerprint",
    "bisect",
    "bisect_window",
    "broken_evidence",
    "choose_bounds",
    "find_boundary",
    "inspect_base",
    "list_releases",
    "locate_edge",
    "locate_window",
    "prober_of",
    "project_bounds",
    "select_candidates",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
