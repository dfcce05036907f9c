"""DisaggregatedDeployment API: the pydantic models the CRD is generated from.

Pure layer. Python fields are snake_case, the wire (and the CRD) camelCase through an
alias generator; both spellings are accepted (``populate_by_name``). Unknown fields are
refused, so a typo in a manifest is an error, not a silently ignored setting (the API
server prunes them anyway; ``disagg render`` runs without one).

Public names: GROUP, VERSION, KIND, PLURAL, SINGULAR, SHORT_NAMES, API_VERSION, ROLES,
:class:`DisaggregatedDeployment`, :class:`DeploymentSpec`, :class:`RoleSpec` (shared by
:class:`PrefillSpec` and :class:`DecodeSpec`; scaling fields: :class:`ScaledRoleSpec`,
:class:`PerDecode`, :class:`DisruptionBudget`),
:class:`KVTransfer`, :class:`Engine`, :class:`ModelConfig`, :class:`Llmd`,
:class:`TransferCanary`,
:class:`DeploymentStatus`.

Cross-field rules that CEL can express are attached as ``x-kubernetes-validations`` (see
:data:`CEL_RULES`); :mod:`disagg_operator.validation` checks the same and more without an
API server.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

from disagg_operator.engines import llmd as llmd_sidecar
from disagg_worker import ucx

GROUP = "disagg.dev"
VERSION = "v1alpha1"
KIND = "DisaggregatedDeployment"
PLURAL = "disaggregateddeployments"
SINGULAR = "disaggregateddeployment"
SHORT_NAMES = ["disagg"]  # not "dd": the Datadog Operator's DatadogAgent has it
API_VERSION = f"{GROUP}/{VERSION}"

Role = Literal["prefill", "decode"]
ROLES: tuple[Role, Role] = ("prefill", "decode")

# Serving port of every engine container; with the llm-d routing sidecar on decode, the
# sidecar takes this port and the engine moves to ENGINE_BEHIND_SIDECAR_PORT.
HTTP_PORT = 8000
ENGINE_BEHIND_SIDECAR_PORT = 8200
# The decode pods' transfer-canary container serves its readiness endpoint here.
CANARY_PORT = 8090

# Kubernetes quantities are int-or-string on the wire ("500m", "1Gi", 2).
Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    ),
]
# Upstream shapes we pass through untouched; the API server validates them on the Pod.
FreeForm = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        protected_namespaces=(),
    )


# An object default of {} lets the API server apply the nested field defaults.
_EMPTY: dict[str, Any] = {"json_schema_extra": {"default": {}}}


def _rules(*rules: tuple[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


# --- CEL rules (admission) ------------------------------------------------------------
# Each is also checked by validation.py, so `disagg render` and the operator reject the
# same manifests an API server would.
TP_RULE = (
    "self.prefill.tensorParallelSize <= self.decode.tensorParallelSize || "
    "(has(self.modelConfig) && has(self.modelConfig.numKeyValueHeads))",
    "spec.prefill.tensorParallelSize exceeds spec.decode.tensorParallelSize: lower prefill "
    "TP, raise decode TP, or set spec.modelConfig.numKeyValueHeads so the operator can "
    "check the pair against vLLM (>= 0.14 serves it when prefill KV is not replicated)",
)
TP_DIVIDES_RULE = (
    "self.prefill.tensorParallelSize > self.decode.tensorParallelSize ? "
    "self.prefill.tensorParallelSize % self.decode.tensorParallelSize == 0 : "
    "self.decode.tensorParallelSize % self.prefill.tensorParallelSize == 0",
    "spec.decode.tensorParallelSize and spec.prefill.tensorParallelSize must divide: "
    "the larger must be a multiple of the smaller",
)
REFERENCE_TP_RULE = (
    "self.engine.type != 'reference' || "
    "(self.prefill.tensorParallelSize == 1 && self.decode.tensorParallelSize == 1)",
    "the reference engine runs tensorParallelSize 1 only; set it to 1 or use engine vllm",
)
VLLM_CPU_PREFILL_RULE = (
    "self.engine.type != 'vllm' || self.prefill.device != 'cpu' || ("
    "has(self.prefill.resources) && has(self.prefill.resources.limits) && "
    "'memory' in self.prefill.resources.limits && ("
    "'cpu' in self.prefill.resources.limits || "
    "(has(self.prefill.resources.requests) && 'cpu' in self.prefill.resources.requests)))",
    "spec.prefill.resources: a vLLM CPU pool needs limits.memory and a cpu limit or "
    "request; its KV cache size and thread count derive from them",
)
VLLM_CPU_DECODE_RULE = (
    "self.engine.type != 'vllm' || self.decode.device != 'cpu' || ("
    "has(self.decode.resources) && has(self.decode.resources.limits) && "
    "'memory' in self.decode.resources.limits && ("
    "'cpu' in self.decode.resources.limits || "
    "(has(self.decode.resources.requests) && 'cpu' in self.decode.resources.requests)))",
    "spec.decode.resources: a vLLM CPU pool needs limits.memory and a cpu limit or "
    "request; its KV cache size and thread count derive from them",
)
BACKENDS_UNIQUE_RULE = (
    "self.backends.all(b, self.backends.exists_one(c, c == b))",
    "spec.kvTransfer.backends lists a backend twice; list each NIXL backend once",
)
LEASE_RULE = (
    "self.blockLeaseSeconds > self.transferDeadlineSeconds",
    "spec.kvTransfer.blockLeaseSeconds must exceed spec.kvTransfer.transferDeadlineSeconds: "
    "prefill would free blocks a decode may still be reading; raise the lease",
)
_HOST_ONLY = "|".join(ucx.host_only_names())
UCX_REACH_RULE = (
    f"!has(self.ucxTls) || !self.ucxTls.matches('^({_HOST_ONLY})(,({_HOST_ONLY}))*$')",
    "spec.kvTransfer.ucxTls lists only transports that stay inside one host; add tcp, or "
    "rc for RDMA: prefill and decode run in different pods, so shared-memory transports "
    "cannot carry KV between them",
)
SIDECAR_IMAGE_RULE = (
    "!self.enabled || (has(self.image) && size(self.image) > 0)",
    "spec.llmd.routingSidecar.image is required when the routing sidecar is enabled",
)
SIDECAR_NEEDS_LLMD_RULE = (
    "!self.routingSidecar.enabled || self.enabled",
    "spec.llmd.routingSidecar.enabled needs spec.llmd.enabled: true; enable llm-d or "
    "disable the sidecar",
)
# Scaling (see the classes below the role specs).
PREFILL_COUNT_RULE = (
    "!has(self.replicas) || !has(self.perDecode)",
    "spec.prefill: set replicas (a fixed count) or perDecode (follow decode), not both; remove one",
)
PER_DECODE_BOUNDS_RULE = (
    "!has(self.max) || self.min <= self.max",
    "spec.prefill.perDecode.min exceeds spec.prefill.perDecode.max; lower min or raise max",
)
CEL_RULES = (
    TP_RULE,
    TP_DIVIDES_RULE,
    REFERENCE_TP_RULE,
    VLLM_CPU_PREFILL_RULE,
    VLLM_CPU_DECODE_RULE,
    BACKENDS_UNIQUE_RULE,
    LEASE_RULE,
    UCX_REACH_RULE,
    SIDECAR_IMAGE_RULE,
    SIDECAR_NEEDS_LLMD_RULE,
    PREFILL_COUNT_RULE,
    PER_DECODE_BOUNDS_RULE,
)


class Engine(_Model):
    """Which serving engine the pods run."""

    type: Literal["vllm", "reference"] = Field(
        description="vllm: `vllm serve` with NixlConnector (real deployments); reference: "
        "the built-in worker engine (`disagg worker serve`; cpu or cuda, TP 1)"
    )
    image: str = Field(min_length=1, description="container image of the engine")
    version: str | None = Field(
        default=None,
        pattern=r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?([.+_-][0-9A-Za-z.+_-]*)?$",
        description='vLLM version the images run, e.g. "0.32.0"; read from the image tag '
        "when omitted (an untagged or `latest` image assumes the newest profile and says so "
        "in the EngineVersionKnown condition). Picks the contract profile "
        "(docs/derivation.md)",
    )


class ModelConfig(_Model):
    """Facts about the model that decide which P/D pairs vLLM can serve."""

    num_key_value_heads: int | None = Field(
        default=None,
        ge=1,
        description="the model's total KV heads (config.json num_key_value_heads); lets "
        "prefill TP exceed decode TP where vLLM allows it (prefill KV not replicated)",
    )


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


class Resources(_Model):
    """Compute resources of the engine container (core/v1 ResourceRequirements)."""

    limits: dict[str, Quantity] | None = Field(
        default=None, description="limits, e.g. {nvidia.com/gpu: 1, memory: 16Gi}"
    )
    requests: dict[str, Quantity] | None = Field(
        default=None, description="requests, e.g. {cpu: '4', memory: 16Gi}"
    )


class EnvVar(_Model):
    """An extra environment variable; names the operator derives are refused (use the
    spec field that sets them)."""

    name: str = Field(min_length=1, description="variable name")
    value: str | None = Field(default=None, description="literal value")
    value_from: FreeForm | None = Field(
        default=None, description="core/v1 EnvVarSource (secretKeyRef, fieldRef, ...)"
    )


# A count or a percentage of a role's replicas ("25%"), as in a Deployment's strategy or
# a PodDisruptionBudget's maxUnavailable.
_PERCENT = re.compile(r"^[0-9]{1,3}%$")


def _int_or_percent(value: Any) -> Any:
    if isinstance(value, bool) or not (
        (isinstance(value, int) and value >= 0)
        or (isinstance(value, str) and _PERCENT.match(value) and int(value[:-1]) <= 100)
    ):
        raise ValueError("neither a count (0, 1, ...) nor a percentage like '25%'")
    return value


IntOrPercent = Annotated[
    int | str,
    BeforeValidator(_int_or_percent),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": _PERCENT.pattern},
            ],
        }
    ),
]


class RolloutStrategy(_Model):
    """How a role's pods are replaced when the spec changes (a Deployment's RollingUpdate).

    Percentages are of the role's replicas: maxSurge rounds up, maxUnavailable down (both
    0 is refused). A change of the KV-compatibility key does not roll in place: it starts
    a new KV revision (docs/operator.md, "Rollouts").
    """

    max_surge: IntOrPercent = Field(
        default="25%", description="pods above replicas while rolling (count or percent)"
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
    node_selector: dict[str, str] | None = Field(
        default=None, description="node labels the pods must land on (node pool)"
    )
    tolerations: list[Toleration] | None = Field(
        default=None, description="tolerations for tainted node pools (e.g. GPU nodes)"
    )
    affinity: FreeForm | None = Field(
        default=None, description="core/v1 Affinity, passed to the pods unchanged"
    )
    resources: Resources | None = Field(
        default=None, description="engine container resources; GPU roles must limit the GPU"
    )
    image: str | None = Field(default=None, description="image override for this role")
    args: list[str] | None = Field(
        default=None,
        description="extra engine arguments, appended to the derived ones (flags the "
        "operator derives, e.g. --port or --kv-transfer-config, are refused)",
    )
    env: list[EnvVar] | None = Field(
        default=None,
        description="extra env (names the operator derives, e.g. UCX_TLS or VLLM_CPU_*, "
        "are refused: set the spec field instead)",
    )
    rollout: RolloutStrategy = Field(
        default_factory=RolloutStrategy,
        description="how a spec change replaces this role's pods (maxSurge, maxUnavailable)",
        **_EMPTY,
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
    """The role's PodDisruptionBudget (policy/v1) ``<name>-<role>``."""

    enabled: bool = Field(default=True, description="render it; false: no budget")
    max_unavailable: IntOrPercent = Field(
        default=1,
        description="pods of the role a voluntary disruption (a node drain) may take at "
        'once: a count or a percentage ("25%")',
    )


