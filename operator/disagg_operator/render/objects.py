"""Render: a DisaggregatedDeployment body → every child object it should own.

The operator's builder (and ``disagg render``/``disagg up``'s): :func:`render`. The handshake
Secret's key is an argument (the I/O layer reads the existing key or generates one), so
render itself is deterministic. :func:`role_pod` renders the pod of any index, since a
rollout may use indices beyond ``replicas``. What is rendered: docs/crd.md ("What the
operator creates").
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from disagg_operator.api import (
    API_VERSION,
    CANARY_PORT,
    HMAC_KEY,
    HTTP_PORT,
    KIND,
    LABEL_DEPLOYMENT,
    LABEL_KV_REVISION,
    LABEL_LLMD_ROLE,
    LABEL_ROLE,
    ROLES,
    DeploymentSpec,
    DisaggregatedDeployment,
    ExtensionRef,
)
from disagg_operator.derive.scaling import effective_replicas, min_available
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.render import canary as render_canary
from disagg_operator.render import epp, groups, monitoring, router
from disagg_operator.render import pods as render_pods
from disagg_operator.render.kvkey import Revisions, kv_revision
from disagg_operator.validation.spec import InvalidSpec, parse


def labels(name: str, role: str | None = None) -> dict[str, str]:
    """Labels of every child of deployment ``name`` (plus the role labels for ``role``)."""
    out = {
        "app.kubernetes.io/name": "disagg",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "disagg-operator",
        LABEL_DEPLOYMENT: name,
    }
    if role is not None:
        out.update({LABEL_ROLE: role, LABEL_LLMD_ROLE: role})
    return out


def selector(name: str, role: str | None = None) -> dict[str, str]:
    """Label selector of the deployment's pods (of one role when given)."""
    out = {LABEL_DEPLOYMENT: name}
    if role is not None:
        out[LABEL_ROLE] = role
    return out


def routing_selector(name: str, kv: str, role: str | None = None) -> dict[str, str]:
    """Selector of the pods routers may pick: one role's (or both roles') pods of KV
    revision ``kv``."""
    return {**selector(name, role), LABEL_KV_REVISION: kv}


def render(
    body: dict[str, Any],
    *,
    hmac_key: str,
    routed_kv: str | None = None,
    settings: Settings = DEFAULT,
) -> list[dict[str, Any]]:
    """Every desired child of ``body`` as a plain Kubernetes object dict, stable order
    (the table in docs/crd.md, "What the operator creates"), each with the deployment's
    labels, namespace and a controller ownerReference (deleting the CR deletes them; no
    finalizer). A role with 0 replicas has no pods, Service or budget; pods per role from
    :func:`scaling.effective_replicas`. ``routed_kv``: the KV revision the role Services and
    the InferencePool select (default: the spec's own), so routers never pair a prefill and
    a decode of different revisions. Invalid specs raise :class:`validation.InvalidSpec`."""
    dd, problems = parse(body, settings)
    if dd is None or problems:
        raise InvalidSpec(problems)
    uid = str(body.get("metadata", {}).get("uid") or "")
    kv = Revisions(kv_revision(dd.spec, settings), routed_kv)
    return render_model(dd, uid=uid, hmac_key=hmac_key, revisions=kv, settings=settings)


def _meta(
    dd: DisaggregatedDeployment, uid: str, obj_name: str, role: str | None = None
) -> dict[str, Any]:
    owner = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": dd.metadata.name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "name": obj_name,
        "namespace": dd.metadata.namespace,
        "labels": labels(dd.metadata.name, role),
        "ownerReferences": [owner],
    }


def role_pod(
    dd: DisaggregatedDeployment,
    *,
    uid: str,
    role: str,
    index: int,
    kv: str,
    settings: Settings = DEFAULT,
) -> dict[str, Any]:
    """The pod ``<name>-<role>-<index>`` as the spec wants it now; ``kv`` is the spec's
    KV revision (:func:`kv_revision`, computed once by the caller)."""
    meta = _meta(dd, uid, "", role)
    meta["labels"][LABEL_KV_REVISION] = kv
    name = dd.metadata.name
    return render_pods.pod(
        dd.spec,
        role,
        index,
        meta=meta,
        pod_selector=selector(name, role),
        kv=kv,
        settings=settings,
    )


