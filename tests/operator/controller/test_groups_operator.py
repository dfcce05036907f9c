"""Instances that span pods, with the real kopf operator over HTTP against the API emulator:
a role's instances are LeaderWorkerSets the rollout planner creates, counts and deletes as
it does pods. A simulated LWS controller marks each group ready a moment after it
appears (and a kubelet each pod); an observer samples what routers would see after every
change, so the test checks every intermediate state of a KV rollout, not only the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from disagg_operator.contracts import lws
from tests.operator.builders import body, role
from tests.operator.conftest import (
    DD,
    DD_PATH,
    NS,
    api,
    condition,
    pods,
    ready_after,
    rolled_out,
    sampled,
    until,
)
from tests.support.emulator import Emulator

LWS = f"{lws.API_VERSION}/{lws.PLURAL}"
KV = "disagg.dev/kv-revision"


def groups(emu: Emulator) -> dict[str, dict[str, Any]]:
    return {g["metadata"]["name"]: g for g in emu.objects_of(LWS, NS)}


def _spec() -> dict[str, Any]:
    """vLLM: 2 prefill instances of 2 GPU pods each (TP 2, one rank per pod), 2 decode pods
    (TP 2 in one pod)."""
    gpu = {"limits": {"nvidia.com/gpu": 1}}
    prefill = role("cuda", 2, tensorParallelSize=2, nodesPerInstance=2, resources=gpu)
    prefill["rollout"] = {"maxSurge": "100%", "maxUnavailable": 0}
    decode = role("cuda", 2, tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}})
    decode["rollout"] = {"maxSurge": "100%", "maxUnavailable": 0}
    out = body(engine="vllm", prefill=prefill, decode=decode)
    out["metadata"] = {"name": "demo", "namespace": NS}
    return out


def _status(emu: Emulator) -> dict[str, Any]:
    return dict((emu.find(DD, NS, "demo") or {}).get("status") or {})


def _live(obj: dict[str, Any]) -> bool:
    return not obj["metadata"].get("deletionTimestamp")


def view(emu: Emulator) -> dict[str, Any]:
    """Per role Service: the KV revision it selects and the ready instances behind it of
    that revision (a group counts when LWS says it is ready: its leader is what the
    Service reaches)."""
    instances = [*pods(emu).values(), *groups(emu).values()]
    out: dict[str, Any] = {}
    for svc in emu.objects_of("v1/services", NS):
        name = svc["metadata"]["name"]
        if name not in ("demo-prefill", "demo-decode"):
            continue
        kv = svc["spec"]["selector"].get(KV)
        role = name.removeprefix("demo-")
        chosen = [
            i
            for i in instances
            if _live(i)
            and i["metadata"]["labels"].get(KV) == kv
            and i["metadata"]["labels"].get("disagg.dev/role") == role
        ]
        ready = [i for i in chosen if _ready(i)]
        out[name] = {"kv": kv, "ready": len(ready)}
    return out


def _ready(obj: dict[str, Any]) -> bool:
    if obj["kind"] == lws.KIND:
        return bool((obj.get("status") or {}).get("readyReplicas"))
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class World:
    """What the controllers below recorded (``samples``) and the groups they leave
    unready (``broken``: a rank's pod restarting)."""

    def __init__(self) -> None:
        self.samples: list[dict[str, Any]] = []
        self.broken: set[str] = set()


@pytest.fixture()
async def controllers(emulator: Emulator) -> AsyncIterator[World]:
    """The kubelet (pods Ready 0.3 s after they appear) and the LWS controller (groups
    ready 0.3 s after they appear, but the broken ones); records what routers see."""
    seen: dict[str, float] = {}
    world = World()
    loop = asyncio.get_running_loop()

    async def run() -> None:
        while True:
            ready_after(emulator, seen, loop.time())
            for name, group in groups(emulator).items():
                first = seen.setdefault(group["metadata"]["uid"], loop.time())
                if name in world.broken and _ready(group):
                    emulator.set_group_ready(NS, name, ready=False)
                elif name not in world.broken and not _ready(group) and loop.time() - first > 0.3:
                    emulator.set_group_ready(NS, name)
            emulator.roll_out_deployments(NS)
            world.samples.append(view(emulator))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run())
    yield world
    task.cancel()


