"""A role's pool: what prefill and decode share (:class:`RoleSpec`), what each adds
(:class:`PrefillSpec`, :class:`DecodeSpec`), rollouts, disruption budgets and spreading.

Part of :mod:`disagg_operator.api`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from disagg_operator.api.base import _EMPTY, IntOrPercent, Quantity, _Model, _rules
from disagg_operator.api.corev1 import shape
from disagg_operator.api.podtemplate import PodTemplate
from disagg_operator.api.rdma import Rdma
from disagg_operator.api.rules import ENV_VALUE_RULE, PER_DECODE_BOUNDS_RULE, PREFILL_COUNT_RULE


class Toleration(_Model):
    """A pod toleration (same fields as core/v1 Toleration)."""

    key: str | None = Field(default=None, description="taint key the toleration applies to")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists or Equal (default Equal)"
    )
    value: str | None = Field(default=None, description="taint value to match")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="taint effect to match; empty matches all"
    )
    toleration_seconds: int | None = Field(
        default=None, description="how long a NoExecute taint is tolerated"
    )


class ClaimRef(_Model):
    """A resource claim the engine container uses (core/v1 ResourceClaim): a name in
    ``podTemplate.spec.resourceClaims``, and optionally one request of it."""

    name: str = Field(min_length=1, description="the pod's resource claim to use")
    request: str | None = Field(default=None, description="one request of that claim")


class Resources(_Model):
    """Compute resources of the engine container (core/v1 ResourceRequirements)."""

    limits: dict[str, Quantity] | None = Field(
        default=None, description="limits, e.g. {nvidia.com/gpu: 1, memory: 16Gi}"
    )
    requests: dict[str, Quantity] | None = Field(
        default=None, description="requests, e.g. {cpu: '4', memory: 16Gi}"
    )
    claims: list[ClaimRef] | None = Field(
        default=None,
        description="Dynamic Resource Allocation: the pod's resource claims "
        "(podTemplate.spec.resourceClaims) the engine uses, e.g. its GPUs in place of "
        "limits['nvidia.com/gpu'] (then set claimedDevices)",
    )


class EnvVar(_Model):
    """An extra environment variable; names the operator derives are refused (use the
    spec field that sets them)."""

    model_config = ConfigDict(json_schema_extra=_rules(ENV_VALUE_RULE))

    name: str = Field(min_length=1, description="variable name")
    value: str | None = Field(default=None, description="literal value")
    value_from: shape("EnvVarSource") | None = Field(  # type: ignore[valid-type]
        default=None, description="where the value comes from (secretKeyRef, fieldRef, ...)"
    )


class RolloutStrategy(_Model):
    """How a role's pods are replaced when the spec changes (a Deployment's strategy).

    RollingUpdate: percentages are of the role's replicas, maxSurge rounds up,
    maxUnavailable down (both 0 is refused). A change of the KV-compatibility key rolls
    a new KV revision in beside the old one, within the same bounds, the roles in step
    (docs/operator.md, "Rollouts"). maxSurge left unset is 25%, and as much more as a KV
    change needs where routers reach one revision at a time
    (:func:`~disagg_operator.derive.scaling.surge`), so a model change finishes with the
    defaults. Recreate: every old pod of the role goes first, the new ones start once
    they are gone (for pools with no room for one more pod; the role serves nothing
    meanwhile), and maxSurge/maxUnavailable are not read.
    """

    strategy: Literal["RollingUpdate", "Recreate"] = Field(
        default="RollingUpdate",
        description="RollingUpdate (within maxSurge and maxUnavailable) or Recreate (old "
        "pods first, then the new ones: no extra pod, a stop)",
    )
    max_surge: IntOrPercent | None = Field(
        default=None,
        description="pods above replicas while rolling (count or percent); unset: 25%, or "
        "for a KV change without the router the room the new revision needs beside the "
        "old, max(1, R - maxUnavailable) - maxUnavailable, where that is more",
    )
    max_unavailable: IntOrPercent = Field(
        default="25%", description="ready pods that may be missing while rolling"
    )


class RoleSpec(_Model):
    """What both pools share: which hardware, which engine settings, how pods are placed.
    The pod count is per role (:class:`PrefillSpec`, :class:`DecodeSpec`)."""

    device: str = Field(
        default="cpu",
        pattern=r"^[a-z][a-z0-9_-]*$",
        description="accelerator of this pool: cpu, cuda, rocm, xpu, tpu or a platform "
        "declared in the operator's platforms file (checked by the operator, not by an enum)",
    )
    kv_buffer_device: str | None = Field(
        default=None,
        description="where the KV buffer NIXL registers lives; derived from device and the "
        "other role's device when omitted (see docs/derivation.md)",
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="tensor-parallel ranks")
    nodes_per_instance: int = Field(
        default=1,
        ge=1,
        le=64,
        description="pods (one per node) one instance of the engine spans; above 1 each "
        "instance is a LeaderWorkerSet group (leaderworkerset.x-k8s.io/v1: the LWS "
        "controller must be installed) whose leader serves and whose workers hold the "
        "other ranks: tensorParallelSize (times pipeline stages) is the instance's total, "
        "spread evenly over its pods. A replica, a budget and a rollout count instances "
        "(docs/multinode.md)",
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="node labels the pods must land on (node pool)"
    )
    tolerations: list[Toleration] | None = Field(
        default=None, description="tolerations for tainted node pools (e.g. GPU nodes)"
    )
    affinity: shape("Affinity") | None = Field(  # type: ignore[valid-type]
        default=None, description="the pods' affinity, passed to them unchanged"
    )
    resources: Resources | None = Field(
        default=None, description="engine container resources; GPU roles must limit the GPU"
    )
    claimed_devices: int | None = Field(
        default=None,
        ge=1,
        description="the accelerators one pod gets from its resource claims (the claim "
        "template is not read by the operator): required when resources.claims gives an "
        "accelerator pool its devices instead of the device resource's limit, and held to "
        "its ranks the same way",
    )
    accelerator_memory: Quantity | None = Field(
        default=None,
        description="memory of one accelerator of this pool (e.g. 80Gi for an H100): with "
        "kvBufferDevice cpu on a GPU pool, vLLM keeps a host buffer as large as its device "
        "KV cache, which is counted against limits.memory (a limit that cannot hold it is "
        "refused with the numbers)",
    )
    image: str | None = Field(default=None, description="image override for this role")
    rdma: Rdma | None = Field(
        default=None,
        description="this pool's RDMA, in place of spec.kvTransfer.rdma (pools whose NICs, "
        "networks or device resources differ)",
    )
    startup_seconds: int | None = Field(
        default=None,
        ge=10,
        le=86400,
        description="how long the engine may take to start (load the model, compile) before "
        "its readiness and liveness probes count: its startup probe's budget; default from "
        "the model's size (vllm: 10 min + spec.modelConfig.weightsMemory at 100 MB/s, at "
        "25 MB/s more when the engine downloads a hub id itself; 30 min when the size is "
        "not given), reference: 2 min",
    )
    drain_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description="the least a terminating pod waits (its preStop) before its engine "
        "stops: raise it to the longest generation it may be serving; the derived drain "
        "(in-flight KV transfers, docs/derivation.md) when that is longer. The grace period "
        "follows",
    )
    args: list[str] | None = Field(
        default=None,
        description="extra engine arguments, appended to the derived ones (flags the "
        "operator derives, e.g. --port or --kv-transfer-config, are refused)",
    )
    env: list[EnvVar] | None = Field(
        default=None,
        description="extra env (names the operator derives, e.g. UCX_TLS or VLLM_CPU_*, "
        "are refused: set the spec field instead)",
        # one entry per name: the API server refuses a second (a pod would take the last)
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    rollout: RolloutStrategy = Field(
        default_factory=RolloutStrategy,
        description="how a spec change replaces this role's pods (maxSurge, maxUnavailable)",
        **_EMPTY,
    )
    pod_template: PodTemplate | None = Field(
        default=None,
        description="an overlay on the role's pods: labels, annotations, volumes, mounts, "
        "pull secrets, service account, extra and init containers (docs/operator.md, "
        '"Pod overlays"); what would break a derived setting is refused',
    )


# --- scaling: pod counts, disruption budgets, spreading ------------------------------
class PerDecode(_Model):
    """Prefill replicas that follow decode: clamp(ceil(decode.replicas * ratio), min, max)."""

    model_config = ConfigDict(json_schema_extra=_rules(PER_DECODE_BOUNDS_RULE))

    ratio: float = Field(
        gt=0, description="prefill pods per decode pod, e.g. 0.5 (rounded up: 3 decode → 2)"
    )
    min_replicas: int = Field(
        default=0,
        ge=0,
        alias="min",
        description="fewest prefill pods (also with 0 decode pods); any decode pod gets at "
        "least one prefill pod anyway",
    )
    max_replicas: int | None = Field(
        default=None, ge=1, alias="max", description="most prefill pods; no bound when omitted"
    )


class DisruptionBudget(_Model):
    """The role's PodDisruptionBudget (policy/v1) ``<name>-<role>``, rendered with
    ``minAvailable`` = replicas - maxUnavailable (scaling.min_available)."""

    enabled: bool = Field(default=True, description="render it; false: no budget")
    max_unavailable: IntOrPercent = Field(
        default=1,
        description="pods of the role a voluntary disruption (a node drain) may take at "
        'once: a count or a percentage ("25%", rounded up); the budget states it as '
        "minAvailable = replicas - maxUnavailable",
    )


class ScaledRoleSpec(RoleSpec):
    """A role's pool with what scaling adds to both roles: its disruption budget and how its
    pods spread across nodes."""

    disruption_budget: DisruptionBudget = Field(
        default_factory=DisruptionBudget,
        description="PodDisruptionBudget <name>-<role> (maxUnavailable 1 by default); none "
        "while it could refuse no eviction (replicas - maxUnavailable is 0: one pod with the "
        "default, or 0 replicas)",
        **_EMPTY,
    )
    topology_spread_constraints: list[shape("TopologySpreadConstraint")] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="topologySpreadConstraints of the pods, used as given; omitted: "
        "spread across nodes (topologyKey kubernetes.io/hostname, maxSkew 1, "
        "ScheduleAnyway, the role's pods); []: none",
    )


class PrefillSpec(ScaledRoleSpec):
    """The prefill pool: a fixed pod count (replicas), or one that follows decode."""

    model_config = ConfigDict(json_schema_extra=_rules(PREFILL_COUNT_RULE))

    replicas: int | None = Field(
        default=None,
        ge=0,
        description="number of pods; 0 removes the role; 1 when neither replicas nor "
        "perDecode is set (set one, not both)",
    )
    per_decode: PerDecode | None = Field(
        default=None,
        description="follow spec.decode.replicas (kubectl scale, HPA, KEDA): "
        "clamp(ceil(decode * ratio), min, max) pods, instead of replicas",
    )


class DecodeSpec(ScaledRoleSpec):
    """The decode pool; its replicas are the resource's scale subresource."""

    replicas: int = Field(
        default=1,
        ge=0,
        description="number of pods; 0 removes the role. The scale subresource sets it "
        "(kubectl scale, HPA, KEDA)",
    )
