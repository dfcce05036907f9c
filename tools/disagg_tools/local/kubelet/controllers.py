"""The cluster around the local kubelet: endpoints, cluster DNS and Deployments.

I/O layer (the API through :mod:`.api`, the name tables as files). Each
:meth:`Controllers.tick`:

- the EndpointSlice controller: a Service with a selector gets its EndpointSlices
  (``<service>-local``, one per port set: :func:`.endpoints.endpoint_slices`, each
  endpoint's zone its Node's), written when they change, deleted when no longer wanted;
- cluster DNS: for each namespace the kubelet runs pods in, the name table its processes
  read (:func:`.endpoints.names`, ``DISAGG_HOSTS_FILE``), replaced whole when it changes;
- a Deployment controller (the router's): pods ``<deployment>-<template hash>-<i>`` from
  the template; on a template change the new pods start beside the old ones, and the old
  ones go once every new one is Ready; its status says ``observedGeneration``,
  ``replicas``, ``updatedReplicas``, ``readyReplicas`` and ``availableReplicas`` as the
  real controller's does, so a rollout reads as complete exactly when it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from disagg_operator.planning.pods import is_ready
from disagg_tools.local.kubelet.api import Api, KubeletApiError
from disagg_tools.local.kubelet.node import Kubelet
from disagg_tools.local.kubelet.rules import endpoints

HASH_LABEL = "pod-template-hash"
SLICES = ("discovery.k8s.io/v1", "endpointslices")


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


class Controllers:
    """The endpoints controller, cluster DNS and a Deployment controller (module docstring)."""

    def __init__(self, api: Api, kubelet: Kubelet) -> None:
        self.api, self.kubelet = api, kubelet
        self._slices: dict[tuple[str, str], Any] = {}  # (namespace, name) → what was written
        self._tables: dict[str, str] = {}  # namespace → the name table's text

    async def tick(self) -> None:
        pods = await self.api.list("v1", "pods")
        services = await self.api.list("v1", "services")
        nodes = {n["metadata"]["name"]: n for n in await self.api.list("v1", "nodes")}
        await self._endpoints(services, pods, nodes)
        self._names(services, pods, nodes)
        for deployment in await self.api.list("apps/v1", "deployments"):
            await self._deployment(deployment, pods)

    async def _endpoints(
        self,
        services: Sequence[Mapping[str, Any]],
        pods: Sequence[Mapping[str, Any]],
        nodes: endpoints.Nodes,
    ) -> None:
        wanted = {}
        for service in services:
            for body in endpoints.endpoint_slices(service, pods, nodes):
                meta = body["metadata"]
                key = (meta["namespace"], meta["name"])
                wanted[key] = body
                if self._slices.get(key) == body:
                    continue
                try:
                    await self.api.create(*SLICES, meta["namespace"], body)
                except KubeletApiError:  # there already: replace what it says
                    await self.api.patch(*SLICES, meta["namespace"], meta["name"], body)
                self._slices[key] = body
        for key in [k for k in self._slices if k not in wanted]:  # a port set or Service gone
            await self.api.delete(*SLICES, *key)
            del self._slices[key]

    def _names(
        self,
        services: Sequence[Mapping[str, Any]],
        pods: Sequence[Mapping[str, Any]],
        nodes: endpoints.Nodes,
    ) -> None:
        namespaces = {p.run.namespace for p in self.kubelet.pods.values()} | set(self._tables)
        for namespace in namespaces:
            text = endpoints.hosts_text(endpoints.names(services, pods, namespace, nodes))
            if self._tables.get(namespace) == text:
                continue
            path = self.kubelet.hosts_file(namespace)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".new")
            partial.write_text(text)
            os.replace(partial, path)  # a reader sees the old table or the new, never half
            self._tables[namespace] = text

    async def _deployment(
        self, deployment: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
    ) -> None:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        namespace, name = meta.get("namespace", "default"), meta["name"]
        wanted, template = int(spec.get("replicas", 1)), spec.get("template") or {}
        current = template_hash(template)
        owned = [
            p
            for p in pods
            if any(o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences", []))
        ]
        live = [p for p in owned if not p["metadata"].get("deletionTimestamp")]
        new = [p for p in live if p["metadata"].get("labels", {}).get(HASH_LABEL) == current]
        old = [p for p in live if p not in new]
        taken = {p["metadata"]["name"] for p in owned}
        names = (f"{name}-{current}-{i}" for i in range(10_000))
        for pod_name in [n for n in names if n not in taken][: max(0, wanted - len(new))]:
            await self.api.create("v1", "pods", namespace, _pod(deployment, pod_name, current))
        ready_new = sum(1 for p in new if is_ready(p))
        extra = sorted(new, key=lambda p: p["metadata"]["name"])[wanted:]
        going = [*extra, *(old if ready_new >= wanted else [])]
        for pod in going:
            await self.api.delete("v1", "pods", namespace, pod["metadata"]["name"])
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(live),
            "updatedReplicas": len(new),
            "readyReplicas": sum(1 for p in live if is_ready(p)),
            "availableReplicas": ready_new,
        }
        if {k: (deployment.get("status") or {}).get(k) for k in status} != status:
            await self.api.patch(
                "apps/v1", "deployments", namespace, name, {"status": status}, sub="status"
            )


def _pod(deployment: Mapping[str, Any], name: str, template_hash: str) -> dict[str, Any]:
    meta, template = deployment["metadata"], deployment["spec"]["template"]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    labels = {**(template.get("metadata") or {}).get("labels", {}), HASH_LABEL: template_hash}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": dict(template.get("spec") or {}),
    }
