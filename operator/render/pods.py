"""Pod rendering: one prefill or decode pod, with the engine its hardware needs.

Pure layer, part of render. :func:`pod` builds the whole Pod for role ``role`` index
``i``; :func:`engine_container` the engine container for either engine:

- ``reference``: ``disagg worker serve`` with env = ``WorkerConfig(...).to_env()`` (the
  worker's own contract model, imported), plus the pod-specific values from the downward
  API (DISAGG_ENGINE_ID = pod name, DISAGG_ADVERTISE_HOST = pod IP) and UCX_TLS. The local
  runner (``disagg up``) reads exactly this command and env.
- ``vllm``: ``vllm serve <model>`` with ``--kv-transfer-config`` JSON, the NIXL side-channel
  env and, on CPU pools, the CPU-engine env, in the form the deployment's vLLM version
  reads (its profile, :func:`derive.resolution`, named in the pod's annotations).

Decode pods also get the ``transfer-canary`` container (:mod:`.canary`) unless it is
disabled or has no image.
User ``env`` and ``args`` are appended; validation refuses names and flags that collide
with derived ones.
The spec-hash annotation is a hash of the pod's labels and spec, so any change to either
makes the rollout replace the pod; the ``disagg.dev/revision`` label hashes the same minus
the pod's own name, so it is equal across a role's pods of one template.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from disagg_operator.engines import llmd, vllm
from disagg_operator.models import (
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    LABEL_REVISION,
    SPEC_HASH,
    DeploymentSpec,
    RoleSpec,
)
from disagg_operator.render import canary as render_canary
from disagg_operator.render import derive
from disagg_worker.config import WorkerConfig

# Which vLLM version render assumed and the profile it used (unknown: no version found).
VLLM_VERSION = "disagg.dev/vllm-version"
VLLM_PROFILE = "disagg.dev/vllm-profile"
ENGINE = "engine"
SIDECAR = "routing-proxy"
HANDSHAKE_VOLUME = "handshake"
# The worker images' user (Dockerfile: USER 65532:65532).
WORKER_UID = 65532

# Every container: no privilege escalation, no capabilities. The derived UCX_TLS uses no
# transport that needs CAP_SYS_PTRACE (cma) or a shared IPC namespace, so none is added.
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


def sidecar_enabled(spec: DeploymentSpec, role: str) -> bool:
    """The llm-d routing sidecar runs in decode pods when llm-d and the sidecar are on."""
    return role == "decode" and spec.llmd.enabled and spec.llmd.routing_sidecar.enabled


def engine_port(spec: DeploymentSpec, role: str) -> int:
    return ENGINE_BEHIND_SIDECAR_PORT if sidecar_enabled(spec, role) else HTTP_PORT


def spec_hash(labels: dict[str, str], pod_spec: dict[str, Any]) -> str:
    blob = json.dumps({"labels": labels, "spec": pod_spec}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def pod(
    spec: DeploymentSpec,
    role: str,
    i: int,
    *,
    name: str,
    meta: dict[str, Any],
    pod_selector: dict[str, str],
) -> dict[str, Any]:
    """The Pod ``<name>-<role>-<i>``; ``meta`` carries namespace, labels, ownerReferences;
    ``pod_selector`` selects the role's pods (for the default topology spread)."""
    r = spec.role(role)
    pod_name = f"{name}-{role}-{i}"
    containers = [engine_container(spec, role)]
    if sidecar_enabled(spec, role):
        containers.append(sidecar_container(spec))
    canary = (
        render_canary.container(spec, name, engine_port(spec, role)) if role == "decode" else None
    )
    if canary is not None:
        containers.append({**canary, "securityContext": dict(CONTAINER_SECURITY)})
    pod_spec: dict[str, Any] = {
        "hostname": pod_name,
        "subdomain": f"{name}-{role}",
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": derive.grace_period_seconds(spec),
        # Service env vars (FOO_SERVICE_HOST...) can clash with VLLM_* settings.
        "enableServiceLinks": False,
        "containers": containers,
        "volumes": _volumes(spec, name),
        "securityContext": pod_security(spec),
    }
    placement = {
        "nodeSelector": r.node_selector,
        "tolerations": [t.model_dump(by_alias=True, exclude_none=True) for t in r.tolerations]
        if r.tolerations
        else None,
        "affinity": r.affinity,
        "topologySpreadConstraints": spread(spec, role, pod_selector),
    }
    pod_spec.update({k: v for k, v in placement.items() if v})
    template = {k: v for k, v in pod_spec.items() if k not in ("hostname",)}
    labels = {**meta["labels"], LABEL_REVISION: spec_hash(meta["labels"], template)[:10]}
    metadata = {**meta, "name": pod_name, "labels": labels}
    metadata["annotations"] = {SPEC_HASH: spec_hash(labels, pod_spec), **_engine_notes(spec)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def spread(spec: DeploymentSpec, role: str, pod_selector: dict[str, str]) -> list[Any]:
    """The role's topologySpreadConstraints: as given, or by default one soft constraint
    that spreads the role's pods across nodes (a node failure or drain takes fewer of them
    at once; ScheduleAnyway, so a pool with fewer nodes than pods still schedules)."""
    given = spec.role(role).topology_spread_constraints
    if given is not None:
        return list(given)
    return [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(pod_selector)},
        }
    ]


