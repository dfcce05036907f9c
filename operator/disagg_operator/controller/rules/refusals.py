"""Refusals: writes the API server answered with a client error, and the back-off after them.

The refusal itself, :class:`Refusal`, is in :mod:`disagg_operator.api.refusals`, where
status reads it; this module adds what the API client raises (:class:`ApiError`) and one
deployment's back-off (:class:`Backoff`, :func:`held`, :func:`after`). A refusal (a 422
Invalid, a quota's or RBAC's 403, a webhook's denial) gets the same answer when retried at
once, so it is reported and retried with back-off, while 404/409, 401, 408, 429, 5xx and
connection failures stay transient. Which codes and why: docs/operator.md (Error policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from disagg_contract.backoff import doubling
from disagg_operator.api.refusals import (
    MAX_MESSAGE,
    TRANSIENT_CLIENT_CODES,
    Refusal,
    api_message,
    is_refusal,
    lines,
)

__all__ = [
    "MAX_MESSAGE",
    "TRANSIENT_CLIENT_CODES",
    "ApiError",
    "Backoff",
    "Pending",
    "Refusal",
    "after",
    "api_message",
    "held",
    "is_refusal",
    "lines",
]


# Codes that mean "try again later", not "this write is wrong".
class ApiError(RuntimeError):
    """The API server answered a request with an error other than not-found/conflict.

    ``status``: the HTTP code; ``text``: the response body (a ``Status`` object as JSON from
    a real API server), kept whole up to 8 KiB so its message can be reported. Raised by
    :mod:`disagg_operator.controller.client` (and re-exported there); defined here so the reconcile
    shell can tell refusals from transient failures without importing the HTTP client."""

    def __init__(self, status: int, method: str, url: str, text: str) -> None:
        super().__init__(f"{method} {url}: HTTP {status}: {text[:500]}")
        self.status = status
        self.text = text[:8192]


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off between attempts at refused writes, in seconds.

    delay(n) = min(first · 2^(n-1), cap) for the n-th refused attempt in a row (n ≥ 1):
    5, 10, 20, 40, 80, 160, 300, 300, ... with the defaults.
    """

    first: float = 5.0
    cap: float = 300.0

    def delay(self, attempt: int) -> float:
        return doubling(attempt, self.first, self.cap)


@dataclass(frozen=True)
class Pending:
    """The refused writes of one deployment and when to try them again (monotonic s)."""

    generation: int | None
    attempt: int
    due: float
    refusals: tuple[Refusal, ...]


def held(pending: Pending | None, generation: int | None, now: float) -> tuple[Refusal, ...]:
    """The refusals whose writes a sync at ``now`` must not retry: those of a back-off that
    has not ended, for the same spec generation (a new generation retries at once)."""
    if pending is None or pending.generation != generation or now >= pending.due:
        return ()
    return pending.refusals


def after(
    pending: Pending | None,
    refusals: Sequence[Refusal],
    *,
    generation: int | None,
    now: float,
    holding: bool,
    backoff: Backoff,
) -> Pending | None:
    """The back-off state after a sync that ended at ``now`` with ``refusals``.

    No refusal: none (the back-off resets). A sync that held writes (``holding``: inside
    the back-off) keeps the timing and updates what is refused. Otherwise this was an
    attempt: the n-th in a row for this generation waits ``backoff.delay(n)``."""
    if not refusals:
        return None
    if holding and pending is not None:
        return Pending(pending.generation, pending.attempt, pending.due, tuple(refusals))
    same = pending is not None and pending.generation == generation
    attempt = pending.attempt + 1 if same and pending is not None else 1
    return Pending(generation, attempt, now + backoff.delay(attempt), tuple(refusals))
