"""Every condition the custom resource reports and every reason it can carry: one table.

Each reason's name is written once: here, or where it is decided and read from there (the
rollout planner's ``Paused`` and ``KVRolloutBlocked``, the canary's first word, the
EngineVersionKnown reasons in api/status.py). An engine's rows are its own
(``Engine.reasons``: vLLM's say when its version resolution gives each). Status returns
them by these constants; what a condition type allows (:data:`ALLOWED`) and docs/crd.md's
table (:func:`markdown`, generated, checked by tests/operator/planning/test_reasons.py) come
from :data:`TABLE`.
"""

from __future__ import annotations

from disagg_contract.canary import BUSY, RECOMPUTED, SLOW, UNEXPECTED_TRANSPORT, UNREACHABLE
from disagg_operator.api.status import ENGINE_VERSION_KNOWN, Reason
from disagg_operator.engines.settings import BUILTIN_ENGINES
from disagg_operator.planning.rollout import BLOCKED, PAUSED

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
TRANSFER_PATH_READY = "TransferPathReady"

ALL_REPLICAS_READY = "AllReplicasReady"
REPLICAS_NOT_READY = "ReplicasNotReady"
NO_PREFILL = "NoPrefill"
INVALID_SPEC = "InvalidSpec"
API_REFUSED = "ApiRefused"
NEW_KV_REVISION = "NewKVRevision"
ROLLING_OUT = "RollingOut"
PODS_STARTING = "PodsStarting"
SCALING_DOWN = "ScalingDown"
ROLLOUT_COMPLETE = "RolloutComplete"
PODS_FAILING = "PodsFailing"
AS_EXPECTED = "AsExpected"
CANARY_PASSING = "CanaryPassing"
CANARY_FAILING = "CanaryFailing"
CANARY_UNANSWERED = "CanaryUnanswered"
NO_DECODE_PODS = "NoDecodePods"
CANARY_DISABLED = "CanaryDisabled"
NO_CANARY_IMAGE = "NoCanaryImage"


TABLE: tuple[Reason, ...] = (
    Reason(READY, "True", ALL_REPLICAS_READY, "every desired pod exists, is updated and Ready"),
    Reason(READY, "False", REPLICAS_NOT_READY, "some desired pod is missing, stale or not "
           "Ready, or traffic is still on an old KV revision"),
    Reason(READY, "False", NO_PREFILL, "prefill has 0 replicas while decode has some, or "
           "decode pods are Ready and no prefill pod is: decode cannot get KV (wins over the "
           "above)"),
    Reason(READY, "False", INVALID_SPEC, "the spec has problems (the message lists them)"),
    Reason(READY, "False", API_REFUSED, "the API server refused a write (as Degraded)"),
    Reason(PROGRESSING, "True", NEW_KV_REVISION, "the KV key changed: the new revision's pods "
           "start while the old one keeps the traffic"),
    Reason(PROGRESSING, "True", ROLLING_OUT, "some pod runs an old pod spec or is missing"),
    Reason(PROGRESSING, "True", PODS_STARTING, "all pods updated, some not Ready yet"),
    Reason(PROGRESSING, "True", SCALING_DOWN, "pods beyond the desired ones still exist"),
    Reason(PROGRESSING, "False", ROLLOUT_COMPLETE, "nothing left to do"),
    Reason(PROGRESSING, "Unknown", PAUSED, "spec.paused while some pod runs an old spec: "
           "nothing is created or deleted"),
    Reason(PROGRESSING, "False", BLOCKED, "the KV key changed, the routers pair without regard "
           "to revision and a maxSurge that is set leaves no room for the new revision beside the "
           "old (the message names the fixes); the old revision keeps serving"),
    Reason(PROGRESSING, "False", INVALID_SPEC, "nothing is created or changed until it is fixed"),
    Reason(DEGRADED, "True", API_REFUSED, "the API server refused a write of a child (a 422, a "
           "quota's 403, a webhook's denial): the message names each write and the server's "
           "answer; it wins over the reasons below"),
    Reason(DEGRADED, "True", PODS_FAILING, "a pod failed, crash-loops, cannot pull its image or "
           "cannot be scheduled (the message names them; a pod of a LeaderWorkerSet group with "
           "its group: a gang that cannot be placed whole)"),
    Reason(DEGRADED, "True", NO_PREFILL, "spec.prefill.replicas is 0 while decode wants pods: "
           "nothing will fix it but the spec"),
    Reason(DEGRADED, "True", INVALID_SPEC, "the spec has problems"),
    Reason(DEGRADED, "False", AS_EXPECTED, "no pod is failing"),
    # EngineVersionKnown: the built-in engines' own rows (Engine.reasons), in their order
    *dict.fromkeys(r for e in BUILTIN_ENGINES.values() for r in e.reasons),
    Reason(TRANSFER_PATH_READY, "True", CANARY_PASSING, "always, last (the decode pods' "
           "transfer canaries; the message names failing pods): every running decode pod's "
           "canary passed on its engine, and those asked pass now"),
    Reason(TRANSFER_PATH_READY, "False", RECOMPUTED, "a failing canary says decode computed "
           "the prompt instead of reading its KV"),
    Reason(TRANSFER_PATH_READY, "False", BUSY, "a canary's prefill hop took its whole deadline: "
           "the pool is saturated (decode pods stay Ready)"),
    Reason(TRANSFER_PATH_READY, "False", UNREACHABLE, "no prefill pod took a canary's "
           "connection"),
    Reason(TRANSFER_PATH_READY, "False", UNEXPECTED_TRANSPORT, "a canary's wire probe found UCX "
           "on a wire the derivation does not expect there (tcp where shared memory or RDMA "
           "was expected; the pods serve)"),
    Reason(TRANSFER_PATH_READY, "False", SLOW, "a canary says its KV moved slower than the floor "
           "(transferCanary.minBandwidthGbytesPerSecond or the RDMA block's)"),
    Reason(TRANSFER_PATH_READY, "False", CANARY_FAILING, "some running decode pod's canary "
           "fails, or has not passed on its engine yet"),
    Reason(TRANSFER_PATH_READY, "Unknown", CANARY_UNANSWERED, "no Ready decode pod's canary "
           "answered the operator"),
    Reason(TRANSFER_PATH_READY, "Unknown", NO_DECODE_PODS, "no running decode pod runs a canary "
           "yet"),
    Reason(TRANSFER_PATH_READY, "Unknown", CANARY_DISABLED, "spec.transferCanary.enabled is "
           "false"),
    Reason(TRANSFER_PATH_READY, "Unknown", NO_CANARY_IMAGE, "the engine's images have no "
           "canary (vllm's) and the operator was given no --canary-image"),
    Reason(TRANSFER_PATH_READY, "Unknown", INVALID_SPEC, "the spec has problems"),
)  # fmt: skip

# The condition types in the order status lists them (EngineVersionKnown only for an
# engine that resolves versions).
TYPES = (READY, PROGRESSING, DEGRADED, ENGINE_VERSION_KNOWN, TRANSFER_PATH_READY)
ALLOWED: dict[str, frozenset[str]] = {
    t: frozenset(r.reason for r in TABLE if r.type == t) for t in TYPES
}


def markdown() -> str:
    """docs/crd.md's table of the conditions and their reasons."""
    lines = ["| condition | status | reason | when |", "|---|---|---|---|"]
    previous = ""
    for r in TABLE:
        shown = f"**{r.type}**" if r.type != previous else ""
        previous = r.type
        lines.append(f"| {shown} | {r.status} | `{r.reason}` | {r.when} |")
    return "\n".join(lines)
