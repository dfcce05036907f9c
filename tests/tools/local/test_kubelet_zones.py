"""Transfer locality on the local kubelet: two fake nodes (zone-a, zone-b) as Node objects
with the ``topology.kubernetes.io/zone`` label, toy-engine prefill and decode pods bound to
them, the kubelet's EndpointSlice controller writing each endpoint's zone from its Node (as
kube-controller-manager's does, k8s.io/endpointslice v0.36.3), and the real router pools
(cluster DNS: the kubelet's name table) reading those zones from the API: Required never
pairs across zones, Preferred falls back across zones when a zone has no decode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.api import LABEL_DEPLOYMENT
from disagg_tools.local.engines import BUILTIN
from disagg_tools.local.kubelet import run as kubelet_run
from disagg_tools.local.kubelet.node import Kubelet, NodeConfig
from disagg_tools.local.kubelet.rules.endpoints import ZONE, parse_hosts
from disagg_worker.serve.proxy.config import ProxyConfig
from disagg_worker.serve.proxy.discovery import Refresher
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.upstream import Pool
from disagg_worker.serve.proxy.zones import KubeApi, Zones
from tests.operator.builders import body
from tests.operator.conftest import DD_PATH, NS, api, until
from tests.support.emulator import Emulator
from tests.support.toy_engine.local import ToyLocal
from tests.support.toy_engine.pd import PROTOCOL

SLICES = "discovery.k8s.io/v1/endpointslices"
PORT = 8000
ROLE = "disagg.dev/role"


def _pod(name: str, role: str, node: str) -> dict[str, Any]:
    """A toy-engine pod of deployment ``zones``, bound to ``node`` (as a scheduler would)."""
    engine = {
        "name": "engine",
        "image": "example.com/toy:1",
        "command": ["toy-serve", "--role", role, "--listen", str(PORT)],
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 1},
    }
    labels = {LABEL_DEPLOYMENT: "zones", ROLE: role}
    meta = {"name": name, "namespace": NS, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [engine]}}  # fmt: skip


def _service(role: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"zones-{role}", "namespace": NS},
            "spec": {"clusterIP": "None", "selector": {LABEL_DEPLOYMENT: "zones", ROLE: role},
                     "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]}}  # fmt: skip


@pytest.fixture()
async def zoned(emulator: Emulator, tmp_path: Path) -> AsyncIterator[Kubelet]:
    """Two zoned nodes, the deployment object the pods' engine is looked up in (no operator
    runs: the test makes the pods), the Services, and the local kubelet."""
    for zone in ("zone-a", "zone-b"):
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"node-{zone}", "labels": {ZONE: zone}}}  # fmt: skip
        await api(emulator, "POST", "/api/v1/nodes", node)
    owner = body()
    owner["metadata"] = {"name": "zones", "namespace": NS}
    await api(emulator, "POST", DD_PATH, owner)
    for role in ("prefill", "decode"):
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/services", _service(role))
    # the deployment's engine (the CRD's reference) runs as the toy's local part: a light
    # server per pod, where the reference worker would load a model in each
    engines = {**BUILTIN, "reference": ToyLocal()}
    async with kubelet_run.running(
        str(emulator.url), tmp_path, NodeConfig(engines=engines)
    ) as kubelet:
        yield kubelet


async def _start(emulator: Emulator, pods: list[tuple[str, str, str]]) -> None:
    """Create ``pods`` (name, role, node) and wait until each is a ready endpoint with its
    node's zone."""
    for name, role, node in pods:
        await api(emulator, "POST", f"/api/v1/namespaces/{NS}/pods", _pod(name, role, node))

    def zoned_ready() -> bool:
        found = {
            e["targetRef"]["name"]: e
            for s in emulator.objects_of(SLICES, NS)
            for e in s.get("endpoints") or []
        }
        return all(
            n in found and found[n]["conditions"]["ready"] and found[n].get("zone") == node[5:]
            for n, _, node in pods
        )

    await until("every pod a ready endpoint with its node's zone", zoned_ready, 60)


async def _proxy(emulator: Emulator, kubelet: Kubelet, mode: str) -> Proxy:
    """The router's pools from the Services (the kubelet's name table standing for cluster
    DNS) and its zones from the API's EndpointSlices, under ``mode``."""

    async def resolve(host: str, port: int) -> list[str]:
        table = parse_hosts(kubelet.hosts_file(NS).read_text())
        if not table.get(host):
            raise OSError(f"{host}: NXDOMAIN")
        return [f"http://{ip}:{port}" for ip in table[host]]

    pools, refreshers = [], []
    for role in ("prefill", "decode"):
        host = f"zones-{role}.{NS}.svc"
        pools.append(Pool([], "round-robin", service=host))
        refreshers.append(Refresher(pools[-1], host, PORT, 0.2, resolve))
    zones = Zones(KubeApi(str(emulator.url), NS), ["zones-prefill", "zones-decode"], 0.2)
    config = ProxyConfig(policy="round-robin", protocol=PROTOCOL, locality=mode)
    proxy = Proxy(pools[0], pools[1], config, refreshers=refreshers, zones=zones)
    await proxy.start()
    return proxy


async def _pairs(proxy: Proxy, zones: Zones, n: int) -> list[tuple[Any, Any]]:
    """``n`` requests through the proxy: the (prefill zone, decode zone) of each."""
    out = []
    for i in range(n):
        answer = await proxy.complete(
            "/v1/completions", {"model": "toy", "prompt": f"p{i}", "max_tokens": 2}, {}
        )
        figures = answer["disagg"]["proxy"]
        out.append((zones.zone(figures["prefill_url"]), zones.zone(figures["decode_url"])))
    return out


async def test_required_locality_never_pairs_across_zones(
    emulator: Emulator, zoned: Kubelet
) -> None:
    # three prefills over two decodes: the two pools' turns never move in step, so a pair
    # stays in one zone only because the router keeps it there
    await _start(emulator, [
        ("prefill-a", "prefill", "node-zone-a"), ("prefill-a2", "prefill", "node-zone-a"),
        ("prefill-b", "prefill", "node-zone-b"),
        ("decode-a", "decode", "node-zone-a"), ("decode-b", "decode", "node-zone-b"),
    ])  # fmt: skip
    proxy = await _proxy(emulator, zoned, "Required")
    try:
        assert proxy.zones is not None
        pair = proxy.pairs.pairs[0]
        await until("both pools full",
                    lambda: (len(pair.prefill.backends), len(pair.decode.backends)) == (3, 2),
                    10)  # fmt: skip
        pairs = await _pairs(proxy, proxy.zones, 40)
    finally:
        await proxy.close()
    assert {p for p, _ in pairs} == {"zone-a", "zone-b"}  # both zones' prefills served
    crossed = [(p, d) for p, d in pairs if p != d]
    assert not crossed, crossed


async def test_preferred_locality_falls_back_across_zones_without_a_decode(
    emulator: Emulator, zoned: Kubelet
) -> None:
    await _start(emulator, [
        ("prefill-a", "prefill", "node-zone-a"), ("decode-b", "decode", "node-zone-b"),
    ])  # fmt: skip
    proxy = await _proxy(emulator, zoned, "Preferred")
    try:
        assert proxy.zones is not None
        await until("both pools", lambda: proxy.pairs.pairs[0].decode.backends, 10)
        pairs = await _pairs(proxy, proxy.zones, 4)
    finally:
        await proxy.close()
    assert pairs == [("zone-a", "zone-b")] * 4
