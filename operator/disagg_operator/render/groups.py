"""Instances that span pods: one LeaderWorkerSet per instance of a role whose
``nodesPerInstance`` is above 1, from the pod render gives that instance.

:func:`leader_worker_set` turns the rendered pod
``<name>-<role>-<i>`` into the LeaderWorkerSet of the same name (one group, ``replicas``
1): its leader is that pod (it serves, runs the engine core and the side channel, and
carries the KV-revision label the role Services and the InferencePool select); its
``nodesPerInstance - 1`` workers run the same engine command plus the engine's worker
arguments, with no serving port, probe or sidecar, and without the KV-revision label, so
no router and no Service ever picks one. The planner counts, creates and deletes these
objects as it does pods (:mod:`disagg_operator.planning.pods`, :func:`as_instance`): one
LWS is one replica. The template never changes after creation (a new spec is a new
object, as for pods), so LWS's own rolling update never runs and a KV rollout keeps its
pairs (docs/multinode.md says why this shape).

Gang scheduling (``spec.gangScheduling``) and group placement (``spec.placement.group``)
are written where Volcano, Kueue and LWS read them (:mod:`disagg_operator.contracts.lws`).
"""

from __future__ import annotations

from typing import Any

from disagg_operator.api import LABEL_KV_REVISION, LABEL_LLMD_ROLE, SPEC_HASH, DeploymentSpec
from disagg_operator.contracts import lws
from disagg_operator.render.pods import ENGINE, spec_hash

# What a worker's engine container does not get: it serves nothing (a headless rank), so
# it has no port to probe and nothing for a router to find.
_SERVING = ("ports", "readinessProbe", "livenessProbe", "startupProbe")


def spans(spec: DeploymentSpec, role: str) -> bool:
    """Whether an instance of ``role`` spans pods (a LeaderWorkerSet per instance)."""
    return spec.role(role).nodes_per_instance > 1


def leader_worker_set(
    pod: dict[str, Any], spec: DeploymentSpec, role: str, worker_args: list[str]
) -> dict[str, Any]:
    """The LeaderWorkerSet standing for the rendered ``pod`` of a spanning ``role``;
    ``worker_args``: what the engine adds on a worker pod."""
    meta = pod["metadata"]
    leader_spec = {k: v for k, v in pod["spec"].items() if k not in ("hostname", "subdomain")}
    annotations = {k: v for k, v in meta["annotations"].items() if k != SPEC_HASH}
    leader = {"metadata": {"labels": dict(meta["labels"]), "annotations": annotations}}
    worker_labels = {
        k: v for k, v in meta["labels"].items() if k not in (LABEL_KV_REVISION, LABEL_LLMD_ROLE)
    }
    worker = {"metadata": {"labels": worker_labels, "annotations": dict(annotations)}}
    leader["spec"], worker["spec"] = leader_spec, _worker_spec(leader_spec, worker_args)
    own = _gang(spec, leader, worker)
    own.update(_group_topology(spec, leader, worker))
    size = spec.role(role).nodes_per_instance
    body: dict[str, Any] = {
        "replicas": 1,
        "startupPolicy": lws.STARTUP_POLICY,
        "leaderWorkerTemplate": {
            "size": size,
            "restartPolicy": lws.RESTART_POLICY,
            "leaderTemplate": leader,
            "workerTemplate": worker,
        },
    }
    labels = {**meta["labels"], **own.pop("labels", {})}
    metadata = {
        **{k: v for k, v in meta.items() if k not in ("labels", "annotations")},
        "labels": labels,
        "annotations": {**own, SPEC_HASH: spec_hash(labels, body, own)},
    }
    return {"apiVersion": lws.API_VERSION, "kind": lws.KIND, "metadata": metadata, "spec": body}


def _worker_spec(leader: dict[str, Any], worker_args: list[str]) -> dict[str, Any]:
    engine = next(c for c in leader["containers"] if c["name"] == ENGINE)
    container = {k: v for k, v in engine.items() if k not in _SERVING}
    container["command"] = [*engine["command"], *worker_args]
    return {**leader, "containers": [container]}


def _gang(spec: DeploymentSpec, *templates: dict[str, Any]) -> dict[str, Any]:
    """The LWS's own annotations (and ``labels``) for ``spec.gangScheduling``; the pod
    templates get what their pods need."""
    gang = spec.gang_scheduling
    if gang is None:
        return {}
    if gang.scheduler == "Kueue":  # each group one Workload, admitted whole
        return {"labels": {lws.KUEUE_QUEUE: gang.queue or ""}}
    for template in templates:  # LWS makes the PodGroup; the pods ask Volcano for it
        template["spec"]["schedulerName"] = lws.VOLCANO_SCHEDULER
    return {lws.VOLCANO_QUEUE: gang.queue} if gang.queue else {}


def _group_topology(spec: DeploymentSpec, *templates: dict[str, Any]) -> dict[str, str]:
    """``spec.placement.group``: Kueue's topology-aware scheduling reads the templates
    (one podset group, so the leader lands in its workers' domain); without Kueue, LWS's
    exclusive topology on the LWS itself (Required only, validation says)."""
    group = spec.placement.group if spec.placement else None
    if group is None:
        return {}
    gang = spec.gang_scheduling
    if gang is not None and gang.scheduler == "Kueue":
        required = group.mode == "Required"
        key = lws.KUEUE_REQUIRED_TOPOLOGY if required else lws.KUEUE_PREFERRED_TOPOLOGY
        for template in templates:
            notes = template["metadata"]["annotations"]
            notes.update({key: group.topology_key, lws.KUEUE_GROUP: "instance"})
        return {}
    return {lws.EXCLUSIVE_TOPOLOGY: group.topology_key}
