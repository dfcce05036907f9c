"""TransferPathReady: can the decode pods pull KV from prefill now?

Each decode pod's ``transfer-canary`` container (:mod:`disagg_operator.render.canary`)
latches its readiness on the first canary that passes on its engine, so a saturated prefill
pool never takes decode pods out of their Services; the path *now* is each canary's ``GET
/verdict``, which the operator asks (:mod:`disagg_operator.controller.canaries`, a few pods
per sync) and this module folds into one condition. Its reasons and when each holds:
docs/operator.md (TransferPathReady).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# the reasons the canary reports, first word of its problem
from disagg_contract.canary import BUSY, RECOMPUTED, SLOW, UNEXPECTED_TRANSPORT, UNREACHABLE
from disagg_operator.api import CANARY_PORT, LABEL_ROLE, DeploymentSpec
from disagg_operator.derive.scaling import effective_replicas
from disagg_operator.engines.settings import Settings
from disagg_operator.planning.reasons import (
    ALLOWED,
    CANARY_DISABLED,
    CANARY_FAILING,
    CANARY_PASSING,
    CANARY_UNANSWERED,
    INVALID_SPEC,
    NO_CANARY_IMAGE,
    NO_DECODE_PODS,
    TRANSFER_PATH_READY,
)
from disagg_operator.render.canary import NAME as CANARY
from disagg_operator.render.canary import image as canary_image

REASONS = ALLOWED[TRANSFER_PATH_READY]
MAX_LISTED = 5


@dataclass(frozen=True)
class Said:
    """What one canary's ``GET /verdict`` answered: whether the path passes now, and why."""

    passing: bool
    reason: str


def condition(
    spec: DeploymentSpec | None,
    pods: Sequence[dict[str, Any]],
    settings: Settings,
    *,
    invalid: bool = False,
    said: Mapping[str, Said] | None = None,
) -> tuple[str, str, str]:
    """(status, reason, message) of TransferPathReady for the observed ``pods``; ``said``:
    what the canaries asked answered (:func:`to_ask`; pod name → their verdict), None when
    none were asked (then the latches alone decide). Pods being deleted, not Running, or on
    an older pod spec without the canary are left out: they say nothing of the path the
    current pods take."""
    if spec is None or invalid:
        return ("Unknown", INVALID_SPEC, "Nothing is checked until the spec is fixed.")
    if not spec.transfer_canary.enabled:
        return (
            "Unknown",
            CANARY_DISABLED,
            "The canary is off (spec.transferCanary.enabled: false): the transfer path is "
            "not checked.",
        )
    if effective_replicas(spec, "decode") > 0 and canary_image(spec, settings) is None:
        return (
            "Unknown",
            NO_CANARY_IMAGE,
            "Engine vllm images have no `disagg` command for the canary, and none was "
            "given: set spec.transferCanary.image or the operator's --canary-image (chart "
            "value transferCanary.image) to a disagg worker image.",
        )
    running = [p for p in _decode(pods) if _running(p) and _canary_status(p) is not None]
    if not running:
        return ("Unknown", NO_DECODE_PODS, "No running decode pod runs the transfer canary yet.")
    heard = said or {}
    names = sorted(p["metadata"]["name"] for p in running)
    latched = sorted(p["metadata"]["name"] for p in running if _canary_ready(p))
    failing = sorted(n for n in names if n not in latched or (n in heard and not heard[n].passing))
    told = _told(failing, names, {n: v.reason for n, v in heard.items()})
    if told is not None:
        return told
    if failing:
        reason = next((heard[n].reason for n in failing if n in heard), None)
        why = (
            f"Their canaries say: {reason}"
            if reason
            else f"Why: `kubectl logs POD -c {CANARY}`, or GET :{CANARY_PORT}/verdict."
        )
        return (
            "False",
            CANARY_FAILING,
            f"The transfer canary fails in {len(failing)} of {len(running)} decode pod(s): "
            f"{listing(failing)}. {why}",
        )
    if said is not None and not any(n in heard for n in latched):
        return (
            "Unknown",
            CANARY_UNANSWERED,
            f"No decode pod's canary answered the operator (GET :{CANARY_PORT}/verdict): "
            "the pods are Ready (their canaries passed once), the path now is not known. "
            "The rendered NetworkPolicy admits the operator's pods to that port.",
        )
    return (
        "True",
        CANARY_PASSING,
        f"Every running decode pod ({len(running)}) pulled KV from prefill in a canary request.",
    )