def role_instance(
    dd: DisaggregatedDeployment,
    *,
    uid: str,
    role: str,
    index: int,
    kv: str,
    settings: Settings = DEFAULT,
) -> dict[str, Any]:
    """Instance ``<name>-<role>-<index>``: its pod, or the LeaderWorkerSet standing for it
    where the role's instances span pods (:mod:`.groups`)."""
    pod = role_pod(dd, uid=uid, role=role, index=index, kv=kv, settings=settings)
    if not groups.spans(dd.spec, role):
        return pod
    worker_args = settings.engine(dd.spec).worker_args(dd.spec, role)
    return groups.leader_worker_set(pod, dd.spec, role, worker_args)


def render_model(
    dd: DisaggregatedDeployment,
    *,
    uid: str,
    hmac_key: str,
    revisions: Revisions | None = None,
    pods: bool = True,
    settings: Settings = DEFAULT,
) -> list[dict[str, Any]]:
    """Render an already validated deployment (pods ``0 .. replicas-1`` of each role;
    none with ``pods=False``: the reconciler renders pods one by one, as the rollout
    planner asks). ``revisions``: the KV revisions it names (default: the spec's own
    alone)."""
    name, spec = dd.metadata.name, dd.spec
    revisions = revisions or Revisions(kv_revision(spec, settings))
    target = revisions.target
    kv = revisions.routed or target
    counts = {role: effective_replicas(spec, role) for role in ROLES}
    roles = [role for role in ROLES if counts[role] > 0]
    objects = [_secret(_meta(dd, uid, f"{name}-handshake"), hmac_key)]
    objects += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(dd, uid, cm), "data": data}
        for cm, data in settings.engine(spec).config_maps(spec, name).items()
    ]
    objects += [
        _service(spec, role, _meta(dd, uid, f"{name}-{role}", role), kv, settings) for role in roles
    ]
    serving = list(revisions.serving or [target])
    objects += _revision_services(dd, uid, roles, kv, target, serving, settings)
    front = router.objects(
        spec, name, dd.metadata.namespace, _meta(dd, uid, router.name_of(name)), settings, serving
    )
    objects += front[:1]  # the router Service, with the other Services
    netpol = _meta(dd, uid, f"{name}-side-channel")
    objects.append(_network_policy(spec, name, netpol, settings))
    floors = {role: pod_floor(spec, role) for role in roles}
    budgets = [r for r in roles if spec.role(r).disruption_budget.enabled and floors[r] > 0]
    objects += [_pdb(floors[r], _meta(dd, uid, f"{name}-{r}", r)) for r in budgets]
    for role in roles if pods else ():
        objects += [
            role_instance(dd, uid=uid, role=role, index=i, kv=target, settings=settings)
            for i in range(counts[role])
        ]
    objects += front[1:]  # the router Deployment
    namespace = dd.metadata.namespace
    objects += monitoring.objects(
        spec, name, namespace, roles, lambda n: _meta(dd, uid, n), settings
    )
    if spec.llmd.enabled and spec.llmd.inference_pool.enabled:
        objects.append(_inference_pool(spec, name, _meta(dd, uid, name), kv))
    if spec.llmd.enabled:  # the endpoint picker's config, for llm-d's charts to mount
        meta = _meta(dd, uid, epp.name_of(name))
        # the decode Service's vLLM renders prompts to token ids for the precise producer
        data = epp.data(spec, settings, f"http://{name}-decode.{namespace}.svc:{HTTP_PORT}")
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    copied: list[dict[str, Any]] = fresh(objects)  # no shared sub-dicts: callers may mutate
    return copied


def pod_floor(spec: DeploymentSpec, role: str) -> int:
    """The role budget's ``minAvailable`` in pods: every pod of its instances but
    maxUnavailable. An instance spanning pods is broken by losing any one of them, so the
    budget counts all of a group's pods and lets at most maxUnavailable go at once: at
    most that many instances down (0: no budget, as for pods)."""
    floor = min_available(spec, role)
    nodes = spec.role(role).nodes_per_instance
    return floor + effective_replicas(spec, role) * (nodes - 1) if floor > 0 else 0


