"""Prometheus metrics of the operator: reconciles, errors, API writes, reconcile latency,
and per deployment its pods, conditions, rollout and transfer path (:class:`Deployments`).

I/O-free definitions (prometheus-client objects on the default registry) plus
:func:`serve`, which exposes them over HTTP for ``disagg operator --metrics-port``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from disagg_operator.planning.reasons import ROLLOUT_COMPLETE

RECONCILES = Counter(
    "disagg_operator_reconciles",
    "Reconciles of DisaggregatedDeployments, by result (ok, invalid, refused, error).",
    ["result"],
)
ERRORS = Counter(
    "disagg_operator_errors",
    "Reconciles that failed with an exception and were retried.",
)
API_WRITES = Counter(
    "disagg_operator_api_writes",
    "Writes sent to the API server, by verb and kind (steady state: only the Lease renewals).",
    ["verb", "kind"],
)
LEADER = Gauge(
    "disagg_operator_leader",
    "1 while this replica holds the leader-election Lease and reconciles, else 0.",
)
RECONCILE_SECONDS = Histogram(
    "disagg_operator_reconcile_seconds",
    "Time of one reconcile (read, plan, write, status).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


def writes_total() -> float:
    """All API writes counted so far in this process."""
    return sum(
        sample.value
        for metric in API_WRITES.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
    )


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Expose /metrics on ``addr:port`` from a background thread."""
    start_http_server(port, addr=addr)


class Deployments:
    """Per-deployment gauges read from the operator's cache at each scrape (nothing kept
    between scrapes, so a deleted deployment's series end with it), as kube-state-metrics
    reports a Deployment:

    - ``disagg_deployment_replicas{namespace, deployment, role, state}``: ``desired``,
      ``ready`` (of the revisions routers reach) and ``updated`` pods of each role;
    - ``disagg_deployment_condition{namespace, deployment, type, status}``: 1 for each
      condition's current status (True, False or Unknown), 0 for the other two;
    - ``disagg_deployment_rollout_in_progress{namespace, deployment}``: 1 while Progressing
      says anything but RolloutComplete (a roll on, paused or held);
    - ``disagg_deployment_transfer_path_ready{namespace, deployment}``: 1 while
      TransferPathReady is True;
    - ``disagg_deployment_planned_replicas{namespace, deployment, role}``: the pods the
      autoscaler plans (spec.autoscaling; absent without a plan), for a KEDA or HPA that
      is to act on the plan instead.

    ``source``: the cache (``deployments()`` keys, ``deployment(ns, name)`` bodies)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def describe(self) -> list[Any]:
        return []  # names come from collect(); none claimed, so two operators may coexist

    def collect(self) -> Any:
        labels = ["namespace", "deployment"]
        replicas = GaugeMetricFamily(
            "disagg_deployment_replicas",
            "Pods per role and state.",
            labels=[*labels, "role", "state"],
        )
        conditions = GaugeMetricFamily(
            "disagg_deployment_condition",
            "1 for each condition's current status.",
            labels=[*labels, "type", "status"],
        )
        rolling = GaugeMetricFamily(
            "disagg_deployment_rollout_in_progress",
            "1 while Progressing is not RolloutComplete.",
            labels=labels,
        )
        path = GaugeMetricFamily(
            "disagg_deployment_transfer_path_ready",
            "1 while TransferPathReady is True.",
            labels=labels,
        )
        planned = GaugeMetricFamily(
            "disagg_deployment_planned_replicas",
            "Pods the autoscaler plans per role (spec.autoscaling).",
            labels=[*labels, "role"],
        )
        for namespace, name in self.source.deployments():
            status = (self.source.deployment(namespace, name) or {}).get("status") or {}
            for role in ("prefill", "decode"):
                counts = status.get(role) or {}
                for state in ("desired", "ready", "updated"):
                    value = float(counts.get(state, 0))
                    replicas.add_metric([namespace, name, role, state], value)
                if isinstance(counts.get("plannedReplicas"), int):
                    planned.add_metric([namespace, name, role], float(counts["plannedReplicas"]))
            found = {c.get("type"): c for c in status.get("conditions") or []}
            for kind, condition in found.items():
                for said in ("True", "False", "Unknown"):
                    on = 1.0 if condition.get("status") == said else 0.0
                    conditions.add_metric([namespace, name, str(kind), said], on)
            progressing = found.get("Progressing", {}).get("reason")
            rolling.add_metric([namespace, name], 0.0 if progressing == ROLLOUT_COMPLETE else 1.0)
            ready = found.get("TransferPathReady", {}).get("status") == "True"
            path.add_metric([namespace, name], 1.0 if ready else 0.0)
        yield from (replicas, conditions, rolling, path, planned)


def register_deployments(source: Any, registry: Any = None) -> Deployments:
    """Serve :class:`Deployments` over ``source`` on ``registry`` (default: the one
    ``serve`` exposes); :func:`unregister` takes it back."""
    collector = Deployments(source)
    (registry or REGISTRY).register(collector)
    return collector


def unregister(collector: Deployments, registry: Any = None) -> None:
    (registry or REGISTRY).unregister(collector)
