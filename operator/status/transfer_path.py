"""TransferPathReady: do the decode pods' transfer canaries pass?

Pure layer, part of status. Each decode pod's ``transfer-canary`` container
(:mod:`disagg_operator.render.canary`) is ready only while a canary P/D request (prefill
``max_tokens 1``, then this pod's decode with the returned ``kv_transfer_params``) passes;
the kubelet writes that into the pod's ``containerStatuses``, which the operator already
reads. This module folds them into one condition::

    status   reason          when
    True     CanaryPassing   every running decode pod's canary is ready
    False    DecodeRecomputing  a failing canary says its decode computed the prompt
                             instead of reading its KV (the operator asks failing
                             canaries why: :mod:`disagg_operator.controller.canaries`)
    False    SlowTransport   a canary says its KV moved slower than the floor
                             (spec.transferCanary.minBandwidthGbytesPerSecond, or the RDMA
                             block's): the path works, but not over the transport meant;
                             its pod stays Ready (a slow path still serves), so with a
                             floor the operator asks passing canaries too
    False    CanaryFailing   some running decode pod's canary is not (message names them)
    Unknown  NoDecodePods    no decode pod runs a canary yet (none wanted, none running)
    Unknown  CanaryDisabled  spec.transferCanary.enabled is false
    Unknown  NoCanaryImage   engine vllm with no canary image (spec or --canary-image)
    Unknown  InvalidSpec     the spec has problems: nothing runs, nothing is checked

Pods that are being deleted, are not Running, or run an older pod spec without the canary
are left out: they say nothing about the path the current pods take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from disagg_operator.api import LABEL_ROLE, DeploymentSpec
from disagg_operator.derive import transfer
from disagg_operator.derive.scaling import effective_replicas
from disagg_operator.engines.settings import Settings
from disagg_operator.render.canary import NAME as CANARY
from disagg_operator.render.canary import image as canary_image

# the reasons the canary reports, first word of its problem
from disagg_worker.serve.canary_verdict import RECOMPUTED, SLOW

TRANSFER_PATH_READY = "TransferPathReady"
REASONS = frozenset(
    {
        "CanaryPassing",
        RECOMPUTED,
        SLOW,
        "CanaryFailing",
        "NoDecodePods",
        "CanaryDisabled",
        "NoCanaryImage",
        "InvalidSpec",
    }
)
MAX_LISTED = 5


def condition(
    spec: DeploymentSpec | None,
    pods: Sequence[dict[str, Any]],
    settings: Settings,
    *,
    invalid: bool = False,
    canary_reasons: Mapping[str, str] | None = None,
) -> tuple[str, str, str]:
    """(status, reason, message) of TransferPathReady for the observed ``pods``;
    ``canary_reasons``: what the canaries asked said (:func:`to_ask`; pod name → their
    /ready reason)."""
    if spec is None or invalid:
        return ("Unknown", "InvalidSpec", "Nothing is checked until the spec is fixed.")
    if not spec.transfer_canary.enabled:
        return (
            "Unknown",
            "CanaryDisabled",
            "The canary is off (spec.transferCanary.enabled: false): the transfer path is "
            "not checked.",
        )
    if effective_replicas(spec, "decode") > 0 and canary_image(spec, settings) is None:
        return (
            "Unknown",
            "NoCanaryImage",
            "Engine vllm images have no `disagg` command for the canary, and none was "
            "given: set spec.transferCanary.image or the operator's --canary-image (chart "
            "value transferCanary.image) to a disagg worker image.",
        )
    running = [p for p in _decode(pods) if _running(p) and _canary_status(p) is not None]
    if not running:
        return ("Unknown", "NoDecodePods", "No running decode pod runs the transfer canary yet.")
    failing = sorted(p["metadata"]["name"] for p in failing_canaries(pods))
    names = sorted(p["metadata"]["name"] for p in running)
    told = _told(failing, names, canary_reasons or {})
    if told is not None:
        return told
    if failing:
        return (
            "False",
            "CanaryFailing",
            f"The transfer canary fails in {len(failing)} of {len(running)} decode pod(s): "
            f"{listing(failing)}. Its reason: `kubectl logs POD -c {CANARY}`.",
        )
    return (
        "True",
        "CanaryPassing",
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
        SLOW,
        False,
        "The KV moved slower than the canary's bandwidth floor in {n} of {m} decode pod(s): "
        "{pods}: the path works and the pods serve, but not at what their transport should "
        "give (docs/troubleshooting.md).",
    ),
)


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


def to_ask(spec: DeploymentSpec, pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decode pods whose canary's words are worth reading: the failing ones, then, when
    the deployment has a bandwidth floor, the passing ones too (a slow path passes)."""
    failing = failing_canaries(pods)
    if transfer.bandwidth_floor(spec) is None:
        return failing
    ready = [p for p in _decode(pods) if _running(p) and _canary_ready(p)]
    return [*failing, *ready]


def failing_canaries(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The running decode pods whose canary is not ready (whose reason is worth asking)."""
    return [p for p in _decode(pods) if _running(p) and _canary_status(p) and not _canary_ready(p)]


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
