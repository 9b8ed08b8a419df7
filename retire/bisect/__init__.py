"""Release bisection: the first release of a shim's target in which its reproducer stops reproducing.

``search`` (pure: candidates, the search over their states), ``result`` (the value it ends in),
``bounds`` (pure: the range, from the evidence of where the bug is known), ``runner`` (overlay
envs and the reproducer run), ``cache`` (answers on disk), ``bisection`` (``bisect()`` tying them
together, ``project_bounds``, ``list_releases``).
"""

from retire.bisect.bisection import bisect, list_releases, project_bounds
from retire.bisect.bounds import Bounds, BrokenEvidence, broken_evidence, choose_bounds
from retire.bisect.cache import ResultCache
from retire.bisect.result import BisectResult
from retire.bisect.runner import OverlayRunner, base_fingerprint, inspect_base
from retire.bisect.search import (
    BROKEN,
    FIXED,
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    Candidates,
    Limits,
    State,
    Status,
    find_boundary,
    select_candidates,
)

__all__ = [
    "BROKEN", "FIXED", "NOT_APPLICABLE", "UNKNOWN", "BisectResult", "Bounds", "BrokenEvidence", "CandidateRun",
    "Candidates", "Limits", "OverlayRunner", "ResultCache", "State", "Status", "base_fingerprint", "bisect",
    "broken_evidence", "choose_bounds", "find_boundary", "inspect_base", "list_releases", "project_bounds",
    "select_candidates",
]
