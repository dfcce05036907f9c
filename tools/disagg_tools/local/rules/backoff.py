"""Restart back-off: when to start again a pod's container, or a local process, that died.

The kubelet's crash loop, ported from Kubernetes 1.36: client-go
``util/flowcontrol/backoff.go`` (tag v0.36.3: ``Next``, ``IsInBackOffSince``,
``IsInBackOffSinceUpdate``, ``GC`` over one key) with the constants and the reset rule
``pkg/kubelet/kubelet.go`` gives it (``newCrashLoopBackOff``: 10 s doubling to 300 s, or
1 s to 60 s under the ``ReduceDefaultCrashLoopBackOffDecay`` gate; a ``HasExpiredFunc``
of a fixed 600 s since 1.32). The kubelet asks it at each start of a container that has
an exited instance (``doBackOff`` in ``kuberuntime_manager.go``): the first restart is
immediate, the next waits 10 s after the exit, then 20 s, 40 s ... 300 s; a container
that ran more than 600 s since its last restart starts over. The local kubelet uses the
defaults, ``disagg up`` (:mod:`disagg_tools.local.supervise`) the gate's values. Time is
passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


# The crash loop with ReduceDefaultCrashLoopBackOffDecay on (pkg/kubelet/kubelet.go,
# newCrashLoopBackOff: 1 s doubling to 60 s): `disagg up`'s, whose processes start in seconds
LOCAL_RUN = CrashLoop(initial_s=1.0, cap_s=60.0)


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
