"""Crash-loop back-off: doubling delays up to a cap, a fresh start once a process served."""

from __future__ import annotations

import pytest

from disagg_operator.local.rules.backoff import BackOff, Restart, next_restart

POLICY = BackOff(initial_s=1.0, cap_s=30.0, reset_after_s=60.0)


def test_delays_double_from_the_initial_delay_up_to_the_cap() -> None:
    assert [POLICY.delay_s(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert POLICY.delay_s(10_000) == 30  # no overflow however long the crash loop


def test_failures_in_a_row_back_off_further() -> None:
    """A process that dies at start, again and again: never ready, so never reset."""
    attempt, at, delays = 0, 100.0, []
    for _ in range(7):
        restart = next_restart(POLICY, attempt, ready_at=None, failed_at=at)
        assert restart.at == at + restart.delay_s
        attempt, at = restart.attempt, restart.at + 0.5  # started, died half a second later
        delays.append(restart.delay_s)
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert attempt == 7


def test_a_process_that_served_long_enough_starts_the_count_over() -> None:
    assert next_restart(POLICY, 6, ready_at=10.0, failed_at=70.0) == Restart(1, 1.0, 71.0)
    # just short of the reset: the run of failures goes on
    assert next_restart(POLICY, 6, ready_at=10.0, failed_at=69.9) == Restart(7, 30.0, 99.9)


def test_the_first_failure_waits_the_initial_delay_whenever_it_comes() -> None:
    assert next_restart(POLICY, 0, ready_at=5.0, failed_at=6.0) == Restart(1, 1.0, 7.0)
    assert next_restart(POLICY, 0, ready_at=5.0, failed_at=5000.0).delay_s == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial_s": 0}, "need 0 < initial_s <= cap_s"),
        ({"initial_s": 5, "cap_s": 2}, "need 0 < initial_s <= cap_s"),
        ({"reset_after_s": 0}, "reset_after_s must be > 0"),
    ],
)
def test_a_policy_that_cannot_work_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BackOff(**kwargs)


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="attempt counts from 1, got 0"):
        POLICY.delay_s(0)
