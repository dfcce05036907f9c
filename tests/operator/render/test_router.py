"""spec.router: the disagg proxy as a Deployment and a ClusterIP Service in front of every
ready pod, paired within each KV revision it is told of (with llm-d: the role Services)."""

from __future__ import annotations

import dataclasses
from typing import Any

import kubernetes_validate
import pytest

from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render.objects import render, selector
from disagg_operator.validation import spec as validation
from disagg_worker.serve.proxy import app as proxy
from disagg_worker.serve.proxy.config import from_args
from tests.operator.builders import body

KEY = "k" * 32


def _router(obj: dict[str, Any], **kw: Any) -> dict[str, dict[str, Any]]:
    return {
        o["kind"]: o
        for o in render(obj, hmac_key=KEY, **kw)
        if o["metadata"]["name"].endswith("-router")
    }


def test_no_router_unless_asked() -> None:
    assert _router(body()) == {}


def test_the_router_resolves_the_role_services_and_listens_on_all_interfaces() -> None:
    got = _router(body(router={"enabled": True, "replicas": 2, "policy": "least-loaded"}))
    service, deployment = got["Service"], got["Deployment"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    ]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "example.com/reference:1"  # the decode image has `disagg`
    assert container["command"] == ["disagg", "proxy"]
    # the rendered arguments are what `disagg proxy` parses
    args = proxy._parser().parse_args(container["args"])
    assert args.prefill_service == "demo-p-{kv}.ns.svc:8000"
    assert args.decode_service == "demo-d-{kv}.ns.svc:8000"
    (kv,) = args.kv_revision  # the spec's revision: the only one with pods from the start
    (pair,) = proxy.pools(args)[0].pairs
    assert pair.prefill.service == f"demo-p-{kv}.ns.svc:8000"
    assert (args.host, args.port, args.policy) == ("0.0.0.0", 8080, "least-loaded")
    # each revision's Services select that revision's pods of one role
    services = {
        o["metadata"]["name"]: o["spec"]["selector"]
        for o in render(body(router={"enabled": True}), hmac_key=KEY)
        if o["kind"] == "Service"
    }
    for short, role in (("p", "prefill"), ("d", "decode")):
        assert services[f"demo-{short}-{kv}"] == {
            "disagg.dev/deployment": "demo",
            "disagg.dev/role": role,
            "disagg.dev/kv-revision": kv,
        }
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_two_routers_by_default_spread_over_nodes_and_kept_one_at_a_time() -> None:
    got = _router(body(router={"enabled": True}))
    deployment, budget = got["Deployment"], got["PodDisruptionBudget"]
    assert deployment["spec"]["replicas"] == 2  # one router pod fails every request with it
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"] == {
        "selector": {"matchLabels": labels},
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"  # fewer nodes still schedule
    assert spread["labelSelector"] == {"matchLabels": labels}
    # one router: no budget, which could only block a node drain
    assert set(_router(body(router={"enabled": True, "replicas": 1}))) == {"Service", "Deployment"}


def test_router_pods_are_never_counted_as_the_deployments_pods() -> None:
    pod = _router(body(router={"enabled": True}))["Deployment"]["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert not set(selector("demo").items()) <= set(labels.items())


def test_a_vllm_router_takes_the_operators_worker_image() -> None:
    settings = dataclasses.replace(DEFAULT, canary_image="example.com/worker-cpu:1")
    obj = body(engine="vllm", router={"enabled": True})
    got = _router(obj, settings=settings)
    assert got["Deployment"]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "example.com/worker-cpu:1"
    )
    (p,) = validation.parse(obj)[1]  # without one: refused, naming the field
    assert p.field == "spec.router.image" and "--canary-image" in p.message
    obj["spec"]["router"]["image"] = "example.com/mine:1"
    assert validation.parse(obj)[1] == []


