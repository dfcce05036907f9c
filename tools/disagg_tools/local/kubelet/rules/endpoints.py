"""What the EndpointSlice controller and cluster DNS would say of the local pods.

Ported from k8s.io/endpointslice at tag v0.36.3 (Kubernetes 1.36): ``reconciler.go``
(``util.ShouldPodBeInEndpoints``, the Node lookup), ``utils.go`` (``podToEndpoint`` with the
Node's zone, ``getEndpointPorts`` / ``FindPort``, ``setEndpointSliceLabels``). No scheduler
binds the local pods: one with no ``spec.nodeName`` runs on the local kubelet's own node,
which has no labels (no zone). Cluster DNS as CoreDNS's kubernetes plugin
answers, with a Service's ready endpoints only. A ClusterIP Service answers its pods'
addresses too: there is no kube-proxy here, so the name leads straight to the pods. Dicts
in, dicts out. The rules: docs/local-run.md (the local kubelet).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

MANAGED_BY = "local-kubelet.disagg.dev"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
HEADLESS = "service.kubernetes.io/headless"
RESERVED = (SERVICE_NAME, MANAGED_BY_LABEL, HEADLESS)
DOMAIN = "cluster.local"
TCP = "TCP"  # the API server's default protocol of a Service port and a container port
MAX_ENDPOINTS = 100  # kube-controller-manager's --max-endpoints-per-slice default
ZONE = "topology.kubernetes.io/zone"  # the Node label an endpoint's zone is copied from
Nodes = Mapping[str, Mapping[str, Any]]  # Node objects by name


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """``IsPodReady``: the pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def should_be_in_endpoints(pod: Mapping[str, Any], include_terminating: bool) -> bool:
    """``ShouldPodBeInEndpoints``: not terminal (Succeeded, Failed), has an IP, and not
    terminating unless ``include_terminating`` (the reconciler passes True)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not status.get("podIP") and not status.get("podIPs"):
        return False
    return include_terminating or not pod.get("metadata", {}).get("deletionTimestamp")


def should_set_hostname(pod: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    """``ShouldSetHostname``: the pod names a hostname and the Service as its subdomain."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return bool(spec.get("hostname")) and (
        spec.get("subdomain") == service["metadata"]["name"]
        and service["metadata"].get("namespace", "default") == meta.get("namespace", "default")
    )


def find_port(pod: Mapping[str, Any], port: Mapping[str, Any]) -> int | None:
    """``FindPort``: a number is itself; a name is a container port of that name and the
    Service port's protocol (a sidecar's too: an init container restarting Always);
    None when nothing matches."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    protocol = port.get("protocol", TCP)
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in [*(spec.get("containers") or []), *sidecars]:
        for p in container.get("ports") or []:
            if p.get("name") == target and p.get("protocol", TCP) == protocol:
                return int(p["containerPort"])
    return None


def endpoint_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``getEndpointPorts``: each Service port the pod has, as an EndpointPort."""
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, port)
        if number is None:
            continue  # the controller logs it and leaves the port out
        entry = {
            "name": port.get("name", ""),
            "port": number,
            "protocol": port.get("protocol", TCP),
        }
        if port.get("appProtocol") is not None:
            entry["appProtocol"] = port["appProtocol"]
        out.append(entry)
    return out


def addresses(pod: Mapping[str, Any], family: int = 4) -> list[str]:
    """``getEndpointAddresses``: the pod's ``status.podIPs`` of one family, normalised.
    One that does not parse counts as IPv4 and reads ``<nil>``, as Go's nil IP prints
    (the API server lets no such pod IP through)."""
    out = []
    for entry in (pod.get("status") or {}).get("podIPs") or []:
        try:
            ip = ipaddress.ip_address(entry["ip"])
        except ValueError:
            out += ["<nil>"] if family == 4 else []
            continue
        if ip.version == family:
            out.append(str(ip))
    return out


