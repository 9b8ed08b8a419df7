"""A shim's fixed edge and fix commit read back from the validation records: the code lives in
:mod:`retire.mirrors.recorded` (one floor down, so the verdicts and the packs read it too); the
bisection's readers keep this name."""

from __future__ import annotations

from retire.mirrors.recorded import RecordedFix, recorded_fix, shim_fix

__all__ = ["RecordedFix", "recorded_fix", "shim_fix"]
