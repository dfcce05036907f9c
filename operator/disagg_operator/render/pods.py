"""Pod rendering: one prefill or decode pod, with the engine its hardware needs.

:func:`pod` builds the whole Pod for role ``role`` index
``i``; :func:`engine_container` the engine container. What differs between engines (the
container's command, env, mounts and startup probe; volumes; the pod's security context;
the drain; side-channel ports; annotations) comes from the deployment's engine
(:mod:`disagg_operator.engines`), looked up in the settings by ``spec.engine.type``; render
adds what every engine gets: ports, the readiness probe, the hardened container security
context, the preStop drain, the user's ``args`` and ``env`` (validation refuses names and
flags that collide with derived ones), resources, placement and the default spread.

Decode pods also get the ``transfer-canary`` container (:mod:`.canary`) unless it is
disabled or has no image; with llm-d's routing sidecar on, decode pods get the sidecar
and the engine moves behind it.
The spec-hash annotation is a hash of the pod's labels and spec, so any change to either
makes the rollout replace the pod; the ``disagg.dev/revision`` label hashes the same minus
the pod's own name, so it is equal across a role's pods of one template.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from disagg_operator.api import (
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    LABEL_DEPLOYMENT,
    LABEL_REVISION,
    LABEL_ROLE,
    SPEC_HASH,
    DeploymentSpec,
    RoleSpec,
)
from disagg_operator.api.podtemplate import ENGINE_CONTAINER, SIDECAR_CONTAINER
from disagg_operator.contracts import llmd
from disagg_operator.derive import model as model_source
from disagg_operator.derive import scaling, transfer
from disagg_operator.engines.settings import Settings
from disagg_operator.render import canary as render_canary
from disagg_operator.render import overlay

ENGINE = ENGINE_CONTAINER
SIDECAR = SIDECAR_CONTAINER
# Seconds left after the preStop drain for the engine to stop on SIGTERM (finish HTTP
# responses, deregister memory, close the NIXL agent) before the kubelet kills it.
SHUTDOWN_MARGIN_S = 10

# Every container: no privilege escalation, no capabilities. The derived UCX_TLS uses no
# transport that needs CAP_SYS_PTRACE (cma) or a shared IPC namespace, so none is added.
# The llm-d routing sidecar's requests (it relays HTTP; a podTemplate entry named
# routing-proxy may raise or limit them).
SIDECAR_RESOURCES: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
READINESS_TIMEOUT_S = 5
METRICS_PORT_NAME = "metrics"
EVENTS_PORT_NAME = "kv-events"  # the engine publishes its KV cache events (routing.prefixIndex)
# The engine's /health is answered by its HTTP server's loop, never behind a model step
# (vLLM: the engine core's liveness flag; the reference worker computes in threads), so it
# turns slow only when the process is wedged: 2 minutes without an answer restarts it.
LIVENESS: dict[str, Any] = {"periodSeconds": 20, "timeoutSeconds": 10, "failureThreshold": 6}


def sidecar_enabled(spec: DeploymentSpec, role: str) -> bool:
    """The llm-d routing sidecar runs in decode pods when llm-d and the sidecar are on."""
    return role == "decode" and spec.llmd.enabled and spec.llmd.routing_sidecar.enabled


def engine_port(spec: DeploymentSpec, role: str) -> int:
    return ENGINE_BEHIND_SIDECAR_PORT if sidecar_enabled(spec, role) else HTTP_PORT


def spec_hash(
    labels: dict[str, str], pod_spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> str:
    """What the rollout compares: the pod's labels, spec and the annotations a podTemplate
    adds (derived annotations follow from the spec)."""
    what: dict[str, Any] = {"labels": labels, "spec": pod_spec}
    if annotations:
        what["annotations"] = annotations
    blob = json.dumps(what, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _drain_command(spec: DeploymentSpec, role: str, settings: Settings) -> list[str]:
    engine = settings.engine(spec)
    wait = scaling.drain_seconds(spec, role, engine.drain_seconds(spec))
    return engine.drain_command(spec, scaling.settle_seconds(spec), wait)


def grace_period_seconds(spec: DeploymentSpec, role: str, settings: Settings) -> int:
    """terminationGracePeriodSeconds: the preStop (settle, then drain), then time for the
    engine to stop."""
    engine_drain = settings.engine(spec).drain_seconds(spec)
    return scaling.prestop_seconds(spec, role, engine_drain) + SHUTDOWN_MARGIN_S


def pod(
    spec: DeploymentSpec,
    role: str,
    i: int,
    *,
    meta: dict[str, Any],
    pod_selector: dict[str, str],
    kv: str,
    settings: Settings,
) -> dict[str, Any]:
    """The Pod ``<name>-<role>-<i>`` of deployment ``<name>`` (its label in ``meta``, which
    carries namespace, labels, ownerReferences); ``pod_selector`` selects the role's pods
    (for the default topology spread); ``kv`` is the spec's KV revision (where the canary
    sends its prefill hop)."""
    r, engine = spec.role(role), settings.engine(spec)
    name = meta["labels"][LABEL_DEPLOYMENT]
    source = model_source.source(spec)
    pod_name = f"{name}-{role}-{i}"
    containers = [engine_container(spec, role, settings)]
    if sidecar_enabled(spec, role):
        containers.append(sidecar_container(spec))
    canary = (
        render_canary.container(spec, name, engine_port(spec, role), kv, settings)
        if role == "decode"
        else render_canary.wire_peer(spec, settings)
    )
    if canary is not None:
        # the canary and the wire peer (our worker image) write nothing; both run UCX as
        # the engine does
        security = {**CONTAINER_SECURITY, "readOnlyRootFilesystem": True}
        env = render_canary.ucx_env(containers[0])
        containers.append({**canary, **({"env": env} if env else {}), "securityContext": security})
    if canary is not None and role == "decode":
        containers[0]["readinessProbe"] = render_canary.engine_readiness(spec)
    pod_spec: dict[str, Any] = {
        "hostname": pod_name,
        "subdomain": f"{name}-{role}",
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": grace_period_seconds(spec, role, settings),
        # Service env vars (FOO_SERVICE_HOST...) can clash with VLLM_* settings.
        "enableServiceLinks": False,
        "containers": containers,
        "volumes": [*engine.volumes(spec, name, role), *source.volumes],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}
        | engine.pod_security(spec, role),
    }
    placement = {
        "nodeSelector": r.node_selector,
        "tolerations": [t.model_dump(by_alias=True, exclude_none=True) for t in r.tolerations]
        if r.tolerations
        else None,
        "affinity": affinity(spec, role, name),
        "topologySpreadConstraints": spread(spec, role, pod_selector),
    }
    pod_spec.update({k: v for k, v in placement.items() if v})
    if source.init is not None:
        download = {"image": spec.image(role), **source.init}
        pod_spec["initContainers"] = [{**download, "securityContext": dict(CONTAINER_SECURITY)}]
    pod_spec = overlay.apply(pod_spec, r.pod_template)
    extra_labels, extra_annotations = overlay.metadata(r.pod_template)
    template = {k: v for k, v in pod_spec.items() if k not in ("hostname",)}
    base = {**extra_labels, **meta["labels"]}
    annotations = {**extra_annotations, **rdma_annotations(spec, role)}
    labels = {**base, LABEL_REVISION: spec_hash(base, template, annotations)[:10]}
    metadata = {**meta, "name": pod_name, "labels": labels}
    metadata["annotations"] = {
        # a bare Pod owned by a custom resource keeps Cluster Autoscaler (default
        # --skip-nodes-with-custom-controller-pods) from ever removing its node; the
        # role's PodDisruptionBudget is what protects it (a podTemplate may say "false")
        SAFE_TO_EVICT: "true",
        **annotations,
        SPEC_HASH: spec_hash(labels, pod_spec, annotations),
        **engine.annotations(spec),
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def affinity(spec: DeploymentSpec, role: str, name: str) -> dict[str, Any] | None:
    """The role's affinity as given, and for prefill with ``spec.placement.
    prefillNearDecode`` a pod affinity to the deployment's decode pods in one domain of
    its topology key (Required: a prefill pod waits for a decode pod's domain)."""
    given = spec.role(role).affinity
    near = spec.placement.prefill_near_decode if spec.placement else None
    if role != "prefill" or near is None:
        return given
    decode = {LABEL_DEPLOYMENT: name, LABEL_ROLE: "decode"}
    term = {"labelSelector": {"matchLabels": decode}, "topologyKey": near.topology_key}
    out = json.loads(json.dumps(given or {}))  # the spec's own stays as it is
    pods = out.setdefault("podAffinity", {})
    if near.mode == "Required":
        pods.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
    else:
        preferred = {"weight": 100, "podAffinityTerm": term}
        pods.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(preferred)
    return dict(out)


def spread(spec: DeploymentSpec, role: str, pod_selector: dict[str, str]) -> list[Any]:
    """The role's topologySpreadConstraints: as given, or by default one soft constraint
    that spreads the role's pods across nodes (a node failure or drain takes fewer of them
    at once; ScheduleAnyway, so a pool with fewer nodes than pods still schedules)."""
    given = spec.role(role).topology_spread_constraints
    if given is not None:
        return list(given)
    return [across_nodes(pod_selector)]


def across_nodes(pod_selector: dict[str, str]) -> dict[str, Any]:
    """One soft constraint spreading the selected pods over nodes (ScheduleAnyway)."""
    return {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": dict(pod_selector)},
    }


def engine_container(spec: DeploymentSpec, role: str, settings: Settings) -> dict[str, Any]:
    r, engine = spec.role(role), settings.engine(spec)
    port = engine_port(spec, role)
    derived = engine.container(spec, role, port, settings)
    container: dict[str, Any] = {
        "name": ENGINE,
        "image": spec.image(role),
        "command": list(derived.command),
        "env": _merge_env([*derived.env, *_transport_env(spec, role)], r),
        "ports": _ports(engine.side_channel_ports(spec, role), port, engine.metrics_port(spec))
        + _event_ports(engine.kv_events_ports(spec, role)),
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": 5,
            "timeoutSeconds": READINESS_TIMEOUT_S,
            "failureThreshold": 3,
        },
        "livenessProbe": dict(LIVENESS, httpGet={"path": "/health", "port": port}),
        "volumeMounts": [*derived.mounts, *model_source.source(spec).mounts],
        "securityContext": dict(CONTAINER_SECURITY)
        | ({"readOnlyRootFilesystem": True} if derived.read_only_root else {})
        | _rdma_capabilities(spec, role),
        # The preStop serves on until the pod's endpoint clients have seen it leave (the
        # settle), then waits for in-flight transfers before SIGTERM.
        "lifecycle": {"preStop": {"exec": {"command": _drain_command(spec, role, settings)}}},
    }
    if r.args:
        container["args"] = list(r.args)
    if derived.startup_probe:
        container["startupProbe"] = dict(derived.startup_probe)
    resources = r.resources.model_dump(by_alias=True, exclude_none=True) if r.resources else {}
    rdma = transfer.rdma(spec, role)
    if rdma is not None and rdma.resources:  # validation refused the same key in limits
        resources["limits"] = {**resources.get("limits", {}), **rdma.resources}
    if resources:
        container["resources"] = resources
    return container