class ScaledRoleSpec(RoleSpec):
    """A role's pool with what scaling adds to both roles: its disruption budget and how its
    pods spread across nodes."""

    disruption_budget: DisruptionBudget = Field(
        default_factory=DisruptionBudget,
        description="PodDisruptionBudget <name>-<role> (maxUnavailable 1 by default); none "
        "for a role with 0 replicas",
        **_EMPTY,
    )
    topology_spread_constraints: list[FreeForm] | None = Field(
        default=None,
        description="core/v1 TopologySpreadConstraints of the pods, used as given; omitted: "
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


class KVTransfer(_Model):
    """How the KV cache moves from prefill to decode."""

    model_config = ConfigDict(
        json_schema_extra=_rules(BACKENDS_UNIQUE_RULE, LEASE_RULE, UCX_REACH_RULE)
    )

    connector: Literal["NixlConnector"] = Field(
        default="NixlConnector", description="KV connector; NixlConnector only"
    )
    backends: list[Annotated[str, StringConstraints(min_length=1, max_length=32)]] = Field(
        default=["UCX"],
        min_length=1,
        max_length=8,  # bounds the CEL uniqueness rule's cost for the API server
        description="NIXL backends, e.g. [UCX]; each must move the buffer's memory type",
    )
    side_channel_port: int = Field(
        default=5600,
        ge=1024,
        le=65535,
        description="NIXL handshake port (vLLM >= 0.11.1: one listener per engine on this "
        "port; 0.11.0: rank r of a TP group listens on port + r)",
    )
    ucx_tls: str | None = Field(
        default=None,
        max_length=256,  # bounds the CEL reach rule's cost for the API server
        pattern=r"^\^?[a-z0-9_]+(,[a-z0-9_]+)*$",
        description="UCX_TLS override; derived per device when omitted. It must keep a "
        "transport that crosses pods (tcp, rc, ud, dc, ...; an exclusion ^... does): "
        "shared-memory ones alone (cma, sm, cuda_ipc, ...) are refused",
    )
    transfer_deadline_seconds: float = Field(
        default=10.0, gt=0, description="decode gives up on one KV transfer after this"
    )
    block_lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="prefill frees KV blocks no decode has read after this (vLLM: the "
        "abort timeout env before 0.22, kv_lease_duration from 0.22)",
    )
    kv_load_failure_policy: Literal["fail", "recompute"] | None = Field(
        default=None,
        description="vLLM >= 0.13 kv_load_failure_policy: fail the request or recompute "
        "the prefill locally when a KV load fails; vLLM's default when omitted",
    )
    kv_connector_extra_config: FreeForm | None = Field(
        default=None,
        description="extra keys merged into kv_connector_extra_config (vLLM reads them "
        "unchecked); keys the operator derives (backends, kv_lease_duration, "
        "enforce_handshake_compat) are refused",
    )


