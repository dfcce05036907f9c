"""Crash-loop back-off: when to start again a local process that died.

The rule of ``disagg up``'s supervision (:mod:`disagg_operator.local.supervise`); time
is passed in. The shape of a kubelet's CrashLoopBackOff, scaled to processes that start in
a second or two instead of pulled images:

    delay(attempt) = min(initial_s · 2^(attempt - 1), cap_s)      attempt = 1, 2, 3, ...

so 1 s, 2 s, 4 s, ... 30 s with the defaults. ``attempt`` counts the failures in a row: it
starts over at 1 once the process had served (been ready) for ``reset_after_s`` before it
failed, so a worker that crashes once a day always restarts after ``initial_s``, and one
that crashes at start does not hammer the host. A process that never became ready (it
exited while starting, or its start timed out) served for 0 s.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_worker.core.backoff import doubling


@dataclass(frozen=True)
class BackOff:
    """The restart delay policy: doubling from ``initial_s`` to ``cap_s``, reset once a
    process served ``reset_after_s``."""

    initial_s: float = 1.0
    cap_s: float = 30.0
    reset_after_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.cap_s:
            raise ValueError(
                f"BackOff: need 0 < initial_s <= cap_s, got {self.initial_s} and {self.cap_s}"
            )
        if self.reset_after_s <= 0:
            raise ValueError(f"BackOff: reset_after_s must be > 0, got {self.reset_after_s}")

    def delay_s(self, attempt: int) -> float:
        """The wait before restart number ``attempt`` (1-based) of a run of failures."""
        if attempt < 1:
            raise ValueError(f"BackOff.delay_s: attempt counts from 1, got {attempt}")
        return doubling(attempt, self.initial_s, self.cap_s)


@dataclass(frozen=True)
class Restart:
    """What to do about one failure: restart number ``attempt`` of this run of failures,
    ``delay_s`` after the failure, that is at ``at`` (the clock the times came in)."""

    attempt: int
    delay_s: float
    at: float


def next_restart(
    policy: BackOff, previous_attempt: int, ready_at: float | None, failed_at: float
) -> Restart:
    """The restart after a failure at ``failed_at`` of a process that became ready at
    ``ready_at`` (None: it never did), whose previous restart was ``previous_attempt``
    (0: none yet)."""
    served = 0.0 if ready_at is None else failed_at - ready_at
    attempt = 1 if served >= policy.reset_after_s else previous_attempt + 1
    delay = policy.delay_s(attempt)
    return Restart(attempt, delay, failed_at + delay)
