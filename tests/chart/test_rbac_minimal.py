"""RBAC proven minimal: the chart grants exactly the API calls the operator makes.

The real operator (kopf, in this event loop) runs against the API emulator, which records
every request as (verb, API group, resource, subresource, namespace). The scenario drives
every kind of write the operator's planner can make: a deployment is applied, reconciled
and becomes Ready; it is scaled up and down (pods created, deleted); its side-channel port
changes (Services patched, pods replaced, and the handshake Secret, lost just before,
created again with them: create only, the operator never reads Secrets); disruption
budgets come and go (a second decode pod brings decode's PodDisruptionBudget, scaling
back to one deletes it, prefill's maxUnavailable 0 creates prefill's, a second prefill
pod patches it); someone edits its NetworkPolicy (drift patched back); its router is
turned on, scaled and turned off (a Deployment created, patched, deleted), and while on
pairs within zones (its ServiceAccount, Role and RoleBinding created, the Role and the
binding repaired at the next reconcile after someone edits them, all three deleted when
the locality is turned off); a vLLM CPU
deployment's NIXL idle ConfigMap is created, repaired and deleted; a role is scaled
to 0 (its Service deleted); it gets
an invalid spec (status + Warning event). Then an llm-d deployment gets its InferencePool
(v1, the default), changes it and drops it; and one stored before the v1alpha2
InferencePool was removed is refused (status and an event, no call in either pool API
group). Throughout, the operator runs with leader election as the chart starts it: its
Lease (created, renewed, released) lives in the release namespace.
The test's own writes go through the emulator's admission in process (``put_object``,
not recorded), so every recorded call is the operator's.

Then, per mode (all namespaces, namespaced), per ``llmd.enabled`` and per
``llmd.inferencePoolVersions``, the calls are compared with the rules the chart renders,
both ways: a call the rules do not allow is
missing RBAC (the operator would get 403 in a cluster); a rule no call used is excess,
but for what the operator holds only to grant it to the router (kinds.DELEGATED), which
must then cover every rule of the router's Role.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from disagg_operator.api import kinds
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.election.leader import ElectionSettings, Elector
from disagg_operator.controller.run import running
from disagg_operator.render import router
from tests.chart.chartkit import (
    NAMESPACE,
    RELEASE,
    ROOT,
    Grant,
    grants,
    load,
    parse,
    render_files,
)
from tests.support.emulator import ApiCall, Emulator

NS = "team-a"
DD = "disagg.dev/v1alpha1/disaggregateddeployments"
POOL = "inference.networking.k8s.io/v1/inferencepools"
OLD_POOL = "inference.networking.x-k8s.io/v1alpha2/inferencepools"
MONITORING = "monitoring.coreos.com/v1"
SA = "disagg"
RBAC = "rbac.authorization.k8s.io/v1"


# --- scenario ---------------------------------------------------------------------------


def _manifest(name: str, **spec: Any) -> dict[str, Any]:
    body = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
    body["metadata"] = {"name": name, "namespace": NS}
    body["spec"].update(spec)
    return dict(body)


def _edit(emu: Emulator, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """A user's edit of the spec, through admission but not a recorded call."""
    body = copy.deepcopy(emu.find(DD, NS, name))
    assert body is not None
    change(body["spec"])
    emu.put_object(DD, body)


def _pods(emu: Emulator, name: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in emu.objects_of("v1/pods", NS)
        if p["metadata"].get("labels", {}).get("disagg.dev/deployment") == name
    ]


