"""What transfer locality writes and reads through the API, held to Kubernetes' own schemas
by the emulator: the router's ServiceAccount, Role and RoleBinding, an EndpointSlice whose
endpoints carry a zone (as the EndpointSlice controller writes it), and a zoned Node."""

from __future__ import annotations

import copy
from typing import Any

from disagg_operator.render.objects import render
from disagg_tools.emulator.rules import builtin
from disagg_tools.local.kubelet.rules import endpoints
from tests.operator.builders import body
from tests.operator.conftest import NS, api
from tests.support.emulator import Emulator

KEY = "k" * 32
NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {endpoints.ZONE: "zone-a"}}}  # fmt: skip


SERVICE = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "demo-decode", "namespace": NS},
           "spec": {"clusterIP": "None", "selector": {"app": "d"},
                    "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}}  # fmt: skip


def _slice(uid: str = "u") -> dict[str, Any]:
    """The controller's slice of SERVICE (its uid ``uid``) over one Ready pod on node-a."""
    service = copy.deepcopy(SERVICE)
    service["metadata"]["uid"] = uid
    pod = {"metadata": {"name": "d-0", "namespace": NS, "labels": {"app": "d"}},
           "spec": {"nodeName": "node-a", "containers": [{"name": "engine"}]},
           "status": {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}],
                      "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
    (piece,) = endpoints.endpoint_slices(service, [pod], {"node-a": NODE})
    return piece


def test_the_routers_access_objects_pass_their_kinds_schemas() -> None:
    spec = body(router={"enabled": True}, routing={"transferLocality": {"mode": "Required"}})
    kinds = {"ServiceAccount", "Role", "RoleBinding"}
    found = [o for o in render(spec, hmac_key=KEY) if o["kind"] in kinds]
    assert {o["kind"] for o in found} == kinds
    for obj in found:
        assert builtin.validator(obj["kind"], obj["apiVersion"]) is not None, obj["kind"]
        assert builtin.check(obj) == builtin.Findings([], []), obj["kind"]


def test_a_zoned_endpoint_and_node_pass_and_a_misspelt_zone_is_unknown() -> None:
    piece = _slice()
    assert piece["endpoints"][0]["zone"] == "zone-a"
    assert builtin.check(piece) == builtin.Findings([], [])
    assert builtin.check(NODE) == builtin.Findings([], [])
    wrong = copy.deepcopy(piece)
    wrong["endpoints"][0]["zones"] = wrong["endpoints"][0].pop("zone")
    assert builtin.check(wrong).unknown == ["endpoints[0].zones"]


async def test_the_emulator_stores_and_serves_an_endpoints_zone(emulator: Emulator) -> None:
    await api(emulator, "POST", "/api/v1/nodes", NODE)
    owner = await api(emulator, "POST", f"/api/v1/namespaces/{NS}/services", SERVICE)
    await api(emulator, "POST", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices",
              _slice(owner["metadata"]["uid"]))  # fmt: skip
    listed = await api(emulator, "GET", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices")
    (item,) = listed["items"]
    assert item["endpoints"][0]["zone"] == "zone-a"
    node = await api(emulator, "GET", "/api/v1/nodes/node-a")
    assert node["metadata"]["labels"][endpoints.ZONE] == "zone-a"