# What a canary's own words can tell (the first word of its reason), first match wins:
# the reason, whether only failing canaries say it (a slow path passes), and the message's
# start ({n} of {m} decode pods: {pods}).
TOLD = (
    (
        RECOMPUTED,
        True,
        "The decode computed the canary's prompt itself instead of reading its KV from "
        "prefill in {n} of {m} decode pod(s): {pods}: tokens are right but P/D is not "
        "happening (docs/routing.md).",
    ),
    (
        BUSY,
        True,
        "The prefill pool did not answer the canary within its deadline in {n} of {m} "
        "decode pod(s): {pods}: it is saturated (requests queued ahead); decode pods stay "
        "Ready and serve what needs no prefill (add prefill, docs/troubleshooting.md).",
    ),
    (
        UNREACHABLE,
        True,
        "No prefill pod accepted the canary's connection in {n} of {m} decode pod(s): "
        "{pods}: none is Ready behind the revision's Service, or DNS or a policy is in the "
        "way; decode pods stay Ready and serve what needs no prefill.",
    ),
    (
        UNEXPECTED_TRANSPORT,
        False,
        "UCX moved the canary's wire probe over a transport the deployment does not expect "
        "in {n} of {m} decode pod(s): {pods}: the path works and the pods serve, but not on "
        "the wire modelled for it (docs/troubleshooting.md).",
    ),
    (
        SLOW,
        False,
        "The KV moved slower than the canary's bandwidth floor in {n} of {m} decode pod(s): "
        "{pods}: the path works and the pods serve, but not at what their transport should "
        "give (docs/troubleshooting.md).",
    ),
)


def told(reason: str) -> str | None:
    """The condition reason a canary's words name (:data:`TOLD`), None: none of those."""
    return next((word for word, _, _ in TOLD if word in reason), None)


def _told(
    failing: Sequence[str], running: Sequence[str], said: Mapping[str, str]
) -> tuple[str, str, str] | None:
    """The condition the canaries' reasons give (:data:`TOLD`), None when they name none
    of those (or were not asked)."""
    for reason, failing_only, text in TOLD:
        named = [n for n in (failing if failing_only else running) if reason in said.get(n, "")]
        if named:
            start = text.format(n=len(named), m=len(running), pods=listing(named))
            return ("False", reason, f"{start} Their canaries say: {said[named[0]]}")
    return None


def to_ask(pods: Sequence[dict[str, Any]], limit: int, turn: int = 0) -> list[dict[str, Any]]:
    """The decode pods whose canaries to ask now, at most ``limit``: those not yet proven
    (their words say why), then the proven ones from position ``turn`` on, round the
    list, so that successive turns cover every pod of a large pool."""
    running = sorted(
        (p for p in _decode(pods) if _running(p) and _canary_status(p) is not None),
        key=lambda p: str(p["metadata"]["name"]),
    )
    waiting = [p for p in running if not _canary_ready(p)]
    proven = [p for p in running if _canary_ready(p)]
    start = turn % len(proven) if proven else 0
    return [*waiting, *proven[start:], *proven[:start]][:limit]


def listing(names: Sequence[str]) -> str:
    """At most MAX_LISTED names, then how many more."""
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _decode(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    meta = "metadata"
    return [
        p
        for p in pods
        if p.get(meta, {}).get("labels", {}).get(LABEL_ROLE) == "decode"
        and not p.get(meta, {}).get("deletionTimestamp")
    ]


def _running(pod: dict[str, Any]) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Running")


def _canary_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == CANARY), None)


def _canary_ready(pod: dict[str, Any]) -> bool:
    found = _canary_status(pod)
    return bool(found and found.get("ready") is True)
