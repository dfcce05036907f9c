"""Status: (spec, observed pods, desired pods, generation, now) → the CR's status.

Pure layer. Public API::

    compute(*, name, spec, generation, pods, previous, now, problems, desired_pods=()) -> dict

``spec`` is the parsed DeploymentSpec (None when the body did not parse), ``pods`` the
observed Pods of the deployment, ``desired_pods`` what render produced for it (their
spec-hash annotations decide which observed pods are *updated*), ``previous`` the status
now stored (so lastTransitionTime only moves when a condition's status flips), ``problems``
from validation.parse. Same inputs, same output: an unchanged world yields an unchanged
status, so the I/O layer writes nothing.

The scale subresource reads two fields (``kubectl scale``, HPA, KEDA): ``replicas``, the
decode pods that exist (not being deleted), and ``selector``, the decode pods' label
selector as a string (``disagg.dev/deployment=<name>,disagg.dev/role=decode``); both are
written whatever the spec's state, so an autoscaler always finds the pods.

Conditions (metav1.Condition shape, observedGeneration on each)::

    type         status  reason            when
    Ready        True    AllReplicasReady  every desired pod exists, is updated and Ready
                 False   ReplicasNotReady  some desired pod is missing, stale or not Ready
                 False   NoPrefill         prefill has 0 replicas while decode has some, or
                                           decode pods are Ready and no prefill pod is:
                                           decode cannot get KV (wins over the above)
                 False   InvalidSpec       the spec has problems (message lists them)
    Progressing  True    RollingOut        some pod runs an old pod spec or is missing
                 True    PodsStarting      all pods updated, some not Ready yet
                 True    ScalingDown       pods beyond the desired ones still exist
                 False   RolloutComplete   nothing left to do
                 False   InvalidSpec       nothing is created or changed until it is fixed
    Degraded     True    PodsFailing       a pod failed, crash-loops, cannot pull its image
                                           or cannot be scheduled (message names them)
                 True    NoPrefill         spec.prefill.replicas is 0 while decode wants
                                           pods: nothing will fix it but the spec
                 True    InvalidSpec       the spec has problems
                 False   AsExpected        no pod is failing
    EngineVersionKnown                     engine vllm only: which contract profile render
                                           used (engines.vllm; message names version, source)
                 True    VersionResolved   spec.engine.version or the image tags name it
                 True    TooOld            below the oldest profile (the spec is invalid)
                 False   UnknownEngineVersion  no version found: the newest profile is
                                           assumed; set spec.engine.version or tag images
                 False   NewerThanProfiles newer than the newest checked release

``phase`` (printer column only) is derived: Invalid, Degraded, Ready or Progressing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from disagg_operator.models import ROLES, DeploymentSpec
from disagg_operator.render.derive import resolution
from disagg_operator.render.objects import selector
from disagg_operator.render.pods import SPEC_HASH
from disagg_operator.scaling import effective_replicas
from disagg_operator.validation import Problem

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
CONDITION_TYPES = (READY, PROGRESSING, DEGRADED)
# Present only for engine vllm, after the three above.
ENGINE_VERSION_KNOWN = "EngineVersionKnown"
# Every reason each condition type can carry (the table in the module docstring).
REASONS: dict[str, frozenset[str]] = {
    READY: frozenset({"AllReplicasReady", "ReplicasNotReady", "NoPrefill", "InvalidSpec"}),
    PROGRESSING: frozenset(
        {"RollingOut", "PodsStarting", "ScalingDown", "RolloutComplete", "InvalidSpec"}
    ),
    DEGRADED: frozenset({"PodsFailing", "NoPrefill", "InvalidSpec", "AsExpected"}),
    ENGINE_VERSION_KNOWN: frozenset(
        {"VersionResolved", "TooOld", "UnknownEngineVersion", "NewerThanProfiles"}
    ),
}

LABEL_ROLE = "disagg.dev/role"
FAILING_WAIT_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
_MAX_LISTED = 5


def compute(
    *,
    name: str,
    spec: DeploymentSpec | None,
    generation: int | None,
    pods: Sequence[dict[str, Any]],
    previous: dict[str, Any] | None,
    now: datetime,
    problems: Sequence[Problem],
    desired_pods: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The status subresource for this observation (camelCase dict)."""
    previous = previous or {}
    live = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    roles: dict[str, Any]
    if problems or spec is None:
        roles = {r: previous.get(r) or _role(0, 0, 0) for r in ROLES}
        wanted = _invalid(problems)
    else:
        roles, extra = _counts(spec, live, desired_pods)
        wanted = _healthy(roles, extra, _failing(live))
    conditions = [
        _condition(kind, status, reason, message, generation, previous, now)
        for kind, (status, reason, message) in zip(CONDITION_TYPES, wanted, strict=True)
    ]
    engine = engine_version(spec)
    if engine is not None:
        conditions.append(_condition(ENGINE_VERSION_KNOWN, *engine, generation, previous, now))
    return {
        "observedGeneration": generation,
        **roles,
        "conditions": conditions,
        "phase": _phase(conditions),
        **scale(name, live),
    }


