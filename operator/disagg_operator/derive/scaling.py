"""Scaling: how many pods each role runs. The one place that answers it.

Render (pods, Services, budgets), status (desired counts) and validation (name lengths,
accelerator checks) all read :func:`effective_replicas`, never a role's ``replicas`` field
directly, because prefill's count may follow decode's (``perDecode``) or the autoscaler's
plan. Also here: what the CRD's CEL rules check of these fields (:func:`problems`, for
``disagg render`` and servers without admission), rollout surge, disruption budgets and
the settle before a drain. The user's view: docs/scaling.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from disagg_operator.api import DeploymentSpec, PerDecode, RolloutStrategy, rules
from disagg_operator.api.problems import Problem

DEFAULT_PREFILL = 1
DEFAULT_MAX_SURGE = "25%"  # spec.<role>.rollout.maxSurge unset, same KV revision
ROUTER_REFRESH_S = 5  # the router resolves its role Services again this often
DNS_TTL_S = 5  # the TTL of CoreDNS's kubernetes plugin answers (its default)
ENDPOINTS_PROPAGATION_S = 2  # kube-proxy (its minimum sync period, 1 s) and pod watchers


def settle_seconds(spec: DeploymentSpec) -> int:
    """Seconds a terminating pod keeps taking work before it drains: until every client of
    its endpoints has seen it leave (the router re-resolves its role Services every
    :data:`ROUTER_REFRESH_S` through DNS answers that live :data:`DNS_TTL_S`; kube-proxy and
    watchers such as llm-d's endpoint picker within :data:`ENDPOINTS_PROPAGATION_S`). A
    worker that stopped at once would close the keep-alive connection a request was just
    sent on."""
    if spec.router.enabled:
        return ROUTER_REFRESH_S + DNS_TTL_S
    return ENDPOINTS_PROPAGATION_S


def drain_seconds(spec: DeploymentSpec, role: str, engine_drain: int) -> int:
    """How long a terminating pod of ``role`` waits after the settle: the engine's drain
    (its transfers), or the role's ``drainSeconds`` (long generations) when longer."""
    return max(engine_drain, spec.role(role).drain_seconds or 0)


def prestop_seconds(spec: DeploymentSpec, role: str, engine_drain: int) -> int:
    """The preStop's whole time: the settle, then the drain. The grace period covers it."""
    return settle_seconds(spec) + drain_seconds(spec, role, engine_drain)


def follow(decode: int, per: PerDecode) -> int:
    """Prefill pods for ``decode`` decode pods under ``per``."""
    wanted = max(math.ceil(Fraction(str(per.ratio)) * decode), per.min_replicas)
    return wanted if per.max_replicas is None else min(wanted, per.max_replicas)


def effective_replicas(spec: DeploymentSpec, role: str) -> int:
    """The number of pods ``role`` runs under ``spec``: decode's ``replicas`` (the scale
    subresource sets it); prefill's ``replicas`` when set, else clamp(ceil(decode * ratio),
    min, max) with ``perDecode``, else 1. ``ceil`` runs on the ratio's decimal value
    (``Fraction(str(ratio))``: 10 * 0.3 is 3, not binary floating point's 4). Under
    ``spec.autoscaling`` mode Apply the planner's counts come in by :func:`with_planned`;
    before its first plan each role keeps this count within its autoscaling min and max.
    Mode Recommend changes no count."""
    wanted = _spec_replicas(spec, role)
    auto = spec.autoscaling
    if auto is None or not applies(spec):
        return wanted
    bounds = auto.prefill if role == "prefill" else auto.decode
    return min(max(wanted, bounds.min_replicas), bounds.max_replicas)


def applies(spec: DeploymentSpec) -> bool:
    """Whether the planner's counts are what runs (spec.autoscaling, mode Apply)."""
    return spec.autoscaling is not None and spec.autoscaling.mode == "Apply"


def planned(status: Mapping[str, Any] | None) -> dict[str, int]:
    """The planner's counts in ``status`` (``status.<role>.plannedReplicas``), by role."""
    out: dict[str, int] = {}
    for role in ("prefill", "decode"):
        value = ((status or {}).get(role) or {}).get("plannedReplicas")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[role] = value
    return out


def with_planned(spec: DeploymentSpec, status: Mapping[str, Any] | None) -> DeploymentSpec:
    """``spec`` with each role's replicas set to the planner's count in ``status``, while
    ``spec.autoscaling`` is on (``spec`` itself otherwise, or before a first plan)."""
    counts = planned(status) if applies(spec) else {}
    if not counts:
        return spec
    update = {r: spec.role(r).model_copy(update={"replicas": n}) for r, n in counts.items()}
    return spec.model_copy(update=update)


def _spec_replicas(spec: DeploymentSpec, role: str) -> int:
    if role == "decode":
        return spec.decode.replicas
    prefill = spec.prefill
    if prefill.replicas is not None:
        return prefill.replicas
    if prefill.per_decode is not None:
        return follow(spec.decode.replicas, prefill.per_decode)
    return DEFAULT_PREFILL


def resolve(value: int | str, replicas: int, *, round_up: bool) -> int:
    """A count, or a percentage of ``replicas`` rounded up or down."""
    if isinstance(value, int):
        return value
    share = replicas * int(value.rstrip("%")) / 100
    return math.ceil(share) if round_up else math.floor(share)


def surge(strategy: RolloutStrategy, replicas: int, *, one_revision: bool = False) -> int:
    """Pods of a role that a roll may start beyond ``replicas``: maxSurge where set (a
    bound the user chose: a full pool); unset, 25% rounded up, and where routers reach one
    KV revision at a time (``one_revision``: a KV change without the deployment's router)
    at least the room the new revision needs to carry the load beside the old one, its
    max(1, R - U) Ready pods beside the old one's R - U: max(1, R - U) - U pods."""
    if strategy.max_surge is not None:
        return resolve(strategy.max_surge, replicas, round_up=True)
    base = resolve(DEFAULT_MAX_SURGE, replicas, round_up=True)
    if not one_revision:
        return base
    unavailable = resolve(strategy.max_unavailable, replicas, round_up=False)
    return max(base, max(1, replicas - unavailable) - unavailable)


def min_available(spec: DeploymentSpec, role: str) -> int:
    """Pods of ``role`` a voluntary disruption must leave running: R - maxUnavailable, a
    percentage of R rounded up as the disruption controller rounds it; 0 when its budget
    could refuse no eviction. The budget states this as ``minAvailable`` because with
    ``maxUnavailable`` the disruption controller takes the expected count from the pods'
    controller's scale subresource, which scales decode: a prefill budget would be sized by
    decode's replicas."""
    replicas = effective_replicas(spec, role)
    unavailable = resolve(
        spec.role(role).disruption_budget.max_unavailable, replicas, round_up=True
    )
    return max(0, replicas - unavailable)


def problems(spec: DeploymentSpec) -> Iterator[Problem]:
    """The prefill count's conflicts: the CEL rules PREFILL_COUNT_RULE,
    PER_DECODE_BOUNDS_RULE and the autoscaling ones, in their own words."""
    yield from _autoscaling_problems(spec)
    prefill, per = spec.prefill, spec.prefill.per_decode
    if per is None:
        return
    if prefill.replicas is not None:
        yield rules.PREFILL_COUNT_RULE.problem()
    if per.max_replicas is not None and per.min_replicas > per.max_replicas:
        found = f"min {per.min_replicas}, max {per.max_replicas}"
        yield rules.PER_DECODE_BOUNDS_RULE.problem(found=found)


def _autoscaling_problems(spec: DeploymentSpec) -> Iterator[Problem]:
    auto = spec.autoscaling
    if auto is None:
        return
    if spec.prefill.per_decode is not None and auto.mode == "Apply":
        yield rules.AUTOSCALING_PER_DECODE_RULE.problem()
    if spec.monitoring is None or not spec.monitoring.enabled:
        yield rules.AUTOSCALING_MONITORING_RULE.problem()
    for role in ("prefill", "decode"):
        b = auto.prefill if role == "prefill" else auto.decode
        if b.min_replicas > b.max_replicas:
            found = f"min {b.min_replicas}, max {b.max_replicas}"
            yield rules.AUTOSCALING_BOUNDS_RULE.problem(f"spec.autoscaling.{role}.min", found)
    ratio = auto.prefill_per_decode
    if ratio.max_ratio is not None and ratio.min_ratio > ratio.max_ratio:
        found = f"min {ratio.min_ratio:g}, max {ratio.max_ratio:g}"
        yield rules.AUTOSCALING_RATIO_RULE.problem(found=found)
    budget = auto.budget
    if budget is not None and budget.pods is None and budget.cost is None:
        yield rules.AUTOSCALING_BUDGET_RULE.problem()
    if budget is not None and budget.cost is not None:
        for role in ("prefill", "decode"):
            if (auto.prefill if role == "prefill" else auto.decode).cost is None:
                yield rules.AUTOSCALING_COST_RULE.problem(f"spec.autoscaling.{role}.cost")
