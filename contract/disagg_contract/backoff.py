"""Doubling back-off: the one rule every retry in the project waits by.

``delay(n) = min(first · 2^(n-1), cap)`` for the n-th failure in a row (n ≥ 1;
anything lower counts as 1). Readers: the worker's peer directory (a prefill whose
handshake failed), the operator's refused writes (controller/refusals) and ``disagg up``'s
crash-loop restarts (local/backoff).
"""

from __future__ import annotations

MAX_DOUBLINGS = 62  # far past any cap; keeps 2**n a plain float


def doubling(attempt: int, first: float, cap: float) -> float:
    """Seconds to wait after the ``attempt``-th failure in a row."""
    return float(min(first * 2.0 ** min(max(attempt, 1) - 1, MAX_DOUBLINGS), cap))
