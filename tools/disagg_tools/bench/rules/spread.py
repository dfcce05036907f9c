"""The spread of a benchmark figure: its median beside its 10th and 90th percentiles.

:mod:`.stream` re-exports both functions beside the
streamed request they time.

- ``spread(values, ndigits=3) -> {"median", "p10", "p90"}``: the median (the middle value,
  or the mean of the two middle ones) beside the 10th and 90th percentiles (nearest rank:
  values that were measured; with fewer than 10 values they are the smallest and the
  largest).
- ``percentile(values, q)``: nearest-rank percentile, ``q`` in 0..100, 0.0 of no values.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in 0..100: a value that was measured, never an
    interpolation between two; 0.0 of no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(q / 100.0 * len(ordered))
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


def spread(values: Sequence[float], ndigits: int = 3) -> dict[str, float]:
    """``{"median", "p10", "p90"}`` of ``values``, rounded to ``ndigits``."""
    if not values:
        raise ValueError("spread: no values")
    figures = {
        "median": float(statistics.median(values)),
        "p10": percentile(values, 10),
        "p90": percentile(values, 90),
    }
    return {k: round(v, ndigits) for k, v in figures.items()}
