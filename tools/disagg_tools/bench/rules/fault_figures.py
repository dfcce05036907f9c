"""Figures of `disagg bench faults` from what its clients recorded: latency percentiles,
status counts, which requests a prefill restart is allowed to fail, and whether each
target is met.

Records in, figures out; :mod:`disagg_tools.bench.faults` does the I/O.
Times are seconds on one monotonic clock; latencies are milliseconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_tools.bench.rules import verdicts
from disagg_tools.bench.rules.spread import percentile

NO_ANSWER = 0  # a Record's status when no HTTP answer came (refused, reset, timed out)

# Every figure the benchmark reports, in the order the table lists them. A phase that was
# not run (--only) leaves its figures None.
KEYS = (
    "load_clients",
    "load_requests",
    "load_failed",
    "load_statuses",
    "load_p50_ms",
    "load_p99_ms",
    "load_rps",
    "baseline_p99_ms",
    "baseline_failed",
    "bad_peer_healthy_p99_ms",
    "bad_peer_healthy_failed",
    "bad_peer_healthy_requests",
    "bad_peer_requests",
    "bad_peer_statuses",
    "prefill_restart_ready_s",
    "prefill_restart_failed",
    "prefill_restart_down_failed",
    "prefill_restart_before_failed",
    "prefill_restart_requests",
    "release_status",
    "release_after_decode_fail_s",
    "release_freed",
    "fuzz_frames",
    "fuzz_answered",
    "fuzz_kinds",
    "fuzz_s",
    "fuzz_rss_before_mb",
    "fuzz_rss_after_mb",
    "fuzz_rss_growth_mb",
    "fuzz_still_serves",
    "prefill_kill_requests",
    "prefill_kill_inflight",
    "prefill_kill_client_failed",
    "prefill_kill_statuses",
    "prefill_kill_prefill_failovers",
    "prefill_kill_decode_retries",
)

TARGETS: dict[str, Any] = {
    "load_failed": 0,
    "baseline_failed": 0,
    "bad_peer_healthy_failed": 0,
    "bad_peer_healthy_p99_ms": "<= 2 x baseline_p99_ms",
    "prefill_restart_failed": 0,
    "prefill_restart_before_failed": 0,
    "release_after_decode_fail_s": "<= 1",
    "fuzz_rss_growth_mb": "<= 16",
    "prefill_kill_inflight": "> 0 (else the kill tested nothing)",
    "prefill_kill_client_failed": "0, with prefill_kill_inflight > 0",
}

# target → (the figures it reads, whether they meet it)
_CHECKS: dict[str, tuple[tuple[str, ...], Callable[..., bool]]] = {
    "load_failed": (("load_failed",), lambda failed: failed == 0),
    "baseline_failed": (("baseline_failed",), lambda failed: failed == 0),
    "bad_peer_healthy_failed": (("bad_peer_healthy_failed",), lambda failed: failed == 0),
    "bad_peer_healthy_p99_ms": (
        ("bad_peer_healthy_p99_ms", "baseline_p99_ms"),
        lambda p99, base: p99 <= 2 * base,
    ),
    "prefill_restart_failed": (("prefill_restart_failed",), lambda failed: failed == 0),
    "prefill_restart_before_failed": (
        ("prefill_restart_before_failed",),
        lambda failed: failed == 0,
    ),
    "release_after_decode_fail_s": (("release_after_decode_fail_s",), lambda s: s <= 1.0),
    "fuzz_rss_growth_mb": (("fuzz_rss_growth_mb",), lambda mb: mb <= 16.0),
    "prefill_kill_inflight": (("prefill_kill_inflight",), lambda inflight: inflight > 0),
    "prefill_kill_client_failed": (
        ("prefill_kill_client_failed", "prefill_kill_inflight"),
        lambda failed, inflight: failed == 0 and inflight > 0,
    ),
}


@dataclass(frozen=True)
class Record:
    """One client request: when it was sent, when its answer (or failure) came, and the
    HTTP status (:data:`NO_ANSWER` when none came)."""

    start: float
    end: float
    status: int

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1000.0


def status_counts(records: Iterable[Record]) -> dict[str, int]:
    """HTTP status → requests, as JSON keys ("200", "502", "no_answer"), by status."""
    counts = Counter(r.status for r in records)
    return {_status_key(s): counts[s] for s in sorted(counts)}


def _status_key(status: int) -> str:
    return "no_answer" if status == NO_ANSWER else str(status)


def latency_p(records: Iterable[Record], q: float) -> float:
    """Percentile ``q`` of the answered-200 requests' latencies (ms, rounded): a failure
    is counted as a failure, not as a short or long latency."""
    return round(percentile([r.ms for r in records if r.ok], q), 2)


def failed(records: Iterable[Record]) -> int:
    return sum(not r.ok for r in records)


def load_figures(records: Sequence[Record], clients: int) -> dict[str, Any]:
    """The load phase: counts, statuses, p50/p99 and 200s per second over the span from
    the first request sent to the last answer."""
    span = max(r.end for r in records) - min(r.start for r in records) if records else 0.0
    ok = sum(r.ok for r in records)
    return {
        "load_clients": clients,
        "load_requests": len(records),
        "load_failed": failed(records),
        "load_statuses": status_counts(records),
        "load_p50_ms": latency_p(records, 50),
        "load_p99_ms": latency_p(records, 99),
        "load_rps": round(ok / span, 2) if span > 0 else 0.0,
    }


def restart_window(record: Record, kill_at: float, ready_at: float) -> str:
    """Where a request falls around a prefill restart: ``before`` (answered before the
    kill), ``down`` (in flight at the kill, or sent before the prefill was ready again:
    allowed to fail) or ``after`` (sent once it was ready again: must succeed)."""
    if record.start >= ready_at:
        return "after"
    if record.end < kill_at:
        return "before"
    return "down"


def restart_figures(records: Sequence[Record], kill_at: float, ready_at: float) -> dict[str, Any]:
    windows: dict[str, list[Record]] = {"before": [], "down": [], "after": []}
    for r in records:
        windows[restart_window(r, kill_at, ready_at)].append(r)
    return {
        "prefill_restart_ready_s": round(ready_at - kill_at, 3),
        "prefill_restart_failed": failed(windows["after"]),
        "prefill_restart_down_failed": failed(windows["down"]),
        "prefill_restart_requests": {k: len(v) for k, v in windows.items()},
        "prefill_restart_before_failed": failed(windows["before"]),
    }


def prefill_kill_figures(
    records: Sequence[Record], inflight: int, health: dict[str, Any]
) -> dict[str, Any]:
    """The prefill-kill phase: the clients' records; ``inflight``, the hops the proxy had
    on the killed prefill when the signal went (read just before it); ``health``, the
    proxy's ``/health`` after the phase (prefill hops that moved on from an unreachable
    worker, decode hops retried from the other prefill)."""
    return {
        "prefill_kill_requests": len(records),
        "prefill_kill_inflight": inflight,
        "prefill_kill_client_failed": failed(records),
        "prefill_kill_statuses": status_counts(records),
        "prefill_kill_prefill_failovers": health["hop_failovers"]["prefill"]["unreachable"],
        "prefill_kill_decode_retries": health.get("prefill_retries", 0),
    }


def met(figures: dict[str, Any]) -> dict[str, bool | None]:
    """Per target: whether the figures meet it; None when a figure it reads was not
    measured (its phase was left out)."""
    out: dict[str, bool | None] = {}
    for target, (inputs, check) in _CHECKS.items():
        values = [figures.get(k) for k in inputs]
        out[target] = None if any(v is None for v in values) else bool(check(*values))
    return out


def report_rows(figures: dict[str, Any]) -> list[dict[str, str]]:
    """The table: one row per measured number with its target and verdict, and one per
    target whose phase did not run; counts by status or kind are :func:`report_counts`."""
    return verdicts.rows(
        figures, KEYS, TARGETS, met(figures), missing="not run", unmeasured_rows=False
    )


def report_counts(figures: dict[str, Any]) -> list[str]:
    """``figure: key value, ...`` for each measured count by status, kind or window."""
    return verdicts.counts(figures, KEYS)
