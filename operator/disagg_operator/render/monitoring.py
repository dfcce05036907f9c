"""Monitoring (``spec.monitoring``): Prometheus Operator PodMonitors for the engines, the
transfer canaries and the router, and a PrometheusRule with the alerts the docs describe.

With ``spec.monitoring.enabled`` it renders a PodMonitor per role, ``<name>-prefill`` and
``<name>-decode`` (the engine's port by name: its ``/metrics``-only ``metrics`` port where
it has one (the reference worker), else its serving port ``http``, or ``engine`` behind
llm-d's routing sidecar; where decode pods run a canary, its ``canary`` port too),
``<name>-router`` with the router, each scraping ``/metrics`` every ``interval`` and
copying the pods' role and KV revision onto the series; with ``rules`` a PrometheusRule
``<name>`` (:func:`rule_groups`): each alert reads the series the engine says it exports
(``Engine.alert_series``), the canary's or the router's, and is left out where no pod
exports one (promtool would pass an alert on a series nobody exports). ``labels`` go on
each object, for the Prometheus' ``podMonitorSelector`` and ``ruleSelector``. The
NetworkPolicy admits ``prometheusNamespace`` to the ports scraped (:func:`scraped_ports`;
the trade-off of vLLM's serving port is in docs/security.md). Fields and rules as
:mod:`disagg_operator.contracts.prometheus` states them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from disagg_operator.api import (
    CANARY_PORT,
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    LABEL_DEPLOYMENT,
    LABEL_KV_REVISION,
    LABEL_ROLE,
    ROLES,
    DeploymentSpec,
)
from disagg_operator.contracts import prometheus
from disagg_operator.contracts.prometheus import AlertSeries
from disagg_operator.engines.settings import Settings
from disagg_operator.render import canary, router
from disagg_operator.render.pods import METRICS_PORT_NAME, sidecar_enabled

TARGET_LABELS = (LABEL_ROLE, LABEL_KV_REVISION)
# Our own processes' series the alerts read: the transfer canary's gauges
# (disagg_worker.serve.canary.metrics_text) and the router's counter
# (disagg_worker.serve.proxy.metrics); tests/operator/render/test_alerts.py fires each
# alert on the series those processes' /metrics pages really carry.
CANARY_PASSING = "disagg_canary_passing"
CANARY_READY = "disagg_canary_ready"
ROUTER_RECOMPUTED = "disagg_proxy_decode_recomputed_total"


def objects(
    spec: DeploymentSpec,
    name: str,
    namespace: str,
    roles: Sequence[str],
    meta: Any,
    settings: Settings,
) -> list[dict[str, Any]]:
    """The monitoring objects of deployment ``name`` for its ``roles`` with pods;
    ``meta(child_name)`` gives a child's metadata. None without ``spec.monitoring``."""
    m = spec.monitoring
    if m is None or not m.enabled:
        return []
    out = [
        _pod_monitor(spec, name, role, _labelled(meta(f"{name}-{role}"), m.labels), settings)
        for role in roles
    ]
    if spec.router.enabled:
        selector = {router.LABEL_ROUTER: name}
        front = _labelled(meta(router.name_of(name)), m.labels)
        out.append(_monitor(front, selector, ["http"], m.interval, ()))
    if m.rules:
        body = {"groups": rule_groups(spec, name, namespace, settings)}
        rule = {"apiVersion": prometheus.API_VERSION, "kind": "PrometheusRule"}
        out.append({**rule, "metadata": _labelled(meta(name), m.labels), "spec": body})
    return out


def names(name: str) -> list[tuple[str, str]]:
    """(kind, name) of every monitoring object a deployment may own, whether or not the
    spec renders it now (what a sync looks up by name, to delete what is no longer
    wanted)."""
    roles = [("PodMonitor", f"{name}-{role}") for role in ROLES]
    return [*roles, ("PodMonitor", router.name_of(name)), ("PrometheusRule", name)]


def scraped_ports(spec: DeploymentSpec, settings: Settings) -> list[int]:
    """The ports of the deployment's pods Prometheus reads: the engine's /metrics-only port
    where it has one (the reference worker), else its serving port (vLLM serves /metrics
    only there) and the engine's own behind the sidecar; the canary's where one runs."""
    own = settings.engine(spec).metrics_port(spec)
    ports = [HTTP_PORT] if own is None else [own]
    if own is None and sidecar_enabled(spec, "decode"):
        ports.append(ENGINE_BEHIND_SIDECAR_PORT)
    if canary.image(spec, settings) is not None:
        ports.append(CANARY_PORT)
    return ports


