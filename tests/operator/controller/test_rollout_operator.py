"""Rollouts with the real kopf operator over HTTP against the API emulator.

A simulated kubelet marks each pod Ready a moment after it appears; an observer samples
the world as routers would see it (the Services' selectors, the Ready pods) after every
change, so the tests check what every intermediate state offered, not only the end.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

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

KV = "disagg.dev/kv-revision"


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def view(emu: Emulator) -> dict[str, Any]:
    """What routers see: per role Service, its selected KV revision and Ready pods."""
    out: dict[str, Any] = {}
    for svc in emu.objects_of("v1/services", NS):
        selector = svc["spec"]["selector"]
        chosen = [
            p
            for p in pods(emu).values()
            if selector.items() <= p["metadata"]["labels"].items()
            and not p["metadata"].get("deletionTimestamp")
        ]
        out[svc["metadata"]["name"]] = {
            "kv": selector.get(KV),
            "ready": sum(1 for p in chosen if _ready(p)),
            "kvs": {p["metadata"]["labels"][KV] for p in chosen},
        }
    for role in ("prefill", "decode"):  # every pod of the role, terminating ones too
        out[f"pods-{role}"] = sum(1 for n in pods(emu) if f"-{role}-" in n)
    return out


@pytest.fixture()
async def kubelet(emulator: Emulator) -> AsyncIterator[list[dict[str, Any]]]:
    """Marks pods Ready 0.3 s after they appear and rolls Deployments out (the router's);
    records the routers' view meanwhile."""
    seen: dict[str, float] = {}
    samples: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()

    async def run() -> None:
        while True:
            ready_after(emulator, seen, loop.time())
            emulator.roll_out_deployments(NS)
            samples.append(view(emulator))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run())
    yield samples
    task.cancel()


def _spec(**decode: Any) -> dict[str, Any]:
    from tests.operator.conftest import quickstart

    body = quickstart()
    body["spec"]["decode"].update(decode)
    return body


async def test_in_place_roll_replaces_a_few_pods_at_a_time(
    emulator: Emulator, operator: asyncio.Task[None], kubelet: list[dict[str, Any]]
) -> None:
    rollout = {"maxSurge": 0, "maxUnavailable": 1}
    await api(emulator, "POST", DD_PATH, _spec(replicas=4, rollout=rollout))
    first = await rolled_out(emulator)
    before = {n: p["metadata"]["uid"] for n, p in pods(emulator).items()}
    kubelet.clear()
    patch = {"spec": {"decode": {"nodeSelector": {"pool": "decode-b"}}}}  # not a KV field
    await api(emulator, "PATCH", f"{DD_PATH}/demo", patch)
    await until(
        "a decode pod replaced",
        lambda: (
            set(before)
            != set(n for n, p in pods(emulator).items() if p["metadata"]["uid"] in before.values())
        ),
    )
    status = await rolled_out(emulator)
    now = pods(emulator)
    decode = [p for n, p in now.items() if "-decode-" in n]
    assert len(decode) == 4 and all(
        p["spec"]["nodeSelector"] == {"pool": "decode-b"} for p in decode
    )
    assert now["demo-prefill-0"]["metadata"]["uid"] == before["demo-prefill-0"]  # untouched
    # never fewer than replicas - maxUnavailable ready decode pods behind the Service
    assert min(s["demo-decode"]["ready"] for s in kubelet if "demo-decode" in s) >= 3
    assert status["kvRevision"] == first["kvRevision"] == status["routedKvRevision"]
    assert status["decode"]["currentRevision"] == status["decode"]["updateRevision"]
    assert status["decode"]["updateRevision"] != first["decode"]["updateRevision"]
    assert status["prefill"]["updateRevision"] == first["prefill"]["updateRevision"]


async def test_kv_change_rolls_revisioned_pairs_and_never_mixes(
    emulator: Emulator, operator: asyncio.Task[None], kubelet: list[dict[str, Any]]
) -> None:
    """Without the router: room for a whole new revision (maxSurge 100%), one routed."""
    room = {"maxSurge": "100%", "maxUnavailable": 0}
    await api(emulator, "POST", DD_PATH, _spec(replicas=2, rollout=room))
    first = await rolled_out(emulator)
    old = set(pods(emulator))
    kubelet.clear()
    engine = {"type": "reference", "image": "ghcr.io/disagg-dev/disagg-worker-cpu:0.2.0"}
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"engine": engine}})
    await until(
        "NewKVRevision",
        lambda: condition(emulator, "demo", "Progressing").get("reason") == "NewKVRevision",
    )
    status = await rolled_out(emulator)
    await sampled(kubelet)
    assert status["kvRevision"] != first["kvRevision"]
    assert status["routedKvRevision"] == status["kvRevision"]
    now = pods(emulator)
    assert not old & set(now)  # every old pod is gone, new ones took other indices
    assert {p["spec"]["containers"][0]["image"] for p in now.values()} == {engine["image"]}
    assert sorted(now) == ["demo-decode-2", "demo-decode-3", "demo-prefill-1"]
    switched = False
    for sample in kubelet:
        if not {"demo-prefill", "demo-decode"} <= set(sample):
            continue
        kvs = {sample[s]["kv"] for s in ("demo-prefill", "demo-decode")}
        assert len(kvs) == 1, sample  # routers never see two revisions
        for svc in ("demo-prefill", "demo-decode"):
            assert sample[svc]["kvs"] <= kvs  # the Service selects only its revision
            assert sample[svc]["ready"] >= 1, sample  # and the routed pair can serve
        switched |= kvs == {status["kvRevision"]}
    assert switched
    assert condition(emulator, "demo")["status"] == "True"