def scale(name: str, live: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scale subresource's status: decode pods that exist, and their selector."""
    count = sum(1 for p in live if p["metadata"].get("labels", {}).get(LABEL_ROLE) == "decode")
    terms = selector(name, "decode")
    return {"replicas": count, "selector": ",".join(f"{k}={v}" for k, v in terms.items())}


def engine_version(spec: DeploymentSpec | None) -> tuple[str, str, str] | None:
    """(status, reason, message) of EngineVersionKnown; None when not engine vllm."""
    if spec is None or spec.engine.type != "vllm":
        return None
    found = resolution(spec)
    return ("True" if found.known else "False", found.reason, found.message)


def _role(desired: int, ready: int, updated: int) -> dict[str, Any]:
    return {
        "desired": desired,
        "ready": ready,
        "updated": updated,
        "summary": f"{ready}/{desired}",
    }


def _is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _counts(
    spec: DeploymentSpec, live: Sequence[dict[str, Any]], desired: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any], int]:
    """Per-role counts, and how many live pods are not desired at all."""
    hashes = {
        p["metadata"]["name"]: p["metadata"].get("annotations", {}).get(SPEC_HASH) for p in desired
    }
    roles: dict[str, Any] = {}
    for role in ROLES:
        mine = [
            p
            for p in live
            if p["metadata"].get("labels", {}).get(LABEL_ROLE) == role
            and p["metadata"]["name"] in hashes
        ]
        updated = [
            p
            for p in mine
            if p["metadata"].get("annotations", {}).get(SPEC_HASH) == hashes[p["metadata"]["name"]]
        ]
        ready = sum(1 for p in mine if _is_ready(p))
        roles[role] = _role(effective_replicas(spec, role), ready, len(updated))
    extra = sum(1 for p in live if p["metadata"]["name"] not in hashes)
    return roles, extra


def _failing(live: Sequence[dict[str, Any]]) -> list[str]:
    """``"<pod>: <reason>"`` for every pod that will not become Ready by itself."""
    out = []
    for pod in live:
        status = pod.get("status", {})
        reason = "Failed" if status.get("phase") == "Failed" else None
        for c in status.get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                reason = "Unschedulable"
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FAILING_WAIT_REASONS:
                reason = waiting["reason"]
        if reason:
            out.append(f"{pod['metadata']['name']}: {reason}")
    return sorted(out)


def _listing(items: Sequence[str]) -> str:
    more = len(items) - _MAX_LISTED
    return "; ".join(items[:_MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")


_Wanted = tuple[str, str, str]


def _invalid(problems: Sequence[Problem]) -> tuple[_Wanted, _Wanted, _Wanted]:
    listed = _listing([str(p) for p in problems]) or "the spec could not be parsed"
    message = f"The spec is invalid, so nothing was created or changed: {listed}."
    return (
        ("False", "InvalidSpec", message),
        ("False", "InvalidSpec", "Nothing is rolled out until the spec is fixed."),
        ("True", "InvalidSpec", message),
    )


def _healthy(
    roles: dict[str, Any], extra: int, failing: list[str]
) -> tuple[_Wanted, _Wanted, _Wanted]:
    summary = ", ".join(
        f"{r} {roles[r]['ready']}/{roles[r]['desired']} ready ({roles[r]['updated']} updated)"
        for r in ROLES
    )
    stale = any(roles[r]["updated"] < roles[r]["desired"] for r in ROLES)
    starting = any(roles[r]["ready"] < roles[r]["desired"] for r in ROLES)
    if stale:
        progressing = ("True", "RollingOut", f"Creating or replacing pods: {summary}.")
    elif starting:
        progressing = ("True", "PodsStarting", f"Waiting for pods to become ready: {summary}.")
    elif extra:
        progressing = ("True", "ScalingDown", f"Removing {extra} pod(s) no longer desired.")
    else:
        progressing = ("False", "RolloutComplete", f"Every pod runs the current spec: {summary}.")
    return _ready(roles, summary, stale or starting), progressing, _degraded(roles, failing)


def _no_prefill(roles: dict[str, Any]) -> bool:
    """Decode pods are wanted but no prefill pod is ready to produce their KV: prefill has
    0 replicas, or decode already serves while every prefill pod is missing or unready
    (while both roles start, ReplicasNotReady says enough)."""
    prefill, decode = roles["prefill"], roles["decode"]
    if decode["desired"] == 0 or prefill["ready"] > 0:
        return False
    return bool(prefill["desired"] == 0 or decode["ready"] > 0)


def _ready(roles: dict[str, Any], summary: str, not_ready: bool) -> _Wanted:
    if _no_prefill(roles):
        return (
            "False",
            "NoPrefill",
            f"No prefill pod is ready, so decode pods cannot get KV until prefill has "
            f"ready pods: {summary}.",
        )
    if not_ready:
        return ("False", "ReplicasNotReady", f"Not all pods are ready: {summary}.")
    return ("True", "AllReplicasReady", f"All pods are ready: {summary}.")


def _degraded(roles: dict[str, Any], failing: list[str]) -> _Wanted:
    """Pods that will not recover by themselves, or a spec that leaves decode stranded."""
    if failing:
        return ("True", "PodsFailing", f"Pods are failing: {_listing(failing)}.")
    if _no_prefill(roles) and roles["prefill"]["desired"] == 0:
        return (
            "True",
            "NoPrefill",
            f"The prefill pool has 0 replicas (spec.prefill.replicas) while decode wants "
            f"{roles['decode']['desired']} pod(s): decode pods cannot get KV without "
            "prefill; set spec.prefill.replicas to at least 1 (or perDecode), or scale "
            "decode to 0 as well.",
        )
    return ("False", "AsExpected", "No pod is failing.")


def _condition(
    kind: str,
    status: str,
    reason: str,
    message: str,
    generation: int | None,
    previous: dict[str, Any],
    now: datetime,
) -> dict[str, Any]:
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == kind), None)
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        since = old["lastTransitionTime"]
    else:
        since = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def _phase(conditions: list[dict[str, Any]]) -> str:
    by_type = {c["type"]: c for c in conditions}
    if by_type[READY]["reason"] == "InvalidSpec":
        return "Invalid"
    if by_type[DEGRADED]["status"] == "True":
        return "Degraded"
    return "Ready" if by_type[READY]["status"] == "True" else "Progressing"
