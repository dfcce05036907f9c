"""The front door (``spec.router``): the disagg proxy as a Deployment and a ClusterIP
Service ``<name>-router``, and from two replicas a PodDisruptionBudget ``<name>-router``.

The router pairs each request within one KV revision: it is told every revision with pods
(``--kv-revision``) and reaches each through two headless Services of that revision's
ready pods (``<name>-p-<kv>``, ``<name>-d-<kv>``), so both revisions serve while a KV
change rolls within maxSurge. A change of the revision list rolls the router Deployment,
and the planner starts a new revision's pods only once that roll has ended
(:func:`revisions_reached`). docs/routing.md (the front door), docs/operator.md (Rollouts).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from disagg_operator.api import HTTP_PORT, ROUTER_PORT, DeploymentSpec
from disagg_operator.derive import scaling, tracing
from disagg_operator.engines.base import protocol_args
from disagg_operator.engines.settings import Settings
from disagg_operator.render.canary import revision_service
from disagg_operator.render.pods import across_nodes

LABEL_ROUTER = "disagg.dev/router"
CONTAINER = "router"
SERVICE_PORT = 80
WORKER_UID = 65532  # the worker images' user (Dockerfile: USER 65532:65532)
RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "512Mi"},
}


def image(spec: DeploymentSpec, settings: Settings) -> str | None:
    """The router's image: given, or the engine's image with the ``disagg`` command."""
    return spec.router.image or settings.engine(spec).canary_image(spec, settings)


def name_of(name: str) -> str:
    return f"{name}-router"


def pairs_by_revision(spec: DeploymentSpec) -> bool:
    """Whether the deployment's own router fronts it and pairs within KV revisions (on,
    with pods, and not behind llm-d's gateway)."""
    return spec.router.enabled and spec.router.replicas > 0 and not spec.llmd.enabled


def decode_service(name: str, kv: str) -> str:
    """The headless Service of KV revision ``kv``'s decode pods (the router's)."""
    return f"{name}-d-{kv}"


def revisions_reached(deployment: Mapping[str, Any], live: Collection[str]) -> set[str]:
    """The KV revisions every pod of the observed router ``deployment`` knows: those its
    template names once its roll has ended (``kubectl rollout status``'s test); while it
    rolls, those it names that have pods (``live``), since the planner adds a revision
    before that revision's first pod and drops one only after its last."""
    spec = deployment.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    args = next((c.get("args") or [] for c in containers if c.get("name") == CONTAINER), [])
    named = {b for a, b in itertools.pairwise(args) if a == "--kv-revision"}
    return named if _rolled_out(deployment) else named & set(live)


def _rolled_out(deployment: Mapping[str, Any]) -> bool:
    meta, spec = deployment.get("metadata") or {}, deployment.get("spec") or {}
    status = deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    counts = ("updatedReplicas", "replicas", "availableReplicas")
    caught_up = int(status.get("observedGeneration", -1)) >= int(meta.get("generation", 0))
    return caught_up and all(status.get(k, 0) == wanted for k in counts)


def objects(
    spec: DeploymentSpec,
    name: str,
    namespace: str,
    meta: dict[str, Any],
    settings: Settings,
    revisions: Sequence[str],
) -> list[dict[str, Any]]:
    """The router Deployment and Service of deployment ``name`` (``meta``: the child
    metadata, name included; ``revisions``: the KV revisions it pairs within), with
    transfer locality its ServiceAccount, Role and RoleBinding (:func:`access`); none when
    the router is off."""
    if not spec.router.enabled:
        return []
    pods = {LABEL_ROUTER: name}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": dict(pods),
            "ports": [
                {"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}
            ],
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": spec.router.replicas,
            "selector": {"matchLabels": dict(pods)},
            "template": {
                "metadata": {"labels": dict(pods)},
                "spec": _pod(spec, name, namespace, settings, revisions),
            },
        },
    }
    front = [service, *access(spec, name, namespace, meta), deployment]
    if spec.router.replicas < 2:  # a budget over one pod could only block drains
        return front
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": dict(pods)},
            "maxUnavailable": 1,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    return [*front, budget]


