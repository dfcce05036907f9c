"""The kinds the operator reads and writes: one table every module takes them from.

Each :class:`Kind` row says what Kubernetes calls the kind and what the operator does with
it, which is also exactly what the chart's RBAC grants (:attr:`Kind.verbs`). The planner
(:mod:`disagg_operator.planning.actions`), the sync and the handlers, the API client, the
emulator and the chart's RBAC test all read :data:`CHILDREN` and :data:`KINDS`, so none
keeps a list of its own that could drift from the RBAC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from disagg_operator.api.base import API_VERSION, KIND, PLURAL, SHORT_NAMES
from disagg_operator.api.spec import INFERENCE_POOL_APIS
from disagg_operator.contracts import lws
from disagg_operator.contracts.prometheus import API_VERSION as PROMETHEUS_API

Access = Literal["watched", "by-name", "create-only"]


@dataclass(frozen=True)
class Kind:
    """One kind the operator talks to: what Kubernetes calls it and what the operator does
    with it, which is also exactly what the chart's RBAC grants (:attr:`verbs`).

    ``access``: ``watched`` (list, watch: kopf's watches), ``by-name`` (get, once per
    sync) or ``create-only`` (written once, never read back); then ``create``; ``update``
    for a kind written whole (``replaced``); ``patch`` when a drift patch manages fields of
    it (``managed``: top-level fields; metadata labels, annotations and owners always go
    with them); ``delete`` when a deployment can stop wanting one (``deleted``).
    ``exclusive``: fields that exclude each other within a managed one (the API server
    refuses an object with two: one observed and not desired is removed). ``optional``:
    another project's CRD a cluster may not serve (the resync's listing skips its 404)."""

    kind: str
    api_versions: tuple[str, ...]  # the first is the one rendered by default
    plural: str
    access: Access
    managed: tuple[str, ...] = ("spec",)
    deleted: bool = True
    replaced: bool = False  # written whole with a conditional update (the Lease)
    exclusive: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = False  # has a status subresource
    optional: bool = False  # a CRD of another project: a cluster may not serve it

    @property
    def api_version(self) -> str:
        return self.api_versions[0]

    @property
    def verbs(self) -> tuple[str, ...]:
        """The API verbs the operator uses on it (and the chart grants), in RBAC order."""
        reads = {"watched": ("list", "watch"), "by-name": ("get",), "create-only": ()}
        update = ("update",) if self.replaced else ()
        patch = ("patch",) if self.managed else ()
        delete = ("delete",) if self.deleted else ()
        return (*reads[self.access], "create", *update, *patch, *delete)

    @property
    def groups(self) -> tuple[str, ...]:
        """API groups of its versions ("" for the core group), as RBAC names them."""
        return tuple(dict.fromkeys(v.rpartition("/")[0] for v in self.api_versions))


# The children a deployment owns, in the order render emits them.
CHILDREN: tuple[Kind, ...] = (
    # the handshake key is generated once and never rotated by a resync
    Kind("Secret", ("v1",), "secrets", "create-only", managed=(), deleted=False),
    Kind("Service", ("v1",), "services", "watched", short_names=("svc",), status=True),
    # files the pods mount (the engine-idle shim of vLLM CPU pools) and the llm-d endpoint
    # picker's config; the data is the operator's
    Kind("ConfigMap", ("v1",), "configmaps", "watched", managed=("data",), short_names=("cm",)),
    Kind(
        "NetworkPolicy",
        ("networking.k8s.io/v1",),
        "networkpolicies",
        "watched",
        deleted=False,  # every deployment has one, for as long as it exists
        short_names=("netpol",),
    ),
    Kind(
        "PodDisruptionBudget",
        ("policy/v1",),
        "poddisruptionbudgets",
        "watched",
        exclusive={"spec": ("minAvailable", "maxUnavailable")},
        short_names=("pdb",),
        status=True,
    ),
    # a pod's spec is immutable: the rollout planner replaces pods, nothing patches them
    Kind("Pod", ("v1",), "pods", "watched", managed=(), short_names=("po",), status=True),
    # an instance spanning pods (nodesPerInstance > 1): replaced like a pod, never patched;
    # a cluster without the LWS controller's CRD has none to list (optional)
    Kind(
        lws.KIND,
        (lws.API_VERSION,),
        lws.PLURAL,
        "watched",
        managed=(),
        short_names=("lws",),
        status=True,
        optional=True,
    ),
    # the router's own account with transfer locality (spec.routing.transferLocality): a
    # Role reading EndpointSlices (the pods' zones) bound to it; read by name, not watched
    Kind("ServiceAccount", ("v1",), "serviceaccounts", "by-name", managed=(), short_names=("sa",)),
    Kind("Role", ("rbac.authorization.k8s.io/v1",), "roles", "by-name", managed=("rules",)),
    Kind(
        "RoleBinding",
        ("rbac.authorization.k8s.io/v1",),
        "rolebindings",
        "by-name",
        managed=("subjects",),  # its roleRef cannot change, and never does here
    ),
    # the router (spec.router): patched like a Service; its ReplicaSets and pods are the
    # Deployment controller's, never the operator's
    Kind(
        "Deployment", ("apps/v1",), "deployments", "watched", short_names=("deploy",), status=True
    ),
    # only with llm-d, in the version the spec asks for; not watched (it changes with the CR)
    Kind(
        "InferencePool",
        tuple(INFERENCE_POOL_APIS.values()),
        "inferencepools",
        "by-name",
        status=True,
    ),
    # only with spec.monitoring (the Prometheus Operator's kinds); not watched, like the pool
    Kind("PodMonitor", (PROMETHEUS_API,), "podmonitors", "by-name", short_names=("pmon",)),
    Kind(
        "PrometheusRule", (PROMETHEUS_API,), "prometheusrules", "by-name", short_names=("promrule",)
    ),
)
# The operator's other kinds: the resource it reconciles, the Events it posts, the Lease
# of leader election.
RESOURCE = Kind(
    KIND, (API_VERSION,), PLURAL, "watched", short_names=tuple(SHORT_NAMES), status=True
)
# The autoscaler reads the profile ConfigMap spec.autoscaling.profile names (a user's, not
# a child: by name, never watched). Autoscaling needs spec.monitoring, so the chart grants
# it with monitoring.enabled, beside the PodMonitors.
PROFILE_READ = ("", "configmaps", "get")  # (API group, resource, verb)
EVENT = Kind(
    "Event", ("v1",), "events", "create-only", managed=(), deleted=False, short_names=("ev",)
)
LEASE = Kind(
    "Lease",
    ("coordination.k8s.io/v1",),
    "leases",
    "by-name",
    managed=(),
    deleted=False,
    replaced=True,
)
KINDS: tuple[Kind, ...] = (*CHILDREN, RESOURCE, EVENT, LEASE)
# Granted to the operator only to be delegated: the router's Role (transfer locality) lets
# it read EndpointSlices, and Kubernetes refuses to create a Role granting what its creator
# lacks (RBAC escalation check). (API group, resource, verbs); the operator never calls them.
DELEGATED = (("discovery.k8s.io", "endpointslices", ("get", "list", "watch")),)

BY_KIND: Mapping[str, Kind] = {k.kind: k for k in KINDS}
# What one instance of a role is: a Pod, or a LeaderWorkerSet where instances span pods (the
# rollout planner's; never patched).
INSTANCE_KINDS = ("Pod", lws.KIND)
WATCHED: tuple[Kind, ...] = tuple(k for k in CHILDREN if k.access == "watched")
WATCHED_NAMES = frozenset(k.kind for k in WATCHED)
PLURALS: Mapping[str, str] = {k.kind: k.plural for k in KINDS}


def child(kind: str) -> Kind:
    """The row of child kind ``kind`` (KeyError: not a kind a deployment owns)."""
    return {k.kind: k for k in CHILDREN}[kind]
