"""Transfer telemetry: counters move and the Prometheus text carries them."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from disagg_worker.transfer.telemetry import TransferTelemetry


def test_transfers_failures_and_releases_are_counted() -> None:
    t = TransferTelemetry()
    t.record_transfer(nbytes=4096, descriptors=3, post_ms=0.2, transfer_ms=1.5)
    t.record_transfer(nbytes=1024, descriptors=1, post_ms=0.1, transfer_ms=0.5)
    t.record_failure("deadline")
    t.record_release("notified")
    t.record_handshake(12.0)
    snap = t.snapshot()
    assert snap["transfers"] == 2 and snap["bytes"] == 5120 and snap["descriptors"] == 4
    assert snap["failures"] == 1 and snap["failures_deadline"] == 1
    assert snap["released_notified"] == 1 and snap["handshakes"] == 1


def test_metrics_text_parses_as_prometheus() -> None:
    t = TransferTelemetry()
    t.record_transfer(nbytes=10, descriptors=1, post_ms=0.3, transfer_ms=2.0)
    t.record_failure("nixl_error")
    families = {f.name: f for f in text_string_to_metric_families(t.metrics_text().decode())}
    samples = {s.name: s.value for s in families["disagg_kv_transfer_bytes"].samples}
    assert samples["disagg_kv_transfer_bytes_total"] == 10
    failures = families["disagg_kv_transfer_failures"].samples
    assert any(s.labels == {"reason": "nixl_error"} and s.value == 1 for s in failures)
    assert "disagg_kv_transfer_ms" in families


def test_registries_are_per_instance() -> None:
    a, b = TransferTelemetry(), TransferTelemetry()
    a.record_failure("x")
    assert b.snapshot()["failures"] == 0
