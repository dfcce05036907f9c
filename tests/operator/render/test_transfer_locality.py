"""spec.routing.transferLocality: rendered as the router's ``--transfer-locality``, which
`disagg proxy` parses into its settings and a zone source over the very Services it pairs
within (their EndpointSlices, in the deployment's namespace), and as the router's own
ServiceAccount with a Role that reads EndpointSlices there and nothing else."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from disagg_operator.api import DeploymentSpec
from disagg_operator.render.objects import render
from disagg_worker.serve.proxy import app as proxy
from disagg_worker.serve.proxy.config import from_args
from disagg_worker.serve.proxy.rules.locality import MODES
from tests.operator.builders import body

KEY = "k" * 32


def _router_args(**routing: Any) -> list[str]:
    obj = body(router={"enabled": True}, routing=routing)
    (deployment,) = [o for o in render(obj, hmac_key=KEY) if o["kind"] == "Deployment"]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_the_spec_offers_the_modes_the_router_takes() -> None:
    schema = DeploymentSpec.model_json_schema(by_alias=True)
    locality = schema["$defs"]["TransferLocality"]["properties"]["mode"]
    assert tuple(locality["enum"]) == MODES


def test_no_flag_and_no_zone_source_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    args = proxy._parser().parse_args(_router_args())
    assert from_args(args).locality is None
    assert proxy.zones_of(args, proxy.pools(args)[1]) is None


@pytest.mark.parametrize("mode", MODES)
def test_the_mode_is_the_routers_flag_and_its_zones_are_its_services(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = _router_args(transferLocality={"mode": mode})
    assert rendered[rendered.index("--transfer-locality") + 1] == mode
    args = proxy._parser().parse_args(rendered)
    assert from_args(args).locality == mode
    # in the pod: the API server from the Service env the kubelet sets
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    pairs, refreshers = proxy.pools(args)
    zones = proxy.zones_of(args, refreshers)
    assert zones is not None
    assert zones.api.url == "https://10.96.0.1:443" and zones.api.namespace == "ns"
    (pair,) = pairs.pairs
    names = {pool.service.split(".")[0] for pool in (pair.prefill, pair.decode)}
    assert set(zones.services) == names


def test_without_an_api_server_the_router_pairs_without_zones_and_says_which_flag(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # outside a cluster (the local kubelet runs the router with no API server in its env)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = proxy._parser().parse_args(_router_args(transferLocality={"mode": "Required"}))
    assert proxy.zones_of(args, proxy.pools(args)[1]) is None
    assert "give --kube-api URL; pairing without zones" in caplog.text


def test_workers_given_as_urls_have_no_zone_source(caplog: pytest.LogCaptureFixture) -> None:
    # `disagg up` runs the router with the manifest's flags and worker URLs on one host
    args = proxy._parser().parse_args(
        ["--prefill", "http://a:1", "--decode", "http://b:1", "--transfer-locality", "Preferred"]
    )
    assert proxy.zones_of(args, proxy.pools(args)[1]) is None
    assert "workers given as URLs have no zones" in caplog.text


def _by_kind(**routing: Any) -> dict[str, dict[str, Any]]:
    obj = body(router={"enabled": True}, routing=routing)
    return {
        o["kind"]: o for o in render(obj, hmac_key=KEY) if o["metadata"]["name"] == "demo-router"
    }


def test_the_router_reads_endpointslices_of_its_namespace_as_its_own_account() -> None:
    got = _by_kind(transferLocality={"mode": "Preferred"})
    assert {"ServiceAccount", "Role", "RoleBinding", "Deployment"} <= set(got)
    pod = got["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "demo-router"
    assert pod.get("automountServiceAccountToken", True)  # its token is how it reads
    role, binding = got["Role"], got["RoleBinding"]
    assert role["metadata"]["namespace"] == "ns"  # a Role: its namespace only
    assert role["rules"] == [
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
         "verbs": ["get", "list", "watch"]}
    ]  # fmt: skip
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "demo-router"
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "demo-router", "namespace": "ns"}
    ]
    for obj in (got["ServiceAccount"], role, binding):
        kubernetes_validate.validate(obj, "1.31.0", strict=True)


def test_without_locality_the_router_has_no_account_of_its_own() -> None:
    got = _by_kind()
    assert not {"ServiceAccount", "Role", "RoleBinding"} & set(got)
    assert "serviceAccountName" not in got["Deployment"]["spec"]["template"]["spec"]