def fresh(value: Any) -> Any:
    """A copy of JSON-shaped ``value`` (dicts, lists, scalars) sharing no dict or list
    with it: what ``copy.deepcopy`` gives for such values, several times faster (no memo,
    no dispatch), which a sync pays on every pass."""
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, tuple):
        return tuple(fresh(v) for v in value)
    return value


def _secret(meta: dict[str, Any], hmac_key: str) -> dict[str, Any]:
    data = {HMAC_KEY: base64.b64encode(hmac_key.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data}


def _service(
    spec: DeploymentSpec, role: str, meta: dict[str, Any], kv: str, settings: Settings
) -> dict[str, Any]:
    """Headless: peers and routers address pods directly (pod DNS via the subdomain). Its
    ports: the serving port and each side channel a pod listens on, named as the
    container's (a TP rank's or a data-parallel engine's)."""
    ports = [{"name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP"}]
    for rank, port in enumerate(settings.engine(spec).side_channel_ports(spec, role)):
        named = "side-channel" + (f"-{rank}" if rank else "")
        ports.append({"name": named, "port": port, "targetPort": port, "protocol": "TCP"})
    name = meta["labels"][LABEL_DEPLOYMENT]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"clusterIP": "None", "selector": routing_selector(name, kv, role), "ports": ports},
    }


def _revision_services(
    dd: DisaggregatedDeployment,
    uid: str,
    roles: Sequence[str],
    routed: str,
    target: str,
    serving: Sequence[str],
    settings: Settings,
) -> list[dict[str, Any]]:
    """Headless Services of one KV revision's pods of one role: ``<name>-p-<kv>`` where
    that revision's decode canaries send their prefill hop (the routed and the spec's
    revision), and both roles' for every revision the router pairs within."""
    if len(roles) < len(ROLES):
        return []
    name, spec = dd.metadata.name, dd.spec
    prefill = list(serving) if router.pairs_by_revision(spec) else []
    if render_canary.image(spec, settings):
        prefill += [routed, target]
    named = [(render_canary.revision_service(name, kv), kv, "prefill") for kv in prefill]
    if router.pairs_by_revision(spec):
        named += [(router.decode_service(name, kv), kv, "decode") for kv in serving]
    return [
        _revision_service(name, kv, role, _meta(dd, uid, svc, role))
        for svc, kv, role in dict.fromkeys(named)
    ]


def _revision_service(name: str, kv: str, role: str, meta: dict[str, Any]) -> dict[str, Any]:
    ports = [{"name": "http", "port": HTTP_PORT, "targetPort": HTTP_PORT, "protocol": "TCP"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": routing_selector(name, kv, role),
            "ports": ports,
        },
    }


