"""Restart back-off. :class:`CrashLoop` against client-go's own tests of
``flowcontrol.Backoff`` (tag v0.36.3, ``util/flowcontrol/backoff_test.go``, each case
named by its function) and the kubelet's use of it (``pkg/kubelet/kubelet.go``,
``kuberuntime_manager.go`` ``doBackOff``, Kubernetes 1.36), and the values ``disagg up``
takes from it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from disagg_tools.local.rules import backoff as bo
from disagg_tools.local.rules.backoff import LOCAL_RUN, CrashLoop, Entry

UPSTREAM = "client-go v0.36.3 util/flowcontrol/backoff_test.go"
KUBELET = CrashLoop()


def _gte(seconds: float) -> bo.Expiry:
    """An alternate ``HasExpiredFunc`` as the upstream tests write them (``>=``)."""
    return lambda event_at, last_update, cap_s: event_at - last_update >= seconds


class Fake:
    """The upstream tests' fake clock and one key's entry."""

    def __init__(self, policy: CrashLoop) -> None:
        self.policy, self.now = policy, 1000.0
        self.entry: Entry | None = None

    def next(self, at: float | None = None) -> None:
        self.entry = bo.step(self.policy, self.entry, self.now if at is None else at, self.now)

    def get(self) -> float:
        return 0.0 if self.entry is None else self.entry.backoff_s


def test_slow_backoff() -> None:
    """TestSlowBackoff: 1 s doubling to 50 s, read before each ``Next``."""
    b = Fake(CrashLoop(1, 50, bo.twice_the_cap))
    seen = []
    for _ in range(10):
        b.now += 1
        seen.append(b.get())
        b.next()
    assert seen == [0, 1, 2, 4, 8, 16, 32, 50, 50, 50]


def test_backoff_reset() -> None:
    """TestBackoffReset: at the cap it backs off; 11 s later (over twice the cap) not."""
    b = Fake(CrashLoop(1, 5, bo.twice_the_cap))
    for _ in range(6):
        b.now += 1
        b.next()
    assert bo.in_back_off_since(b.policy, b.entry, b.now, b.now)
    last_update = b.now
    b.now += 11
    assert not bo.in_back_off_since(b.policy, b.entry, last_update, b.now)


def test_backoff_high_water_mark() -> None:
    """TestBackoffHighWaterMark: 6 s after reaching the cap (under twice the cap) it stays there."""
    b = Fake(CrashLoop(1, 5, bo.twice_the_cap))
    for _ in range(6):
        b.now += 1
        b.next()
    b.now += 6
    b.next()
    assert b.get() == 5


def test_backoff_gc() -> None:
    """TestBackoffGC: kept 6 s after its last move, collected 12 s after."""
    b = Fake(CrashLoop(1, 5, bo.twice_the_cap))
    for _ in range(6):
        b.now += 1
        b.next()
    assert b.entry is not None
    assert bo.kept_by_gc(b.policy, b.entry, b.now + 6)
    assert not bo.kept_by_gc(b.policy, b.entry, b.now + 12)


# TestAlternateBackoffGC and TestAlternateHasExpiredFunc: (name, expiry, cap, kept, gone)
ALTERNATE = [
    ("default GC", bo.twice_the_cap, 50, 5, 101),
    ("GC later than 2*maxDuration", _gte(200), 50, 101, 501),
]
ALTERNATE_EXPIRY = [
    ("default expiration", bo.twice_the_cap, 50, 5, 101),
    ("expires faster than maxDuration", _gte(8), 50, 5, 9),
]


@pytest.mark.parametrize(("name", "expiry", "cap", "kept", "gone"), ALTERNATE)
def test_alternate_backoff_gc(name: str, expiry: bo.Expiry, cap: int, kept: int, gone: int) -> None:
    b = Fake(CrashLoop(1, cap, expiry))
    b.next()
    assert b.entry is not None
    assert bo.kept_by_gc(b.policy, b.entry, b.now + kept), name
    assert not bo.kept_by_gc(b.policy, b.entry, b.now + kept + gone), name


@pytest.mark.parametrize(("name", "expiry", "cap", "kept", "gone"), ALTERNATE_EXPIRY)
def test_alternate_has_expired_func(
    name: str, expiry: bo.Expiry, cap: int, kept: int, gone: int
) -> None:
    b = Fake(CrashLoop(1, cap, expiry))
    b.next()
    b.now += kept
    b.next()
    assert b.get() >= 2, name  # it backed off
    b.now += gone
    b.next()
    assert b.get() == 1, name  # and started over


# TestIsInBackOffSinceUpdate: (tick, in back-off, the back-off then) with 1 s to 10 s
SINCE_UPDATE = [
    (0, False, 0), (1, False, 1), (2, True, 2), (3, False, 2), (4, True, 4), (5, True, 4),
    (6, True, 4), (7, False, 4), (8, True, 8), (9, True, 8), (10, True, 8), (11, True, 8),
    (12, True, 8), (13, True, 8), (14, True, 8), (15, False, 8), (16, True, 10),
    (17, True, 10), (18, True, 10), (19, True, 10), (20, True, 10), (21, True, 10),
    (22, True, 10), (23, True, 10), (24, True, 10), (25, False, 10), (26, True, 10),
    (27, True, 10), (28, True, 10), (29, True, 10), (30, True, 10), (31, True, 10),
    (32, True, 10), (33, True, 10), (34, True, 10), (35, False, 10), (56, False, 0),
    (57, False, 1),
]  # fmt: skip


def test_is_in_back_off_since_update() -> None:
    """TestIsInBackOffSinceUpdate, row by row; a row not in back-off calls ``Next``."""
    b = Fake(CrashLoop(1, 10, bo.twice_the_cap))
    start = b.now
    agree = []
    for tick, expected, value in SINCE_UPDATE:
        b.now = start + tick
        got = bo.in_back_off_since_update(b.policy, b.entry, b.now)
        agree.append(got == expected and (not expected or b.get() == value))
        if not got:
            b.next()
    assert all(agree), [row for row, ok in zip(SINCE_UPDATE, agree, strict=True) if not ok]


# ---------------------------------------------------------------- the kubelet's use of it


def _crash_loop(runs: Sequence[float], policy: CrashLoop = KUBELET) -> list[float]:
    """A container that runs ``runs[i]`` seconds after each start and exits: the wait
    before each restart, as ``doBackOff`` decides it (the first start has no exited
    instance, so it is never backed off and does not move the entry)."""
    entry, now, waits = None, 0.0, []
    for run in runs:
        finished = now + run
        at = bo.restart_at(policy, entry, finished)
        assert not bo.in_back_off_since(policy, entry, finished, at)
        assert at == finished or bo.in_back_off_since(policy, entry, finished, at - 0.001)
        waits.append(at - finished)
        entry, now = bo.step(policy, entry, finished, at), at
    return waits


def test_the_kubelets_crash_loop_is_immediate_then_10_s_doubling_to_300_s() -> None:
    assert _crash_loop([1.0] * 9) == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_a_container_that_ran_over_600_s_since_its_last_restart_starts_over() -> None:
    # the 600 s count from the last restart (Next), not from readiness: 600.5 s of running
    assert _crash_loop([1, 1, 1, 600.5, 1]) == [0, 10, 20, 0, 10]
    assert _crash_loop([1, 1, 1, 600.0, 1]) == [0, 10, 20, 40, 80]  # not over: no reset
    # the wait before a restart does not count: 599 s of running at the cap is not over
    assert _crash_loop([1] * 7 + [599, 1])[-2:] == [300, 300]


def test_the_kubelets_policy_and_its_feature_gates() -> None:
    assert (CrashLoop().initial_s, CrashLoop().cap_s) == (10, 300)
    assert CrashLoop().expiry is bo.ten_minutes
    reduced = CrashLoop(1, 60)  # ReduceDefaultCrashLoopBackOffDecay (alpha, off in 1.36)
    assert _crash_loop([0.5] * 9, reduced) == [0, 1, 2, 4, 8, 16, 32, 60, 60]
    assert reduced == LOCAL_RUN  # disagg up's: the gate's values
    with pytest.raises(ValueError, match="need 0 < initial_s <= cap_s"):
        CrashLoop(20, 10)