def pod_to_endpoint(
    pod: Mapping[str, Any], service: Mapping[str, Any], node: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``podToEndpoint`` (IPv4): ``zone`` is the ``node``'s zone label, when it has one."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    serving = is_pod_ready(pod)
    terminating = bool(meta.get("deletionTimestamp"))
    publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    endpoint: dict[str, Any] = {
        "addresses": addresses(pod),
        "conditions": {
            "ready": publish or (serving and not terminating),
            "serving": serving,
            "terminating": terminating,
        },
        "targetRef": {
            "kind": "Pod",
            "namespace": meta.get("namespace", "default"),
            "name": meta["name"],
        },
    }
    if meta.get("uid"):
        endpoint["targetRef"]["uid"] = meta["uid"]
    if spec.get("nodeName"):
        endpoint["nodeName"] = spec["nodeName"]
    zone = (((node or {}).get("metadata") or {}).get("labels") or {}).get(ZONE)
    if zone:
        endpoint["zone"] = zone
    if should_set_hostname(pod, service):
        endpoint["hostname"] = spec["hostname"]
    return endpoint


def node_of(
    pod: Mapping[str, Any], service: Mapping[str, Any], nodes: Nodes | None
) -> tuple[bool, Mapping[str, Any] | None]:
    """The reconciler's Node lookup: (whether the pod goes in, its Node). A pod naming a
    Node that does not exist is left out until it does, unless the Service publishes not
    ready addresses (then it goes in with no zone). Unbound (local) or Nodes not read: in,
    no Node."""
    name = (pod.get("spec") or {}).get("nodeName")
    if nodes is None or not name:
        return True, None
    if name in nodes:
        return True, nodes[name]
    return bool((service.get("spec") or {}).get("publishNotReadyAddresses")), None


def selected(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The pods of the Service's namespace its selector matches (none without one)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    namespace = service["metadata"].get("namespace", "default")
    if not selector:
        return []
    return [
        p
        for p in pods
        if p["metadata"].get("namespace", "default") == namespace
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
    ]


def labels(service: Mapping[str, Any]) -> dict[str, str]:
    """``setEndpointSliceLabels``: the Service's own labels but the reserved ones, then
    the reserved ones; headless when no cluster IP is set (``isServiceIPSet``: None or
    empty, as a Service the emulator allocated no IP for is)."""
    meta = service["metadata"]
    out = {k: v for k, v in (meta.get("labels") or {}).items() if k not in RESERVED}
    if (service.get("spec") or {}).get("clusterIP") in (None, "", "None"):
        out[HEADLESS] = ""
    return {**out, SERVICE_NAME: meta["name"], MANAGED_BY_LABEL: MANAGED_BY}


def endpoint_slices(
    service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], nodes: Nodes | None = None
) -> list[dict[str, Any]]:
    """The Service's EndpointSlices: one per distinct port set (the reconciler's
    ``desiredEndpointsByPortMap``), split at ``MAX_ENDPOINTS`` endpoints, named
    ``<service>-local``, ``-local-1``, ... in the order of their first pod's name;
    endpoints by pod name; with none, one placeholder slice. None without a selector
    (the controller leaves such a Service alone). ``nodes``: the cluster's Nodes (None:
    not read, no zones), as :func:`node_of` finds a pod's."""
    if not (service.get("spec") or {}).get("selector"):
        return []
    groups: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    chosen = sorted(selected(service, pods), key=lambda p: p["metadata"]["name"])
    for pod in chosen:
        if not should_be_in_endpoints(pod, include_terminating=True):
            continue
        found, node = node_of(pod, service, nodes)
        if not found:
            continue
        ports = endpoint_ports(service, pod)
        endpoint = pod_to_endpoint(pod, service, node)
        key = repr(ports)
        groups.setdefault(key, (ports, []))
        if endpoint["addresses"]:
            groups[key][1].append(endpoint)
    groups = {k: g for k, g in groups.items() if g[1]}
    if not groups:  # no endpoint: the reconciler's placeholder slice, with no ports
        groups[""] = ([], [])
    chunks = [
        (ports, endpoints[at : at + MAX_ENDPOINTS])
        for ports, endpoints in groups.values()
        for at in range(0, max(1, len(endpoints)), MAX_ENDPOINTS)
    ]
    return [
        _slice(service, f"-local-{i}" if i else "-local", ports, endpoints)
        for i, (ports, endpoints) in enumerate(chunks)
    ]


def _slice(
    service: Mapping[str, Any], suffix: str, ports: Any, endpoints: list[dict[str, Any]]
) -> dict[str, Any]:
    meta = service["metadata"]
    owner = {"apiVersion": "v1", "kind": "Service", "name": meta["name"]}
    owner.update({"uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
                 if meta.get("uid") else {})  # fmt: skip
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": meta["name"] + suffix,
            "namespace": meta.get("namespace", "default"),
            "labels": labels(service),
            "ownerReferences": [owner],
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": endpoints,
    }


def names(
    services: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    namespace: str,
    nodes: Nodes | None = None,
) -> dict[str, list[str]]:
    """What cluster DNS answers a pod of ``namespace``: name → the addresses of the
    Service's ready endpoints, under its names (short, with its namespace, ``.svc`` and
    ``.svc.cluster.local``; the short ones only in the pod's own namespace, as its DNS
    search path gives them), none while there is none (a headless Service's NXDOMAIN)."""
    out: dict[str, list[str]] = {}
    for service in services:
        meta = service["metadata"]
        ns, name = meta.get("namespace", "default"), meta["name"]
        slices = endpoint_slices(service, pods, nodes)
        ips = sorted({ip for s in slices for ip in ready_addresses(s)})
        forms = [f"{name}.{ns}.svc", f"{name}.{ns}.svc.{DOMAIN}"]
        forms += [name, f"{name}.{ns}"] if ns == namespace else []
        for form in forms:
            out[form] = ips
    return out


def ready_addresses(piece: Mapping[str, Any]) -> list[str]:
    """The addresses of an EndpointSlice's ready endpoints (what DNS and a forward use)."""
    return [
        ip
        for e in piece.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready")
        for ip in e.get("addresses") or []
    ]


def hosts_text(table: Mapping[str, Sequence[str]]) -> str:
    """The table as the file the pods' DNS shim reads (``kubelet/dns/sitecustomize.py``:
    one line a name, then its addresses)."""
    lines = ["# what cluster DNS would answer (the local kubelet's table)"]
    lines += [" ".join([name, *ips]) for name, ips in sorted(table.items())]
    return "\n".join(lines) + "\n"


def parse_hosts(text: str) -> dict[str, list[str]]:
    """:func:`hosts_text`'s table read back (names lower case, without a root dot)."""
    names: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            names[words[0].rstrip(".").lower()] = words[1:]
    return names
