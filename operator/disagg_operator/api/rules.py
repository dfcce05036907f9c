"""The CEL rules (``x-kubernetes-validations``) the CRD carries, each a :class:`Rule`:
the CEL expression and its message, ``FIELD: what is wrong and the fix``.

Part of :mod:`disagg_operator.api`. Each is also checked by
:mod:`disagg_operator.validation.spec`, so ``disagg render`` and the operator reject the
same manifests an API server would, in the same words: validation's problem is the rule's
own (:meth:`Rule.problem`), with what it found. The TP and pair rules are the exception:
there validation knows more than CEL can (the model's heads, the vLLM release) and says
so in words of its own. An engine's own rules (``Engine.cel_rules``, in its folder) are
added to the spec's by the CRD generator (:mod:`disagg_operator.render.crd`).
"""

from __future__ import annotations

from typing import NamedTuple

from disagg_contract import platforms, ucx
from disagg_operator.api.problems import Problem

# A rule reads a field only under has() where its object's CRD default ({}) lacks it: the
# API server runs every rule on each default as written, before nested defaults apply
# (apiextensions-apiserver v0.36.3 pkg/apiserver/schema/defaulting/validation.go), and
# refuses the CRD when one fails ("no such key").


class Rule(NamedTuple):
    """A CEL rule and its message, ``FIELD: what is wrong and the fix`` (FIELD may be
    generic, as ``spec.<role>.env``)."""

    rule: str
    message: str

    @property
    def field(self) -> str:
        return self.message.split(": ", 1)[0]

    @property
    def text(self) -> str:
        """The message without its field."""
        return self.message.split(": ", 1)[1]

    def problem(self, field: str | None = None, found: str = "") -> Problem:
        """What validation says of a spec this rule refuses: the rule's own words at
        ``field`` (the concrete path; default the rule's), then ``found``."""
        return Problem(field or self.field, self.text + (f" ({found})" if found else ""))