@pytest.mark.parametrize(
    ("router", "field", "says"),
    [
        (
            {"enabled": True, "resources": {"limits": {"cpu": [1]}}},
            "resources.limits.cpu",
            "integer",
        ),
        ({"enabled": True, "replicas": -1}, "spec.router.replicas", "greater than or equal"),
    ],
)
def test_bad_router_fields_are_refused(router: dict[str, Any], field: str, says: str) -> None:
    problems = validation.parse(body(router=router))[1]
    assert len(problems) == 1 and field in problems[0].field and says in problems[0].message


def test_the_router_and_the_llmd_sidecar_are_one_router_too_many() -> None:
    obj = body(
        router={"enabled": True},
        llmd={"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1"}},
    )
    fields = [p.field for p in validation.parse(obj)[1]]
    assert fields == ["spec.router.enabled"]


def test_the_router_passes_the_upstream_schemas() -> None:
    for child in _router(body(router={"enabled": True})).values():
        kubernetes_validate.validate(child, "1.31.0", strict=True)


def _routing(obj: dict[str, Any]) -> Any:
    """The routing policy `disagg proxy` builds from the rendered router's arguments."""
    settings = dataclasses.replace(DEFAULT, canary_image="example.com/worker-cpu:1")
    deployment = _router(obj, settings=settings)["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return from_args(proxy._parser().parse_args(container["args"])).routing


def test_the_router_always_disaggregates_by_default() -> None:
    got = _routing(body(router={"enabled": True}))
    assert (got.mode, got.prefix_cache) == ("always", False)  # the reference keeps no cache


@pytest.mark.parametrize(
    ("decode", "model", "block"),
    [
        ({}, {}, 128),  # vLLM's CPU default block (vllm/platforms/cpu.py)
        # vLLM's GPU default (config/cache.py: 64 from 0.34.0; no version: the newest checked)
        ({"device": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}, {}, 64),
        ({}, {"blockSize": 64}, 64),
        ({"args": ["--no-enable-prefix-caching"]}, {}, None),
    ],
)
def test_the_threshold_policy_reaches_the_router_with_the_engines_prefix_cache(
    decode: dict[str, Any], model: dict[str, Any], block: int | None
) -> None:
    routing = {"disaggregate": "threshold", "thresholdTokens": 300, "prefillQueueLimit": 4}
    prefill = {
        "device": decode.get("device", "cpu"),
        **{k: v for k, v in decode.items() if k == "resources"},
    }
    obj = body(
        engine="vllm", prefill=prefill, decode={"device": "cpu", **decode},
        router={"enabled": True}, routing=routing, modelConfig=model,
    )  # fmt: skip
    got = _routing(obj)
    assert (got.mode, got.threshold_tokens, got.prefill_queue_limit) == ("threshold", 300, 4)
    assert got.prefix_cache is (block is not None)
    if block is not None:
        assert got.block_tokens == block


def test_behind_llm_d_the_router_follows_the_role_services() -> None:
    llmd = {"enabled": True}
    args = proxy._parser().parse_args(
        _router(body(router={"enabled": True}, llmd=llmd))["Deployment"]["spec"]["template"][
            "spec"
        ]["containers"][0]["args"]
    )
    assert args.prefill_service == "demo-prefill.ns.svc:8000" and args.kv_revision is None


def test_the_router_is_told_every_revision_it_pairs_within() -> None:
    dd, _ = validation.parse(body(router={"enabled": True}))
    assert dd is not None
    from disagg_operator.render.kvkey import Revisions, kv_revision
    from disagg_operator.render.objects import render_model

    kv = Revisions(kv_revision(dd.spec, DEFAULT), serving=["aaa", "bbb"])
    objects = render_model(dd, uid="u", hmac_key=KEY, revisions=kv)
    deploy = next(o for o in objects if o["kind"] == "Deployment")
    args = proxy._parser().parse_args(deploy["spec"]["template"]["spec"]["containers"][0]["args"])
    assert args.kv_revision == ["aaa", "bbb"]
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    assert {"demo-p-aaa", "demo-d-aaa", "demo-p-bbb", "demo-d-bbb"} <= names