async def test_a_kv_rollout_replaces_groups_in_step_with_no_mixed_pair(
    emulator: Emulator, operator: asyncio.Task[None], controllers: World
) -> None:
    await api(emulator, "POST", DD_PATH, _spec())
    first = await rolled_out(emulator)
    assert set(groups(emulator)) == {"demo-prefill-0", "demo-prefill-1"}
    assert not [n for n in pods(emulator) if "-prefill-" in n]  # LWS makes those pods
    assert first["prefill"]["ready"] == 2 and first["decode"]["ready"] == 2
    old = {n: g["metadata"]["uid"] for n, g in groups(emulator).items()}
    controllers.samples.clear()
    change = {"spec": {"modelConfig": {"maxModelLen": 4096}}}  # a KV-layout field
    await api(emulator, "PATCH", f"{DD_PATH}/demo", change)
    await until(
        "a new KV revision", lambda: _status(emulator).get("kvRevision") != first["kvRevision"]
    )
    done = await rolled_out(emulator)
    await sampled(controllers.samples)
    now = groups(emulator)
    assert len(now) == 2 and not {g["metadata"]["uid"] for g in now.values()} & set(old.values())
    assert {g["metadata"]["labels"][KV] for g in now.values()} == {done["kvRevision"]}
    assert done["routedKvRevision"] == done["kvRevision"] != first["kvRevision"]
    # every moment: both Services on one KV revision (no prefill of one revision paired
    # with a decode of another) with its ready instances at least replicas - maxUnavailable
    both = [s for s in controllers.samples if {"demo-prefill", "demo-decode"} <= s.keys()]
    assert both and all(s["demo-prefill"]["kv"] == s["demo-decode"]["kv"] for s in both)
    assert min(s["demo-prefill"]["ready"] for s in both) >= 2
    assert min(s["demo-decode"]["ready"] for s in both) >= 2
    assert {s["demo-prefill"]["kv"] for s in both} == {first["kvRevision"], done["kvRevision"]}


async def test_a_group_that_is_not_ready_counts_as_an_unready_instance(
    emulator: Emulator, operator: asyncio.Task[None], controllers: World
) -> None:
    await api(emulator, "POST", DD_PATH, _spec())
    await rolled_out(emulator)
    controllers.broken.add("demo-prefill-1")  # a rank's pod restarted: LWS recreates it
    status = await until(
        "prefill 1 of 2 ready",
        lambda: _status(emulator).get("prefill", {}).get("ready") == 1 and _status(emulator),
    )
    assert status["decode"]["ready"] == 2
    assert "demo-prefill-1" in groups(emulator)  # not replaced: LWS recreates the group


async def test_a_group_its_gang_cannot_place_is_reported_and_its_pods_left_to_lws(
    emulator: Emulator, operator: asyncio.Task[None], controllers: World
) -> None:
    await api(emulator, "POST", DD_PATH, _spec())
    await rolled_out(emulator)
    controllers.broken.add("demo-prefill-1")  # recreated: its pods wait for room
    group = groups(emulator)["demo-prefill-1"]
    labels = {
        **group["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"],
        lws.LABEL_NAME: "demo-prefill-1",
        lws.LABEL_WORKER_INDEX: "1",
    }
    pending = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "demo-prefill-1-0-1", "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "engine", "image": "x"}]},
    }
    await api(emulator, "POST", f"/api/v1/namespaces/{NS}/pods", pending)
    unschedulable = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    path = f"/api/v1/namespaces/{NS}/pods/demo-prefill-1-0-1/status"
    await api(emulator, "PATCH", path, {"status": unschedulable})

    def degraded() -> Any:
        c = condition(emulator, "demo", "Degraded")
        return c if c.get("reason") == "PodsFailing" else None

    said = await until("Degraded names the group", degraded)
    assert "demo-prefill-1-0-1 of group demo-prefill-1: Unschedulable" in said["message"]
    assert _status(emulator)["prefill"]["ready"] == 1
    await asyncio.sleep(1.0)  # syncs run meanwhile: the group's pod is LWS's, never ours
    assert emulator.find("v1/pods", NS, "demo-prefill-1-0-1") is not None