def _ready(emu: Emulator, name: str) -> dict[str, Any]:
    body = emu.find(DD, NS, name) or {}
    found = [c for c in body.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
    return found[0] if found else {}


def _pool_epp(emu: Emulator, name: str) -> str | None:
    pool = emu.find(POOL, NS, name)
    return str(pool["spec"]["endpointPickerRef"]["name"]) if pool else None


async def until(what: str, check: Callable[[], Any], timeout: float = 60.0) -> None:
    """Poll until ``check()`` is truthy; fail naming ``what`` (a liveness bound, not timing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


def _tamper(emu: Emulator, key: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Someone else edits a child (drift the operator must repair)."""
    obj = copy.deepcopy(emu.find(key, NS, name))
    assert obj is not None, name
    change(obj)
    emu.put_object(key, obj)


def _side_port(emu: Emulator, name: str) -> int | None:
    svc = emu.find("v1/services", NS, name)
    return svc["spec"]["ports"][1]["port"] if svc else None


def _budget(emu: Emulator, name: str) -> Any:
    pdb = emu.find("policy/v1/poddisruptionbudgets", NS, name)
    return pdb["spec"]["minAvailable"] if pdb else None


async def _plain_life(emu: Emulator) -> None:
    emu.put_object(DD, _manifest("demo"))
    await until("two pods", lambda: len(_pods(emu, "demo")) == 2)
    for pod in _pods(emu, "demo"):
        emu.set_pod_ready(NS, pod)
    await until("Ready", lambda: _ready(emu, "demo").get("status") == "True")
    _edit(emu, "demo", lambda s: s["decode"].update(replicas=2))
    await until("scaled up", lambda: len(_pods(emu, "demo")) == 3)
    await until("decode PodDisruptionBudget created", lambda: _budget(emu, "demo-decode") == 1)
    _edit(emu, "demo", lambda s: s["decode"].update(replicas=1))
    await until("scaled down", lambda: len(_pods(emu, "demo")) == 2)
    await until("decode PodDisruptionBudget removed", lambda: _budget(emu, "demo-decode") is None)
    emu.lose_object("v1/secrets", NS, "demo-handshake")  # gone: back with the new pods
    _edit(emu, "demo", lambda s: s.update(kvTransfer={"sideChannelPort": 6600}))
    await until("Services patched", lambda: _side_port(emu, "demo-decode") == 6600)
    await until("Secret back", lambda: emu.find("v1/secrets", NS, "demo-handshake"))
    _edit(emu, "demo", lambda s: s["prefill"].update(disruptionBudget={"maxUnavailable": 0}))
    await until("prefill PodDisruptionBudget created", lambda: _budget(emu, "demo-prefill") == 1)
    _edit(emu, "demo", lambda s: s["prefill"].update(replicas=2))
    await until("PodDisruptionBudget patched", lambda: _budget(emu, "demo-prefill") == 2)
    netpol = "networking.k8s.io/v1/networkpolicies"
    _tamper(emu, netpol, "demo-side-channel", lambda o: o["spec"].update(ingress=[]))
    await until(
        "NetworkPolicy repaired",
        lambda: emu.find(netpol, NS, "demo-side-channel")["spec"]["ingress"],
    )
    deploys = "apps/v1/deployments"
    _edit(emu, "demo", lambda s: s.update(router={"enabled": True}))
    await until("router Deployment", lambda: emu.find(deploys, NS, "demo-router"))
    _edit(emu, "demo", lambda s: s["router"].update(replicas=3))
    await until(
        "router Deployment patched",
        lambda: emu.find(deploys, NS, "demo-router")["spec"]["replicas"] == 3,
    )
    await _locality_life(emu)
    _edit(emu, "demo", lambda s: s["router"].update(enabled=False))
    await until("router Deployment removed", lambda: emu.find(deploys, NS, "demo-router") is None)
    _edit(emu, "demo", lambda s: s["decode"].update(replicas=0))
    await until(
        "decode Service removed", lambda: emu.find("v1/services", NS, "demo-decode") is None
    )
    _edit(emu, "demo", lambda s: s["prefill"].update(kvBufferDevice="cuda"))  # cpu: invalid
    await until("InvalidSpec", lambda: _ready(emu, "demo").get("reason") == "InvalidSpec")


async def _locality_life(emu: Emulator) -> None:
    """The router pairs within zones: its account, Role and binding come, the Role and
    the binding are repaired after someone edits them, and all go with the locality."""
    roles, bindings = f"{RBAC}/roles", f"{RBAC}/rolebindings"
    _edit(emu, "demo", lambda s: s.setdefault("routing", {}).update(
        transferLocality={"mode": "Required"}))  # fmt: skip
    await until("router Role", lambda: emu.find(bindings, NS, "demo-router"))
    assert emu.find("v1/serviceaccounts", NS, "demo-router")
    assert emu.find(roles, NS, "demo-router")["rules"] == [router.SLICE_READ]
    # edited by someone (not watched: repaired at the next reconcile, here a spec edit's)
    _tamper(emu, roles, "demo-router", lambda o: o.update(rules=[]))
    _tamper(emu, bindings, "demo-router", lambda o: o.update(subjects=[]))
    _edit(emu, "demo", lambda s: s["router"].update(replicas=2))
    await until("Role repaired", lambda: emu.find(roles, NS, "demo-router")["rules"])
    await until("RoleBinding repaired", lambda: emu.find(bindings, NS, "demo-router")["subjects"])
    _edit(emu, "demo", lambda s: s["routing"].pop("transferLocality"))
    await until("router access removed", lambda: emu.find(roles, NS, "demo-router") is None)
    await until("router account removed",
                lambda: emu.find("v1/serviceaccounts", NS, "demo-router") is None)  # fmt: skip


async def _vllm_life(emu: Emulator) -> None:
    """A vLLM CPU deployment: its engine-idle shim's ConfigMap is created, repaired when
    someone edits it, and deleted when both of the shim's levers are turned off."""
    body = yaml.safe_load((ROOT / "examples" / "vllm-cpu.yaml").read_text())
    body["metadata"] = {"name": "cpu", "namespace": NS}
    emu.put_object(DD, body)
    maps = "v1/configmaps"
    await until("shim ConfigMap", lambda: emu.find(maps, NS, "cpu-engine-idle"))
    _tamper(emu, maps, "cpu-engine-idle", lambda o: o.update(data={"sitecustomize.py": ""}))
    await until(
        "shim ConfigMap repaired",
        lambda: emu.find(maps, NS, "cpu-engine-idle")["data"]["sitecustomize.py"],
    )

    def off(spec: dict[str, Any]) -> None:
        spec["kvTransfer"].update(nixlProgressDelayMicroseconds=0)
        for role in ("prefill", "decode"):
            spec[role].update(queuePollMicroseconds=0, keepCpuAffinity=False)

    _edit(emu, "cpu", off)
    await until("shim ConfigMap removed", lambda: emu.find(maps, NS, "cpu-engine-idle") is None)


async def _groups_life(emu: Emulator) -> None:
    """examples/multinode-gpu.yaml: its prefill instance is a LeaderWorkerSet, created,
    then deleted when prefill scales to 0 (LWS are watched, created and deleted)."""
    body = yaml.safe_load((ROOT / "examples" / "multinode-gpu.yaml").read_text())
    body["metadata"] = {"name": "big", "namespace": NS}
    emu.put_object(DD, body)
    groups = "leaderworkerset.x-k8s.io/v1/leaderworkersets"
    await until("LeaderWorkerSet", lambda: emu.find(groups, NS, "big-prefill-0"))
    _edit(emu, "big", lambda s: s["prefill"].update(replicas=0))
    await until("LeaderWorkerSet deleted", lambda: emu.find(groups, NS, "big-prefill-0") is None)


async def _llmd_life(emu: Emulator) -> None:
    emu.put_object(DD, _manifest("pool", llmd={"enabled": True}))
    await until("InferencePool", lambda: _pool_epp(emu, "pool") == "pool-epp")
    new_ref = {"inferencePool": {"extensionRef": {"name": "other-epp"}}}
    _edit(emu, "pool", lambda s: s["llmd"].update(new_ref))
    await until("InferencePool changed", lambda: _pool_epp(emu, "pool") == "other-epp")
    _edit(emu, "pool", lambda s: s["llmd"].update(enabled=False))
    await until("InferencePool removed", lambda: _pool_epp(emu, "pool") is None)


async def _v1alpha2_stored(emu: Emulator) -> None:
    """An object stored while the CRD still offered v1alpha2 (written around admission, as
    the store holds it; the CRD now refuses it): refused with the fix, no pool anywhere."""
    admitted = copy.deepcopy(emu.put_object(DD, _manifest("old", llmd={"enabled": False})))
    admitted["spec"]["llmd"].update(enabled=True, inferencePool={"version": "v1alpha2"})
    emu.put_stored(DD, admitted)  # as stored under the CRD that still offered it
    await until("InvalidSpec", lambda: "v1.5.0 removed" in _ready_message(emu, "old"))
    assert emu.find(POOL, NS, "old") is None and emu.find(OLD_POOL, NS, "old") is None


def _ready_message(emu: Emulator, name: str) -> str:
    conditions = ((emu.find(DD, NS, name) or {}).get("status") or {}).get("conditions") or []
    return next((c.get("message", "") for c in conditions if c["type"] == "Ready"), "")


async def _monitoring_life(emu: Emulator) -> None:
    """PodMonitors and the PrometheusRule: created, changed, then removed (not watched, like
    InferencePools: read by name on each sync of the deployment)."""
    monitors, rules = f"{MONITORING}/podmonitors", f"{MONITORING}/prometheusrules"
    monitoring = {"enabled": True, "interval": "30s"}
    emu.put_object(DD, _manifest("mon", router={"enabled": True}, monitoring=monitoring))
    await until("PodMonitors", lambda: emu.find(monitors, NS, "mon-router"))
    await until("PrometheusRule", lambda: emu.find(rules, NS, "mon"))
    _edit(emu, "mon", lambda s: s["monitoring"].update(interval="1m", labels={"release": "p"}))
    await until(
        "PodMonitor patched",
        lambda: (
            emu.find(monitors, NS, "mon-prefill")["spec"]["podMetricsEndpoints"][0]["interval"]
            == "1m"
        ),
    )
    await until(
        "PrometheusRule patched",
        lambda: emu.find(rules, NS, "mon")["metadata"]["labels"].get("release") == "p",
    )
    _edit(emu, "mon", lambda s: s["monitoring"].update(enabled=False))
    await until("PodMonitors removed", lambda: emu.find(monitors, NS, "mon-router") is None)
    await until("PrometheusRule removed", lambda: emu.find(rules, NS, "mon") is None)
    # an autoscaled deployment: its profile ConfigMap read, Prometheus not reachable
    profile = {
        "prefill": {"curve": [[1, 1]], "start_s": 1},
        "decode": {"curve": [[1, 1]], "start_s": 1},
    }
    meta = {"name": "pools", "namespace": NS}
    data = {"profile.json": json.dumps(profile)}
    emu.put_object("v1/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                                     "data": data})  # fmt: skip
    autoscaling = {
        "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
        "profile": {"configMap": "pools"},
        "prefill": {"max": 2},
        "decode": {"max": 2},
        "periodSeconds": 1,
        "prometheusUrl": "http://127.0.0.1:9",
    }
    emu.put_object(DD, _manifest("auto", autoscaling=autoscaling, monitoring=monitoring))
    await until(
        "autoscaler asked",
        lambda: ((emu.find(DD, NS, "auto") or {}).get("status") or {}).get("autoscaling"),
    )


async def _record(emu: Emulator, namespaces: list[str]) -> list[list[ApiCall]]:
    """Calls the operator made by the end of each scenario: plain, + llm-d, + a stored
    v1alpha2 pool, + monitoring."""
    for ns in namespaces:  # kopf serves only namespaces it sees listed
        emu.put_object(
            "v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    host = str(emu.url).rstrip("/")
    # The chart's Lease: named after the release, in its namespace; renewed (an update)
    # every 0.5 s, so each scenario's calls include renewals, not only the creation.
    # Renewed every 0.5 s; a 25 s deadline rides out a loaded 2-core host's stalls (an
    # 8 s one lost the lease there, ending the scenario early).
    election = ElectionSettings(RELEASE, NAMESPACE, 30, 25.0, 0.5)
    elector = await Elector.connect(host, election, "op-0_test")
    try:
        async with running(
            OperatorConfig(host=host, namespaces=tuple(namespaces)), elector=elector
        ):
            await _plain_life(emu)
            await _vllm_life(emu)
            await _groups_life(emu)
            plain = len(emu.calls)
            await _llmd_life(emu)
            llmd = len(emu.calls)
            await _v1alpha2_stored(emu)
            both = len(emu.calls)
            await _monitoring_life(emu)
    finally:
        await elector.close()
    assert emu.find("coordination.k8s.io/v1/leases", NAMESPACE, RELEASE)  # released, kept
    return [emu.calls[:plain], emu.calls[:llmd], emu.calls[:both], list(emu.calls)]


# --- comparison -------------------------------------------------------------------------


def _used(calls: list[ApiCall], *, by_namespace: bool) -> set[Grant]:
    """Calls as grants: where ("" = cluster-wide), group, resource[/subresource], verb.

    Lease calls keep their namespace in every mode: the chart grants them there only."""
    return {
        (
            c.namespace if by_namespace or c.resource == "leases" else "",
            c.api_group,
            f"{c.resource}/{c.subresource}" if c.subresource else c.resource,
            c.verb,
        )
        for c in calls
    }


def _granted(values: dict[str, Any]) -> set[Grant]:
    return grants(parse(render_files(load(), values)), SA)


def _compare(used: set[Grant], granted: set[Grant]) -> None:
    missing = sorted(used - granted)
    delegated = {(g[1], g[2], g[3]) for g in granted} & {
        (group, resource, verb) for group, resource, verbs in kinds.DELEGATED for verb in verbs
    }
    unused = sorted(g for g in granted - used if (g[1], g[2], g[3]) not in delegated)
    assert not missing, f"the operator made calls the chart does not allow: {missing}"
    assert not unused, f"the chart grants what the operator never used: {unused}"


@pytest.mark.parametrize("mode", ["all-namespaces", "namespaced"])
async def test_chart_rbac_is_exactly_what_the_operator_uses(emulator: Emulator, mode: str) -> None:
    namespaced = mode == "namespaced"
    plain, llmd, pools, everything = await _record(emulator, [NS] if namespaced else [])
    values: dict[str, Any] = {"watchNamespaces": [NS]} if namespaced else {}
    both = {"enabled": True, "inferencePoolVersions": ["v1"]}
    for calls, chart_llmd, monitored in (
        (plain, {"enabled": False}, False),
        (llmd, {"enabled": True}, False),
        (pools, both, False),
        (everything, both, True),
    ):
        used = _used(calls, by_namespace=namespaced)
        chart = {**values, "llmd": chart_llmd, "monitoring": {"enabled": monitored}}
        _compare(used, _granted(chart))
        # the router's Role grants nothing the operator lacks (RBAC escalation check)
        held = {(g[1], g[2], g[3]) for g in _granted(chart)}
        rule = router.SLICE_READ
        assert {(rule["apiGroups"][0], rule["resources"][0], v) for v in rule["verbs"]} <= held
