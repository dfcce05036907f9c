"""Two `disagg operator --leader-elect` processes against the API emulator: one reconciles,
the other stands by; a crash, a clean stop and a stolen lease each hand over correctly.

Real processes (``python -m disagg_operator.cli operator``) with their own health and
metrics ports, so a kill is a real SIGKILL and each replica's writes are its own
``disagg_operator_api_writes_total``. Short leases (3 s, renew deadline 2.4 s, retry
0.6 s) keep the suite quick. No bound here is on the test's clock (a busy host slows the
processes, not the rules they follow): a replica's looks at the Lease are counted, each
with the holder it was answered (:class:`Looks`), the Lease's own stamps say when it was
renewed and taken, and every wait is for the thing itself, with a deadline that only
guards a hang.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from disagg_operator.controller.rules import lease
from disagg_tools.bench import failover
from disagg_tools.bench.failover import LEASE, LEASE_KEY, Replica, Setup, lease_args
from tests.operator.conftest import DD, quickstart
from tests.support.emulator import ApiCall, Emulator

LEASE_NS = "disagg-system"
LEASE_S, RETRY_S = 3, 0.6  # lease_args(3)
HANG_S = 60.0  # a deadline that only guards a hang


def setup(emulator: Emulator, kubeconfig: Path, work: Path, flags: list[str]) -> Setup:
    return Setup(emulator, kubeconfig, work, flags, LEASE_NS, timeout=HANG_S)


async def leader_and_standby(s: Setup) -> tuple[Replica, Replica]:
    a = await s.replica("op-a")
    await s.until("A to lead", lambda: s.holder().startswith("op-a_"))
    b = await s.replica("op-b")
    await s.until("B to answer /healthz as a standby", lambda: _health_says(b, "standby"))
    return a, b


async def _health_says(replica: Replica, state: str) -> bool:
    assert replica.proc.returncode is None, replica.log.read_text()[-2000:]
    return (await replica.health()).get("leader") == state


async def reap(s: Setup) -> None:
    await failover.reap(s.replicas)


def stored(emulator: Emulator) -> lease.Record:
    return lease.read(emulator.find(LEASE_KEY, LEASE_NS, LEASE) or {})


class Looks(list[ApiCall]):
    """The emulator's request log, spied on: each Lease request is also noted in
    ``answered`` as (verb, the holder stored when it came). The emulator serves a request
    as it logs it, in this event loop, so a GET's noted holder is what it answered."""

    def __init__(self, emulator: Emulator) -> None:
        super().__init__(emulator.calls)
        self.emulator = emulator
        self.answered: list[tuple[str, str]] = []
        emulator.calls = self

    def append(self, call: ApiCall) -> None:
        if call.resource == "leases":
            self.answered.append((call.verb, stored(self.emulator).holder))
        super().append(call)

    def gets(self, mark: int, holder: str) -> int:
        """Lease GETs after ``mark`` (a length of ``answered``) answered with a holder that
        starts with ``holder`` (a prefix; "": any)."""
        return sum(1 for v, h in self.answered[mark:] if v == "get" and h.startswith(holder))


def seconds(earlier: str, later: str) -> float:
    """``later - earlier``, two MicroTime stamps (RFC 3339, microseconds)."""
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    parse = datetime.datetime.strptime
    return (parse(later, stamp) - parse(earlier, stamp)).total_seconds()


