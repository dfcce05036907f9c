"""Instances that span pods: one LeaderWorkerSet per instance, leaders serve, workers run
ranks headless; gang scheduling and placement where Volcano, Kueue and LWS read them; what
validation refuses.

The LeaderWorkerSet shape is kubernetes-sigs/lws v0.10.0's
(``config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml``): the fields and
enums below are that CRD's, restated here in the project's words; the rendered objects
were validated against the CRD itself (openapi-schema-validator) when this was written.
The pod templates are judged by the core/v1 Pod schema like every pod we render.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml

from disagg_operator.contracts import lws
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import ROOT, as_built_in, body, by_kind, env_of, role, spanning

KEY = "k" * 32
# LWS v0.10.0: spec, leaderWorkerTemplate and the enums of the policies we set.
LWS_SPEC_FIELDS = {"replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy"} | {
    "networkConfig"
}
LWS_TEMPLATE_FIELDS = {
    "leaderTemplate",
    "workerTemplate",
    "size",
    "restartPolicy",
    "subGroupPolicy",
    "volumeClaimTemplates",
    "persistentVolumeClaimRetentionPolicy",
}
RESTART_POLICIES = {"RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default"}
STARTUP_POLICIES = {"LeaderCreated", "LeaderReady"}
LEADER_ADDRESS = f"$({lws.ENV_LEADER_ADDRESS})"


def groups_of(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in by_kind(objects, lws.KIND)}


def _templates(group: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    t = group["spec"]["leaderWorkerTemplate"]
    return t["leaderTemplate"], t["workerTemplate"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_each_instance_of_a_spanning_role_is_one_leader_worker_set() -> None:
    objects = render(spanning(), hmac_key=KEY)
    groups = groups_of(objects)
    assert set(groups) == {"demo-prefill-0", "demo-prefill-1"}
    assert {p["metadata"]["name"] for p in by_kind(objects, "Pod")} == {"demo-decode-0"}
    group = groups["demo-prefill-0"]
    assert group["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert set(group["spec"]) <= LWS_SPEC_FIELDS
    assert group["spec"]["replicas"] == 1  # the planner counts instances, not LWS
    template = group["spec"]["leaderWorkerTemplate"]
    assert set(template) <= LWS_TEMPLATE_FIELDS and template["size"] == 2
    assert template["restartPolicy"] in RESTART_POLICIES
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert group["spec"]["startupPolicy"] in STARTUP_POLICIES
    assert group["metadata"]["ownerReferences"][0]["kind"] == "DisaggregatedDeployment"
    for pod in as_built_in(group):
        kubernetes_validate.validate(pod, "1.31.0", strict=True)


def test_the_leader_serves_and_the_worker_runs_headless_ranks() -> None:
    leader, worker = _templates(groups_of(render(spanning(), hmac_key=KEY))["demo-prefill-0"])
    lead, work = leader["spec"]["containers"], worker["spec"]["containers"]
    assert [c["name"] for c in work] == ["engine"]
    engine = lead[0]
    command = engine["command"]
    at = command.index("--nnodes")
    assert command[at : at + 6] == [
        *("--nnodes", "2", "--node-rank", f"$({lws.ENV_WORKER_INDEX})"),
        *("--master-addr", LEADER_ADDRESS),
    ]
    assert "--headless" not in command
    assert work[0]["command"] == [*command, "--headless"]
    assert "readinessProbe" in engine and "ports" in engine
    assert not {"ports", "readinessProbe", "livenessProbe", "startupProbe"} & set(work[0])
    assert env_of(work[0]) == env_of(engine)  # the same engine settings on every node
    # LWS names the pods and gives the group its Service: nothing of ours may fight it
    assert "hostname" not in leader["spec"] and "subdomain" not in leader["spec"]
    # one GPU per local rank: tensorParallelSize 2 over 2 pods
    assert engine["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_routing_selects_leaders_only_and_the_budget_counts_every_pod_of_a_group() -> None:
    obj = spanning(replicas=4, nodes=2, tp=2)
    obj["spec"]["prefill"]["disruptionBudget"] = {"maxUnavailable": 1}
    objects = render(obj, hmac_key=KEY)
    leader, worker = _templates(groups_of(objects)["demo-prefill-0"])
    service = next(
        s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "demo-prefill"
    )
    assert _selects(service["spec"]["selector"], leader["metadata"]["labels"])
    assert not _selects(service["spec"]["selector"], worker["metadata"]["labels"])
    budget = next(
        b for b in by_kind(objects, "PodDisruptionBudget") if "prefill" in b["metadata"]["name"]
    )
    assert _selects(budget["spec"]["selector"]["matchLabels"], worker["metadata"]["labels"])
    # 4 groups of 2 pods, one pod may go: any lost pod breaks its group, so 1 group down
    assert budget["spec"]["minAvailable"] == 4 * 2 - 1


def test_volcano_gang_scheduling_names_the_scheduler_and_the_queue() -> None:
    objects = render(spanning(gangScheduling={"scheduler": "Volcano", "queue": "q1"}), hmac_key=KEY)
    group = groups_of(objects)["demo-prefill-0"]
    assert group["metadata"]["annotations"][lws.VOLCANO_QUEUE] == "q1"
    assert all(t["spec"]["schedulerName"] == "volcano" for t in _templates(group))
    decode = by_kind(objects, "Pod")[0]  # one pod needs no gang
    assert "schedulerName" not in decode["spec"]


def test_kueue_admits_each_group_and_packs_it_into_one_domain() -> None:
    placement = {"group": {"topologyKey": "rack", "mode": "Preferred"}}
    gang = {"scheduler": "Kueue", "queue": "gpu"}
    group = groups_of(render(spanning(gangScheduling=gang, placement=placement), hmac_key=KEY))[
        "demo-prefill-0"
    ]
    assert group["metadata"]["labels"][lws.KUEUE_QUEUE] == "gpu"
    notes = [t["metadata"]["annotations"] for t in _templates(group)]
    assert all(n[lws.KUEUE_PREFERRED_TOPOLOGY] == "rack" for n in notes)
    assert len({n[lws.KUEUE_GROUP] for n in notes}) == 1  # the leader in its workers' domain
    assert lws.EXCLUSIVE_TOPOLOGY not in group["metadata"]["annotations"]


def test_without_kueue_a_required_group_placement_is_lws_exclusive_topology() -> None:
    group = groups_of(render(spanning(placement={"group": {"topologyKey": "rack"}}), hmac_key=KEY))[
        "demo-prefill-0"
    ]
    assert group["metadata"]["annotations"][lws.EXCLUSIVE_TOPOLOGY] == "rack"
    assert all(lws.KUEUE_GROUP not in t["metadata"]["annotations"] for t in _templates(group))


@pytest.mark.parametrize("mode", ["Required", "Preferred"])
def test_prefill_near_decode_is_a_pod_affinity_beside_the_roles_own(mode: str) -> None:
    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]
            }
        }
    }
    obj = body(placement={"prefillNearDecode": {"topologyKey": "zone", "mode": mode}})
    obj["spec"]["prefill"]["affinity"] = copy.deepcopy(own)
    objects = render(obj, hmac_key=KEY)
    prefill = next(p for p in by_kind(objects, "Pod") if "prefill" in p["metadata"]["name"])
    decode = next(p for p in by_kind(objects, "Pod") if "decode" in p["metadata"]["name"])
    affinity = prefill["spec"]["affinity"]
    assert affinity["nodeAffinity"] == own["nodeAffinity"]
    terms = affinity["podAffinity"]
    if mode == "Required":
        (term,) = terms["requiredDuringSchedulingIgnoredDuringExecution"]
    else:
        (weighted,) = terms["preferredDuringSchedulingIgnoredDuringExecution"]
        term = weighted["podAffinityTerm"]
    assert term["topologyKey"] == "zone"
    assert _selects(term["labelSelector"]["matchLabels"], decode["metadata"]["labels"])
    assert obj["spec"]["prefill"]["affinity"] == own  # the spec is not changed
    assert "affinity" not in decode["spec"]


def test_a_kv_change_makes_new_groups_and_a_template_change_new_hashes() -> None:
    before = groups_of(render(spanning(), hmac_key=KEY))["demo-prefill-0"]
    changed = spanning(modelConfig={"maxModelLen": 4096})
    after = groups_of(render(changed, hmac_key=KEY))["demo-prefill-0"]
    kv = "disagg.dev/kv-revision"
    assert before["metadata"]["labels"][kv] != after["metadata"]["labels"][kv]
    gang = groups_of(render(spanning(gangScheduling={"scheduler": "Volcano"}), hmac_key=KEY))
    hash_of = lambda g: g["metadata"]["annotations"]["disagg.dev/spec-hash"]  # noqa: E731
    assert hash_of(gang["demo-prefill-0"]) != hash_of(before)  # a group setting replaces it


def _problems(obj: dict[str, Any]) -> dict[str, str]:
    return {p.field: p.message for p in validation.parse(obj)[1]}


def test_the_reference_engines_pods_learn_their_place_from_the_lws_environment() -> None:
    obj = body(prefill=role(tensorParallelSize=2, nodesPerInstance=2))
    leader, worker = _templates(groups_of(render(obj, hmac_key=KEY))["demo-prefill-0"])
    lead, work = leader["spec"]["containers"][0], worker["spec"]["containers"][0]
    assert lead["command"] == work["command"] == ["disagg", "worker", "serve"]
    group = {k: v for k, v in env_of(work).items() if k.startswith("DISAGG_NOD") or "LEADER" in k}
    assert group == {
        "DISAGG_NODES": "2",
        "DISAGG_NODE_RANK": f"$({lws.ENV_WORKER_INDEX})",
        "DISAGG_LEADER_ADDRESS": LEADER_ADDRESS,
    }
    assert env_of(lead) == env_of(work)
    found = _problems(body(prefill=role(nodesPerInstance=2)))  # one rank cannot be split
    assert "tensorParallelSize 1 has one rank" in found["spec.prefill.nodesPerInstance"]
    user = body(prefill=role(tensorParallelSize=2, env=[{"name": "DISAGG_NODES", "value": "3"}]))
    assert "DISAGG_NODES" in " ".join(_problems(user).values())


def test_vllm_before_0_11_1_refuses_to_span_pods() -> None:
    obj = spanning()
    obj["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.11.0"
    assert "0.11.1" in _problems(obj)["spec.prefill.nodesPerInstance"]


def test_ranks_that_do_not_divide_over_the_pods_are_refused() -> None:
    obj = spanning(nodes=2, tp=2)
    obj["spec"]["prefill"]["nodesPerInstance"] = 4
    message = _problems(obj)["spec.prefill.nodesPerInstance"]
    assert "tensorParallelSize 2 (2 ranks) cannot be spread evenly over 4 pods" in message


def test_devices_are_counted_per_pod_of_an_instance() -> None:
    obj = spanning(nodes=2, tp=4)
    obj["spec"]["prefill"]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
    message = _problems(obj)["spec.prefill.resources.limits[nvidia.com/gpu]"]
    assert "tensorParallelSize 4 over 2 pods" in message and "set it to 2" in message


def test_gang_scheduling_and_group_placement_need_a_spanning_role() -> None:
    found = _problems(
        body(gangScheduling={"scheduler": "Volcano"}, placement={"group": {"topologyKey": "r"}})
    )
    assert "no role's nodesPerInstance is above 1" in found["spec.gangScheduling"]
    assert "no role's nodesPerInstance is above 1" in found["spec.placement.group"]


def test_kueue_needs_a_queue_and_a_name_its_workloads_can_take() -> None:
    found = _problems(spanning(gangScheduling={"scheduler": "Kueue"}))
    assert "LocalQueue" in found["spec.gangScheduling.queue"]
    long = spanning(gangScheduling={"scheduler": "Kueue", "queue": "q"})
    long["metadata"]["name"] = "a-rather-longer-deployment-name"
    assert "too long for Kueue" in _problems(long)["metadata.name"]


def test_a_name_whose_groups_lws_cannot_take_is_refused_naming_the_lws_limit() -> None:
    """LWS v0.10.0 (site/content/en/docs/troubleshooting, section 3): a LeaderWorkerSet of
    one replica named over 51 characters gets worker pods the API server refuses (their
    StatefulSet's controller-revision-hash label passes 63)."""
    obj = spanning()
    obj["metadata"]["name"] = "d" * 48  # its groups: d...d-prefill-0, 58 characters
    message = _problems(obj)["metadata.name"]
    assert f"exceeds {lws.LWS_MAX_NAME} characters" in message
    assert "use a name of at most 41 characters" in message
    longest = f"{'d' * 41}-prefill-0"
    obj["metadata"]["name"] = "d" * 41
    assert len(longest) == lws.LWS_MAX_NAME and "metadata.name" not in _problems(obj)


def test_derived_multinode_flags_are_refused_in_args() -> None:
    obj = spanning()
    obj["spec"]["prefill"]["args"] = ["--nnodes", "3"]
    assert "set spec.prefill.nodesPerInstance" in _problems(obj)["spec.prefill.args[0]"]


def test_a_vllm_cpu_pod_of_a_group_is_sized_for_its_own_share_of_the_ranks() -> None:
    """examples/vllm-cpu.yaml's 6Gi pods hold one rank, not two: TP 2 in one pod is
    refused, TP 2 over two pods is not, and each pod's KV cache and threads are one rank's."""
    body = yaml.safe_load((ROOT / "examples" / "vllm-cpu.yaml").read_text())
    body["metadata"]["uid"] = "u"
    body["spec"]["prefill"]["tensorParallelSize"] = 2
    body["spec"]["decode"]["tensorParallelSize"] = 2
    found = _problems(body)
    assert "spec.prefill.resources.limits.memory" in found  # two ranks in 6Gi: too little
    body["spec"]["prefill"]["nodesPerInstance"] = 2
    body["spec"]["decode"]["nodesPerInstance"] = 2
    assert _problems(body) == {}
    leader, _ = _templates(groups_of(render(body, hmac_key=KEY))["vllm-cpu-prefill-0"])
    env = env_of(leader["spec"]["containers"][0])
    one = copy.deepcopy(body)
    one["spec"]["prefill"].update(tensorParallelSize=1, nodesPerInstance=1)
    one["spec"]["decode"].update(tensorParallelSize=1, nodesPerInstance=1)
    pod = next(
        p for p in by_kind(render(one, hmac_key=KEY), "Pod") if "prefill" in p["metadata"]["name"]
    )
    alone = env_of(pod["spec"]["containers"][0])
    for name in ("VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS"):
        assert env[name] == alone[name], name  # a pod's rank is sized as a TP 1 pod's
