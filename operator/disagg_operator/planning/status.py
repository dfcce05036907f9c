"""Status: (spec, observed pods, rollout plan, generation, now) → the CR's status.

Same inputs, same output: an unchanged world yields an unchanged status, so the I/O layer
writes nothing. What each field means: docs/operator.md and docs/crd.md (status); every
condition reason and when: :mod:`disagg_operator.planning.reasons` (docs/crd.md shows it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from disagg_operator.api import LABEL_ROLE, ROLES, DeploymentSpec
from disagg_operator.api.refusals import Refusal, lines
from disagg_operator.api.status import ENGINE_VERSION_KNOWN
from disagg_operator.contracts import lws
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning.observed import Observed
from disagg_operator.planning.reasons import (
    ALL_REPLICAS_READY,
    ALLOWED,
    API_REFUSED,
    AS_EXPECTED,
    DEGRADED,
    INVALID_SPEC,
    NEW_KV_REVISION,
    NO_PREFILL,
    PODS_FAILING,
    PODS_STARTING,
    PROGRESSING,
    READY,
    REPLICAS_NOT_READY,
    ROLLING_OUT,
    ROLLOUT_COMPLETE,
    SCALING_DOWN,
    TRANSFER_PATH_READY,
)
from disagg_operator.planning.rollout import PAUSED as PAUSED_REASON
from disagg_operator.planning.rollout import Plan, RoleCounts
from disagg_operator.planning.transfer_path import condition as transfer_path
from disagg_operator.render.objects import selector
from disagg_operator.validation.spec import Problem

CONDITION_TYPES = (READY, PROGRESSING, DEGRADED)
# Every reason each condition type can carry (reasons.py: the one table).
REASONS = ALLOWED

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
    seen: Observed,
    *,
    spec: DeploymentSpec | None,
    problems: Sequence[Problem],
    rollout: Plan | None = None,
    refusals: Sequence[Refusal] = (),
    settings: Settings = DEFAULT,
) -> dict[str, Any]:
    """The status subresource for this observation (camelCase dict): per role desired,
    ready (of the routed KV revision), updated, the two template revisions and a summary;
    kvRevision and routedKvRevision; the scale subresource's ``replicas`` and ``selector``,
    written whatever the spec's state, so an autoscaler always finds the pods; the
    conditions (:mod:`disagg_operator.planning.reasons`) and the derived ``phase``.
    ``seen.previous`` keeps lastTransitionTime until a condition's status flips;
    ``seen.canary_said``: what the transfer canaries asked answered (None: none asked);
    ``seen.group_pods``: the pods of the deployment's LeaderWorkerSet groups (``seen.pods``
    holds the LWS of each: a group's pod that fails, or that its gang cannot place, is named
    under Degraded with its group)."""
    previous, generation, now = seen.previous or {}, seen.generation, seen.now
    pods, group_pods = seen.pods, seen.group_pods
    live = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    grouped = [p for p in group_pods if not p.get("metadata", {}).get("deletionTimestamp")]
    roles: dict[str, Any]
    revisions: dict[str, Any] = {}
    if problems or spec is None:
        roles = {r: previous.get(r) or _role(RoleCounts()) for r in ROLES}
        wanted = _invalid(problems)
    elif rollout is None:
        raise ValueError("a valid spec needs its rollout plan (rollout.decide)")
    else:
        roles = {r: _role(rollout.counts.get(r, RoleCounts())) for r in ROLES}
        extra = sum(c.extra for c in rollout.counts.values())
        wanted = _healthy(rollout, roles, extra, _failing([*live, *grouped]))
        revisions = {"kvRevision": rollout.target, "routedKvRevision": rollout.routed}
        if refusals:
            _, reason, message = refused = refused_condition(refusals)
            wanted = (("False", reason, message), wanted[1], refused)
    conditions = [
        _condition(kind, status, reason, message, generation, previous, now)
        for kind, (status, reason, message) in zip(CONDITION_TYPES, wanted, strict=True)
    ]
    engine = engine_version(spec, settings)
    if engine is not None:
        conditions.append(_condition(ENGINE_VERSION_KNOWN, *engine, generation, previous, now))
    path = transfer_path(spec, live, settings, invalid=bool(problems), said=seen.canary_said)
    conditions.append(_condition(TRANSFER_PATH_READY, *path, generation, previous, now))
    if not revisions:  # invalid: keep what the last valid spec reported
        revisions = {k: previous[k] for k in ("kvRevision", "routedKvRevision") if k in previous}
    return {
        "observedGeneration": generation,
        **_planned(spec, roles, previous),
        **revisions,
        "conditions": conditions,
        "phase": _phase(conditions),
        **scale(seen.name, live),
    }


def _planned(
    spec: DeploymentSpec | None, roles: dict[str, Any], previous: dict[str, Any]
) -> dict[str, Any]:
    """The roles' counts with what the planner wrote (``plannedReplicas``, and
    ``autoscaling``: its last pass) kept while ``spec.autoscaling`` is on; an invalid spec
    keeps them too (the last valid one planned them)."""
    if spec is not None and spec.autoscaling is None:
        return roles
    out: dict[str, Any] = {}
    for role, counts in roles.items():
        planned = (previous.get(role) or {}).get("plannedReplicas")
        out[role] = counts if planned is None else {**counts, "plannedReplicas": planned}
    if "autoscaling" in previous:
        out["autoscaling"] = previous["autoscaling"]
    return out


def scale(name: str, live: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scale subresource's status: decode pods that exist, and their selector."""
    count = sum(1 for p in live if p["metadata"].get("labels", {}).get(LABEL_ROLE) == "decode")
    terms = selector(name, "decode")
    return {"replicas": count, "selector": ",".join(f"{k}={v}" for k, v in terms.items())}


