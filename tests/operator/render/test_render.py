"""Render: names, labels, owners, per-hardware engine config, and upstream schema validity."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pytest

from disagg_contract.config import WorkerConfig
from disagg_operator.api import HMAC_PATH, LABEL_KV_REVISION, SPEC_HASH
from disagg_operator.contracts import llmd
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive as vllm_derive
from disagg_operator.render import crd, derivation
from disagg_operator.render import pods as render_pods
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator import disruption
from tests.operator.builders import GPU, ROOT, body, by_kind, env_of, role, vllm_gpu_cpu

SPEC = DEFAULT.spec_model  # the spec with every built-in engine's fields

KEY = "secret-key"


def _pod(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in by_kind(objects, "Pod") if o["metadata"]["name"] == name)


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def test_children_names_and_stable_order() -> None:
    objects = render(body(prefill=role(replicas=2), decode=role(replicas=2)), hmac_key=KEY)
    kv = by_kind(objects, "Pod")[0]["metadata"]["labels"][LABEL_KV_REVISION]
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "demo-handshake"),
        ("Service", "demo-prefill"),
        ("Service", "demo-decode"),
        ("Service", f"demo-p-{kv}"),  # the canaries' way to this revision's prefill pods
        ("NetworkPolicy", "demo-side-channel"),
        ("PodDisruptionBudget", "demo-prefill"),
        ("PodDisruptionBudget", "demo-decode"),
        ("Pod", "demo-prefill-0"),
        ("Pod", "demo-prefill-1"),
        ("Pod", "demo-decode-0"),
        ("Pod", "demo-decode-1"),
    ]
    assert render(body(prefill=role(replicas=2), decode=role(replicas=2)), hmac_key=KEY) == objects


def test_every_child_is_owned_labelled_and_namespaced() -> None:
    for obj in render(body(uid="abc"), hmac_key=KEY):
        meta = obj["metadata"]
        assert meta["namespace"] == "ns"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "disagg.dev/v1alpha1",
                "kind": "DisaggregatedDeployment",
                "name": "demo",
                "uid": "abc",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["app.kubernetes.io/name"] == "disagg"
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "disagg-operator"
        assert meta["labels"]["disagg.dev/deployment"] == "demo"


def test_pods_and_services_carry_role_labels() -> None:
    for obj in render(body(), hmac_key=KEY):
        if obj["kind"] in {"Pod", "Service"}:
            short = obj["metadata"]["name"].split("-")[1]  # demo-<role>[-i] or demo-p-<kv>
            role_name = "prefill" if short == "p" else short
            assert obj["metadata"]["labels"]["disagg.dev/role"] == role_name
            assert obj["metadata"]["labels"]["llm-d.ai/role"] == role_name


def test_spec_hash_is_the_hash_of_labels_and_spec() -> None:
    for pod in by_kind(render(body(), hmac_key=KEY), "Pod"):
        expected = render_pods.spec_hash(pod["metadata"]["labels"], pod["spec"])
        assert pod["metadata"]["annotations"][SPEC_HASH] == expected


def _hashes(obj: dict[str, Any], key: str = KEY) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["metadata"]["annotations"][SPEC_HASH]
        for p in by_kind(render(obj, hmac_key=key), "Pod")
    }


def test_hash_moves_with_the_pod_spec_only() -> None:
    base = _hashes(body())
    assert _hashes(body(), key="other") == base  # key lives in the Secret only
    assert _hashes(body(uid="other-uid")) == base
    scaled = _hashes(body(prefill=role(replicas=3)))
    assert {k: scaled[k] for k in base} == base  # scaling does not replace pods
    changed = _hashes(body(decode=role(node_selector={"pool": "b"})))
    assert changed["demo-decode-0"] != base["demo-decode-0"]
    assert changed["demo-prefill-0"] == base["demo-prefill-0"]  # not in the KV key
    # a new reference image may change the cache layout: a new KV revision for both roles
    new_kv = _hashes(body(decode=role(image="example.com/other:2")))
    assert all(new_kv[name] != base[name] for name in base)


def test_routing_objects_select_one_kv_revision() -> None:
    """Services and the InferencePool select the routed KV revision (the spec's own by
    default), which every pod carries as a label."""
    obj = vllm_gpu_cpu(llmd={"enabled": True})
    objects = render(obj, hmac_key=KEY)
    kv = {p["metadata"]["labels"][LABEL_KV_REVISION] for p in by_kind(objects, "Pod")}
    assert len(kv) == 1
    for svc in by_kind(objects, "Service"):
        assert svc["spec"]["selector"][LABEL_KV_REVISION] in kv
    pool = by_kind(objects, "InferencePool")[0]
    assert pool["spec"]["selector"]["matchLabels"][LABEL_KV_REVISION] in kv
    older = render(obj, hmac_key=KEY, routed_kv="0123456789")
    assert {s["spec"]["selector"][LABEL_KV_REVISION] for s in by_kind(older, "Service")} == {
        "0123456789"
    }


def test_secret_holds_the_key() -> None:
    import base64

    secret = by_kind(render(body(), hmac_key=KEY), "Secret")[0]
    assert base64.b64decode(secret["data"]["hmac"]).decode() == KEY


def test_replicas_zero_removes_the_role() -> None:
    objects = render(body(prefill=role(replicas=0)), hmac_key=KEY)
    names = [o["metadata"]["name"] for o in objects]
    assert "demo-prefill" not in names and not any(n.startswith("demo-prefill-") for n in names)
    assert "demo-decode-0" in names


def test_a_disruption_budget_per_role_selects_its_pods() -> None:
    objects = render(body(prefill=role(replicas=2), decode=role(replicas=3)), hmac_key=KEY)
    budgets = {b["metadata"]["name"]: b for b in by_kind(objects, "PodDisruptionBudget")}
    assert list(budgets) == ["demo-prefill", "demo-decode"]
    for role_name in ("prefill", "decode"):
        budget = budgets[f"demo-{role_name}"]
        assert budget["apiVersion"] == "policy/v1"
        assert budget["metadata"]["labels"]["disagg.dev/role"] == role_name
        assert budget["spec"]["selector"] == {
            "matchLabels": {"disagg.dev/deployment": "demo", "disagg.dev/role": role_name}
        }
        selected = [
            p["metadata"]["name"]
            for p in by_kind(objects, "Pod")
            if budget["spec"]["selector"]["matchLabels"].items() <= p["metadata"]["labels"].items()
        ]
        assert selected and all(n.startswith(f"demo-{role_name}-") for n in selected)
        # an unready pod serves nothing: the budget never holds it (or a node drain) back
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_every_pod_lets_cluster_autoscaler_remove_its_node_unless_the_template_says_not() -> None:
    for pod in by_kind(render(body(), hmac_key=KEY), "Pod"):
        annotations = pod["metadata"]["annotations"]
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"
    template = {
        "metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}
    }
    kept = body(decode=role(podTemplate=template))
    pods = {
        p["metadata"]["labels"]["disagg.dev/role"]: p
        for p in by_kind(render(kept, hmac_key=KEY), "Pod")
    }
    assert (
        pods["decode"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
        == "false"
    )
    assert (
        pods["prefill"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
        == "true"
    )


SHAPES = [
    # (prefill, decode, prefill budget, decode budget)
    (2, 6, 1, 1),  # prefill follows decode at a ratio: fewer prefill pods than decode
    (6, 2, 1, 1),
    (3, 8, "50%", "25%"),
    (1, 4, 0, 1),  # 0: the single prefill pod is never evicted voluntarily
    (4, 1, "25%", 1),
    (1, 1, 1, 1),
    (5, 5, 2, "100%"),
]


@pytest.mark.parametrize(("prefill", "decode", "p_budget", "d_budget"), SHAPES)
def test_a_drain_takes_what_maxunavailable_says_per_the_disruption_controllers_arithmetic(
    prefill: int, decode: int, p_budget: int | str, d_budget: int | str
) -> None:
    """The cluster's disruption controller (modelled: no cluster here) sizes a budget
    from the pods' controller; the pods' controller is the DisaggregatedDeployment, whose
    scale subresource is decode's replicas. With all pods Ready a drain may take exactly
    maxUnavailable of a role's pods (a percentage of the role's pods, rounded up; every
    pod when there is no budget)."""
    obj = body(
        prefill=role(replicas=prefill, disruptionBudget={"maxUnavailable": p_budget}),
        decode=role(replicas=decode, disruptionBudget={"maxUnavailable": d_budget}),
    )
    objects = render(obj, hmac_key=KEY)
    budgets = {
        b["metadata"]["labels"]["disagg.dev/role"]: b
        for b in by_kind(objects, "PodDisruptionBudget")
    }
    pods = by_kind(objects, "Pod")
    for role_name, count, allowed in (("prefill", prefill, p_budget), ("decode", decode, d_budget)):
        of_role = [p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == role_name]
        assert len(of_role) == count
        want = allowed if isinstance(allowed, int) else -(-count * int(allowed[:-1]) // 100)
        budget = budgets.get(role_name)
        got = count if budget is None else disruption.disruptions_allowed(budget, pods, obj)
        assert got == min(want, count), (role_name, budget)


def test_a_budget_that_would_allow_every_eviction_is_not_created() -> None:
    """One pod and maxUnavailable 1 (the default): the budget could never refuse an
    eviction, so there is none; maxUnavailable 0 keeps it; more pods bring it back."""

    def budgets(**roles: Any) -> dict[str, Any]:
        found = by_kind(render(body(**roles), hmac_key=KEY), "PodDisruptionBudget")
        return {b["metadata"]["name"]: b["spec"].get("minAvailable") for b in found}

    assert budgets() == {}
    assert budgets(decode=role(replicas=2)) == {"demo-decode": 1}
    assert budgets(prefill=role(disruptionBudget={"maxUnavailable": 0})) == {"demo-prefill": 1}
    assert budgets(decode=role(replicas=4, disruptionBudget={"maxUnavailable": "100%"})) == {}


def test_a_disruption_budget_takes_a_count_or_a_percentage_or_is_turned_off() -> None:
    obj = body(
        prefill=role(replicas=3, disruptionBudget={"enabled": False}),
        decode=role(replicas=8, disruptionBudget={"maxUnavailable": "25%"}),
    )
    budgets = by_kind(render(obj, hmac_key=KEY), "PodDisruptionBudget")
    assert [(b["metadata"]["name"], b["spec"]["minAvailable"]) for b in budgets] == [
        ("demo-decode", 6)
    ]


def test_a_role_at_zero_replicas_has_no_disruption_budget() -> None:
    obj = body(prefill=role(replicas=0), decode=role(replicas=2))
    budgets = by_kind(render(obj, hmac_key=KEY), "PodDisruptionBudget")
    assert [b["metadata"]["name"] for b in budgets] == ["demo-decode"]


def test_pods_spread_across_nodes_by_default() -> None:
    for pod in by_kind(render(body(), hmac_key=KEY), "Pod"):
        role_name = pod["metadata"]["labels"]["disagg.dev/role"]
        assert pod["spec"]["topologySpreadConstraints"] == [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {
                    "matchLabels": {"disagg.dev/deployment": "demo", "disagg.dev/role": role_name}
                },
            }
        ]


def test_spread_constraints_given_are_used_and_an_empty_list_turns_them_off() -> None:
    zone = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
    }
    obj = body(
        prefill=role(topologySpreadConstraints=[]), decode=role(topologySpreadConstraints=[zone])
    )
    objects = render(obj, hmac_key=KEY)
    assert "topologySpreadConstraints" not in _pod(objects, "demo-prefill-0")["spec"]
    assert _pod(objects, "demo-decode-0")["spec"]["topologySpreadConstraints"] == [zone]


def _resolve(env: list[dict[str, Any]], pod_name: str, pod_ip: str) -> dict[str, str]:
    fields = {"metadata.name": pod_name, "status.podIP": pod_ip}
    out = {}
    for e in env:
        value = e.get("value")
        if value is None:
            value = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        out[e["name"]] = value
    return out


def test_reference_env_is_the_workers_own_contract() -> None:
    obj = body(prefill=role(), decode=role("cuda", resources=GPU))
    pod = _pod(render(obj, hmac_key=KEY), "demo-decode-0")
    container = _engine(pod)
    assert container["command"] == ["disagg", "worker", "serve"]
    env = _resolve(container["env"], "demo-decode-0", "10.0.0.7")
    config = WorkerConfig.from_env(env)
    assert config.role == "decode" and config.engine_id == "demo-decode-0"
    assert config.device == "cuda" and config.peer_device == "cpu"
    assert config.buffer_device == "cpu" and config.needs_staging
    assert config.advertised_host == "10.0.0.7"
    assert (config.http_host, config.side_channel_host) == ("0.0.0.0", "0.0.0.0")
    assert config.hmac_secret_path == HMAC_PATH
    mount = container["volumeMounts"][0]
    assert config.hmac_secret_path.startswith(mount["mountPath"] + "/")
    assert env["UCX_TLS"] == "rc,ud,tcp,cuda_copy,self"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {
        "http": config.http_port,
        "side-channel": config.side_channel_port,
        "metrics": config.metrics_port,  # the worker's /metrics-only listener
    }


def test_transfer_settings_reach_the_worker() -> None:
    kv = {
        "backends": ["UCX", "LIBFABRIC"],
        "sideChannelPort": 6000,
        "ucxTls": "tcp",
        "transferDeadlineSeconds": 2.5,
        "blockLeaseSeconds": 12,
    }
    pod = _pod(render(body(kvTransfer=kv), hmac_key=KEY), "demo-prefill-0")
    env = _resolve(_engine(pod)["env"], "p", "1.2.3.4")
    config = WorkerConfig.from_env(env)
    assert config.backends == ["UCX", "LIBFABRIC"] and config.side_channel_port == 6000
    assert (config.transfer_deadline_s, config.block_lease_s) == (2.5, 12.0)
    assert env["UCX_TLS"] == "tcp"


def _kv_config(container: dict[str, Any]) -> dict[str, Any]:
    command = container["command"]
    result: dict[str, Any] = json.loads(command[command.index("--kv-transfer-config") + 1])
    return result


def test_vllm_heterogeneous_gpu_prefill_cpu_decode() -> None:
    objects = render(vllm_gpu_cpu(), hmac_key=KEY)
    prefill, decode = (
        _engine(_pod(objects, "demo-prefill-0")),
        _engine(_pod(objects, "demo-decode-0")),
    )
    assert prefill["command"][:3] == ["vllm", "serve", "Qwen/Qwen3-0.6B"]
    assert prefill["command"][3:7] == ["--port", "8000", "--tensor-parallel-size", "1"]
    # untagged image: the newest profile (lease in extra config, compat off across devices)
    assert _kv_config(prefill) == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
        "kv_buffer_device": "cpu",
        "kv_connector_extra_config": {
            "backends": ["UCX"],
            "kv_lease_duration": 30,
            "enforce_handshake_compat": False,
        },
    }
    assert _kv_config(decode)["kv_role"] == "kv_consumer"
    assert _kv_config(decode)["kv_buffer_device"] == "cpu"
    p_env, d_env = env_of(prefill), env_of(decode)
    assert p_env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert p_env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
    assert p_env["UCX_TLS"] == "rc,ud,tcp,cuda_copy,self" and d_env["UCX_TLS"] == "tcp,self"
    assert not any(k.startswith("VLLM_CPU_") for k in p_env)
    assert "VLLM_NIXL_ABORT_REQUEST_TIMEOUT" not in p_env  # vLLM >= 0.22 ignores it
    assert d_env["VLLM_CPU_KVCACHE_SPACE"] == "9"  # floor((16 - 3) * 0.75)
    assert d_env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    # nothing spins (the engine-idle shim on): a CPU per rank reserved, not vLLM's 2
    assert d_env["OMP_NUM_THREADS"] == "7" and d_env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    assert prefill["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_vllm_gpu_to_gpu_uses_device_memory() -> None:
    gpu = role("cuda", resources=GPU)
    objects = render(body(engine="vllm", prefill=gpu, decode=gpu), hmac_key=KEY)
    assert _kv_config(_engine(_pod(objects, "demo-decode-0")))["kv_buffer_device"] == "cuda"


def test_cpu_engine_env_follows_the_pod_size() -> None:
    small = SPEC.model_validate(
        body(decode=role(resources={"limits": {"cpu": "1", "memory": "4Gi"}}))["spec"]
    ).decode
    assert vllm_derive.cpu_engine_env(small, vllm.NEWEST) == {
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "OMP_NUM_THREADS": "1",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "2",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    old = vllm.profile_for((0, 13, 0))
    assert vllm_derive.cpu_engine_env(small, old)["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"


def test_the_reserve_shrinks_to_a_cpu_per_rank_only_when_nothing_spins() -> None:
    """vLLM's P/D minimum (2 x TP from 0.20) is for its spinning engine core and NIXL
    thread; with both engine-idle levers on, one CPU per rank stays out of OpenMP."""
    limits = {"limits": {"cpu": "16", "memory": "32Gi"}}
    for tp, spin, free in ((1, "14", "15"), (2, "6", "7")):
        r = role(tensorParallelSize=tp, resources=limits)
        for levers, threads, reserve in (
            ({}, free, tp),
            ({"queuePollMicroseconds": 0}, spin, 2 * tp),
        ):
            obj = body(engine="vllm", decode={**r, **levers})
            env = env_of(_engine(_pod(render(obj, hmac_key=KEY), "demo-decode-0")))
            assert env["OMP_NUM_THREADS"] == threads, (tp, levers)
            assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == str(reserve), (tp, levers)
    obj = body(
        engine="vllm",
        kvTransfer={"nixlProgressDelayMicroseconds": 0},
        decode=role(resources=limits),
    )
    env = env_of(_engine(_pod(render(obj, hmac_key=KEY), "demo-decode-0")))
    assert env["OMP_NUM_THREADS"] == "14"  # NIXL's thread spins again: the version's 2
    old = vllm.profile_for((0, 13, 0))  # no P/D reserve in the version: never raised
    small = SPEC.model_validate(body(decode=role(resources=limits))["spec"]).decode
    assert vllm_derive.cpu_engine_env(small, old, spin_free=True)["OMP_NUM_THREADS"] == "15"


def test_cpu_engine_env_splits_threads_and_memory_per_rank() -> None:
    tp2 = SPEC.model_validate(
        body(
            decode=role(tensorParallelSize=2, resources={"limits": {"cpu": "9", "memory": "22Gi"}})
        )["spec"]
    ).decode
    env = vllm_derive.cpu_engine_env(tp2, vllm.NEWEST)
    assert env["OMP_NUM_THREADS"] == "2"  # (9 - 2 x 2 reserved) // 2
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "6"  # floor((22 - 2 * 3) * 0.75 / 2)
    assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "4"


def test_tensor_parallel_side_channel_ports() -> None:
    gpu4 = role("cuda", tensorParallelSize=4, resources={"limits": {"nvidia.com/gpu": 4}})
    obj = body(engine="vllm", prefill=gpu4, decode=gpu4)
    ports = [
        p["containerPort"]
        for p in _engine(_pod(render(obj, hmac_key=KEY), "demo-prefill-0"))["ports"]
    ]
    assert ports == [8000, 5600]  # one listener per engine from vLLM 0.11.1
    obj["spec"]["engine"]["version"] = "0.11.0"
    pod = _pod(render(obj, hmac_key=KEY), "demo-prefill-0")
    ports = [p["containerPort"] for p in _engine(pod)["ports"]]
    assert ports == [8000, 5600, 5601, 5602, 5603]  # 0.11.0: a listener per TP rank
    assert "--tensor-parallel-size" in _engine(pod)["command"]


def test_user_env_and_args_append() -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["env"] = [{"name": "EXTRA", "value": "1"}]
    obj["spec"]["decode"]["args"] = ["--max-num-seqs", "8"]
    engine = _engine(_pod(render(obj, hmac_key=KEY), "demo-decode-0"))
    names = [e["name"] for e in engine["env"]]
    assert names[-1] == "EXTRA" and engine["args"] == ["--max-num-seqs", "8"]


def test_placement_reaches_the_pod() -> None:
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    prefill = role(
        "cuda",
        resources=GPU,
        nodeSelector={"pool": "gpu"},
        tolerations=tol,
        affinity=affinity,
        image="example.com/vllm-gpu:v0.32.0",
        nixlVersion="1.5.0",
    )
    obj = body(engine="vllm", prefill=prefill, decode=role(nixlVersion="1.5.0"))
    obj["spec"]["engine"]["image"] = "example.com/vllm-cpu:v0.32.0"
    pod = _pod(render(obj, hmac_key=KEY), "demo-prefill-0")
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert pod["spec"]["tolerations"] == tol and pod["spec"]["affinity"] == affinity
    assert _engine(pod)["image"] == "example.com/vllm-gpu:v0.32.0"
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("demo-prefill-0", "demo-prefill")


LLMD = {
    "enabled": True,
    "routingSidecar": {"enabled": True, "image": llmd.IMAGE_EXAMPLE},
}


def test_routing_sidecar_fronts_decode() -> None:
    objects = render(vllm_gpu_cpu(llmd=LLMD), hmac_key=KEY)
    decode = _pod(objects, "demo-decode-0")
    sidecar = decode["spec"]["containers"][1]
    assert sidecar["name"] == "routing-proxy"
    assert sidecar["args"] == [  # llm-d-router >= v0.10.0 pd-sidecar flags
        "--port=8000",
        "--model-server-port=8200",
        "--kv-connector=nixlv2",
        "--secure-proxy=false",
    ]
    assert sidecar["ports"][0]["containerPort"] == 8000
    # the sidecar owns the pod's port: the pod is Ready only once it answers its /health
    # (llm-d-router v0.10.0 pkg/sidecar/proxy/proxy.go serves GET /health with 200)
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    engine = _engine(decode)
    assert engine["command"][engine["command"].index("--port") + 1] == "8200"
    assert len(_pod(objects, "demo-prefill-0")["spec"]["containers"]) == 1


def test_inference_pool_is_the_ga_v1_shape() -> None:
    """inference.networking.k8s.io/v1 (gateway-api-inference-extension api/v1): selector
    under matchLabels, a list of target ports, and an endpointPickerRef whose port is
    required for a Service (the v1 CEL rule; v1alpha2 inferred 9002)."""
    objects = render(vllm_gpu_cpu(llmd={"enabled": True}), hmac_key=KEY)
    pool = by_kind(objects, "InferencePool")[0]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["metadata"]["name"] == "demo"
    kv = pool["spec"]["selector"]["matchLabels"][LABEL_KV_REVISION]
    assert pool["spec"] == {
        "selector": {"matchLabels": {"disagg.dev/deployment": "demo", LABEL_KV_REVISION: kv}},
        "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "demo-epp", "port": {"number": 9002}},
    }
    for pod in by_kind(objects, "Pod"):  # the pool selects both roles' pods
        assert pool["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert not by_kind(render(vllm_gpu_cpu(), hmac_key=KEY), "InferencePool")


def test_inference_pool_endpoint_picker_port_and_failure_mode() -> None:
    ref = {"name": "epp", "port": 9100, "failureMode": "FailOpen"}
    llmd = {"enabled": True, "inferencePool": {"extensionRef": ref}}
    pool = by_kind(render(vllm_gpu_cpu(llmd=llmd), hmac_key=KEY), "InferencePool")[0]
    assert pool["spec"]["endpointPickerRef"] == {
        "name": "epp",
        "port": {"number": 9100},
        "failureMode": "FailOpen",
    }


def test_the_removed_v1alpha2_inference_pool_is_refused_with_the_migration() -> None:
    """gateway-api-inference-extension v1.5.0 removed the v1alpha2 CRD (#2796): a spec
    (or a stored object) that still names it gets the fix, and nothing is rendered."""
    llmd = {"enabled": True, "inferencePool": {"version": "v1alpha2"}}
    dd, problems = validation.parse(vllm_gpu_cpu(llmd=llmd))
    assert dd is None and [p.field for p in problems] == ["spec.llmd.inferencePool.version"]
    assert "v1.5.0 removed" in problems[0].message and "set v1" in problems[0].message
    schema = crd.build()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    llmd_schema = schema["properties"]["spec"]["properties"]["llmd"]["properties"]
    assert llmd_schema["inferencePool"]["properties"]["version"]["enum"] == ["v1"]


def _admitted(policy: dict[str, Any], source: dict[str, str], port: int) -> bool:
    """NetworkPolicy ingress semantics (a pod of the same namespace, TCP) for one
    connection: a peer's podSelector matches the pod's labels ({}: every pod); a
    namespaceSelector {} alone admits every namespace's pods."""

    def admits(peer: dict[str, Any]) -> bool:
        if "podSelector" in peer:
            return peer["podSelector"].get("matchLabels", {}).items() <= source.items()
        return peer.get("namespaceSelector") == {}

    for rule in policy["spec"]["ingress"]:
        peers = rule.get("from")
        source_ok = peers is None or any(admits(p) for p in peers)
        ports = rule.get("ports")
        port_ok = ports is None or any(
            p["port"] <= port <= p.get("endPort", p["port"]) for p in ports
        )
        if source_ok and port_ok:
            return True
    return False


def test_network_policy_admits_the_side_channel_only_from_this_deployment() -> None:
    objects = render(body(), hmac_key=KEY)
    policy = by_kind(objects, "NetworkPolicy")[0]
    pod_labels = by_kind(objects, "Pod")[0]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    other = {"disagg.dev/deployment": "someone-else"}
    assert _admitted(policy, pod_labels, 5600)
    assert _admitted(policy, pod_labels, 41234)  # UCX tcp data port
    assert not _admitted(policy, other, 5600)
    assert not _admitted(policy, {}, 41234)
    # the serving port: the router's pods by default, nobody else
    assert _admitted(policy, {"disagg.dev/router": "demo"}, 8000)
    assert not _admitted(policy, {"disagg.dev/router": "demo"}, 5600)
    assert not _admitted(policy, other, 8000)


@pytest.mark.parametrize(
    ("spec", "admitted", "refused"),
    [
        # llm-d: the namespace's pods (the gateway, the endpoint picker)
        ({"llmd": {"enabled": True}}, [{"app": "gateway"}], []),
        (
            {"servingAccess": [{"podSelector": {"matchLabels": {"app": "gw"}}}]},
            [{"app": "gw"}],
            [{"disagg.dev/router": "demo"}],
        ),
        ({"servingAccess": [{"namespaceSelector": {}}]}, [{"any": "pod"}], []),
        ({"servingAccess": []}, [], [{"disagg.dev/router": "demo"}, {"any": "pod"}]),
    ],
)
def test_serving_access_names_who_reaches_the_serving_port(
    spec: dict[str, Any], admitted: list[dict[str, str]], refused: list[dict[str, str]]
) -> None:
    policy = by_kind(render(body(**spec), hmac_key=KEY), "NetworkPolicy")[0]
    own = {"disagg.dev/deployment": "demo"}
    assert _admitted(policy, own, 8000) and _admitted(policy, own, 5600)
    for labels in admitted:
        assert _admitted(policy, labels, 8000) and not _admitted(policy, labels, 5600)
    for labels in refused:
        assert not _admitted(policy, labels, 8000)


def test_serving_access_peers_are_checked() -> None:
    bad = validation.parse(body(servingAccess=[{"podSelector": {"matchLabel": {}}}, {}]))[1]
    assert [p.field for p in bad] == [
        "spec.servingAccess[0].podSelector.matchLabel",
        "spec.servingAccess[1]",
    ]


def test_headless_services_select_their_role() -> None:
    objects = render(body(), hmac_key=KEY)
    for svc in by_kind(objects, "Service"):
        role_name = svc["metadata"]["labels"]["disagg.dev/role"]
        assert svc["spec"]["clusterIP"] == "None"
        selected = [
            p
            for p in by_kind(objects, "Pod")
            if svc["spec"]["selector"].items() <= p["metadata"]["labels"].items()
        ]
        assert [p["metadata"]["name"] for p in selected] == [f"demo-{role_name}-0"]


VARIANTS = {
    "reference-cpu": body(),
    "reference-cuda-decode": body(decode=role("cuda", resources=GPU)),
    "vllm-gpu-cpu": vllm_gpu_cpu(),
    "vllm-gpu-cpu-llmd": vllm_gpu_cpu(llmd=LLMD),
    "vllm-tp4": body(
        engine="vllm",
        prefill=role("cuda", tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}}),
        decode=role("cuda", tensorParallelSize=4, resources={"limits": {"nvidia.com/gpu": 4}}),
    ),
    "xpu-cpu": body(
        engine="vllm",
        prefill=role("xpu", resources={"limits": {"gpu.intel.com/i915": 1}}),
        decode=role("cpu"),
    ),
    "tpu-tpu": body(
        engine="vllm",
        prefill=role("tpu", tensorParallelSize=4, resources={"limits": {"google.com/tpu": 4}}),
        decode=role("tpu", tensorParallelSize=4, resources={"limits": {"google.com/tpu": 4}}),
    ),
    "vllm-rdma": body(
        engine="vllm",
        prefill=role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}),
        decode=role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}),
        kvTransfer={
            "rdma": {"resources": {"rdma/hca": 1}, "networks": ["rdma-net"], "gidIndex": 3}
        },
    ),
    "env-from-secret": body(
        prefill=role(
            env=[{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}]
        )
    ),
    "scaled": body(prefill=role(replicas=0), decode=role(replicas=3)),
    "scaling-fields": body(
        prefill={"device": "cpu", "perDecode": {"ratio": 0.5}},
        decode=role(
            replicas=4,
            disruptionBudget={"maxUnavailable": "25%"},
            topologySpreadConstraints=[
                {
                    "maxSkew": 2,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"disagg.dev/role": "decode"}},
                }
            ],
        ),
    ),
}


