"""LeaderWorkerSet's part in a local run: a rendered LWS → the pods of its group.

In a cluster the LWS controller makes a group's pods from the LWS's templates and its pod
webhook gives every container the group's env; here :func:`group_pods` does both: the leader
``<lws>-0`` from the leader template and the workers ``<lws>-0-<w>`` (w from 1) from the
worker template, labelled as LWS labels them (the worker index says who serves), each
container's env led by ``LWS_LEADER_ADDRESS`` (the caller's: the leader's address, or its
name in the group's Service, :func:`leader_name`), ``LWS_GROUP_SIZE`` and
``LWS_WORKER_INDEX``; the ``$(VAR)`` references to them stay for the runtime to expand, as
the kubelet does (:mod:`disagg_tools.local.rules.env`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from disagg_operator.contracts import lws


def is_group_worker(labels: Mapping[str, str]) -> bool:
    """Whether a pod of these labels is a group's worker (it serves nothing: no
    readiness, no routing)."""
    return labels.get(lws.LABEL_WORKER_INDEX, lws.LEADER) != lws.LEADER


def leader_name(group: str, namespace: str) -> str:
    """The leader's name in its group's Service, as LWS gives it (``LWS_LEADER_ADDRESS``
    with the default subdomain policy: ``<lws>-<group>.<lws>.<namespace>``)."""
    return f"{lws.leader_pod(group)}.{group}.{namespace}"


Address = Callable[[str, str], str]  # (LWS name, namespace) → LWS_LEADER_ADDRESS


def group_pods(objects: list[dict[str, Any]], address: Address) -> list[dict[str, Any]]:
    """``objects`` with each LeaderWorkerSet replaced by its group's pods; ``address``:
    the leader's address its pods get."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") != lws.KIND:
            out.append(obj)
            continue
        out += _pods_of(obj, address)
    return out


def _pods_of(group: dict[str, Any], address: Address) -> list[dict[str, Any]]:
    name = group["metadata"]["name"]
    namespace = group["metadata"].get("namespace", "default")
    spec = group["spec"]["leaderWorkerTemplate"]
    size = int(spec["size"])
    pods = []
    for worker in range(size):
        template = spec["leaderTemplate"] if worker == 0 else spec["workerTemplate"]
        pod_name = lws.leader_pod(name) if worker == 0 else lws.worker_pod(name, worker)
        labels = {
            **template["metadata"].get("labels", {}),
            lws.LABEL_NAME: name,
            lws.LABEL_GROUP_INDEX: "0",
            lws.LABEL_WORKER_INDEX: str(worker),
        }
        group_env = {
            lws.ENV_LEADER_ADDRESS: address(name, namespace),
            lws.ENV_GROUP_SIZE: str(size),
            lws.ENV_WORKER_INDEX: str(worker),
        }
        pod_spec = dict(template["spec"])
        pod_spec["containers"] = [_with_env(c, group_env) for c in pod_spec["containers"]]
        meta = {
            "name": pod_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(template["metadata"].get("annotations", {})),
        }
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec})
    return pods


def _with_env(container: dict[str, Any], first: Mapping[str, str]) -> dict[str, Any]:
    """The container with ``first`` leading its env (in place of its own of those names)."""
    own = [item for item in container.get("env", []) if item["name"] not in first]
    return {**container, "env": [*({"name": k, "value": v} for k, v in first.items()), *own]}