def _pod_monitor(
    spec: DeploymentSpec, name: str, role: str, metadata: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    assert spec.monitoring is not None
    ports = ["engine" if sidecar_enabled(spec, role) else "http"]
    if settings.engine(spec).metrics_port(spec) is not None:
        ports = [METRICS_PORT_NAME]
    if role == "decode" and canary.image(spec, settings) is not None:
        ports.append(canary.PORT_NAME)
    selector = {LABEL_DEPLOYMENT: name, LABEL_ROLE: role}
    return _monitor(metadata, selector, ports, spec.monitoring.interval, TARGET_LABELS)


def _monitor(
    metadata: dict[str, Any],
    selector: dict[str, str],
    ports: list[str],
    interval: str,
    target_labels: tuple[str, ...],
) -> dict[str, Any]:
    endpoints = [{"port": p, "path": "/metrics", "interval": interval} for p in ports]
    body: dict[str, Any] = {"selector": {"matchLabels": selector}, "podMetricsEndpoints": endpoints}
    if target_labels:
        body["podTargetLabels"] = list(target_labels)
    return {
        "apiVersion": prometheus.API_VERSION,
        "kind": "PodMonitor",
        "metadata": metadata,
        "spec": body,
    }


def _labelled(metadata: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {**metadata, "labels": {**labels, **metadata.get("labels", {})}}


def rule_groups(
    spec: DeploymentSpec, name: str, namespace: str, settings: Settings
) -> list[dict[str, Any]]:
    """The PrometheusRule's one group: the alerts docs/troubleshooting.md explains whose
    series this deployment's pods export, each over this deployment's series only (its
    namespace and its PodMonitors' jobs)."""
    jobs = {
        role: f'namespace="{namespace}", job="{prometheus.job(namespace, monitor)}"'
        for role, monitor in (
            ("prefill", f"{name}-prefill"),
            ("decode", f"{name}-decode"),
            ("router", router.name_of(name)),
        )
    }
    where = f"DisaggregatedDeployment {namespace}/{name}"
    series = settings.engine(spec).alert_series(spec)
    ran = canary.image(spec, settings) is not None
    rules = _canary_alerts(jobs["decode"], where) if ran else []
    recomputed = [f"sum(rate({series.recomputed}{{{jobs['decode']}}}[5m])) > 0"]
    if series.recomputed is None:
        recomputed = []
    if spec.router.enabled:
        recomputed.append(f"sum(rate({ROUTER_RECOMPUTED}{{{jobs['router']}}}[5m])) > 0")
    if recomputed:
        rules.append(_recomputing(" or ".join(recomputed), where))
    if series.transfer_failures is not None:
        rules.append(_transfers_failing(series, jobs, where))
    rules += _lease_alerts(series, jobs, where)
    if series.transfer_bytes is not None and series.transfer_descriptors is not None:
        rules.append(_descriptor_blowup(series, jobs, where))
    if series.waiting is not None:
        rules.append(_prefill_queueing(series.waiting, jobs["prefill"], where))
    return [{"name": f"disagg-{namespace}-{name}", "rules": rules}]


def _canary_alerts(decode: str, where: str) -> list[dict[str, Any]]:
    """The transfer canaries' alerts (decode pods that run one)."""
    return [
        _alert(
            "DisaggTransferPathFailing",
            f"min by (namespace, pod) ({CANARY_PASSING}{{{decode}}}) == 0",
            "5m",
            "warning",
            f"The transfer canary of {{{{ $labels.pod }}}} ({where}) fails: decode cannot "
            "pull KV from prefill now; TransferPathReady says why (PrefillBusy, "
            "PrefillUnreachable, DecodeRecomputing, ...).",
        ),
        _alert(
            "DisaggDecodeUnproven",
            f"max by (namespace, pod) ({CANARY_READY}{{{decode}}}) == 0",
            "15m",
            "warning",
            f"{{{{ $labels.pod }}}} ({where}) has not proven its transfer path on its "
            "engine for 15 minutes, so it is not Ready: its canary's /verdict says why.",
        ),
    ]


def _recomputing(expr: str, where: str) -> dict[str, Any]:
    return _alert(
        "DisaggDecodeRecomputing",
        expr,
        "10m",
        "warning",
        f"Decode pods of {where} compute prompts they were sent to read from prefill: "
        "answers are right, P/D is not happening (docs/routing.md).",
    )


def _transfers_failing(series: AlertSeries, jobs: dict[str, str], where: str) -> dict[str, Any]:
    """Failed KV transfers on either pool (a decode's reads, a prefill's pushes), less the
    failures of ``failures_also_count`` where the engine counts those in too (they have an
    alert of their own)."""
    assert series.transfer_failures is not None
    expr = _either_pool(series.transfer_failures, jobs)
    if series.failures_also_count is not None:
        less = _either_pool(series.failures_also_count, jobs).removesuffix(" > 0")
        expr = f"{expr.removesuffix(' > 0')} - {less} > 0"
    return _alert(
        "DisaggKVTransferFailing",
        expr,
        "10m",
        "warning",
        f"KV transfers between the pools of {where} have failed for 10 minutes: the "
        "requests whose KV did not arrive failed or were computed again by decode; the "
        "engines' logs name the failure (docs/troubleshooting.md).",
    )


def _either_pool(counter: str, jobs: dict[str, str], over: str = "rate") -> str:
    """``counter``'s rate (or increase) over 5 minutes summed over both pools' series."""
    per_pool = (f"{over}({counter}{{{jobs[r]}}}[5m])" for r in ("prefill", "decode"))
    return f"sum({' or '.join(per_pool)}) > 0"


# The alerts on a KV lease's life, each on a counter of AlertSeries read on both pools:
# (its field, the alert, rate or increase over 5 min, for, severity, description of
# {where}). A read after expiry fires at once: one answer built from freed KV is one too many.
_LEASE_ALERTS = (
    (
        "failed_notifications",
        "DisaggKVNotificationsFailing",
        "rate",
        "10m",
        "warning",
        "KV-transfer notifications between the pools of {where} have failed for 10 minutes: "
        "prefill holds KV blocks a decode has read until their lease ends, or a decode waits "
        "for KV it registered for; the engines' logs name the peer (docs/troubleshooting.md).",
    ),
    (
        "expired_leases",
        "DisaggKVLeaseExpiring",
        "rate",
        "10m",
        "warning",
        "Prefill pods of {where} have freed KV blocks no decode read within the lease for 10 "
        "minutes: those requests failed or were computed again on decode. Raise "
        "spec.kvTransfer.blockLeaseSeconds above decode's queueing plus transfer time, or "
        "add decode pods.",
    ),
    (
        "notifications_after_expiry",
        "DisaggKVReadAfterExpiry",
        "increase",
        "0m",
        "critical",
        "A decode of {where} finished reading KV blocks after prefill's lease on them had run "
        "out: the blocks may have been reused, and answers built from another request's KV "
        "(HTTP 200). Raise spec.kvTransfer.blockLeaseSeconds now and look for decode queueing.",
    ),
)


def _lease_alerts(series: AlertSeries, jobs: dict[str, str], where: str) -> list[dict[str, Any]]:
    """The :data:`_LEASE_ALERTS` whose counter the engine exports."""
    out = []
    for field, name, over, after, severity, text in _LEASE_ALERTS:
        counter = getattr(series, field)
        if counter is not None:
            expr = _either_pool(counter, jobs, over)
            out.append(_alert(name, expr, after, severity, text.format(where=where)))
    return out


# Bytes per NIXL descriptor below which the transfers are descriptor-bound: NIXL posts each
# descriptor as an operation of its own, and a descriptor is normally one block of one
# layer's KV (16 tokens of one KV head of 128 dims in bf16 is 4 KiB, the smallest a
# sharded model reads); below a page, blocks are being read in pieces.
DESCRIPTOR_MIN_BYTES = 4096


def _descriptor_blowup(series: AlertSeries, jobs: dict[str, str], where: str) -> dict[str, Any]:
    """Transfers whose descriptors carry less than :data:`DESCRIPTOR_MIN_BYTES` each."""
    assert series.transfer_bytes is not None and series.transfer_descriptors is not None
    moved = _either_pool(series.transfer_bytes, jobs).removesuffix(" > 0")
    descriptors = _either_pool(series.transfer_descriptors, jobs).removesuffix(" > 0")
    return _alert(
        "DisaggKVDescriptorBlowup",
        f"{moved} / {descriptors} < {DESCRIPTOR_MIN_BYTES}",
        "15m",
        "warning",
        f"KV transfers between the pools of {where} have moved under "
        f"{DESCRIPTOR_MIN_BYTES} bytes per NIXL descriptor for 15 minutes: blocks are read "
        "in pieces (a decode TP above prefill's splitting each block by heads, a small "
        "--block-size), so the transfers are bound by descriptors, not bandwidth; "
        "vllm:nixl_num_descriptors shows how many (docs/troubleshooting.md).",
    )


def _prefill_queueing(waiting: str, prefill: str, where: str) -> dict[str, Any]:
    return _alert(
        "DisaggPrefillQueueing",
        f"max({waiting}{{{prefill}}}) > 0",
        "10m",
        "info",
        f"Requests have queued on the prefill pool of {where} for 10 minutes: "
        "first tokens wait; add prefill or route short prompts to decode alone.",
    )


def _alert(name: str, expr: str, after: str, severity: str, text: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": after,
        "labels": {"severity": severity},
        "annotations": {"summary": name, "description": text},
    }
