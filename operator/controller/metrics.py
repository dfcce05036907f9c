"""Prometheus metrics of the operator: reconciles, errors, API writes, reconcile latency.

I/O-free definitions (prometheus-client objects on the default registry) plus
:func:`serve`, which exposes them over HTTP for ``disagg operator --metrics-port``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

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