# Gateway API Inference Extension InferencePool: spec.llmd.inferencePool.version → apiVersion.
# v1 is the GA API (api/v1/inferencepool_types.go upstream); v1alpha2 (the x-k8s.io group,
# deprecated, and dropped from the upstream tree) is rendered only on request.
InferencePoolVersion = Literal["v1", "v1alpha2"]
INFERENCE_POOL_APIS: dict[str, str] = {
    "v1": "inference.networking.k8s.io/v1",
    "v1alpha2": "inference.networking.x-k8s.io/v1alpha2",
}
EPP_PORT = 9002  # the endpoint picker's gRPC port in upstream's manifests and charts


class ExtensionRef(_Model):
    """The endpoint picker (EPP) Service an InferencePool hands routing decisions to
    (``endpointPickerRef`` in v1, ``extensionRef`` in v1alpha2)."""

    name: str = Field(min_length=1, description="name of the EPP Service")
    port: int = Field(
        default=EPP_PORT, ge=1, le=65535, description="the EPP Service's port (its gRPC port)"
    )
    failure_mode: Literal["FailOpen", "FailClose"] | None = Field(
        default=None,
        description="what the gateway does when the EPP does not answer; the gateway's "
        "default (FailClose) when omitted",
    )


class InferencePool(_Model):
    """Gateway API Inference Extension InferencePool over this deployment's pods."""

    enabled: bool = Field(default=True, description="render an InferencePool")
    version: InferencePoolVersion = Field(
        default="v1",
        description="InferencePool API: v1 (inference.networking.k8s.io, GA) or v1alpha2 "
        "(inference.networking.x-k8s.io, deprecated) for gateways that serve only that",
    )
    extension_ref: ExtensionRef | None = Field(
        default=None, description="endpoint picker Service; default <name>-epp, port 9002"
    )

    @property
    def api_version(self) -> str:
        return INFERENCE_POOL_APIS[self.version]