@pytest.mark.parametrize("obj", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_built_in_object_passes_upstream_schemas(obj: dict[str, Any]) -> None:
    for child in render(obj, hmac_key=KEY):
        if child["kind"] == "InferencePool":
            continue  # custom kind: its shape is checked in test_inference_pool_shape
        kubernetes_validate.validate(child, "1.31.0", strict=True)


def test_upstream_validation_really_rejects_a_broken_pod() -> None:
    pod = copy.deepcopy(by_kind(render(body(), hmac_key=KEY), "Pod")[0])
    pod["spec"]["containers"][0]["portz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, "1.31.0", strict=True)


def test_derivation_doc_is_generated_from_the_code() -> None:
    doc = (ROOT / "docs" / "derivation.md").read_text()
    assert derivation.derivation_table() in doc, (
        "docs/derivation.md is stale; paste the output of "
        "`python -m disagg_operator.render.derivation` into its table"
    )


def test_reference_pods_meet_pod_security_restricted() -> None:
    objects = render(body(), hmac_key=KEY)
    for pod in by_kind(objects, "Pod"):
        spec = pod["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert "add" not in security["capabilities"]


def test_vllm_pods_drop_privileges_but_may_run_as_root() -> None:
    objects = render(vllm_gpu_cpu(), hmac_key=KEY)
    for pod in by_kind(objects, "Pod"):
        assert "runAsNonRoot" not in pod["spec"]["securityContext"]
        assert _engine(pod)["securityContext"]["allowPrivilegeEscalation"] is False


def test_vllm_pods_on_an_image_with_a_non_root_user_run_as_it() -> None:
    """The project's vLLM image runs as uid 65532 (Dockerfile, vllm-cpu): its pods meet
    Pod Security restricted; a pool on vLLM's own image (root) is left as it is, and a
    podTemplate's securityContext wins over either."""
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["image"] = "ghcr.io/disagg-dev/disagg-vllm-cpu:0.32.0"
    obj["spec"]["engine"]["version"] = "0.32.0"
    obj["spec"]["prefill"]["nixlVersion"] = obj["spec"]["decode"]["nixlVersion"] = "1.5.0"
    objects = render(obj, hmac_key=KEY)
    decode = _pod(objects, "demo-decode-0")["spec"]["securityContext"]
    assert decode == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
    }
    assert "runAsNonRoot" not in _pod(objects, "demo-prefill-0")["spec"]["securityContext"]
    obj["spec"]["decode"]["podTemplate"] = {"spec": {"securityContext": {"runAsUser": 1000}}}
    decode = _pod(render(obj, hmac_key=KEY), "demo-decode-0")["spec"]["securityContext"]
    assert decode["runAsUser"] == 1000 and decode["runAsNonRoot"] is True


def test_model_config_lengths_reach_both_pools_as_one_flag_each() -> None:
    obj = vllm_gpu_cpu(modelConfig={"maxModelLen": 8192, "blockSize": 32, "dtype": "float16"})
    objects = render(obj, hmac_key=KEY)
    for name in ("demo-prefill-0", "demo-decode-0"):
        command = _engine(_pod(objects, name))["command"]
        assert command[command.index("--max-model-len") + 1] == "8192"
        assert command[command.index("--block-size") + 1] == "32"
        assert command[command.index("--dtype") + 1] == "float16"
        assert command[command.index("--kv-cache-dtype") + 1] == "auto"
    plain = _engine(_pod(render(body(engine="vllm"), hmac_key=KEY), "demo-decode-0"))["command"]
    for flag in ("--max-model-len", "--block-size", "--dtype", "--kv-cache-dtype"):
        assert flag not in plain  # a same-device pair leaves them to vLLM


def test_weights_memory_comes_out_of_a_cpu_pools_kv_space_not_its_kv_revision() -> None:
    """An 8B bf16 model (16 GiB) in a 64Gi decode pod: KV = (64 - 3 - 16) x 0.75 = 33 GiB,
    not the 45 GiB that would leave no room for the weights."""
    decode = {"limits": {"cpu": "16", "memory": "64Gi"}}

    def pods(**model: Any) -> list[dict[str, Any]]:
        obj = vllm_gpu_cpu(modelConfig=model)
        obj["spec"]["decode"]["resources"] = decode
        return by_kind(render(obj, hmac_key=KEY), "Pod")

    (decode_pod,) = [p for p in pods(weightsMemory="16Gi") if "decode" in p["metadata"]["name"]]
    assert env_of(_engine(decode_pod))["VLLM_CPU_KVCACHE_SPACE"] == "33"
    (plain,) = [p for p in pods() if "decode" in p["metadata"]["name"]]
    assert env_of(_engine(plain))["VLLM_CPU_KVCACHE_SPACE"] == "45"
    label = "disagg.dev/kv-revision"
    assert decode_pod["metadata"]["labels"][label] == plain["metadata"]["labels"][label]


def test_rendered_objects_share_no_dict_or_list() -> None:
    """Callers patch what render gives (keys.without_secrets, the plan): no two objects,
    and no two places in one, may hold the same dict or list."""
    objects = render(body(router={"enabled": True}, monitoring={"enabled": True}), hmac_key=KEY)
    seen: dict[int, str] = {}

    def walk(value: Any, where: str) -> None:
        if isinstance(value, (dict, list)):
            assert id(value) not in seen, f"{where} is the same object as {seen[id(value)]}"
            seen[id(value)] = where
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                walk(item, f"{where}.{key}")

    for obj in objects:
        walk(obj, f"{obj['kind']}/{obj['metadata']['name']}")
