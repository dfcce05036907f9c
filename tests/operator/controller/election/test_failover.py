"""Two `disagg operator --leader-elect` processes against the API emulator: one reconciles,
the other stands by; a crash, a clean stop and a stolen lease each hand over correctly.

Real processes (``python -m disagg_operator.cli operator``) with their own health and
metrics ports, so a kill is a real SIGKILL and each replica's writes are its own
``disagg_operator_api_writes_total``. Short leases (3 s, renew deadline 2.4 s, retry
0.6 s) keep the suite quick; the time bounds are liveness bounds, each far from what the
behaviour under test would cost without it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from disagg_operator.bench import failover
from disagg_operator.bench.failover import LEASE, LEASE_KEY, Replica, Setup, lease_args
from disagg_operator.controller.election import lease
from tests.operator.conftest import DD, quickstart
from tests.support.emulator import Emulator

LEASE_NS = "disagg-system"


def setup(emulator: Emulator, kubeconfig: Path, work: Path, flags: list[str]) -> Setup:
    return Setup(emulator, kubeconfig, work, flags, LEASE_NS, timeout=60.0)


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


async def test_only_the_leader_writes_and_the_standby_takes_over_after_a_crash(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = setup(emulator, kubeconfig_path, tmp_path, lease_args(3))
    try:
        a, b = await leader_and_standby(s)
        emulator.put_object(DD, quickstart("before"))
        await s.until("the leader to create the pods", lambda: s.pods("before") == 2)
        assert any('kind="Pod"' in line for line in await a.metric("disagg_operator_api_writes"))
        assert await b.metric("disagg_operator_api_writes") == []  # not even a Lease write
        assert await b.metric("disagg_operator_leader ") == ["disagg_operator_leader 0.0"]

        a.kill()  # a crash: the lease is not released
        killed = time.monotonic()
        emulator.put_object(DD, quickstart("after"))
        await s.until("the standby to create the new pods", lambda: s.pods("after") == 2)
        assert time.monotonic() - killed < 10.0  # lease 3 s + a look 0.6 s + kopf's start
        assert s.holder().startswith("op-b_")
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
    # A 30 s lease: only a released lease lets B lead within the bound below.
    flags = [
        "--lease-duration-seconds=30",
        "--renew-deadline-seconds=8",
        "--retry-period-seconds=0.5",
    ]
    s = setup(emulator, kubeconfig_path, tmp_path, flags)
    try:
        a, _ = await leader_and_standby(s)
        stopped = time.monotonic()
        assert await a.stop() == 0, a.log.read_text()[-2000:]
        await s.until("B to lead", lambda: s.holder().startswith("op-b_"))
        assert time.monotonic() - stopped < 15.0
        stored = lease.read(emulator.find(LEASE_KEY, LEASE_NS, LEASE) or {})
        assert stored.transitions == 1
        emulator.put_object(DD, quickstart("handed-over"))
        await s.until("B to create the pods", lambda: s.pods("handed-over") == 2)
    finally:
        await reap(s)


async def test_a_leader_whose_lease_is_taken_stops_and_exits_non_zero(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    s = setup(emulator, kubeconfig_path, tmp_path, lease_args(3))
    try:
        a, b = await leader_and_standby(s)
        emulator.put_object(DD, quickstart("demo"))
        await s.until("A to reconcile", lambda: s.pods("demo") == 2)
        intruder = lease.Record("intruder", 30, "t", "t", 7)
        emulator.put_object(LEASE_KEY, lease.lease_body(LEASE, LEASE_NS, intruder))
        assert await asyncio.wait_for(a.proc.wait(), 10) == 1
        assert "intruder holds it" in a.log.read_text()
        emulator.put_object(DD, quickstart("later"))
        await asyncio.sleep(1.0)
        assert s.pods("later") == 0  # nobody leads: nobody reconciles
        assert await b.metric("disagg_operator_leader ") == ["disagg_operator_leader 0.0"]
        assert await b.metric("disagg_operator_api_writes") == []
        assert await b.stop() == 0  # a standby stops at once on SIGTERM, writing nothing
        assert s.holder() == "intruder"
    finally:
        await reap(s)