class RoutingSidecar(_Model):
    """llm-d routing sidecar in decode pods: serves the port, calls prefill, then decode."""

    model_config = ConfigDict(json_schema_extra=_rules(SIDECAR_IMAGE_RULE))

    enabled: bool = Field(default=False, description="add the sidecar to decode pods")
    image: str | None = Field(
        default=None,
        description=f"sidecar image, llm-d-router {llmd_sidecar.MIN_VERSION} or later, e.g. "
        f"{llmd_sidecar.IMAGE_EXAMPLE}",
    )
    args: list[str] | None = Field(default=None, description="extra sidecar arguments")


class Llmd(_Model):
    """Optional llm-d integration (llm-d.ai/role labels are always set)."""

    model_config = ConfigDict(json_schema_extra=_rules(SIDECAR_NEEDS_LLMD_RULE))

    enabled: bool = Field(default=False, description="turn on the llm-d objects below")
    inference_pool: InferencePool = Field(
        default_factory=InferencePool, description="InferencePool over the pods", **_EMPTY
    )
    routing_sidecar: RoutingSidecar = Field(
        default_factory=RoutingSidecar, description="routing sidecar on decode pods", **_EMPTY
    )


class TransferCanary(_Model):
    """A canary P/D request from each decode pod behind a readiness probe (TransferPathReady)."""

    enabled: bool = Field(
        default=True,
        description="add the transfer-canary container to decode pods: a decode pod is "
        "Ready only while a canary request through prefill and this pod's engine passes",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="image with the `disagg` command for the canary container; default: the "
        "decode image for engine reference, the operator's --canary-image for engine vllm "
        "(none: no canary, TransferPathReady says so)",
    )


