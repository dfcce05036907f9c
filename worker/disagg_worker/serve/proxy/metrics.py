"""The proxy's Prometheus metrics (``GET /metrics``), in a registry of its own.

I/O layer (prometheus_client). What a platform engineer watches to know P/D is happening:
how many requests took each path and why (the routing policy), how many disaggregated
requests reached a decode that computed the prompt itself (by reason: never silent), the
prefill retries, the prompts the engine could not count, and the requests shed because a
pool would not start them in time, and under transfer locality the pairs that stayed in
a zone or left it and the requests refused for want of a decode in the prefill's zone.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest


class ProxyMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "disagg_proxy_requests", "Requests answered, by path (pd: prefill then decode; "
            "decode: decode alone) and the routing reason", ["path", "reason"],
            registry=self.registry,
        )  # fmt: skip
        self._recomputed = Counter(
            "disagg_proxy_decode_recomputed", "Requests sent through prefill whose decode "
            "computed the prompt itself instead of reading its KV, by reason", ["reason"],
            registry=self.registry,
        )  # fmt: skip
        self._retries = Counter(
            "disagg_proxy_prefill_retries", "Decode hops retried from another prefill after "
            "the KV read from the first failed", registry=self.registry,
        )  # fmt: skip
        self._shed = Counter(
            "disagg_proxy_shed_requests", "Requests refused (503, before any hop) because the "
            "pool, prefill or decode, has more in flight than it starts within --pool-queue-s",
            ["pool"], registry=self.registry,
        )  # fmt: skip
        self._uncounted = Counter(
            "disagg_proxy_tokenize_failures", "Prompts the engine's /tokenize could not count "
            "(routed through prefill)", registry=self.registry,
        )  # fmt: skip
        self._index_fallback = Counter(
            "disagg_proxy_prefix_index_fallback", "Requests whose decode prefix estimate came "
            "from the approximate index because an engine's KV event stream was not whole, by "
            "reason (gap, late_join, disconnected, no_stream, unreadable, hash_mismatch)",
            ["reason"], registry=self.registry,
        )  # fmt: skip

        self._pairs = Counter(
            "disagg_proxy_transfer_pairs", "P/D requests answered under --transfer-locality, "
            "by whether prefill and decode sat in one zone (same) or not (cross; a zone-less "
            "pod counts as its own zone)", ["zones"], registry=self.registry,
        )  # fmt: skip
        self._refused = Counter(
            "disagg_proxy_locality_refused", "Requests refused (503) under --transfer-locality "
            "Required: no ready decode in the zone of the prefill (zone label; empty: the "
            "zone-less group)", ["zone"], registry=self.registry,
        )  # fmt: skip

        self._zones_unread = Counter(
            "disagg_proxy_zone_list_failures", "EndpointSlice lists that failed under "
            "--transfer-locality (403: the router's Role is missing; the zones last read are "
            "kept, a pod not read yet has none)", registry=self.registry,
        )  # fmt: skip

    def zones_unread(self) -> None:
        self._zones_unread.inc()

    def paired(self, same_zone: bool) -> None:
        self._pairs.labels("same" if same_zone else "cross").inc()

    def locality_refused(self, zone: str) -> None:
        self._refused.labels(zone).inc()

    def index_fallback(self, reason: str) -> None:
        self._index_fallback.labels(reason).inc()

    def request(self, path: str, reason: str) -> None:
        self._requests.labels(path, reason).inc()

    def recomputed(self, reason: str) -> None:
        self._recomputed.labels(reason).inc()

    def retried(self) -> None:
        self._retries.inc()

    def shed(self, pool: str) -> None:
        self._shed.labels(pool).inc()

    def uncounted(self) -> None:
        self._uncounted.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