def _pdb(floor: int, meta: dict[str, Any]) -> dict[str, Any]:
    """Voluntary disruptions (node drains, evictions) take at most ``maxUnavailable`` of the
    role's pods at once, stated as ``minAvailable`` (scaling.min_available says why); the
    kubelet still runs each evicted pod's drain (preStop)."""
    name, role = meta["labels"][LABEL_DEPLOYMENT], meta["labels"][LABEL_ROLE]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta,
        # a pod that is not Ready (a decode whose engine restarted, a prefill still
        # loading) serves nothing: evicting it never costs capacity, and with the default
        # policy an unready pod counted against the budget would stall node drains
        "spec": {
            "selector": {"matchLabels": selector(name, role)},
            "minAvailable": floor,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


# The operator's pods as the chart labels them (charts/disagg/templates/_helpers.tpl).
OPERATOR = {
    "matchLabels": {"app.kubernetes.io/name": "disagg", "app.kubernetes.io/component": "operator"}
}


def _network_policy(
    spec: DeploymentSpec, name: str, meta: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    """Every port from this deployment's pods; the serving port from ``servingAccess``; the
    canary port from the operator (which asks canaries for their verdicts); with
    ``spec.monitoring`` the ports Prometheus scrapes from its namespace.

    Pods of the deployment reach each other on every port, not just the side-channel
    ports: UCX's tcp transport moves the KV on ephemeral ports it picks itself, so a list
    of handshake ports would break transfers where policies are enforced. Everyone else
    reaches at most the serving port, and only the peers :func:`serving_peers` names: a
    vLLM decode dials whatever ``remote_host`` a request's kv_transfer_params name, so
    who may send requests matters (docs/security.md).
    """
    peers = [{"podSelector": {"matchLabels": selector(name)}}]
    serving: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": HTTP_PORT}]}
    clients = serving_peers(spec, name)
    ingress: list[dict[str, Any]] = [{"from": peers}]
    if clients:
        ingress.append({"from": clients, **serving})
    events = _event_ports(spec, settings)
    if events:  # the router subscribes to each pod's KV events (routing.prefixIndex)
        ingress.append({"from": event_readers(spec, name), "ports": events})
    if spec.transfer_canary.enabled:  # the operator asks canaries for their verdicts
        canary = {"ports": [{"protocol": "TCP", "port": CANARY_PORT}]}
        ingress.append({"from": [{"namespaceSelector": {}, "podSelector": OPERATOR}], **canary})
    if spec.monitoring is not None and spec.monitoring.enabled:  # Prometheus scrapes
        where = {"kubernetes.io/metadata.name": spec.monitoring.prometheus_namespace}
        scraped = monitoring.scraped_ports(spec, settings)
        ports = [{"protocol": "TCP", "port": port} for port in scraped]
        ingress.append({"from": [{"namespaceSelector": {"matchLabels": where}}], "ports": ports})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": selector(name)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def _event_ports(spec: DeploymentSpec, settings: Settings) -> list[dict[str, Any]]:
    engine = settings.engine(spec)
    found = {p for role in ROLES for p in engine.kv_events_ports(spec, role)}
    return [{"protocol": "TCP", "port": p} for p in sorted(found)]


def event_readers(spec: DeploymentSpec, name: str) -> list[dict[str, Any]]:
    """Who may subscribe to the pods' KV events: the router's pods, and with llm-d the
    namespace's pods (its endpoint picker subscribes to each pod); never servingAccess's
    clients, who send requests and have no use for what each cache holds."""
    out: list[dict[str, Any]] = [{"podSelector": {"matchLabels": {router.LABEL_ROUTER: name}}}]
    if spec.llmd.enabled:
        out.append({"podSelector": {}})
    return out


def serving_peers(spec: DeploymentSpec, name: str) -> list[dict[str, Any]]:
    """Who besides the deployment's pods may reach the serving port: ``servingAccess`` as
    given; by default the router's pods and, with llm-d, the namespace's pods (the gateway
    and the endpoint picker that route to the pods and read their metrics)."""
    if spec.serving_access is not None:
        return [dict(p) for p in spec.serving_access]
    out: list[dict[str, Any]] = [{"podSelector": {"matchLabels": {router.LABEL_ROUTER: name}}}]
    if spec.llmd.enabled:
        out.append({"podSelector": {}})
    return out


def _inference_pool(
    spec: DeploymentSpec, name: str, meta: dict[str, Any], kv: str
) -> dict[str, Any]:
    """Gateway API Inference Extension pool over both roles (the EPP tells them apart by
    the llm-d.ai/role label); the EPP itself is deployed with llm-d's charts.

    v1 (inference.networking.k8s.io, api/v1/inferencepool_types.go upstream): the selector
    is a LabelSelector (``matchLabels``), ports a list, and ``endpointPickerRef.port`` is
    required when the referent is a Service (a CEL rule on the type).
    """
    pool = spec.llmd.inference_pool
    ref = pool.extension_ref or ExtensionRef(name=f"{name}-epp")
    mode = {"failureMode": ref.failure_mode} if ref.failure_mode else {}
    body = {
        "selector": {"matchLabels": routing_selector(name, kv)},
        "targetPorts": [{"number": HTTP_PORT}],
        "endpointPickerRef": {"name": ref.name, "port": {"number": ref.port}, **mode},
    }
    return {"apiVersion": pool.api_version, "kind": "InferencePool", "metadata": meta, "spec": body}


def pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Pods among rendered objects."""
    return [o for o in objects if o["kind"] == "Pod"]
