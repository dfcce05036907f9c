"""``spec.autoscaling``: SLO targets, per-role bounds, the ratio, the budget, the windows,
the measured profile and where Prometheus is (docs/autoscaling.md).

Part of :mod:`disagg_operator.api`. The planner that reads it is
:mod:`disagg_operator.planning.autoscale`; the controller piece that feeds it is
:mod:`disagg_operator.controller.autoscaler`. While it is set the planner owns both pod
counts: they live in ``status.<role>.plannedReplicas`` and the operator renders from them,
so the spec's replicas are never rewritten (GitOps keeps owning the spec).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from disagg_operator.api.base import _EMPTY, _Model, _rules
from disagg_operator.api.rules import (
    AUTOSCALING_BOUNDS_RULE,
    AUTOSCALING_BUDGET_RULE,
    AUTOSCALING_COST_RULE,
    AUTOSCALING_RATIO_RULE,
)

PROFILE_KEY = "profile.json"  # what `disagg bench profile --out` writes, as a ConfigMap key


class Targets(_Model):
    """The service-level objective: TTFT and ITL at one percentile."""

    ttft_milliseconds: float = Field(
        gt=0, description="time to first token the planner keeps prefill within"
    )
    itl_milliseconds: float = Field(
        gt=0, description="inter-token latency the planner keeps decode within"
    )
    percentile: int = Field(
        default=90,
        ge=50,
        le=99,
        description="the percentile both targets are at; the profile must have been "
        "measured at it (disagg bench profile --percentile)",
    )


class RoleBounds(_Model):
    """One role's pod count bounds and what one of its pods costs."""

    model_config = ConfigDict(json_schema_extra=_rules(AUTOSCALING_BOUNDS_RULE))

    min_replicas: int = Field(default=1, ge=0, alias="min", description="fewest pods")
    max_replicas: int = Field(ge=1, alias="max", description="most pods")
    cost: float | None = Field(
        default=None,
        gt=0,
        description="what one pod costs per hour, in budget.cost's unit (e.g. a GPU pod 4, "
        "a CPU pod 1); needed by budget.cost",
    )


class Ratio(_Model):
    """Bounds on prefill pods per decode pod; a bound is met by raising the role that is
    short, never by taking capacity away."""

    model_config = ConfigDict(json_schema_extra=_rules(AUTOSCALING_RATIO_RULE))

    min_ratio: float = Field(
        default=0.0, ge=0, alias="min", description="fewest prefill per decode"
    )
    max_ratio: float | None = Field(
        default=None, gt=0, alias="max", description="most prefill per decode; none when omitted"
    )


class Budget(_Model):
    """The most the two pools may take together: pods, or cost (the roles' ``cost``)."""

    model_config = ConfigDict(json_schema_extra=_rules(AUTOSCALING_BUDGET_RULE))

    pods: int | None = Field(default=None, ge=1, description="most pods of both roles")
    cost: float | None = Field(
        default=None, gt=0, description="most cost per hour of both roles (their cost fields)"
    )


class ProfileRef(_Model):
    """The pools' measured profile: a ConfigMap key holding what ``disagg bench profile
    --out FILE`` wrote (``kubectl create configmap NAME --from-file=profile.json=FILE``)."""

    config_map: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
        description="a ConfigMap in the deployment's namespace",
    )
    key: str = Field(default=PROFILE_KEY, min_length=1, description="its key")


class Autoscaling(_Model):
    """SLO-driven P:D scaling: the planner sizes prefill from prompt tokens/s against the
    TTFT target and decode from output tokens/s against the ITL target and KV capacity,
    each from its pool's measured profile (docs/autoscaling.md)."""

    model_config = ConfigDict(json_schema_extra=_rules(AUTOSCALING_COST_RULE))

    mode: Literal["Apply", "Recommend"] = Field(
        default="Apply",
        description="Apply: the operator renders the planned counts (the spec's replicas "
        "ignored, the scale subresource refused); Recommend: it only writes them to status "
        "and the disagg_deployment_planned_replicas gauge, for a KEDA or HPA to act on, and "
        "the spec's counts (perDecode included) stay in charge",
    )
    targets: Targets = Field(description="TTFT and ITL targets at a percentile")
    profile: ProfileRef = Field(description="the pools' measured profile (disagg bench profile)")
    prefill: RoleBounds = Field(description="prefill's bounds (and cost)")
    decode: RoleBounds = Field(description="decode's bounds (and cost)")
    prefill_per_decode: Ratio = Field(
        default_factory=Ratio, description="bounds on prefill per decode", **_EMPTY
    )
    budget: Budget | None = Field(default=None, description="the most both pools may take")
    period_seconds: int = Field(
        default=15, ge=1, le=600, description="how often the planner reads Prometheus and plans"
    )
    scale_up_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description="a role grows only to the smallest need of this window (0: at once)",
    )
    scale_down_seconds: int = Field(
        default=300,
        ge=0,
        le=3600,
        description="a role shrinks only to the largest need of this window, and a planner "
        "that just started shrinks nothing before it has seen one",
    )
    reserve_percent: int = Field(
        default=0,
        ge=0,
        le=100,
        description="each role keeps at least this share of the largest need it had within "
        "reserveWindowSeconds: capacity held through quiet gaps for bursts shorter than a "
        "scale-up takes (a pod's start-up plus a period), which the planner cannot meet "
        "otherwise (docs/autoscaling.md, bursts); 0: none",
    )
    reserve_window_seconds: int = Field(
        default=3600,
        ge=60,
        le=86400,
        description="the window whose largest need reservePercent keeps a share of",
    )
    prometheus_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="the Prometheus that scrapes the PodMonitors of spec.monitoring, e.g. "
        "http://prometheus-operated.monitoring:9090; default: the operator's "
        "--prometheus-url (the chart's autoscaling.prometheusUrl)",
    )
