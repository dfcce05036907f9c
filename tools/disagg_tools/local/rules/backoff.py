"""Restart back-off: when to start again a local process, or a pod's container, that died.

Time is passed in. Two policies, one module:

- :class:`CrashLoop` is the kubelet's, ported from Kubernetes 1.36: client-go
  ``util/flowcontrol/backoff.go`` (tag v0.36.3: ``Next``, ``IsInBackOffSince``,
  ``IsInBackOffSinceUpdate``, ``GC`` over one key) with the constants and the reset rule
  ``pkg/kubelet/kubelet.go`` gives it (``newCrashLoopBackOff``: 10 s doubling to 300 s; a
  ``HasExpiredFunc`` of a fixed 600 s since 1.32). The kubelet asks it at each start of a
  container that has an exited instance (``doBackOff`` in ``kuberuntime_manager.go``):
  the first restart is immediate, the next waits 10 s after the exit, then 20 s, 40 s ...
  300 s; a container that ran more than 600 s since its last restart starts over.
- :class:`BackOff` is ``disagg up``'s supervision (:mod:`disagg_tools.local.supervise`),
  the same shape scaled to processes that start in a second or two: ``delay(attempt) =
  min(initial_s · 2^(attempt - 1), cap_s)``, reset once the process had served (been
  ready) ``reset_after_s`` before it failed. It stands for no kubelet; the local kubelet
  uses :class:`CrashLoop`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from disagg_contract.backoff import doubling

Expiry = Callable[[float, float, float], bool]  # (event_at, last_update, cap_s) → reset?


def twice_the_cap(event_at: float, last_update: float, cap_s: float) -> bool:
    """client-go's default: an entry idle for more than twice the cap starts over."""
    return event_at - last_update > 2 * cap_s


def ten_minutes(event_at: float, last_update: float, cap_s: float) -> bool:
    """The kubelet's ``HasExpiredFunc`` (kubelet.go, 1.32+): 600 s whatever the cap."""
    return event_at - last_update > 600.0


@dataclass(frozen=True)
class CrashLoop:
    """``flowcontrol.Backoff`` as the kubelet builds it. The defaults are Kubernetes 1.36's
    with its default feature gates: ``ReduceDefaultCrashLoopBackOffDecay`` (1 s to 60 s)
    is alpha and off; ``KubeletCrashLoopBackOffMax`` (beta, on since 1.35) takes the cap
    from ``crashLoopBackOff.maxContainerRestartPeriod``, 300 s when unset."""

    initial_s: float = 10.0
    cap_s: float = 300.0
    expiry: Expiry = ten_minutes

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.cap_s:
            raise ValueError(
                f"CrashLoop: need 0 < initial_s <= cap_s, got {self.initial_s} and {self.cap_s}"
            )


@dataclass(frozen=True)
class Entry:
    """One key's back-off: the current delay, and when it was last moved (``Next``)."""

    backoff_s: float
    last_update: float


def expired(policy: CrashLoop, entry: Entry, event_at: float) -> bool:
    return policy.expiry(event_at, entry.last_update, policy.cap_s)


def step(policy: CrashLoop, entry: Entry | None, event_at: float, now: float) -> Entry:
    """``Next``: the entry after one more failure at ``event_at``, moved at ``now``."""
    if entry is None or expired(policy, entry, event_at):
        return Entry(policy.initial_s, now)
    return Entry(min(entry.backoff_s * 2, policy.cap_s), now)


def in_back_off_since(policy: CrashLoop, entry: Entry | None, event_at: float, now: float) -> bool:
    """``IsInBackOffSince``: whether, at ``now``, the failure at ``event_at`` still waits."""
    if entry is None or expired(policy, entry, event_at):
        return False
    return now - event_at < entry.backoff_s


def in_back_off_since_update(policy: CrashLoop, entry: Entry | None, event_at: float) -> bool:
    """``IsInBackOffSinceUpdate``: the same, counted from the entry's last move."""
    if entry is None or expired(policy, entry, event_at):
        return False
    return event_at - entry.last_update < entry.backoff_s


def kept_by_gc(policy: CrashLoop, entry: Entry, now: float) -> bool:
    """``GC``: whether the entry survives a collection at ``now``."""
    return not expired(policy, entry, now)


def restart_at(policy: CrashLoop, entry: Entry | None, finished_at: float) -> float:
    """The earliest time a container whose newest instance exited at ``finished_at`` may
    start again: the first ``now`` at which :func:`in_back_off_since` is False."""
    if entry is None or expired(policy, entry, finished_at):
        return finished_at
    return finished_at + entry.backoff_s


@dataclass(frozen=True)
class BackOff:
    """``disagg up``'s restart delay policy: doubling from ``initial_s`` to ``cap_s``,
    reset once a process served ``reset_after_s``."""

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
    (0: none yet). A process that never became ready served for 0 s."""
    served = 0.0 if ready_at is None else failed_at - ready_at
    attempt = 1 if served >= policy.reset_after_s else previous_attempt + 1
    delay = policy.delay_s(attempt)
    return Restart(attempt, delay, failed_at + delay)
