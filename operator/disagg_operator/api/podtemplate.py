"""``spec.<role>.podTemplate``: the user's overlay on a role's derived pods.

Part of :mod:`disagg_operator.api`. Shaped like a core/v1 PodTemplateSpec
(``metadata``, ``spec``) but holding only what users add to a derived pod: labels and
annotations; volumes, init and extra containers, pull secrets, the service account, the
priority and runtime classes, the pod security context (merged over the hardened one) and
a longer grace period. A ``containers`` entry named like a derived container (``engine``,
``routing-proxy``, ``transfer-canary``) merges into it (its mounts, env sources, security
context, liveness probe); any other name is an extra container. What would break a
derived setting is refused by field, with the fix (:mod:`disagg_operator.validation.
podtemplate`); the merge is :mod:`disagg_operator.render.overlay`.

Pod fields the role spec already holds (nodeSelector, affinity, tolerations,
topologySpreadConstraints) and ones the operator derives (hostname, subdomain,
restartPolicy, host namespaces) are refused here with the field to use instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from disagg_operator.api.base import _Model
from disagg_operator.api.corev1 import shape

ENGINE_CONTAINER = "engine"
SIDECAR_CONTAINER = "routing-proxy"
CANARY_CONTAINER = "transfer-canary"
DERIVED_CONTAINERS = (ENGINE_CONTAINER, SIDECAR_CONTAINER, CANARY_CONTAINER)

# Pod fields a podTemplate may not set, each with where it is set instead (or why not).
POD_ELSEWHERE: dict[str, str] = {
    "nodeSelector": "set spec.<role>.nodeSelector",
    "affinity": "set spec.<role>.affinity",
    "tolerations": "set spec.<role>.tolerations",
    "topologySpreadConstraints": "set spec.<role>.topologySpreadConstraints",
    "hostname": "the operator names each pod (its side channel is reached by that name)",
    "subdomain": "the operator sets it to the role's headless Service",
    "restartPolicy": "engine pods restart Always; the operator sets it",
    "hostNetwork": "pods keep their own network: the derived ports and UCX_TLS assume it",
    "hostPID": "pods keep their own pid namespace",
    "hostIPC": "pods keep their own IPC namespace",
    "enableServiceLinks": "Service env vars clash with VLLM_* settings; the operator sets false",
}


class PodTemplateMetadata(_Model):
    """Labels and annotations added to the role's pods (the operator's own keys,
    ``disagg.dev/*`` and ``llm-d.ai/role``, are refused)."""

    labels: dict[str, str] | None = Field(default=None, description="extra pod labels")
    annotations: dict[str, str] | None = Field(default=None, description="extra annotations")


class PodTemplateSpec(_Model):
    """The pod fields a role's overlay may set; each reaches every pod of the role."""

    volumes: list[shape("Volume")] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="extra pod volumes (a model PVC, a cache, a ConfigMap); names the "
        "operator uses are refused",
    )
    init_containers: list[shape("Container")] | None = Field(  # type: ignore[valid-type]
        default=None, description="init containers, run before the operator's own"
    )
    containers: list[shape("Container")] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="merged by name: `engine`, `routing-proxy` or `transfer-canary` add "
        "volumeMounts, envFrom, securityContext, livenessProbe (resources and env too, but "
        "for the engine use spec.<role>.resources and .env); any other name is an extra "
        "container (its ports must not collide with the derived ones)",
    )
    resource_claims: list[shape("PodResourceClaim")] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="Dynamic Resource Allocation: the pod's resource claims (from a "
        "ResourceClaim or a ResourceClaimTemplate); the engine uses those its "
        "spec.<role>.resources.claims names",
    )
    image_pull_secrets: list[shape("LocalObjectReference")] | None = Field(  # type: ignore[valid-type]
        default=None, description="Secrets to pull private images with"
    )
    service_account_name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
        description="the pods' service account (workload identity for model storage)",
    )
    automount_service_account_token: bool | None = Field(
        default=None, description="mount the service account's token"
    )
    priority_class_name: str | None = Field(default=None, description="pod priority class")
    runtime_class_name: str | None = Field(
        default=None, description="runtime class (e.g. nvidia for a GPU runtime)"
    )
    security_context: shape("PodSecurityContext") | None = Field(  # type: ignore[valid-type]
        default=None,
        description="merged over the derived pod security context (seccomp RuntimeDefault, "
        "the engine's non-root user); a key set here wins",
    )
    termination_grace_period_seconds: int | None = Field(
        default=None,
        ge=0,
        description="a longer grace than the derived one (settle + drain + 10 s); shorter is "
        "refused (it would cut the drain: lower spec.<role>.drainSeconds instead)",
    )

    @model_validator(mode="before")
    @classmethod
    def _elsewhere(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, fix in POD_ELSEWHERE.items():
                if key in data:
                    raise ValueError(f"{key} cannot be set in a podTemplate: {fix}")
        return data


class PodTemplate(_Model):
    """A role's pod overlay (``metadata`` and ``spec``, as in a PodTemplateSpec)."""

    metadata: PodTemplateMetadata | None = Field(default=None, description="labels, annotations")
    spec: PodTemplateSpec | None = Field(default=None, description="pod fields to add")
