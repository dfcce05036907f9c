"""What the endpoints controller and cluster DNS would say of the local pods.

For each Service with a selector: an EndpointSlice of the pods it selects that have an
address (``discovery.k8s.io/v1``, as the EndpointSlice controller writes it: ``ready`` only
for a Ready pod that is not terminating, ``serving`` for a Ready one, ``terminating`` while
it goes), and the names cluster DNS would answer: every Ready, non-terminating pod's address
under the Service's names (short, with its namespace, ``.svc`` and ``.svc.cluster.local``;
the short names only in the pods' own namespace, as their DNS search path gives them), none
while no pod is ready (a headless Service's NXDOMAIN). A ClusterIP Service answers its pods'
addresses too: there is no kube-proxy here, so the name leads straight to the pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from disagg_operator.planning.pods import is_ready

MANAGED_BY = "local-kubelet.disagg.dev"
SERVICE_NAME = "kubernetes.io/service-name"
DOMAIN = "cluster.local"


def _selected(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Any]:
    selector = (service.get("spec") or {}).get("selector") or {}
    namespace = service["metadata"].get("namespace", "default")
    if not selector:
        return []
    return [
        p
        for p in pods
        if p["metadata"].get("namespace", "default") == namespace
        and (p.get("status") or {}).get("podIP")
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
    ]


def _serving(pod: Mapping[str, Any]) -> bool:
    return is_ready(pod) and not pod["metadata"].get("deletionTimestamp")


def endpoint_slice(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The EndpointSlice of ``service`` over ``pods`` (None-free, deterministic order)."""
    meta = service["metadata"]
    chosen = sorted(_selected(service, pods), key=lambda p: p["metadata"]["name"])
    endpoints = [
        {
            "addresses": [p["status"]["podIP"]],
            "conditions": {
                "ready": _serving(p),
                "serving": is_ready(p),
                "terminating": bool(p["metadata"].get("deletionTimestamp")),
            },
            "targetRef": {
                "kind": "Pod",
                "name": p["metadata"]["name"],
                "namespace": p["metadata"].get("namespace", "default"),
                "uid": p["metadata"].get("uid", ""),
            },
        }
        for p in chosen
    ]
    ports = [
        {"name": port.get("name", ""), "port": _target_port(port, chosen), "protocol": "TCP"}
        for port in (service.get("spec") or {}).get("ports") or []
    ]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{meta['name']}-local",
            "namespace": meta.get("namespace", "default"),
            "labels": {
                SERVICE_NAME: meta["name"],
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": endpoints,
    }


def _target_port(port: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
    """A Service port's target as a number: given, or the named container port."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for pod in pods:
        for container in pod["spec"].get("containers", []):
            for p in container.get("ports", []):
                if p.get("name") == target:
                    return int(p["containerPort"])
    return int(port.get("port", 0))


def names(
    services: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], namespace: str
) -> dict[str, list[str]]:
    """What cluster DNS answers a pod of ``namespace``: name → ready pods' addresses."""
    out: dict[str, list[str]] = {}
    for service in services:
        meta = service["metadata"]
        ns = meta.get("namespace", "default")
        ips = sorted({p["status"]["podIP"] for p in _selected(service, pods) if _serving(p)})
        name = meta["name"]
        forms = [f"{name}.{ns}.svc", f"{name}.{ns}.svc.{DOMAIN}"]
        forms += [name, f"{name}.{ns}"] if ns == namespace else []
        for form in forms:
            out[form] = ips
    return out


def hosts_text(table: Mapping[str, Sequence[str]]) -> str:
    """The table as the file :mod:`disagg_worker.serve.names` reads."""
    lines = ["# what cluster DNS would answer (the local kubelet's table)"]
    lines += [" ".join([name, *ips]) for name, ips in sorted(table.items())]
    return "\n".join(lines) + "\n"
