"""A model change (a new KV revision) finishes with the default rollout settings, without
the router, for any replica counts: the real operator over the API emulator, the test
playing the kubelet (pods Ready 0.3 s after they appear) and sampling what a router on
the role Services sees after every change (issue 55, point 6)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.operator.conftest import (
    DD,
    DD_PATH,
    NS,
    api,
    condition,
    pods,
    quickstart,
    ready_after,
    rolled_out,
    until,
)
from tests.support.emulator import Emulator

KV = "disagg.dev/kv-revision"
ROLES = ("prefill", "decode")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass
class Sample:
    """The world once: per role Service, the KV revisions of the pods it selects and how
    many of them are Ready; per role, every pod (terminating ones too)."""

    kvs: dict[str, set[str]] = field(default_factory=dict)
    ready: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)


def sample(emu: Emulator) -> Sample:
    now, out = pods(emu), Sample()
    for role in ROLES:
        svc = emu.find("v1/services", NS, f"demo-{role}") or {"spec": {"selector": {"x": "y"}}}
        selector = svc["spec"]["selector"]
        chosen = [
            p
            for p in now.values()
            if selector.items() <= p["metadata"]["labels"].items()
            and not p["metadata"].get("deletionTimestamp")
        ]
        out.kvs[role] = {p["metadata"]["labels"][KV] for p in chosen}
        out.ready[role] = sum(1 for p in chosen if _ready(p))
        out.total[role] = sum(1 for n in now if n.startswith(f"demo-{role}-"))
    return out


@pytest.fixture()
async def kubelet(emulator: Emulator) -> AsyncIterator[list[Sample]]:
    """Marks pods Ready 0.3 s after they appear; records a :class:`Sample` every 20 ms."""
    seen: dict[str, float] = {}
    samples: list[Sample] = []
    loop = asyncio.get_running_loop()

    async def run() -> None:
        while True:
            ready_after(emulator, seen, loop.time())
            samples.append(sample(emulator))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run())
    yield samples
    task.cancel()


async def _deploy(emu: Emulator, prefill: int, decode: int) -> dict[str, Any]:
    body = quickstart()  # no router, no rollout settings: the defaults
    body["spec"]["prefill"]["replicas"] = prefill
    body["spec"]["decode"]["replicas"] = decode
    await api(emu, "POST", DD_PATH, body)
    return await rolled_out(emu)


async def _change_model(emu: Emulator, before: dict[str, Any]) -> dict[str, Any]:
    """spec.model tiny → small, then the Progressing condition once the roll has either
    finished or stopped on the spec."""
    await api(emu, "PATCH", f"{DD_PATH}/demo", {"spec": {"model": "small"}})
    await until(
        "a new KV revision in status",
        lambda: (
            (emu.find(DD, NS, "demo") or {}).get("status", {}).get("kvRevision")
            not in (None, before["kvRevision"])
        ),
    )
    ends = {"RolloutComplete", "KVRolloutBlocked"}
    found: dict[str, Any] = await until(
        "the roll finished or held",
        lambda: (c := condition(emu, "demo", "Progressing")).get("reason") in ends and c,
        timeout=60,
    )
    return found


def _check_the_roll(samples: list[Sample], replicas: dict[str, int]) -> None:
    """What routers on the role Services saw while it rolled: one KV revision for both
    roles at every moment, never fewer Ready pods than replicas - maxUnavailable (25%,
    rounded down), never more than a second set of pods."""
    for s in samples:
        assert len(s.kvs["prefill"] | s.kvs["decode"]) <= 1, s
        for role, r in replicas.items():
            assert s.ready[role] >= r - math.floor(r * 25 / 100), (role, s)
            assert s.total[role] <= 2 * r, (role, s)


async def test_the_issue_scenario_3_prefill_5_decode_scaled_to_2_then_tiny_to_small_completes(
    emulator: Emulator, operator: asyncio.Task[None], kubelet: list[Sample]
) -> None:
    await _deploy(emulator, 3, 5)
    await api(emulator, "PATCH", f"{DD_PATH}/demo/scale", {"spec": {"replicas": 2}})
    await until("decode scaled to 2", lambda: sample(emulator).total["decode"] == 2)
    before = await rolled_out(emulator)
    kubelet.clear()
    progressing = await _change_model(emulator, before)
    assert progressing["reason"] == "RolloutComplete", progressing["message"]
    _check_the_roll(kubelet, {"prefill": 3, "decode": 2})
    status = (emulator.find(DD, NS, "demo") or {})["status"]
    assert status["routedKvRevision"] == status["kvRevision"] != before["kvRevision"]
    now = pods(emulator)
    assert sorted(p["metadata"]["labels"]["disagg.dev/role"] for p in now.values()) == [
        *["decode"] * 2,
        *["prefill"] * 3,
    ]
    assert {p["metadata"]["labels"][KV] for p in now.values()} == {status["kvRevision"]}


@pytest.mark.parametrize(("prefill", "decode"), [(1, 1), (3, 2), (3, 5), (1, 4), (8, 2)])
async def test_a_router_less_model_change_completes_with_the_defaults(
    emulator: Emulator,
    operator: asyncio.Task[None],
    kubelet: list[Sample],
    prefill: int,
    decode: int,
) -> None:
    before = await _deploy(emulator, prefill, decode)
    kubelet.clear()
    progressing = await _change_model(emulator, before)
    assert progressing["reason"] == "RolloutComplete", progressing["message"]
    _check_the_roll(kubelet, {"prefill": prefill, "decode": decode})
    status = (emulator.find(DD, NS, "demo") or {})["status"]
    assert status["routedKvRevision"] == status["kvRevision"] != before["kvRevision"]
    now = pods(emulator)
    assert {p["metadata"]["labels"][KV] for p in now.values()} == {status["kvRevision"]}
    for role, want in (("prefill", prefill), ("decode", decode)):
        assert sum(1 for n in now if n.startswith(f"demo-{role}-")) == want