class DeploymentSpec(_Model):
    """Desired state: a model served by a prefill pool and a decode pool."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            TP_RULE,
            TP_DIVIDES_RULE,
            REFERENCE_TP_RULE,
            VLLM_CPU_PREFILL_RULE,
            VLLM_CPU_DECODE_RULE,
        )
    )

    model: str = Field(
        min_length=1,
        description="model to serve (vllm: a Hugging Face id or path; reference: a preset)",
    )
    engine: Engine = Field(description="serving engine and its image")
    model_spec: ModelConfig = Field(
        default_factory=ModelConfig,
        alias="modelConfig",
        description="facts about the model (KV heads) for P/D pair checks",
        **_EMPTY,
    )
    prefill: PrefillSpec = Field(description="the prefill pool (produces KV)")
    decode: DecodeSpec = Field(description="the decode pool (reads KV from prefill)")
    kv_transfer: KVTransfer = Field(
        default_factory=KVTransfer,
        description="KV transfer settings shared by both roles",
        **_EMPTY,
    )
    llmd: Llmd = Field(default_factory=Llmd, description="llm-d integration", **_EMPTY)
    transfer_canary: TransferCanary = Field(
        default_factory=TransferCanary,
        description="transfer-path canary in decode pods (TransferPathReady condition)",
        **_EMPTY,
    )

    def role(self, name: str) -> PrefillSpec | DecodeSpec:
        return self.prefill if name == "prefill" else self.decode

    def peer(self, name: str) -> PrefillSpec | DecodeSpec:
        return self.decode if name == "prefill" else self.prefill


class ObjectMeta(BaseModel):
    """The part of metadata render needs; everything else is kept and ignored."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None


class RoleStatus(_Model):
    """Pod counts of one role."""

    desired: int = Field(default=0, description="pods the spec asks for")
    ready: int = Field(default=0, description="pods whose Ready condition is True")
    updated: int = Field(default=0, description="pods running the current pod spec")
    summary: str = Field(
        default="0/0", description="ready/desired, plus the updated count while rolling"
    )
    current_revision: str | None = Field(
        default=None, description="pod template most routed pods run (disagg.dev/revision)"
    )
    update_revision: str | None = Field(
        default=None, description="pod template the spec wants (equal to current when done)"
    )


class Condition(_Model):
    """A status condition (metav1.Condition shape)."""

    type: str = Field(
        description="Ready, Progressing, Degraded, EngineVersionKnown or TransferPathReady"
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown")
    reason: str = Field(description="CamelCase reason")
    message: str = Field(description="human-readable detail")
    observed_generation: int | None = Field(default=None, description="spec generation seen")
    last_transition_time: str | None = Field(
        default=None, description="when status last changed (RFC 3339)"
    )


class DeploymentStatus(_Model):
    """Observed state, written by the operator."""

    model_config = ConfigDict(extra="allow")

    observed_generation: int | None = Field(default=None, description="last generation seen")
    prefill: RoleStatus | None = Field(default=None, description="prefill pod counts")
    decode: RoleStatus | None = Field(default=None, description="decode pod counts")
    kv_revision: str | None = Field(
        default=None, description="the spec's KV-compatibility key (disagg.dev/kv-revision)"
    )
    routed_kv_revision: str | None = Field(
        default=None, description="the KV revision the Services and InferencePool select"
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready, Progressing, Degraded, EngineVersionKnown, TransferPathReady",
    )
    replicas: int | None = Field(
        default=None, description="decode pods that exist (the scale subresource's status)"
    )
    selector: str | None = Field(
        default=None,
        description="label selector of the decode pods (the scale subresource's, for HPA and KEDA)",
    )
    phase: str | None = Field(
        default=None, description="derived from conditions, for the printer column only"
    )


class DisaggregatedDeployment(BaseModel):
    """The whole custom resource as a body dict parses into."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    api_version: Literal["disagg.dev/v1alpha1"] = "disagg.dev/v1alpha1"
    kind: Literal["DisaggregatedDeployment"] = "DisaggregatedDeployment"
    metadata: ObjectMeta
    spec: DeploymentSpec
    status: dict[str, Any] | None = None