def _engine_notes(spec: DeploymentSpec) -> dict[str, str]:
    if spec.engine.type != "vllm":
        return {}
    found = derive.resolution(spec)
    version = vllm.format_version(found.version) if found.version else "unknown"
    return {VLLM_VERSION: version, VLLM_PROFILE: found.profile.label}


def pod_security(spec: DeploymentSpec) -> dict[str, Any]:
    """Pod Security "restricted" for the reference engine; vLLM images may need root."""
    security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.engine.type == "reference":
        security.update(runAsNonRoot=True, runAsUser=WORKER_UID, runAsGroup=WORKER_UID)
    return security


def _volumes(spec: DeploymentSpec, name: str) -> list[dict[str, Any]]:
    if spec.engine.type == "reference":
        # Readable by the image's non-root user whatever its uid (no fsGroup assumed);
        # the key never leaves the pod's own filesystem view.
        secret = {"secretName": f"{name}-handshake", "defaultMode": 0o444}
        return [{"name": HANDSHAKE_VOLUME, "secret": secret}]
    # vLLM's workers exchange tensors through /dev/shm; the container default is 64 MiB.
    return [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]


def engine_container(spec: DeploymentSpec, role: str) -> dict[str, Any]:
    r = spec.role(role)
    port = engine_port(spec, role)
    if spec.engine.type == "reference":
        command, env = ["disagg", "worker", "serve"], _reference_env(spec, role, port)
        mounts = [{"name": HANDSHAKE_VOLUME, "mountPath": derive.HMAC_DIR, "readOnly": True}]
        startup = None
    else:
        command, env = _vllm_command(spec, role, port), _vllm_env(spec, role)
        mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
        startup = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 10}
        startup["failureThreshold"] = 180  # model download and load: up to 30 min
    container: dict[str, Any] = {
        "name": ENGINE,
        "image": r.image or spec.engine.image,
        "command": command,
        "env": _merge_env(env, r),
        "ports": _ports(spec, role, port),
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "volumeMounts": mounts,
        "securityContext": dict(CONTAINER_SECURITY),
        "lifecycle": {"preStop": {"exec": {"command": _drain_command(spec)}}},
    }
    if r.args:
        container["args"] = list(r.args)
    if startup:
        container["startupProbe"] = startup
    if r.resources:
        container["resources"] = r.resources.model_dump(by_alias=True, exclude_none=True)
    return container


def _drain_command(spec: DeploymentSpec) -> list[str]:
    """The preStop: wait for in-flight transfers before SIGTERM (the pod has already left
    its Service's endpoints, so no new work comes). The reference worker says when it is
    idle; vLLM has no such endpoint, so its pods sleep out the lease."""
    timeout = str(derive.drain_seconds(spec))
    if spec.engine.type == "reference":
        return ["disagg", "worker", "drain", "--timeout-s", timeout]
    return ["sleep", timeout]