def engine_version(spec: DeploymentSpec | None, settings: Settings) -> tuple[str, str, str] | None:
    """(status, reason, message) of EngineVersionKnown; None when the engine has none."""
    engine = settings.engines.get(spec.engine.type) if spec is not None else None
    if spec is None or engine is None:
        return None
    return engine.version_condition(spec)


def refused_condition(refusals: Sequence[Refusal]) -> tuple[str, str, str]:
    """Degraded (status, reason, message) for refused writes; Ready carries the same text.

    The message holds no count of attempts or time, so retries that get the same answer
    leave the status unchanged (no write)."""
    message = (
        f"The API server refused {len(refusals)} write(s), retried with back-off: "
        f"{_listing(lines(refusals))}."
    )
    return ("True", API_REFUSED, message)


def _role(counts: RoleCounts) -> dict[str, Any]:
    """One role's status; the summary (a printer column) shows a rollout's progress."""
    summary = f"{counts.ready}/{counts.desired}"
    if counts.updated < counts.live:  # old pods are still there: a rollout is on
        summary += f" ({counts.updated} updated)"
    out: dict[str, Any] = {
        "desired": counts.desired,
        "ready": counts.ready,
        "updated": counts.updated,
        "summary": summary,
    }
    if counts.update_revision:
        out["currentRevision"] = counts.current_revision
        out["updateRevision"] = counts.update_revision
    return out


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
        group = (pod["metadata"].get("labels") or {}).get(lws.LABEL_NAME)
        if reason and group:  # the group starts whole or not at all (a gang, LWS's restart)
            out.append(f"{pod['metadata']['name']} of group {group}: {reason}")
        elif reason:
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
        ("False", INVALID_SPEC, message),
        ("False", INVALID_SPEC, "Nothing is rolled out until the spec is fixed."),
        ("True", INVALID_SPEC, message),
    )


def _healthy(
    rollout: Plan, roles: dict[str, Any], extra: int, failing: list[str]
) -> tuple[_Wanted, _Wanted, _Wanted]:
    summary = ", ".join(
        f"{r} {roles[r]['ready']}/{roles[r]['desired']} ready ({roles[r]['updated']} updated)"
        for r in ROLES
    )
    counts = [rollout.counts.get(r, RoleCounts()) for r in ROLES]
    stale = any(c.updated < c.desired for c in counts)
    starting = any(c.updated_ready < c.desired for c in counts)
    if rollout.held is not None and (stale or rollout.routed != rollout.target):
        reason, why = rollout.held
        status = "Unknown" if reason == PAUSED_REASON else "False"
        progressing = (status, reason, f"{why} Now: {summary}.")
    elif rollout.routed != rollout.target:
        moving = (
            f"rolls in beside {rollout.routed} within each role's maxSurge, and the router "
            "pairs each request within one of them"
            if rollout.paired
            else f"starts beside {rollout.routed}, which keeps all traffic until "
            f"{rollout.target} has ready pods in every role"
        )
        progressing = (
            "True",
            NEW_KV_REVISION,
            f"The KV-compatibility key changed: KV revision {rollout.target} {moving}: {summary}.",
        )
    elif stale:
        progressing = ("True", ROLLING_OUT, f"Creating or replacing pods: {summary}.")
    elif rollout.paired and rollout.reached != set(rollout.serving):
        told, known = ", ".join(rollout.serving), ", ".join(sorted(rollout.reached)) or "none"
        progressing = (
            "True",
            ROLLING_OUT,
            f"The router Deployment rolls: it is told KV revision(s) {told}, and every "
            f"router pod knows {known}: {summary}.",
        )
    elif starting:
        progressing = ("True", PODS_STARTING, f"Waiting for pods to become ready: {summary}.")
    elif extra:
        progressing = ("True", SCALING_DOWN, f"Removing {extra} pod(s) no longer desired.")
    else:
        progressing = ("False", ROLLOUT_COMPLETE, f"Every pod runs the current spec: {summary}.")
    not_ready = stale or starting or rollout.routed != rollout.target
    return _ready(roles, summary, not_ready), progressing, _degraded(roles, failing)


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
            NO_PREFILL,
            f"No prefill pod is ready, so decode pods cannot get KV until prefill has "
            f"ready pods: {summary}.",
        )
    if not_ready:
        return ("False", REPLICAS_NOT_READY, f"Not all pods are ready: {summary}.")
    return ("True", ALL_REPLICAS_READY, f"All pods are ready: {summary}.")


def _degraded(roles: dict[str, Any], failing: list[str]) -> _Wanted:
    """Pods that will not recover by themselves, or a spec that leaves decode stranded."""
    if failing:
        return ("True", PODS_FAILING, f"Pods are failing: {_listing(failing)}.")
    if _no_prefill(roles) and roles["prefill"]["desired"] == 0:
        return (
            "True",
            NO_PREFILL,
            f"The prefill pool has 0 replicas (spec.prefill.replicas) while decode wants "
            f"{roles['decode']['desired']} pod(s): decode pods cannot get KV without "
            "prefill; set spec.prefill.replicas to at least 1 (or perDecode), or scale "
            "decode to 0 as well.",
        )
    return ("False", AS_EXPECTED, "No pod is failing.")


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
    if by_type[READY]["reason"] == INVALID_SPEC:
        return "Invalid"
    if by_type[DEGRADED]["status"] == "True":
        return "Degraded"
    return "Ready" if by_type[READY]["status"] == "True" else "Progressing"
