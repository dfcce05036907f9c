"""Scaling: how many pods each role runs. The one place that answers it.

Pure layer. Render (pods, Services, budgets), status (desired counts) and validation (name
lengths, accelerator checks) all read :func:`effective_replicas`, never a role's
``replicas`` field directly, because prefill's count may follow decode's:

    decode  = spec.decode.replicas                      (the scale subresource sets it)
    prefill = spec.prefill.replicas                     when set
            = clamp(ceil(decode * ratio), min, max)     with spec.prefill.perDecode
            = 1                                         when neither is set

``ceil`` runs on the decimal value of ``ratio`` (``Fraction(str(ratio))``), so 10 * 0.3 is
3, not the 4 that binary floating point would round up to.

:func:`problems` checks what the CRD's CEL rules check for these fields (replicas and
perDecode both set, min above max), for ``disagg render`` and servers without admission.

:func:`resolve` turns a count-or-percentage (maxSurge, maxUnavailable) into pods, and
:func:`min_available` is what a role's PodDisruptionBudget keeps: R - maxUnavailable, a
percentage of R rounded up as the disruption controller rounds it. The budget states that
count as ``minAvailable`` rather than passing ``maxUnavailable`` on, because with
``maxUnavailable`` the disruption controller takes the expected pod count from the pods'
controller's scale subresource, and the pods' controller (the DisaggregatedDeployment)
scales decode: a prefill budget would be sized by decode's replicas.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

from disagg_operator.api import DeploymentSpec, PerDecode
from disagg_operator.api.problems import Problem

DEFAULT_PREFILL = 1


def follow(decode: int, per: PerDecode) -> int:
    """Prefill pods for ``decode`` decode pods under ``per``."""
    wanted = max(math.ceil(Fraction(str(per.ratio)) * decode), per.min_replicas)
    return wanted if per.max_replicas is None else min(wanted, per.max_replicas)


def effective_replicas(spec: DeploymentSpec, role: str) -> int:
    """The number of pods ``role`` runs under ``spec`` (see the module docstring)."""
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


def min_available(spec: DeploymentSpec, role: str) -> int:
    """Pods of ``role`` a voluntary disruption must leave running (see the module
    docstring); 0 when its budget could refuse no eviction."""
    replicas = effective_replicas(spec, role)
    unavailable = resolve(
        spec.role(role).disruption_budget.max_unavailable, replicas, round_up=True
    )
    return max(0, replicas - unavailable)


def problems(spec: DeploymentSpec) -> Iterator[Problem]:
    """The prefill count's conflicts (the CEL rules PREFILL_COUNT_RULE and
    PER_DECODE_BOUNDS_RULE, with the same wording)."""
    prefill, per = spec.prefill, spec.prefill.per_decode
    if per is None:
        return
    if prefill.replicas is not None:
        yield Problem(
            "spec.prefill.perDecode",
            "set replicas (a fixed count) or perDecode (follow decode), not both; remove "
            "spec.prefill.replicas to follow decode",
        )
    if per.max_replicas is not None and per.min_replicas > per.max_replicas:
        yield Problem(
            "spec.prefill.perDecode.min",
            f"{per.min_replicas} exceeds perDecode.max {per.max_replicas}; lower min or raise max",
        )
