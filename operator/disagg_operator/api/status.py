"""The status subresource's shape (what :mod:`disagg_operator.planning.status` computes).

Part of :mod:`disagg_operator.api`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, Field

from disagg_operator.api.base import _Model


@dataclass(frozen=True)
class Reason:
    """One row of the conditions table (planning/reasons.py, docs/crd.md): condition
    ``type`` at ``status`` says ``reason`` ``when``."""

    type: str
    status: str
    reason: str
    when: str


# The condition an engine whose version picks a contract profile reports, and its reasons
# (vLLM: engines/vllm/contract.py resolves them and says when each is given, its
# Engine.reasons; planning/reasons.py lists them with the rest).
ENGINE_VERSION_KNOWN = "EngineVersionKnown"
VERSION_RESOLVED = "VersionResolved"
TOO_OLD = "TooOld"
UNKNOWN_ENGINE_VERSION = "UnknownEngineVersion"
NEWER_THAN_PROFILES = "NewerThanProfiles"


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
    planned_replicas: int | None = Field(
        default=None,
        description="with spec.autoscaling: the pods the planner asks for (what desired "
        "follows; the spec's replicas are ignored)",
    )


class AutoscalingStatus(_Model):
    """The planner's last pass (spec.autoscaling)."""

    reason: str = Field(
        description="ScaleUp, ScaleDown, Steady, Reserve, AtMaximum, RatioBound, BudgetLimited, or "
        "why no plan was made: NoPrometheus, NoProfile, NoMetrics"
    )
    message: str = Field(description="the demand, each role's need and the bound that decided")
    last_plan_time: str | None = Field(default=None, description="when it planned (RFC 3339)")
    prompt_tokens_per_second: float | None = Field(
        default=None, description="prefill's demand as read (the last period's mean)"
    )
    output_tokens_per_second: float | None = Field(
        default=None, description="decode's demand as read (the last period's mean)"
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
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="the planner's last pass (spec.autoscaling)"
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
