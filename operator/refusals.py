"""Refusals: writes the API server answered with a client error, and the back-off after them.

Pure layer. A *refusal* is a write the API server will not take as sent, whatever the
timing: a 422 ``Invalid`` from validation, a 403 ``Forbidden`` from a ResourceQuota
("exceeded quota") or from RBAC, a 400 from an admission webhook that denied it. Retrying
it at once gives the same answer, so the reconciler reports it (status ``Degraded``,
reason ``ApiRefused``, and a Warning event) and retries with exponential back-off.

Not refusals (the caller's transient policy applies): 404 and 409 (gone / exists: the next
event re-plans), 401 (the operator's own token: refreshed on the next call), 408 and 429
(the server asks to come back later), every 5xx and connection failure.

    ApiError(status, method, url, text)       what the API client raises
    is_refusal(code) -> bool
    api_message(text) -> str                  the Status body's message, cut to MAX_MESSAGE
    Refusal(verb, kind, name, code, reason, message)
    lines(refusals) -> list[str]              one line per distinct API answer
    Backoff(first, cap).delay(attempt)        first · 2^(attempt-1), at most cap
    held(pending, generation, now), after(...)  the back-off state of one deployment
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


# Codes that mean "try again later", not "this write is wrong".
class ApiError(RuntimeError):
    """The API server answered a request with an error other than not-found/conflict.

    ``status``: the HTTP code; ``text``: the response body (a ``Status`` object as JSON from
    a real API server), kept whole up to 8 KiB so its message can be reported. Raised by
    :mod:`disagg_operator.k8s` (and re-exported there); defined here so the reconcile
    shell can tell refusals from transient failures without importing the HTTP client."""

    def __init__(self, status: int, method: str, url: str, text: str) -> None:
        super().__init__(f"{method} {url}: HTTP {status}: {text[:500]}")
        self.status = status
        self.text = text[:8192]


TRANSIENT_CLIENT_CODES = frozenset({401, 404, 408, 409, 429})
MAX_MESSAGE = 300  # characters of the API server's message kept per refusal


def is_refusal(code: int) -> bool:
    """Whether an HTTP answer refuses the write itself (see the module docstring)."""
    return 400 <= code < 500 and code not in TRANSIENT_CLIENT_CODES


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def api_message(text: str) -> tuple[str, str]:
    """(reason, message) of an error body: a ``Status`` object's, else the raw text."""
    try:
        body = json.loads(text)
    except ValueError:
        return "", _cut(text)
    if isinstance(body, dict) and body.get("kind") == "Status":
        return str(body.get("reason") or ""), _cut(str(body.get("message") or ""))
    return "", _cut(text)


@dataclass(frozen=True)
class Refusal:
    """One refused write: what was asked (verb, kind, name) and what the API server said."""

    verb: str
    kind: str
    name: str
    code: int
    reason: str
    message: str

    @property
    def target(self) -> str:
        return f"{self.verb} {self.kind}/{self.name}"

    @property
    def answer(self) -> str:
        """The API server's answer: ``HTTP 422 Invalid: <its message>``."""
        reason = f" {self.reason}" if self.reason else ""
        return f"HTTP {self.code}{reason}: {self.message}"


def lines(refusals: Sequence[Refusal]) -> list[str]:
    """One line per distinct answer, naming every write that got it, in first-seen order:
    ``create Pod/a, create Pod/b refused: HTTP 403 Forbidden: exceeded quota ...``."""
    targets: dict[str, list[str]] = {}
    for refusal in refusals:
        targets.setdefault(refusal.answer, []).append(refusal.target)
    return [f"{', '.join(who)} refused: {answer}" for answer, who in targets.items()]


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off between attempts at refused writes, in seconds.

    delay(n) = min(first · 2^(n-1), cap) for the n-th refused attempt in a row (n ≥ 1):
    5, 10, 20, 40, 80, 160, 300, 300, ... with the defaults.
    """

    first: float = 5.0
    cap: float = 300.0

    def delay(self, attempt: int) -> float:
        exponent = min(max(attempt, 1) - 1, 62)  # 2**62 s is past any cap; no overflow
        return float(min(self.first * 2**exponent, self.cap))


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