ENGINE = {"type": "reference", "image": "ghcr.io/disagg-dev/disagg-worker-cpu:0.2.0"}


async def test_kv_change_without_room_is_held_and_says_the_fix(
    emulator: Emulator, operator: asyncio.Task[None], kubelet: list[dict[str, Any]]
) -> None:
    # a maxSurge set (a full pool's one pod); unset, it would take the room the roll needs
    await api(emulator, "POST", DD_PATH, _spec(replicas=4, rollout={"maxSurge": 1}))
    await rolled_out(emulator)
    old = {n: p["metadata"]["uid"] for n, p in pods(emulator).items()}
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"engine": ENGINE}})
    held = await until(
        "KVRolloutBlocked",
        lambda: (
            (c := condition(emulator, "demo", "Progressing")).get("reason") == "KVRolloutBlocked"
            and c
        ),
    )
    assert held["status"] == "False" and "spec.router.enabled" in held["message"]
    assert {n: p["metadata"]["uid"] for n, p in pods(emulator).items()} == old  # untouched
    # the fix named there: Recreate on both roles
    recreate = {"rollout": {"strategy": "Recreate"}}
    patch = {"spec": {"prefill": recreate, "decode": recreate}}
    await api(emulator, "PATCH", f"{DD_PATH}/demo", patch)
    status = await rolled_out(emulator)
    assert status["routedKvRevision"] == status["kvRevision"]
    assert not set(old.values()) & {p["metadata"]["uid"] for p in pods(emulator).values()}


def _router_revisions(emu: Emulator) -> list[str]:
    deploy = emu.find("apps/v1/deployments", NS, "demo-router") or {}
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    return [b for a, b in itertools.pairwise(args) if a == "--kv-revision"]


async def test_kv_change_behind_the_router_fits_max_surge_with_both_revisions_serving(
    emulator: Emulator, operator: asyncio.Task[None], kubelet: list[dict[str, Any]]
) -> None:
    """spec.router pairs within revisions: the roll stays within maxSurge 1 per role, the
    per-revision Services never mix, and every role keeps its replicas ready across the
    revisions the router is told of."""
    one = {"maxSurge": 1, "maxUnavailable": 0}
    body = _spec(replicas=4, rollout=one)
    body["spec"]["prefill"].update(replicas=2, rollout=one)
    body["spec"]["router"] = {"enabled": True}
    await api(emulator, "POST", DD_PATH, body)
    first = await rolled_out(emulator)
    assert _router_revisions(emulator) == [first["kvRevision"]]
    kubelet.clear()
    router_told: list[list[str]] = []
    task = asyncio.create_task(_watch(emulator, router_told))
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"engine": ENGINE}})
    await until(
        "the new KV revision",
        lambda: (
            (emulator.find(DD, NS, "demo") or {}).get("status", {}).get("kvRevision")
            != first["kvRevision"]
        ),
    )
    status = await rolled_out(emulator)
    await sampled(kubelet)
    task.cancel()
    new = status["kvRevision"]
    assert _router_revisions(emulator) == [new]
    assert sorted([first["kvRevision"], new]) in router_told  # both, while it rolled
    peak = {"prefill": 0, "decode": 0}
    for sample in kubelet:
        for name, seen in sample.items():
            if "-p-" in name or "-d-" in name:
                assert seen["kvs"] <= {seen["kv"]}, sample  # a revision's Service: its pods
        for role in peak:
            peak[role] = max(peak[role], sample.get(f"pods-{role}", 0))
    assert peak == {"prefill": 3, "decode": 5}  # replicas + maxSurge, never more
    assert all(p["metadata"]["labels"][KV] == new for p in pods(emulator).values())


async def _watch(emu: Emulator, told: list[list[str]]) -> None:
    while True:
        found = _router_revisions(emu)
        if not told or told[-1] != found:
            told.append(found)
        await asyncio.sleep(0.02)