def _ports(spec: DeploymentSpec, role: str, port: int) -> list[dict[str, Any]]:
    ports = [{"name": "http" if port == HTTP_PORT else "engine", "containerPort": port}]
    for rank, number in enumerate(derive.side_channel_ports(spec, role)):
        ports.append(
            {"name": "side-channel" + (f"-{rank}" if rank else ""), "containerPort": number}
        )
    return [{**p, "protocol": "TCP"} for p in ports]


def sidecar_container(spec: DeploymentSpec) -> dict[str, Any]:
    """llm-d routing sidecar: serves the pod's port, runs prefill, then the local decode."""
    sidecar = spec.llmd.routing_sidecar
    args = [*llmd.args(HTTP_PORT, ENGINE_BEHIND_SIDECAR_PORT), *(sidecar.args or [])]
    return {
        "name": SIDECAR,
        "image": sidecar.image,
        "args": args,
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "securityContext": dict(CONTAINER_SECURITY),
    }


def worker_config(spec: DeploymentSpec, role: str, port: int = HTTP_PORT) -> WorkerConfig:
    """The reference engine's WorkerConfig for ``role`` (pod-specific fields left unset)."""
    return WorkerConfig(**_worker_fields(spec, role, port))


def _worker_fields(spec: DeploymentSpec, role: str, port: int) -> dict[str, Any]:
    r, kv = spec.role(role), spec.kv_transfer
    return {
        "role": "prefill" if role == "prefill" else "decode",
        "device": r.device,
        "peer_device": spec.peer(role).device,
        "kv_buffer_device": derive.buffer_device(spec, role),
        "backends": list(kv.backends),
        "side_channel_host": "0.0.0.0",
        "side_channel_port": kv.side_channel_port,
        "http_host": "0.0.0.0",
        "http_port": port,
        "transfer_deadline_s": kv.transfer_deadline_seconds,
        "block_lease_s": kv.block_lease_seconds,
        "hmac_secret_path": derive.HMAC_PATH,
        "tp_size": r.tensor_parallel_size,
        "model": spec.model,
    }


def reference_env_names(spec: DeploymentSpec, role: str) -> frozenset[str]:
    """Env names render sets for the reference engine (whatever their values)."""
    fields = {*_worker_fields(spec, role, HTTP_PORT), "engine_id", "advertise_host"}
    return frozenset({*(WorkerConfig.env_name(f) for f in fields), "UCX_TLS"})


def _field_ref(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _reference_env(spec: DeploymentSpec, role: str, port: int) -> list[dict[str, Any]]:
    env = [{"name": k, "value": v} for k, v in worker_config(spec, role, port).to_env().items()]
    env.append(_field_ref(WorkerConfig.env_name("engine_id"), "metadata.name"))
    env.append(_field_ref(WorkerConfig.env_name("advertise_host"), "status.podIP"))
    env.append({"name": "UCX_TLS", "value": derive.ucx_tls(spec, role)})
    return env


def _vllm_command(spec: DeploymentSpec, role: str, port: int) -> list[str]:
    kv_config = json.dumps(derive.kv_transfer_config(spec, role), separators=(",", ":"))
    tp = str(spec.role(role).tensor_parallel_size)
    return [
        *("vllm", "serve", spec.model),
        *("--port", str(port), "--tensor-parallel-size", tp),
        *("--kv-transfer-config", kv_config),
    ]


def _vllm_env(spec: DeploymentSpec, role: str) -> list[dict[str, Any]]:
    r = spec.role(role)
    env = [
        _field_ref(vllm.SIDE_CHANNEL_HOST, "status.podIP"),
        {"name": vllm.SIDE_CHANNEL_PORT, "value": str(spec.kv_transfer.side_channel_port)},
        {"name": "UCX_TLS", "value": derive.ucx_tls(spec, role)},
    ]
    derived = {**derive.lease_env(spec, role), **derive.cpu_engine_env(r, derive.profile(spec))}
    env += [{"name": k, "value": v} for k, v in derived.items()]
    return env


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
