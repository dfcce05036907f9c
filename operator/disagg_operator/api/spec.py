"""The deployment: engine, model, KV transfer, llm-d, the canary, the spec and the resource.

Part of :mod:`disagg_operator.api`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from disagg_operator.api.autoscaling import Autoscaling
from disagg_operator.api.base import _EMPTY, _Model, _rules
from disagg_operator.api.corev1 import shape
from disagg_operator.api.groups import GangScheduling, Placement
from disagg_operator.api.rdma import Rdma
from disagg_operator.api.roles import DecodeSpec, PrefillSpec
from disagg_operator.api.rules import (
    AUTOSCALING_MONITORING_RULE,
    AUTOSCALING_PER_DECODE_RULE,
    AUTOSCALING_SCALE_RULE,
    BACKENDS_REMOTE_RULE,
    BACKENDS_UNIQUE_RULE,
    GROUP_PREFERRED_RULE,
    LEASE_RULE,
    ROUTING_QUEUE_RULE,
    SIDECAR_IMAGE_RULE,
    SIDECAR_NEEDS_LLMD_RULE,
    TP_DIVIDES_RULE,
    UCX_REACH_RULE,
)
from disagg_operator.contracts import inference_pool, prometheus
from disagg_operator.contracts import llmd as llmd_sidecar


class EngineSpec(_Model):
    """The spec's engine block: which serving engine the pods run (the engine itself is a
    plugin of the operator, :mod:`disagg_operator.engines`)."""

    # The CRD lists the engines (enum and description) from the engine table; any other
    # name is refused by validation, naming the engines the operator serves.
    type: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$", description="serving engine")
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


class KVTransfer(_Model):
    """How the KV cache moves from prefill to decode."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            BACKENDS_UNIQUE_RULE, BACKENDS_REMOTE_RULE, LEASE_RULE, UCX_REACH_RULE
        )
    )

    connector: Literal["NixlConnector"] = Field(
        default="NixlConnector", description="KV connector; NixlConnector only"
    )
    mode: Literal["pull", "push"] = Field(
        default="pull",
        description="who moves the KV, one mode for both pools: pull (decode READs "
        "prefill's blocks; vLLM NixlConnector) or push (prefill WRITEs into the blocks "
        "decode registered; vLLM >= 0.24 NixlPushConnector, the reference worker's push). "
        "The two do not interoperate, so a change rolls out a new KV revision, never a "
        "mixed pair. Which pools may run pipeline stages in each mode: docs/derivation.md",
    )
    backends: list[Annotated[str, StringConstraints(min_length=1, max_length=32)]] = Field(
        default=["UCX"],
        min_length=1,
        max_length=8,  # bounds the CEL uniqueness rule's cost for the API server
        description="NIXL backends, e.g. [UCX]; each must move the buffer's memory type, "
        "and one must reach another pod (storage backends such as GDS do not)",
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
    rdma: Rdma | None = Field(
        default=None,
        description="move KV over RDMA (both pools; spec.<role>.rdma overrides it for one "
        "pool whose NICs differ): the device resource, Multus networks, NICs, GID index, "
        "IPC_LOCK, and the transports derived from them",
    )


# Gateway API Inference Extension InferencePool: spec.llmd.inferencePool.version → apiVersion.
# v1 is the GA API (api/v1/inferencepool_types.go upstream). v1alpha2 (the x-k8s.io group)
# is refused: gateway-api-inference-extension v1.5.0 removed its CRD (#2796), so a cluster
# that installs a current release answers "no matches for kind" to it.
INFERENCE_POOL_APIS: dict[str, str] = {"v1": inference_pool.API_VERSION}
REMOVED_POOL_VERSIONS = {
    "v1alpha2": "gateway-api-inference-extension v1.5.0 removed the "
    "inference.networking.x-k8s.io/v1alpha2 InferencePool CRD; set v1 "
    "(inference.networking.k8s.io/v1, what llm-d's gateways and pickers read), then "
    "delete the old pool (CHANGELOG: InferencePool v1alpha2 removed)"
}


def _pool_version(value: Any) -> Any:
    if isinstance(value, str) and value in REMOVED_POOL_VERSIONS:
        raise ValueError(f"{value} is no longer rendered: {REMOVED_POOL_VERSIONS[value]}")
    return value


InferencePoolVersion = Annotated[Literal["v1"], BeforeValidator(_pool_version)]
EPP_PORT = inference_pool.EPP_PORT


class ExtensionRef(_Model):
    """The endpoint picker (EPP) Service an InferencePool hands routing decisions to
    (its ``endpointPickerRef``)."""

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
        description="InferencePool API: v1 (inference.networking.k8s.io, GA; v1alpha2 was "
        "removed upstream in gateway-api-inference-extension v1.5.0)",
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
    min_bandwidth_gbytes_per_second: float | None = Field(
        default=None,
        gt=0,
        description="the least KV bandwidth (GB/s) a canary's transfer may show before "
        "TransferPathReady says SlowTransport; default: the RDMA floor "
        "(spec.kvTransfer.rdma.minBandwidthGbytesPerSecond) where the pair runs RDMA, none "
        "otherwise",
    )


# The threshold's default (non-cached prompt tokens): a starting point, not a measured
# optimum (docs/routing.md, "The threshold, measured": no break-even on an idle pair here).
DEFAULT_THRESHOLD_TOKENS = 64


class TransferLocality(_Model):
    """Keep each prefill->decode KV transfer inside one zone (the node label
    topology.kubernetes.io/zone, as the pools' EndpointSlices carry it): docs/routing.md,
    Transfer locality."""

    mode: Literal["Required", "Preferred"] = Field(
        description="Required: a request is paired only within a zone (503 naming the zone "
        "when the prefill's zone has no ready decode; a zoned prefill is never paired with a "
        "decode whose zone is unknown); Preferred: a decode in the prefill's zone first, any "
        "other when none can take it (pods without a zone form a zone-less group of their "
        "own). Disagg router only: it reads the pods' zones from EndpointSlices, through a "
        "Role the operator renders for its ServiceAccount"
    )


class Routing(_Model):
    """Which requests take both hops (docs/routing.md). One policy for every router: the
    disagg router's flags and llm-d's endpoint picker config are rendered from it."""

    model_config = ConfigDict(json_schema_extra=_rules(ROUTING_QUEUE_RULE))

    disaggregate: Literal["always", "threshold"] = Field(
        default="always",
        description="always: every request through prefill, then decode; threshold: only "
        "requests whose prompt tokens not already cached on the picked decode reach "
        "thresholdTokens (shorter ones are prefilled by decode itself, on purpose)",
    )
    threshold_tokens: int = Field(
        default=DEFAULT_THRESHOLD_TOKENS,
        ge=0,
        description="with disaggregate threshold: non-cached prompt tokens from which a "
        f"request goes through prefill (default {DEFAULT_THRESHOLD_TOKENS}: a starting point "
        "to tune, docs/routing.md)",
    )
    prefill_queue_limit: int | None = Field(
        default=None,
        ge=1,
        description="with disaggregate threshold: also keep a request on decode while every "
        "prefill has this many requests in flight (disagg router only)",
    )
    prefix_index: Literal["approximate", "events"] = Field(
        default="approximate",
        description="what the router knows of each decode's prefix cache: approximate (the "
        "prompt blocks it sent there) or events (the engine's own KV cache events: every pod "
        "publishes them on port 5557 to the router, block size and hashing alike; vLLM only; "
        "docs/routing.md)",
    )
    transfer_locality: TransferLocality | None = Field(
        default=None,
        description="keep each prefill->decode KV transfer in one zone, required or "
        "preferred (disagg router only); default: any prefill with any decode",
    )


ROUTER_PORT = 8080  # the router container's port; its Service serves port 80


class Router(_Model):
    """The front door: the disagg proxy as a Deployment and a ClusterIP Service
    ``<name>-router``, spreading each request's two hops over every ready prefill and
    decode pod (their headless Services, resolved again every few seconds)."""

    enabled: bool = Field(default=False, description="render the router Deployment and Service")
    replicas: int = Field(
        default=2,
        ge=0,
        description="router pods; default 2, so the front door survives a node (a "
        "PodDisruptionBudget keeps one up from 2, and they spread over nodes)",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="image with the `disagg` command; default: the decode image for engine "
        "reference, the operator's worker image (--canary-image, the chart's "
        "transferCanary image) for engine vllm",
    )
    policy: Literal["least-loaded", "round-robin"] = Field(
        default="least-loaded",
        description="how a pod is picked for each hop (decode: after prefix affinity, when "
        "the engine keeps a prefix cache)",
    )
    timeout_seconds: float = Field(
        default=60.0, gt=0, description="the deadline of one request's two hops"
    )
    resources: shape("ResourceRequirements") | None = Field(  # type: ignore[valid-type]
        default=None,
        description="the router container's resources; default requests cpu 100m, memory "
        "128Mi, limits memory 512Mi",
    )


class Monitoring(_Model):
    """Prometheus Operator objects for the deployment: a PodMonitor per role (the engines'
    and the transfer canaries' /metrics), one for the router, and a PrometheusRule with
    the alerts docs/troubleshooting.md explains. Needs the Prometheus Operator's CRDs
    (monitoring.coreos.com/v1) and the chart value monitoring.enabled (its RBAC)."""

    enabled: bool = Field(default=False, description="render the PodMonitors and PrometheusRule")
    interval: str = Field(
        default="30s",
        pattern=prometheus.DURATION.pattern,
        description="how often Prometheus scrapes each pod (a Prometheus duration: 30s, 1m)",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="labels on the PodMonitors and the PrometheusRule, for the Prometheus' "
        "podMonitorSelector and ruleSelector (kube-prometheus-stack: release: <its release>)",
    )
    prometheus_namespace: str = Field(
        default="monitoring",
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="the namespace Prometheus runs in: the NetworkPolicy admits its pods to "
        "the ports scraped (the serving port 8000, where vLLM serves /metrics, and the "
        "canary's 8090)",
    )
    rules: bool = Field(default=True, description="render the PrometheusRule <name>")


class SecretKey(_Model):
    """A key of a Secret in the deployment's namespace."""

    name: str = Field(min_length=1, description="the Secret's name")
    key: str = Field(min_length=1, description="the key in the Secret")


class ModelCache(_Model):
    """Where an ``hf://`` model is downloaded to, and the token to download it with."""

    claim_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="a PersistentVolumeClaim (ReadWriteMany for more than one pod) the "
        "download lands in and every pod reads: downloaded once for all pods and restarts. "
        "Omitted: an emptyDir per pod (each pod downloads it once)",
    )
    token_secret: SecretKey | None = Field(
        default=None, description="the Hugging Face token (HF_TOKEN) for gated or private models"
    )