def _transport_env(spec: DeploymentSpec, role: str) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in transfer.transport_env(spec, role).items()]


def _rdma_capabilities(spec: DeploymentSpec, role: str) -> dict[str, Any]:
    """RDMA pins the registered KV buffers: IPC_LOCK lifts the memlock limit for them (the
    one capability a pod of ours adds; docs/security.md says which Pod Security level)."""
    if transfer.rdma(spec, role) is None:
        return {}
    return {"capabilities": {**CONTAINER_SECURITY["capabilities"], "add": [transfer.IPC_LOCK]}}


def rdma_annotations(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """Multus's networks annotation for an RDMA pool that names networks."""
    rdma = transfer.rdma(spec, role)
    if rdma is None or not rdma.networks:
        return {}
    return {transfer.MULTUS_NETWORKS: ",".join(rdma.networks)}


def _ports(side_channel: list[int], port: int, metrics: int | None) -> list[dict[str, Any]]:
    ports = [{"name": "http" if port == HTTP_PORT else "engine", "containerPort": port}]
    for rank, number in enumerate(side_channel):
        ports.append(
            {"name": "side-channel" + (f"-{rank}" if rank else ""), "containerPort": number}
        )
    if metrics is not None:
        ports.append({"name": METRICS_PORT_NAME, "containerPort": metrics})
    return [{**p, "protocol": "TCP"} for p in ports]


def _event_ports(ports: list[int]) -> list[dict[str, Any]]:
    """The KV events publisher's ports (one per data-parallel engine), for the router."""
    names = [EVENTS_PORT_NAME + (f"-{rank}" if rank else "") for rank in range(len(ports))]
    return [
        {"name": n, "containerPort": p, "protocol": "TCP"}
        for n, p in zip(names, ports, strict=True)
    ]


def sidecar_container(spec: DeploymentSpec) -> dict[str, Any]:
    """llm-d routing sidecar: serves the pod's port, runs prefill, then the local decode."""
    sidecar = spec.llmd.routing_sidecar
    args = [*llmd.args(HTTP_PORT, ENGINE_BEHIND_SIDECAR_PORT), *(sidecar.args or [])]
    return {
        "name": SIDECAR,
        "image": sidecar.image,
        "args": args,
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        # the pod's port is the sidecar's: the pod is Ready only once it listens
        "readinessProbe": {
            "httpGet": {"path": llmd.HEALTH_PATH, "port": HTTP_PORT},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": {k: dict(v) for k, v in SIDECAR_RESOURCES.items()},
        "securityContext": dict(CONTAINER_SECURITY),
    }


def _merge_env(derived: list[dict[str, Any]], r: RoleSpec) -> list[dict[str, Any]]:
    env = list(derived)
    index = {e["name"]: n for n, e in enumerate(env)}
    for extra in r.env or []:
        entry = extra.model_dump(by_alias=True, exclude_none=True)
        if extra.name in index:
            env[index[extra.name]] = entry
        else:
            index[extra.name] = len(env)
            env.append(entry)
    return env