# What the router may read with transfer locality: the pods' zones, in its namespace only
SLICE_READ = {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
              "verbs": ["get", "list", "watch"]}  # fmt: skip


def access(
    spec: DeploymentSpec, name: str, namespace: str, meta: dict[str, Any]
) -> list[dict[str, Any]]:
    """With spec.routing.transferLocality, the router's own ServiceAccount ``<name>-router``
    and the Role and RoleBinding that let it read EndpointSlices in ``namespace`` (the
    zones it pairs by); none without (its pod then runs as the namespace's default)."""
    if spec.routing.transfer_locality is None:
        return []
    rbac = "rbac.authorization.k8s.io"
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
    role = {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": meta,
            "rules": [dict(SLICE_READ)]}  # fmt: skip
    subject = {"kind": "ServiceAccount", "name": name_of(name), "namespace": namespace}
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name_of(name)},
        "subjects": [subject],
    }
    return [account, role, binding]


def routing_args(spec: DeploymentSpec, settings: Settings) -> list[str]:
    """The proxy's routing flags from spec.routing and what the engine says of its
    prefix cache (docs/routing.md)."""
    policy = spec.routing
    out = ["--disaggregate", policy.disaggregate]
    if policy.disaggregate == "threshold":
        out += ["--threshold-tokens", str(policy.threshold_tokens)]
        if policy.prefill_queue_limit is not None:
            out += ["--prefill-queue-limit", str(policy.prefill_queue_limit)]
    if policy.transfer_locality is not None:
        out += ["--transfer-locality", policy.transfer_locality.mode]
    engine = settings.engine(spec)
    block = engine.prefix_cache_block(spec)
    if block is not None:
        out += ["--decode-prefix-cache", "--block-tokens", str(block)]
        out += engine.kv_events_router_args(spec)
    return out + protocol_args(engine)


def tracing_args(spec: DeploymentSpec) -> list[str]:
    """``spec.tracing``: the router exports its spans there (its sampler is env)."""
    return [] if spec.tracing is None else ["--otlp-traces-endpoint", spec.tracing.endpoint]


def _pod(
    spec: DeploymentSpec, name: str, namespace: str, settings: Settings, revisions: Sequence[str]
) -> dict[str, Any]:
    r = spec.router
    prefill, decode = f"{name}-prefill", f"{name}-decode"
    kvs: list[str] = []
    if pairs_by_revision(spec):
        prefill, decode = revision_service(name, "{kv}"), decode_service(name, "{kv}")
        kvs = [a for kv in revisions for a in ("--kv-revision", kv)]
    args = [
        *("--prefill-service", f"{prefill}.{namespace}.svc:{HTTP_PORT}"),
        *("--decode-service", f"{decode}.{namespace}.svc:{HTTP_PORT}"),
        *kvs,
        *("--refresh-s", str(scaling.ROUTER_REFRESH_S), "--policy", r.policy),
        *("--timeout-s", f"{r.timeout_seconds:g}"),
        *("--host", "0.0.0.0", "--port", str(ROUTER_PORT)),
        *routing_args(spec, settings),
        *tracing_args(spec),
    ]

    sampler = tracing.sampler_env(spec)

    def probe(period: int, failures: int) -> dict[str, Any]:
        get = {"path": "/health", "port": "http"}
        return {"httpGet": get, "periodSeconds": period, "failureThreshold": failures}

    container = {
        "name": CONTAINER,
        "image": image(spec, settings),
        "command": ["disagg", "proxy"],
        "args": args,
        **({"env": [{"name": k, "value": v} for k, v in sampler.items()]} if sampler else {}),
        "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
        "readinessProbe": probe(5, 2),
        "livenessProbe": probe(10, 3),
        "resources": dict(r.resources if r.resources is not None else RESOURCES),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }
    account = {"serviceAccountName": name_of(name)} if spec.routing.transfer_locality else {}
    return {
        **account,
        "enableServiceLinks": False,
        "topologySpreadConstraints": [across_nodes({LABEL_ROUTER: name})],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": WORKER_UID,
            "runAsGroup": WORKER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
