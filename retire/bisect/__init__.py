"""Release bisection: the first release of a shim's target in which its reproducer stops reproducing.

``search`` (pure: candidates, the search over states), ``result`` (the value it ends in),
``runner`` (overlay envs and the reproducer run), ``cache`` (results on disk), ``bisection``
(``bisect()`` tying them together, ``list_releases``).
"""

from retire.bisect.bisection import bisect, list_releases
from retire.bisect.cache import ResultCache
from retire.bisect.result import BisectResult
from retire.bisect.runner import OverlayRunner, base_fingerprint, inspect_base
from retire.bisect.search import (
    BROKEN,
    FIXED,
    UNKNOWN,
    CandidateRun,
    Candidates,
    search,
    select_candidates,
)

__all__ = [
    "BROKEN", "FIXED", "UNKNOWN", "BisectResult", "CandidateRun", "Candidates", "OverlayRunner", "ResultCache",
    "base_fingerprint", "bisect", "inspect_base", "list_releases", "search", "select_candidates",
]