TP_DIVIDES_RULE = Rule(
    "self.prefill.tensorParallelSize > self.decode.tensorParallelSize ? "
    "self.prefill.tensorParallelSize % self.decode.tensorParallelSize == 0 : "
    "self.decode.tensorParallelSize % self.prefill.tensorParallelSize == 0",
    "spec.decode.tensorParallelSize: it and spec.prefill.tensorParallelSize must divide: "
    "the larger must be a multiple of the smaller",
)
ENV_VALUE_RULE = Rule(
    "!has(self.value) || !has(self.valueFrom)",
    "spec.<role>.env: a variable sets both value and valueFrom; keep one",
)
BACKENDS_UNIQUE_RULE = Rule(
    "!has(self.backends) || self.backends.all(b, self.backends.exists_one(c, c == b))",
    "spec.kvTransfer.backends: lists a backend twice; list each NIXL backend once",
)
_REMOTE = ", ".join(f"'{name}'" for name in platforms.REMOTE_BACKENDS)
BACKENDS_REMOTE_RULE = Rule(
    f"!has(self.backends) || self.backends.exists(b, b in [{_REMOTE}])",
    f"spec.kvTransfer.backends: {platforms.LOCAL_ONLY_TEXT}",
)
LEASE_RULE = Rule(
    "!has(self.blockLeaseSeconds) || !has(self.transferDeadlineSeconds) || "
    "self.blockLeaseSeconds > self.transferDeadlineSeconds",
    "spec.kvTransfer.blockLeaseSeconds: must exceed spec.kvTransfer.transferDeadlineSeconds, "
    "or prefill frees blocks a decode may still be reading; raise the lease",
)
_HOST_ONLY = "|".join(ucx.host_only_names())
UCX_REACH_RULE = Rule(
    f"!has(self.ucxTls) || !self.ucxTls.matches('^({_HOST_ONLY})(,({_HOST_ONLY}))*$')",
    "spec.kvTransfer.ucxTls: lists only transports that stay inside one host; add tcp, or "
    "rc for RDMA: prefill and decode run in different pods, so shared-memory transports "
    "cannot carry KV between them",
)
SIDECAR_IMAGE_RULE = Rule(
    "!has(self.enabled) || !self.enabled || (has(self.image) && size(self.image) > 0)",
    "spec.llmd.routingSidecar.image: required when the routing sidecar is enabled",
)
SIDECAR_NEEDS_LLMD_RULE = Rule(
    "!has(self.routingSidecar) || !has(self.routingSidecar.enabled) || "
    "!self.routingSidecar.enabled || (has(self.enabled) && self.enabled)",
    "spec.llmd.routingSidecar.enabled: needs spec.llmd.enabled: true; enable llm-d or "
    "disable the sidecar",
)
ROUTING_QUEUE_RULE = Rule(
    "!has(self.prefillQueueLimit) || self.disaggregate == 'threshold'",
    "spec.routing.prefillQueueLimit: applies only with spec.routing.disaggregate: threshold "
    "(always sends every request through prefill); set threshold or remove the limit",
)
# Scaling (see the classes below the role specs).
PREFILL_COUNT_RULE = Rule(
    "!has(self.replicas) || !has(self.perDecode)",
    "spec.prefill.perDecode: set it (follow decode) or spec.prefill.replicas (a fixed count), "
    "not both; remove one",
)
PER_DECODE_BOUNDS_RULE = Rule(
    "!has(self.max) || self.min <= self.max",
    "spec.prefill.perDecode.min: exceeds spec.prefill.perDecode.max; lower min or raise max",
)
# Autoscaling (operator/disagg_operator/api/autoscaling.py).
AUTOSCALING_BOUNDS_RULE = Rule(
    "self.min <= self.max",
    "spec.autoscaling.<role>.min: exceeds its max; lower min or raise max",
)
AUTOSCALING_RATIO_RULE = Rule(
    "!has(self.max) || self.max >= self.min",
    "spec.autoscaling.prefillPerDecode.min: exceeds its max; lower min or raise max",
)
AUTOSCALING_BUDGET_RULE = Rule(
    "has(self.pods) || has(self.cost)",
    "spec.autoscaling.budget: sets neither pods nor cost; set one (or remove the budget)",
)
AUTOSCALING_COST_RULE = Rule(
    "!has(self.budget) || !has(self.budget.cost) || "
    "(has(self.prefill.cost) && has(self.decode.cost))",
    "spec.autoscaling.<role>.cost: spec.autoscaling.budget.cost needs a cost per pod for "
    "both roles; set "
    "spec.autoscaling.prefill.cost and spec.autoscaling.decode.cost",
)
AUTOSCALING_PER_DECODE_RULE = Rule(
    "!has(self.autoscaling) || self.autoscaling.mode == 'Recommend' || "
    "!has(self.prefill.perDecode)",
    "spec.prefill.perDecode: spec.autoscaling plans prefill's count; remove it "
    "(spec.autoscaling.prefillPerDecode bounds the ratio)",
)
AUTOSCALING_MONITORING_RULE = Rule(
    "!has(self.autoscaling) || (has(self.monitoring) && self.monitoring.enabled)",
    "spec.monitoring: spec.autoscaling reads the series the PodMonitors of spec.monitoring "
    "label; set "
    "spec.monitoring.enabled: true",
)
# A transition rule: an API server runs it on updates only, the scale subresource's too,
# so kubectl scale and an HPA on the deployment are refused while the planner owns the
# counts (mode Apply). A spec that turns autoscaling on may change the count in the same
# update.
AUTOSCALING_SCALE_RULE = Rule(
    "!has(self.autoscaling) || self.autoscaling.mode == 'Recommend' || "
    "!has(oldSelf.autoscaling) || oldSelf.autoscaling.mode == 'Recommend' || "
    "self.decode.replicas == oldSelf.decode.replicas",
    "spec.decode.replicas: spec.autoscaling plans the pod counts "
    "(status.<role>.plannedReplicas), so kubectl scale, an HPA or KEDA cannot set them; "
    "change spec.autoscaling.decode.min/max, set spec.autoscaling.mode: Recommend to let "
    "them act on its plan, or remove spec.autoscaling to scale by hand",
)
# Instances that span pods (operator/disagg_operator/api/groups.py).
GANG_QUEUE_RULE = Rule(
    "self.scheduler != 'Kueue' || has(self.queue)",
    "spec.gangScheduling.queue: required with Kueue: name the LocalQueue of the "
    "deployment's namespace",
)
GROUP_PREFERRED_RULE = Rule(
    "!has(self.placement) || !has(self.placement.group) || "
    "self.placement.group.mode == 'Required' || "
    "(has(self.gangScheduling) && self.gangScheduling.scheduler == 'Kueue')",
    "spec.placement.group.mode: Preferred needs Kueue's topology-aware scheduling "
    "(spec.gangScheduling.scheduler: Kueue); without it a group is packed only as Required "
    "(LeaderWorkerSet's exclusive topology)",
)
CEL_RULES = (
    TP_DIVIDES_RULE,
    BACKENDS_UNIQUE_RULE,
    BACKENDS_REMOTE_RULE,
    LEASE_RULE,
    UCX_REACH_RULE,
    SIDECAR_IMAGE_RULE,
    SIDECAR_NEEDS_LLMD_RULE,
    ROUTING_QUEUE_RULE,
    PREFILL_COUNT_RULE,
    PER_DECODE_BOUNDS_RULE,
    ENV_VALUE_RULE,
    AUTOSCALING_BOUNDS_RULE,
    AUTOSCALING_RATIO_RULE,
    AUTOSCALING_BUDGET_RULE,
    AUTOSCALING_COST_RULE,
    AUTOSCALING_PER_DECODE_RULE,
    AUTOSCALING_MONITORING_RULE,
    AUTOSCALING_SCALE_RULE,
    GANG_QUEUE_RULE,
    GROUP_PREFERRED_RULE,
)
