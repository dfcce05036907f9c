"""The real kopf operator over HTTP against the API emulator: the reconcile behaviours.

Tests play the kubelet (pods become Ready only when a test says so); the emulator
collects garbage by owner reference as kube-controller-manager does, so deleting a
deployment removes what the operator created for it.
"""

from __future__ import annotations

import asyncio
import base64
import json

import yaml
from prometheus_client import REGISTRY

from disagg_contract.config import WorkerConfig
from disagg_operator.api import PLURAL
from tests.operator.conftest import (
    DD,
    DD_PATH,
    NS,
    ROOT,
    api,
    condition,
    pods,
    quickstart,
    until,
)
from tests.support.emulator import Emulator, writes


def synced() -> float:
    """Finished reconciles so far, any result (the operator's own metric)."""
    return sum(
        REGISTRY.get_sample_value("disagg_operator_reconciles_total", {"result": r}) or 0.0
        for r in ("ok", "invalid", "refused", "error")
    )


async def converge(emu: Emulator, name: str = "demo", count: int = 2) -> dict[str, dict]:
    """Wait for ``count`` pods, mark them Ready, wait for Ready=True."""
    got = await until(f"{count} pods", lambda: len(pods(emu, name)) == count and pods(emu, name))
    for pod in got:
        emu.set_pod_ready(NS, pod)
    await until("Ready=True", lambda: condition(emu, name).get("status") == "True")
    return pods(emu, name)


async def quiet(emu: Emulator) -> None:
    """Wait until neither reconciles nor API calls happen for half a second."""
    seen = (-1.0, -1)
    for _ in range(100):
        now = (synced(), len(emu.calls))
        if now == seen:
            return
        seen = now
        await asyncio.sleep(0.5)
    raise AssertionError("the operator never went quiet")


def warnings(emu: Emulator) -> list[dict]:
    return [e for e in emu.objects_of("v1/events", NS) if e["type"] == "Warning"]


def snapshot(emu: Emulator) -> str:
    return json.dumps({"/".join(k): v for k, v in emu.store.items()}, sort_keys=True)