class Tracing(_Model):
    """OpenTelemetry traces of each request (docs/routing.md, Tracing): the router, the
    reference worker and vLLM export their spans to one OTLP/HTTP collector, one trace per
    request across router, prefill, KV transfer and decode."""

    endpoint: str = Field(
        min_length=1,
        pattern=r"^https?://[^\s]+$",
        description="the collector's OTLP/HTTP traces URL, used as it is (e.g. "
        "http://otel-collector.observability:4318/v1/traces): the router and the reference "
        "worker send JSON, vLLM protobuf (--otlp-traces-endpoint)",
    )
    sampling_ratio: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="the share of new traces kept (OpenTelemetry's parentbased_traceidratio: "
        "a caller's traceparent decision is kept whatever this is)",
    )
    vllm_detailed_traces: list[Literal["model", "worker", "all"]] | None = Field(
        default=None,
        description="vllm: the modules vLLM traces in detail (--collect-detailed-traces; "
        "costly, may block the engine loop)",
    )


class DeploymentSpec(_Model):
    """Desired state: a model served by a prefill pool and a decode pool."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            TP_DIVIDES_RULE,
            AUTOSCALING_PER_DECODE_RULE,
            AUTOSCALING_MONITORING_RULE,
            AUTOSCALING_SCALE_RULE,
            GROUP_PREFERRED_RULE,
        )
    )

    model: str = Field(
        min_length=1,
        description="model to serve. vllm: hf://org/name[@revision] (downloaded by an init "
        "container), pvc://claim/path (the claim mounted read-only), oci://image (an image "
        "volume), a path in the image, or a hub id the engine downloads; reference: a "
        "preset. Mounted models are loaded from /mnt/models",
    )
    served_model_name: str | None = Field(
        default=None,
        min_length=1,
        description="the name clients, the canary and llm-d send as `model` "
        "(--served-model-name); default: the hub id, or the last segment of the path, claim "
        "path or image repository",
    )
    model_cache: ModelCache | None = Field(
        default=None,
        description="hf:// models: the claim they are downloaded into and the token",
    )
    engine: EngineSpec = Field(description="serving engine and its image")
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
    # no CRD default ({}): an API server would then write the section into every
    # deployment, and the operator looks its InferencePool up whenever the section is there
    llmd: Llmd = Field(
        default_factory=Llmd,
        description="llm-d integration (absent: none, and no InferencePool is looked up)",
    )
    transfer_canary: TransferCanary = Field(
        default_factory=TransferCanary,
        description="transfer-path canary in decode pods (TransferPathReady condition)",
        **_EMPTY,
    )
    routing: Routing = Field(
        default_factory=Routing,
        description="which requests take both hops; read by the router and llm-d",
        **_EMPTY,
    )
    router: Router = Field(
        default_factory=Router,
        description="the in-cluster front door (Deployment and Service <name>-router)",
        **_EMPTY,
    )
    monitoring: Monitoring | None = Field(
        default=None,
        description="Prometheus Operator PodMonitors and a PrometheusRule for the pods "
        "(absent: none, and nothing is looked up)",
    )
    autoscaling: Autoscaling | None = Field(
        default=None,
        description="SLO-driven P:D scaling (docs/autoscaling.md): the planner sets both "
        "pod counts from TTFT and ITL targets and the pools' measured profile, in "
        "status.<role>.plannedReplicas; the spec's replicas are then ignored and the scale "
        "subresource refused",
    )
    tracing: Tracing | None = Field(
        default=None,
        description="export each request's spans to an OpenTelemetry collector (absent: "
        "none; the router still passes a W3C traceparent on)",
    )
    gang_scheduling: GangScheduling | None = Field(
        default=None,
        description="the scheduler that places each multi-pod instance (a role's "
        "nodesPerInstance above 1) whole or not at all: Volcano or Kueue (docs/multinode.md)",
    )
    placement: Placement | None = Field(
        default=None,
        description="a multi-pod instance packed into one topology domain, and prefill kept "
        "near decode (docs/multinode.md)",
    )
    paused: bool = Field(
        default=False,
        description="freeze rollouts: no pod is created or deleted for a spec change while "
        "true (status keeps reporting, and a deployment with nothing to roll still heals "
        "and scales); set false to go on",
    )
    serving_access: list[shape("NetworkPolicyPeer")] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="who else may reach the engines' serving port 8000 (NetworkPolicy peers: "
        "podSelector, namespaceSelector, ipBlock); the deployment's own pods always may. "
        "Default: its router and, with llm-d, the pods of its namespace (the gateway and the "
        "endpoint picker); []: nobody else; [{namespaceSelector: {}}]: every namespace",
    )

    def role(self, name: str) -> PrefillSpec | DecodeSpec:
        return self.prefill if name == "prefill" else self.decode

    def peer(self, name: str) -> PrefillSpec | DecodeSpec:
        return self.decode if name == "prefill" else self.prefill

    def image(self, name: str) -> str:
        """The engine image of role ``name``: its own, else the deployment's."""
        return self.role(name).image or self.engine.image


class ObjectMeta(BaseModel):
    """The part of metadata render needs; everything else is kept and ignored."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None


class DisaggregatedDeployment(BaseModel):
    """The whole custom resource as a body dict parses into."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    api_version: Literal["disagg.dev/v1alpha1"] = "disagg.dev/v1alpha1"
    kind: Literal["DisaggregatedDeployment"] = "DisaggregatedDeployment"
    metadata: ObjectMeta
    spec: DeploymentSpec
    status: dict[str, Any] | None = None