async def test_only_the_leader_writes_and_the_standby_takes_over_after_a_crash(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = setup(emulator, kubeconfig_path, tmp_path, lease_args(3))
    looks = Looks(emulator)
    try:
        a, b = await leader_and_standby(s)
        emulator.put_object(DD, quickstart("before"))
        await s.until("the leader to create the pods", lambda: s.pods("before") == 2)
        assert any('kind="Pod"' in line for line in await a.metric("disagg_operator_api_writes"))
        assert await b.metric("disagg_operator_api_writes") == []  # not even a Lease write
        assert await b.metric("disagg_operator_leader ") == ["disagg_operator_leader 0.0"]

        a.kill()  # a crash: the lease is not released
        killed = len(looks.answered)
        emulator.put_object(DD, quickstart("after"))
        seen = [stored(emulator)]  # the Lease as stored, from the kill until B holds it

        def taken() -> bool:
            seen.append(stored(emulator))
            return seen[-1].holder.startswith("op-b_")

        await s.until("the standby to take the lease", taken)
        await s.until("the standby to create the new pods", lambda: s.pods("after") == 2)
        assert s.holder().startswith("op-b_")
        # B took it only once A's last renewal had expired by B's own clock (both stamps
        # are this host's wall clock) ...
        last = [r for r in seen if r.holder.startswith("op-a_")][-1]
        assert seconds(last.renew_time, seen[-1].acquire_time) >= LEASE_S
        # ... at its first look after that, looking once a retry period: its looks at A's
        # lease after the kill cover the lease and the period it may have taken to see the
        # last renewal, plus the shortened last look and A's own request in flight
        waited = looks.gets(killed, "op-a_")
        assert waited <= (LEASE_S + RETRY_S) / RETRY_S + 2, waited
        assert await b.metric("disagg_operator_leader ") == ["disagg_operator_leader 1.0"]
        assert await b.stop() == 0
    finally:
        await reap(s)
    said = [
        line for line in b.log.read_text().splitlines() if "disagg-system/disagg-operator" in line
    ]
    assert [line.split('"message": "')[1].split(" ")[0] for line in said] == [
        "standby",
        "leading",
        "released",
    ]


async def test_a_clean_stop_releases_the_lease_so_the_standby_need_not_wait_for_expiry(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    # A 30 s lease: B looks every 0.5 s, so waiting for its expiry would take some sixty
    # looks; a released lease is taken at B's first look.
    flags = [
        "--lease-duration-seconds=30",
        "--renew-deadline-seconds=8",
        "--retry-period-seconds=0.5",
    ]
    s = setup(emulator, kubeconfig_path, tmp_path, flags)
    looks = Looks(emulator)
    try:
        a, _ = await leader_and_standby(s)
        held = len(looks.answered)  # the Lease exists and A holds it
        assert await a.stop() == 0, a.log.read_text()[-2000:]
        await s.until("B to lead", lambda: s.holder().startswith("op-b_"))
        # the Lease was seen released (no holder) once: by B's look that took it
        assert [h for v, h in looks.answered[held:] if v == "get" and not h] == [""]
        assert stored(emulator).transitions == 1
        emulator.put_object(DD, quickstart("handed-over"))
        await s.until("B to create the pods", lambda: s.pods("handed-over") == 2)
    finally:
        await reap(s)


async def test_a_leader_whose_lease_is_taken_stops_and_exits_non_zero(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = setup(emulator, kubeconfig_path, tmp_path, lease_args(3))
    looks = Looks(emulator)
    try:
        a, b = await leader_and_standby(s)
        emulator.put_object(DD, quickstart("demo"))
        await s.until("A to reconcile", lambda: s.pods("demo") == 2)
        intruder = lease.Record("intruder", 30, "t", "t", 7)
        emulator.put_object(LEASE_KEY, lease.lease_body(LEASE, LEASE_NS, intruder))
        assert await asyncio.wait_for(a.proc.wait(), HANG_S) == 1
        assert "intruder holds it" in a.log.read_text()
        emulator.put_object(DD, quickstart("later"))
        put = len(looks.answered)  # A is gone: every Lease request from here on is B's
        await s.until("B to look at the lease twice", lambda: looks.gets(put, "") >= 2)
        # each look saw the intruder's lease, and B wrote nothing
        assert set(looks.answered[put:]) == {("get", "intruder")}
        assert s.pods("later") == 0  # nobody leads: nobody reconciles
        assert await b.metric("disagg_operator_leader ") == ["disagg_operator_leader 0.0"]
        assert await b.metric("disagg_operator_api_writes") == []
        assert await b.stop() == 0  # a standby stops at once on SIGTERM, writing nothing
        assert s.holder() == "intruder"
    finally:
        await reap(s)
