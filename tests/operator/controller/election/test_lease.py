"""The leader-election rules (lease.py): acquire, renew, expiry by our own clock, release."""

from __future__ import annotations

import datetime

import pytest

from disagg_operator.controller.rules import lease
from disagg_operator.controller.rules.lease import ElectionSettings, Observation, Record

ME, OTHER = "op-a_1", "op-b_2"
T0 = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:00:02.000000Z"


def held(holder: str = OTHER, duration: int = 10, renew: str = T0) -> Record:
    return Record(holder, duration, T0, renew, 3)


def test_an_absent_lease_may_be_taken() -> None:
    assert lease.may_write(None, ME, now=0.0)


def test_a_lease_held_by_another_is_valid_for_its_duration_from_when_we_saw_it() -> None:
    seen = Observation(held(duration=10), seen_at=100.0)
    assert not lease.may_write(seen, ME, now=109.9)
    assert lease.may_write(seen, ME, now=110.0)


def test_expiry_counts_from_our_first_sight_not_the_stored_renew_time() -> None:
    # The stored renewTime is another node's wall clock: a record unchanged since we first
    # saw it keeps its first sighting, a changed one (a renewal) starts the count again.
    first = lease.observe(None, held(renew=T0), now=50.0)
    same = lease.observe(first, held(renew=T0), now=58.0)
    renewed = lease.observe(same, held(renew=T1), now=59.0)
    assert same.seen_at == 50.0
    assert renewed.seen_at == 59.0
    assert not lease.may_write(renewed, ME, now=61.0)  # 50 + 10 has passed, 59 + 10 has not


def test_our_own_lease_may_always_be_renewed() -> None:
    seen = Observation(held(holder=ME), seen_at=0.0)
    assert lease.may_write(seen, ME, now=1.0)


def test_a_released_lease_may_be_taken_at_once() -> None:
    seen = Observation(lease.released(held(), T1), seen_at=0.0)
    assert seen.record.holder == ""
    assert lease.may_write(seen, ME, now=0.0)


def test_acquiring_counts_a_transition_and_sets_both_times() -> None:
    taken = lease.claim(held(), ME, 10, T1)
    assert taken == Record(ME, 10, T1, T1, 4)
    assert lease.claim(None, ME, 10, T1) == Record(ME, 10, T1, T1, 0)


def test_renewing_keeps_the_acquire_time_and_the_transitions() -> None:
    mine = held(holder=ME)
    assert lease.claim(mine, ME, 10, T1) == Record(ME, 10, T0, T1, 3)


def test_release_clears_the_holder_and_keeps_the_transitions() -> None:
    assert lease.released(held(holder=ME), T1) == Record("", 1, T1, T1, 3)


def test_lease_body_carries_the_resource_version_it_was_computed_from() -> None:
    body = lease.lease_body("disagg-operator", "ops", Record(ME, 10, T0, T1, 2), "42")
    assert body["metadata"] == {
        "name": "disagg-operator",
        "namespace": "ops",
        "resourceVersion": "42",
    }
    assert body["spec"] == {
        "holderIdentity": ME,
        "leaseDurationSeconds": 10,
        "acquireTime": T0,
        "renewTime": T1,
        "leaseTransitions": 2,
    }
    assert "resourceVersion" not in lease.lease_body("l", "ops", Record(ME, 10))["metadata"]
    assert lease.read(body) == Record(ME, 10, T0, T1, 2)


def test_a_released_body_has_no_holder_and_reads_back_as_released() -> None:
    body = lease.lease_body("l", "ops", Record("", 1, T1, T1, 3), "7")
    assert "holderIdentity" not in body["spec"]
    assert lease.read(body).holder == ""
    assert lease.read({"spec": {}}) == Record()


def test_micro_time_is_utc_with_microseconds() -> None:
    at = datetime.datetime(
        2026, 1, 1, 1, 2, 3, 45, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
    )
    assert lease.micro_time(at) == "2026-01-01T00:02:03.000045Z"


def test_default_settings_are_client_go_s() -> None:
    d = ElectionSettings(namespace="ops")
    assert (d.lease_duration_s, d.renew_deadline_s, d.retry_period_s) == (10, 8.0, 2.0)
    assert d.problems() == []


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"namespace": ""}, "--lease-namespace"),
        ({"lease_duration_s": 0, "renew_deadline_s": -1.0}, "--lease-duration-seconds"),
        ({"renew_deadline_s": 10.0}, "--renew-deadline-seconds 10 must be below"),
        ({"retry_period_s": 7.0}, "1.2 x --retry-period-seconds 7"),
        ({"retry_period_s": 0.0}, "--retry-period-seconds: must be above 0"),
    ],
)
def test_bad_settings_name_the_flag(change: dict[str, object], flag: str) -> None:
    settings = ElectionSettings(**{"namespace": "ops", **change})  # type: ignore[arg-type]
    assert any(flag in p for p in settings.problems()), settings.problems()
