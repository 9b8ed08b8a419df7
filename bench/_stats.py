"""Small statistics for noisy machines: medians and a bootstrap interval of a median difference."""

from __future__ import annotations

import random
import statistics


def median_difference_interval(
    a: list[float],
    b: list[float],
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """A bootstrap interval for ``median(b) - median(a)`` (seeded: the same samples give the same
    interval). When it contains 0, the difference is not measurable with these samples."""
    rng = random.Random(seed)
    diffs = sorted(
        statistics.median(rng.choices(b, k=len(b))) - statistics.median(rng.choices(a, k=len(a)))
        for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    return diffs[int(tail * resamples)], diffs[min(resamples - 1, int((1 - tail) * resamples))]
