"""Status: (spec, observed pods, desired pods, generation, now) → the CR's status.

Pure layer. Public API::

    compute(*, spec, generation, pods, previous, now, problems, desired_pods=()) -> dict

``spec`` is the parsed DeploymentSpec (None when the body did not parse), ``pods`` the
observed Pods of the deployment, ``desired_pods`` what render produced for it (their
spec-hash annotations decide which observed pods are *updated*), ``previous`` the status
now stored (so lastTransitionTime only moves when a condition's status flips), ``problems``
from validation.parse. Same inputs, same output: an unchanged world yields an unchanged
status, so the I/O layer writes nothing.

Conditions (metav1.Condition shape, observedGeneration on each)::

    type         status  reason            when
    Ready        True    AllReplicasReady  every desired pod exists, is updated and Ready
                 False   ReplicasNotReady  some desired pod is missing, stale or not Ready
                 False   InvalidSpec       the spec has problems (message lists them)
    Progressing  True    RollingOut        some pod runs an old pod spec or is missing
                 True    PodsStarting      all pods updated, some not Ready yet
                 True    ScalingDown       pods beyond the desired ones still exist
                 False   RolloutComplete   nothing left to do
                 False   InvalidSpec       nothing is created or changed until it is fixed
    Degraded     True    PodsFailing       a pod failed, crash-loops, cannot pull its image
                                           or cannot be scheduled (message names them)
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
from disagg_operator.render.pods import SPEC_HASH
from disagg_operator.validation import Problem

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
CONDITION_TYPES = (READY, PROGRESSING, DEGRADED)
# Present only for engine vllm, after the three above.
ENGINE_VERSION_KNOWN = "EngineVersionKnown"
# Every reason each condition type can carry (the table in the module docstring).
REASONS: dict[str, frozenset[str]] = {
    READY: frozenset({"AllReplicasReady", "ReplicasNotReady", "InvalidSpec"}),
    PROGRESSING: frozenset(
        {"RollingOut", "PodsStarting", "ScalingDown", "RolloutComplete", "InvalidSpec"}
    ),
    DEGRADED: frozenset({"PodsFailing", "InvalidSpec", "AsExpected"}),
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
    }


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
        roles[role] = _role(spec.role(role).replicas, ready, len(updated))
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
    if stale or starting:
        ready = ("False", "ReplicasNotReady", f"Not all pods are ready: {summary}.")
    else:
        ready = ("True", "AllReplicasReady", f"All pods are ready: {summary}.")
    if stale:
        progressing = ("True", "RollingOut", f"Creating or replacing pods: {summary}.")
    elif starting:
        progressing = ("True", "PodsStarting", f"Waiting for pods to become ready: {summary}.")
    elif extra:
        progressing = ("True", "ScalingDown", f"Removing {extra} pod(s) no longer desired.")
    else:
        progressing = ("False", "RolloutComplete", f"Every pod runs the current spec: {summary}.")
    if failing:
        degraded = ("True", "PodsFailing", f"Pods are failing: {_listing(failing)}.")
    else:
        degraded = ("False", "AsExpected", "No pod is failing.")
    return ready, progressing, degraded


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
