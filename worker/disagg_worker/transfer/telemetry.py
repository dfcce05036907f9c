"""Transfer telemetry: per-transfer figures and failure counters as Prometheus metrics.

Effectful layer (prometheus_client only). Each :class:`TransferTelemetry` owns its own
registry, so two agents in one process (tests, ``role=both``) do not collide; the HTTP
server mounts :meth:`TransferTelemetry.metrics_text` at ``/metrics``.
"""

from __future__ import annotations

import threading

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_MS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
CONTENT_TYPE = CONTENT_TYPE_LATEST
# labelled counters in the snapshot: a key per label value, after this prefix
_LABELLED = {
    "disagg_kv_transfer_failures": "failures_",
    "disagg_kv_block_releases": "released_",
    "disagg_kv_push_writes": "push_",
}


class TransferTelemetry:
    """Counters and histograms for one worker; thread-safe."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.transfers = Counter(
            "disagg_kv_transfers", "completed KV transfers (READs and pushes)", registry=r
        )
        self.pushed = Counter(
            "disagg_kv_pushed_transfers",
            "completed KV transfers the prefill wrote (pushes; decode's count)",
            registry=r,
        )
        self.push_writes = Counter(
            "disagg_kv_push_writes",
            "WRITEs posted for pushes, by outcome (prefill's count)",
            ["outcome"],
            registry=r,
        )
        self.bytes = Counter("disagg_kv_transfer_bytes", "KV bytes read", registry=r)
        self.descriptors = Counter(
            "disagg_kv_transfer_descriptors", "NIXL descriptors posted", registry=r
        )
        self.failures = Counter(
            "disagg_kv_transfer_failures", "failed KV reads by reason", ["reason"], registry=r
        )
        self.post_ms = Histogram(
            "disagg_kv_transfer_post_ms",
            "time to build and post a READ, or a push's claim-and-post round trip (ms)",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.transfer_ms = Histogram(
            "disagg_kv_transfer_ms",
            "post to completion of a READ, or of a push (its notification) (ms)",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.handshakes = Counter("disagg_kv_handshakes", "peer handshakes done", registry=r)
        self.handshake_ms = Histogram(
            "disagg_kv_handshake_ms", "handshake duration (ms)", buckets=_MS_BUCKETS, registry=r
        )
        self.releases = Counter(
            "disagg_kv_block_releases", "published requests released", ["reason"], registry=r
        )
        self.held = Gauge("disagg_kv_requests_held", "published requests awaiting", registry=r)
        self.refused = Counter(
            "disagg_kv_handshake_refused",
            "handshake frames refused by the listener",
            registry=r,
        )
        self._lock = threading.Lock()
        self._fail_total = 0

    def record_transfer(
        self,
        *,
        nbytes: int,
        descriptors: int,
        post_ms: float,
        transfer_ms: float,
        pushed: bool = False,
    ) -> None:
        self.transfers.inc()
        if pushed:
            self.pushed.inc()
        self.bytes.inc(nbytes)
        self.descriptors.inc(descriptors)
        self.post_ms.observe(post_ms)
        self.transfer_ms.observe(transfer_ms)

    def record_failure(self, reason: str) -> None:
        self.failures.labels(reason=reason).inc()
        with self._lock:
            self._fail_total += 1

    def record_handshake(self, ms: float) -> None:
        self.handshakes.inc()
        self.handshake_ms.observe(ms)

    def record_push(self, outcome: str) -> None:
        self.push_writes.labels(outcome=outcome).inc()

    def record_release(self, reason: str) -> None:
        self.releases.labels(reason=reason).inc()

    def snapshot(self) -> dict[str, float]:
        """Flat counters for logs, tests and JSON status."""
        out: dict[str, float] = {
            "transfers": self.transfers._value.get(),
            "pushed": self.pushed._value.get(),
            "bytes": self.bytes._value.get(),
            "descriptors": self.descriptors._value.get(),
            "handshakes": self.handshakes._value.get(),
            "requests_held": self.held._value.get(),
            "handshake_refused": self.refused._value.get(),
        }
        with self._lock:
            out["failures"] = float(self._fail_total)
        for metric in self.registry.collect():
            prefix = _LABELLED.get(metric.name)
            if prefix is not None:
                for s in metric.samples:
                    if s.name.endswith("_total"):
                        key = s.labels.get("reason", s.labels.get("outcome", ""))
                        out[prefix + key] = s.value
        return out

    def metrics_text(self) -> bytes:
        """Prometheus text exposition (serve with :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)
