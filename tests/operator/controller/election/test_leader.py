"""Leader election against the API emulator: candidates racing, renewal, loss, release.

The electors (leader.py) talk HTTP to the emulator, whose conditional writes (PUT with a
stale ``metadata.resourceVersion``) answer 409 Conflict as an API server does. Clocks are
passed in where a test needs a lease to run out without waiting for it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from disagg_operator.controller.election import leader as leader_module
from disagg_operator.controller.election.leader import (
    ElectionSettings,
    Elector,
    LeaseLost,
    leading,
)
from disagg_operator.controller.rules import lease
from tests.operator.conftest import until
from tests.support.emulator import Emulator, api_calls

NS = "ops"
KEY = "coordination.k8s.io/v1/leases"
FAST = ElectionSettings(
    name="disagg-operator",
    namespace=NS,
    lease_duration_s=2,
    renew_deadline_s=1.0,
    retry_period_s=0.2,
)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def electors(emu: Emulator, count: int, clock: Clock | None = None) -> list[Elector]:
    host = str(emu.url).rstrip("/")
    made = [await Elector.connect(host, FAST, f"cand-{i}") for i in range(count)]
    if clock is not None:
        for e in made:
            e.clock = clock
    return made


async def close(made: list[Elector]) -> None:
    for e in made:
        await e.close()


def holder(emu: Emulator) -> str:
    return str(
        (emu.find(KEY, NS, "disagg-operator") or {}).get("spec", {}).get("holderIdentity", "")
    )


async def test_candidates_racing_for_an_absent_lease_never_both_lead(emulator: Emulator) -> None:
    made = await electors(emulator, 6)
    try:
        for _ in range(5):  # every round after the first: the lease is valid and not theirs
            won = await asyncio.gather(*(e.try_acquire_or_renew() for e in made))
            winners = [e.me for e, w in zip(made, won, strict=True) if w]
            assert len(winners) == 1, winners
            assert holder(emulator) == winners[0]
    finally:
        await close(made)
    creates = [c for c in api_calls(emulator) if c.resource == "leases" and c.verb == "create"]
    assert len(creates) == 6  # all tried to create it: one got 201, five 409 AlreadyExists


async def test_candidates_racing_for_an_expired_lease_never_both_lead(emulator: Emulator) -> None:
    stale = lease.lease_body("disagg-operator", NS, lease.Record("dead_0", 2, "t", "t", 5))
    emulator.put_object(KEY, stale)
    clock = Clock()
    made = await electors(emulator, 6, clock)
    try:
        first = await asyncio.gather(*(e.try_acquire_or_renew() for e in made))
        assert not any(first)  # just seen: valid for 2 s of their own clock
        clock.now += 2.0
        won = await asyncio.gather(*(e.try_acquire_or_renew() for e in made))
    finally:
        await close(made)
    winners = [e.me for e, w in zip(made, won, strict=True) if w]
    assert len(winners) == 1, winners  # the others' PUTs carried a stale resourceVersion: 409
    stored = lease.read(emulator.find(KEY, NS, "disagg-operator") or {})
    assert stored.holder == winners[0] and stored.transitions == 6
    updates = [c for c in api_calls(emulator) if c.resource == "leases" and c.verb == "update"]
    assert len(updates) == 6


async def test_a_leader_seeing_another_holder_stops_at_its_next_renewal(emulator: Emulator) -> None:
    (a,) = await electors(emulator, 1)
    try:
        await a.acquire()
        assert a.leading
        body = lease.lease_body("disagg-operator", NS, lease.Record("intruder", 10, "t", "t", 9))
        emulator.put_object(KEY, body)
        with pytest.raises(LeaseLost, match="intruder holds it"):
            await asyncio.wait_for(a.hold(), 2 * FAST.retry_period_s + 1)
        assert a.state == "lost"
        await a.release()  # not ours any more: nothing written
    finally:
        await a.close()
    assert holder(emulator) == "intruder"


async def test_a_leader_that_cannot_renew_stops_within_the_renew_deadline(
    emulator: Emulator,
) -> None:
    """The deadline counts from the last renewal sent (so the leader stops before the lease
    expires for anyone else): with renewals refused, it keeps trying until the clock is
    renew_deadline past that renewal, then stops. The clock moves by hand."""
    clock = Clock()
    (a,) = await electors(emulator, 1, clock)

    def renewals() -> int:
        return sum(1 for c in api_calls(emulator) if c.resource == "leases" and c.verb == "update")

    async def tried(count: int) -> None:
        await until(f"renewal attempt {count}", lambda: renewals() >= count, timeout=10)

    try:
        await a.acquire()
        emulator.refuse(KEY, verb="update", code=500, reason="InternalError", message="etcd down")
        holding = asyncio.ensure_future(a.hold())
        before = renewals()
        await tried(before + 2)  # refused renewals: still leading
        clock.now += FAST.renew_deadline_s - 0.1
        await tried(renewals() + 2)
        assert not holding.done() and a.leading
        clock.now += 0.1  # renew_deadline since the last renewal sent (the acquire)
        with pytest.raises(LeaseLost, match="no renewal for 1 s"):
            await asyncio.wait_for(holding, 5)
        assert FAST.renew_deadline_s < FAST.lease_duration_s  # stopped before it expired
    finally:
        await a.close()


async def test_release_lets_a_standby_take_over_without_waiting_for_expiry(
    emulator: Emulator,
) -> None:
    clock = Clock()
    a, b = await electors(emulator, 2, clock)
    try:
        await a.acquire()
        assert not await b.try_acquire_or_renew()
        await a.release()
        assert a.state == "released" and holder(emulator) == ""
        assert await b.try_acquire_or_renew()  # same instant: no expiry waited for
        stored = lease.read(emulator.find(KEY, NS, "disagg-operator") or {})
        assert stored.holder == "cand-1" and stored.transitions == 1
    finally:
        await close([a, b])


async def test_a_standby_looks_again_when_the_observed_lease_runs_out(emulator: Emulator) -> None:
    """Between looks it sleeps a retry period, or only until the lease it saw expires."""
    body = lease.lease_body("disagg-operator", NS, lease.Record("dead_0", 2, "t", "t", 0))
    emulator.put_object(KEY, body)
    clock = Clock()
    (b,) = await electors(emulator, 1, clock)
    try:
        assert not await b.try_acquire_or_renew()
        assert b._pause() == FAST.retry_period_s  # 2 s left: a whole retry period
        clock.now += 1.9
        assert b._pause() == pytest.approx(0.11)  # 0.1 s left (+10 ms): not the 0.2 s period
        clock.now += 0.1
        assert await b.try_acquire_or_renew()
    finally:
        await b.close()


async def _racy_wait_for(aw: Any, timeout: float | None) -> Any:
    """Python 3.11's ``wait_for`` when the call it waits on finishes as the cancel comes:
    the call's answer wins and the cancel is lost (here every time, not by chance)."""
    task = asyncio.ensure_future(aw)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        return await task


class _SlowRenewal(Elector):
    """A leader whose renewals take half a second: the cancel comes during one."""

    async def try_acquire_or_renew(self) -> bool:
        done = await super().try_acquire_or_renew()
        if self.leading:
            await asyncio.sleep(0.5)
        return done


async def test_leaving_the_lead_stops_the_renewal_even_when_its_cancel_is_lost(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    racy = SimpleNamespace(**{**vars(asyncio), "wait_for": _racy_wait_for})
    monkeypatch.setattr(leader_module, "asyncio", racy)
    a = await _SlowRenewal.connect(str(emulator.url).rstrip("/"), FAST, "cand-0")

    async def lead() -> None:
        async with leading(a):
            await asyncio.sleep(FAST.retry_period_s + 0.2)  # inside the first renewal

    try:
        leaving = asyncio.ensure_future(lead())
        done, _ = await asyncio.wait({leaving}, timeout=5)
        if not done:  # the renewal ran on: stop it for good before failing
            monkeypatch.undo()
            a.stopping = True
            await asyncio.wait({leaving}, timeout=5)
        assert done, "leaving the lead waited on a renewal loop that never stopped"
        assert a.state == "released" and holder(emulator) == ""
    finally:
        await a.close()
