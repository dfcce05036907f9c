"""The CEL rules (``x-kubernetes-validations``) the CRD carries, as (rule, message) pairs.

Pure layer, part of :mod:`disagg_operator.api`. Each is also checked by
:mod:`disagg_operator.validation.spec`, so ``disagg render`` and the operator reject the same
manifests an API server would. An engine's own rules (``Engine.cel_rules``, in its folder)
are added to the spec's by the CRD generator (:mod:`disagg_operator.render.crd`).
"""

from __future__ import annotations

from disagg_worker import ucx

TP_DIVIDES_RULE = (
    "self.prefill.tensorParallelSize > self.decode.tensorParallelSize ? "
    "self.prefill.tensorParallelSize % self.decode.tensorParallelSize == 0 : "
    "self.decode.tensorParallelSize % self.prefill.tensorParallelSize == 0",
    "spec.decode.tensorParallelSize and spec.prefill.tensorParallelSize must divide: "
    "the larger must be a multiple of the smaller",
)
ENV_VALUE_RULE = (
    "!has(self.value) || !has(self.valueFrom)",
    "spec.<role>.env: a variable sets both value and valueFrom; keep one",
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
ROUTING_QUEUE_RULE = (
    "!has(self.prefillQueueLimit) || self.disaggregate == 'threshold'",
    "spec.routing.prefillQueueLimit applies only with spec.routing.disaggregate: threshold "
    "(always sends every request through prefill); set threshold or remove the limit",
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
    TP_DIVIDES_RULE,
    BACKENDS_UNIQUE_RULE,
    LEASE_RULE,
    UCX_REACH_RULE,
    SIDECAR_IMAGE_RULE,
    SIDECAR_NEEDS_LLMD_RULE,
    ROUTING_QUEUE_RULE,
    PREFILL_COUNT_RULE,
    PER_DECODE_BOUNDS_RULE,
    ENV_VALUE_RULE,
)