async def test_apply_creates_children_with_expected_config(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    cr = await api(emulator, "POST", DD_PATH, quickstart())
    got = await until("both pods", lambda: len(pods(emulator)) == 2 and pods(emulator))
    assert sorted(got) == ["demo-decode-0", "demo-prefill-0"]
    prefill = got["demo-prefill-0"]
    assert prefill["metadata"]["ownerReferences"][0]["uid"] == cr["metadata"]["uid"]
    assert prefill["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert prefill["metadata"]["annotations"]["disagg.dev/spec-hash"]
    env = {e["name"]: e.get("value") for e in prefill["spec"]["containers"][0]["env"]}
    config = WorkerConfig.from_env({k: v for k, v in env.items() if v is not None})
    assert (config.role, config.device, config.kv_buffer_device) == ("prefill", "cpu", "cpu")
    names = {o["metadata"]["name"] for o in emulator.objects_of("v1/services", NS)}
    kv = prefill["metadata"]["labels"]["disagg.dev/kv-revision"]
    assert names == {"demo-prefill", "demo-decode", f"demo-p-{kv}"}
    secret = emulator.find("v1/secrets", NS, "demo-handshake")
    assert secret is not None and len(base64.b64decode(secret["data"]["hmac"])) >= 32
    assert emulator.find("networking.k8s.io/v1/networkpolicies", NS, "demo-side-channel")
    # one pod per role and maxUnavailable 1: a budget could refuse no eviction, so none
    assert emulator.objects_of("policy/v1/poddisruptionbudgets", NS) == []
    events = await until("an event", lambda: emulator.objects_of("v1/events", NS))
    assert (events[0]["type"], events[0]["reason"]) == ("Normal", "Reconciled")
    assert "create Pod/demo-prefill-0" in events[0]["message"]
    ready = await until("a status", lambda: condition(emulator, "demo"))
    assert ready["reason"] == "ReplicasNotReady"
    assert ("v1/pods", "disagg.dev/deployment") in emulator.watch_selectors  # server-side
    await converge(emulator)
    stored = emulator.find(DD, NS, "demo") or {}
    status = stored["status"]
    assert status["prefill"]["summary"] == status["decode"]["summary"] == "1/1"
    # kopf keeps no bookkeeping on the CR (only event handlers): the operator's one write
    # to it is the status
    assert "kopf" not in status
    assert not stored["metadata"].get("annotations")
    cr_writes = {(c.verb, c.subresource) for c in writes(emulator) if c.resource == PLURAL}
    assert cr_writes == {("create", ""), ("patch", "status")}  # the user's create, our status


async def test_deleting_a_deployment_collects_every_child(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    """No finalizer: the operator writes nothing on delete; owner references (rendered on
    every child) let the garbage collector remove them all, in the background."""
    cr = await api(emulator, "POST", DD_PATH, quickstart())
    await converge(emulator)
    uid = cr["metadata"]["uid"]
    owned = [(k, o) for (k, *_), o in emulator.store.items() if _owned_by(o, uid)]
    assert {o["kind"] for _, o in owned} >= {"Pod", "Service", "Secret", "NetworkPolicy"}
    await api(emulator, "DELETE", f"{DD_PATH}/demo")
    await until(
        "children collected", lambda: not any(_owned_by(o, uid) for o in emulator.store.values())
    )
    assert emulator.find(DD, NS, "demo") is None


def _owned_by(obj: dict, uid: str) -> bool:
    return any(r.get("uid") == uid for r in obj.get("metadata", {}).get("ownerReferences") or [])


async def test_scale_up_down_and_remove_a_role(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    await api(emulator, "POST", DD_PATH, quickstart())
    await converge(emulator)
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"decode": {"replicas": 3}}})
    await until("3 decode pods", lambda: len(pods(emulator)) == 4)
    assert sorted(pods(emulator)) == [
        "demo-decode-0",
        "demo-decode-1",
        "demo-decode-2",
        "demo-prefill-0",
    ]
    await api(
        emulator,
        "PATCH",
        f"{DD_PATH}/demo",
        {"spec": {"decode": {"replicas": 1}, "prefill": {"replicas": 0}}},
    )
    await until("1 pod left", lambda: sorted(pods(emulator)) == ["demo-decode-0"])
    await until("1 service left", lambda: len(emulator.objects_of("v1/services", NS)) == 1)
    assert emulator.find("v1/services", NS, "demo-decode")
    # Decode alone cannot serve: not a plain Ready with "prefill 0/0".
    await until("NoPrefill", lambda: condition(emulator, "demo").get("reason") == "NoPrefill")
    assert condition(emulator, "demo")["status"] == "False"
    assert condition(emulator, "demo", "Degraded")["reason"] == "NoPrefill"
    assert emulator.find(DD, NS, "demo")["status"]["phase"] == "Degraded"


async def test_a_budget_an_older_operator_wrote_is_converted_not_refused(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    """Budgets used to say maxUnavailable; an upgraded operator finds them so and patches
    them to minAvailable. The API server refuses a budget with both set (the emulator
    too), so the patch must remove maxUnavailable, or every such deployment is Degraded."""
    body = quickstart()
    body["spec"]["decode"]["replicas"] = 2
    await api(emulator, "POST", DD_PATH, body)
    await converge(emulator, count=3)
    key = "policy/v1/poddisruptionbudgets"
    budget = await until("the decode budget", lambda: emulator.find(key, NS, "demo-decode"))
    assert budget["spec"]["minAvailable"] == 1
    old = {**budget, "spec": {"selector": budget["spec"]["selector"], "maxUnavailable": 1}}
    emulator.put_object(key, old)  # as the previous release wrote it
    await until(
        "converted", lambda: emulator.find(key, NS, "demo-decode")["spec"] == budget["spec"]
    )
    await quiet(emulator)
    assert condition(emulator, "demo", "Degraded")["status"] == "False"


async def test_a_scale_subresource_write_scales_decode_and_prefill_follows(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    """What an HPA or KEDA does: PATCH .../scale (no kubectl needed here)."""
    body = quickstart()
    del body["spec"]["prefill"]["replicas"]
    body["spec"]["prefill"]["perDecode"] = {"ratio": 0.5, "max": 2}
    await api(emulator, "POST", DD_PATH, body)
    await converge(emulator)
    await api(emulator, "PATCH", f"{DD_PATH}/demo/scale", {"spec": {"replicas": 5}})
    want = [f"demo-decode-{i}" for i in range(5)] + ["demo-prefill-0", "demo-prefill-1"]
    await until("5 decode + 2 prefill pods (max 2)", lambda: sorted(pods(emulator)) == want)
    await until(
        "status.replicas 5", lambda: emulator.find(DD, NS, "demo")["status"]["replicas"] == 5
    )


async def test_deleted_pod_is_recreated(emulator: Emulator, operator: asyncio.Task[None]) -> None:
    await api(emulator, "POST", DD_PATH, quickstart())
    before = await converge(emulator)
    await api(emulator, "DELETE", f"/api/v1/namespaces/{NS}/pods/demo-decode-0")
    again = await until("decode pod back", lambda: pods(emulator).get("demo-decode-0"))
    assert again["metadata"]["uid"] != before["demo-decode-0"]["metadata"]["uid"]
    await until("Ready=False", lambda: condition(emulator, "demo").get("status") == "False")


async def test_invalid_spec_reports_and_changes_nothing(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    bad = quickstart("bad")
    bad["spec"]["decode"]["device"] = "quantum"
    await api(emulator, "POST", DD_PATH, bad)
    ready = await until(
        "InvalidSpec",
        lambda: (
            condition(emulator, "bad").get("reason") == "InvalidSpec" and condition(emulator, "bad")
        ),
    )
    assert ready["status"] == "False" and "spec.decode.device" in ready["message"]
    events = await until("a Warning", lambda: warnings(emulator))
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidSpec")]
    assert "spec.decode.device" in events[0]["message"]
    kinds = {(c.resource, c.subresource) for c in writes(emulator)}
    assert kinds == {
        ("disaggregateddeployments", ""),
        ("disaggregateddeployments", "status"),
        ("events", ""),
    }  # the user's create, our status and event: no children
    assert pods(emulator, "bad") == {}

    await api(emulator, "POST", DD_PATH, quickstart())  # valid first, then broken
    before = await converge(emulator)
    mark = len(emulator.calls)
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"prefill": {"device": "quantum"}}})
    await until("InvalidSpec", lambda: condition(emulator, "demo").get("reason") == "InvalidSpec")
    await until("a second Warning", lambda: len(warnings(emulator)) == 2)
    assert pods(emulator) == before
    ours = {(c.verb, c.resource, c.subresource) for c in writes(emulator, mark)}
    assert ours == {
        ("patch", "disaggregateddeployments", ""),
        ("patch", "disaggregateddeployments", "status"),
        ("create", "events", ""),
    }


async def test_restart_makes_no_duplicates_and_no_writes(emulator: Emulator) -> None:
    host = str(emulator.url).rstrip("/")
    from disagg_operator.controller.config import OperatorConfig
    from disagg_operator.controller.run import running

    async with running(OperatorConfig(host=host)):
        await api(emulator, "POST", DD_PATH, quickstart())
        await converge(emulator)
        await quiet(emulator)
    objects_before = snapshot(emulator)
    mark, before = len(emulator.calls), synced()
    async with running(OperatorConfig(host=host)):
        await until("resumed", lambda: synced() >= before + 1)
        await quiet(emulator)
    assert writes(emulator, mark) == []
    assert snapshot(emulator) == objects_before
    assert sorted(pods(emulator)) == ["demo-decode-0", "demo-prefill-0"]


async def test_namespaced_operator_leaves_other_namespaces_alone(emulator: Emulator) -> None:
    from disagg_operator.controller.config import OperatorConfig
    from disagg_operator.controller.run import running

    for ns in (NS, "team-b"):  # kopf finds the namespaces it serves by listing them
        emulator.put_object(
            "v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    other = quickstart("elsewhere")
    other["metadata"]["namespace"] = "team-b"
    await api(emulator, "POST", DD_PATH.replace(NS, "team-b"), other)
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"), namespaces=(NS,))):
        await api(emulator, "POST", DD_PATH, quickstart())
        await converge(emulator)
        await quiet(emulator)
    assert emulator.objects_of("v1/pods", "team-b") == []
    assert not any(c.namespace == "team-b" for c in emulator.calls if c.verb != "create")


async def test_periodic_resync_heals_what_no_event_reported(emulator: Emulator) -> None:
    from disagg_operator.controller.config import OperatorConfig
    from disagg_operator.controller.run import running

    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"), resync_seconds=0.3)):
        await api(emulator, "POST", DD_PATH, quickstart())
        await converge(emulator)
        emulator.lose_object("v1/services", NS, "demo-decode")  # gone, and no watch event
        await until("the Service back", lambda: emulator.find("v1/services", NS, "demo-decode"))


async def test_llmd_example_gets_a_pool_that_goes_when_disabled(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    body = yaml.safe_load((ROOT / "examples" / "llm-d.yaml").read_text())
    body["metadata"]["namespace"] = NS
    await api(emulator, "POST", DD_PATH, body)
    pool_key = "inference.networking.k8s.io/v1/inferencepools"  # the GA API, by default
    pool = await until("an InferencePool", lambda: emulator.find(pool_key, NS, "qwen"))
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    kv = (emulator.find(DD, NS, "qwen") or {}).get("status", {}).get("kvRevision")
    kv = kv or pool["spec"]["selector"]["matchLabels"].get("disagg.dev/kv-revision")
    qwen_pods = [p for p in emulator.objects_of("v1/pods", NS) if "qwen" in p["metadata"]["name"]]
    assert {p["metadata"]["labels"]["disagg.dev/kv-revision"] for p in qwen_pods} == {kv}
    assert pool["spec"]["selector"] == {
        "matchLabels": {"disagg.dev/deployment": "qwen", "disagg.dev/kv-revision": kv}
    }
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["endpointPickerRef"] == {"name": "qwen-epp", "port": {"number": 9002}}
    await until("3 pods", lambda: len(pods(emulator, "qwen")) == 3)
    disable = {"spec": {"llmd": {"inferencePool": {"enabled": False}}}}
    await api(emulator, "PATCH", f"{DD_PATH}/qwen", disable)
    await until("the pool gone", lambda: emulator.find(pool_key, NS, "qwen") is None)
    assert len(pods(emulator, "qwen")) == 3
