"""Shared pieces of the DisaggregatedDeployment models: the API's names and ports, the base
model (camelCase on the wire, unknown fields refused) and the wire types (quantities,
free-form upstream objects, counts-or-percentages).

Part of :mod:`disagg_operator.api`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel

GROUP = "disagg.dev"
VERSION = "v1alpha1"
KIND = "DisaggregatedDeployment"
PLURAL = "disaggregateddeployments"
SINGULAR = "disaggregateddeployment"
SHORT_NAMES = ["disagg"]  # not "dd": the Datadog Operator's DatadogAgent has it
API_VERSION = f"{GROUP}/{VERSION}"

Role = Literal["prefill", "decode"]
ROLES: tuple[Role, Role] = ("prefill", "decode")

# Labels and annotations on the children (the API's names, like GROUP): every child carries
# the deployment's label, pods their role (also as llm-d's), KV revision and template
# revision, and the hash of the pod render gave them.
LABEL_DEPLOYMENT = "disagg.dev/deployment"
LABEL_ROLE = "disagg.dev/role"
LABEL_LLMD_ROLE = "llm-d.ai/role"
LABEL_KV_REVISION = "disagg.dev/kv-revision"
LABEL_REVISION = "disagg.dev/revision"
SPEC_HASH = "disagg.dev/spec-hash"

# The handshake Secret of every deployment (``<name>-handshake``): its data key, and where
# an engine that authenticates its side channel mounts it.
HMAC_KEY = "hmac"
HMAC_DIR = "/etc/disagg/handshake"
HMAC_PATH = f"{HMAC_DIR}/{HMAC_KEY}"
# Characters of a KV-revision label value (and of the canary Service name's suffix).
KV_REVISION_CHARS = 10

# Serving port of every engine container; with the llm-d routing sidecar on decode, the
# sidecar takes this port and the engine moves to ENGINE_BEHIND_SIDECAR_PORT.
HTTP_PORT = 8000
ENGINE_BEHIND_SIDECAR_PORT = 8200
# The decode pods' transfer-canary container serves its readiness endpoint here.
CANARY_PORT = 8090
# An engine whose server we own (the reference worker) serves /metrics alone here too, so
# a monitoring namespace is admitted to it and not to the serving port.
METRICS_PORT = 9400

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
    """Python fields are snake_case, the wire (and the CRD) camelCase through the alias
    generator; both spellings are accepted. Unknown fields are refused, so a typo in a
    manifest is an error, not a silently ignored setting (the API server prunes them
    anyway; ``disagg render`` runs without one)."""

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
            # the anyOf exactly as the API server's int-or-string exemption (anything more
            # inside a branch makes the CRD non-structural); bounds on the field itself,
            # where `minimum` applies to integers only and `pattern` to strings only
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "minimum": 0,
            "pattern": _PERCENT.pattern,
        }
    ),
]
