"""Did P/D happen? What a decode says about where its prompt's KV came from.

The evidence of the ``kv_transfer_params`` protocol (:mod:`.kv_transfer_params`), which the
proxy and the canary read through it. A decode that computed the prompt itself still
answers the right tokens, so only what it reports tells: the reference worker's
``disagg.kv_source`` and transfer figures in its answer, vLLM's prompt-token sources and
NIXL histograms on its ``/metrics`` (its ``cached_tokens`` counts only the local prefix
cache). Read as typed :class:`~disagg_worker.serve.rules.timings.Timings`, never a dict.
The evidence and its limits: docs/routing.md (proof that P/D happens), docs/worker.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disagg_worker.serve.rules.timings import FIELD as TIMINGS
from disagg_worker.serve.rules.timings import Timings

# Reasons, as labels of disagg_proxy_decode_recomputed_total and the worker's counter.
DECODE_COMPUTED = "decode_computed"
VLLM_SOURCES = "vllm:prompt_tokens_by_source_total"
# vLLM's NIXL histograms, per transfer: bytes (``res.totalBytes``) and seconds (NIXL's
# ``xferDuration`` in us / 1e6). Read in vLLM 0.33.0 (and 0.20.0, 0.32.0, same names):
# vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py, NixlPromMetrics.__init__
# (``name="vllm:nixl_bytes_transferred"``, ``name="vllm:nixl_xfer_time_seconds"``) and
# NixlKVConnectorStats.record_transfer. Their ``_sum`` lines, summed over engines.
VLLM_KV_BYTES = "vllm:nixl_bytes_transferred_sum"
VLLM_KV_SECONDS = "vllm:nixl_xfer_time_seconds_sum"


def recompute_reason(answer: dict[str, Any]) -> str | None:
    """:data:`DECODE_COMPUTED` when decode's answer shows it computed the prompt itself
    instead of reading its KV, else None (read, or the answer does not say)."""
    figures = _timings(answer)
    if figures is not None and figures.kv_source == "computed":
        return DECODE_COMPUTED
    return None


def answer_transfer(answer: dict[str, Any]) -> tuple[float, float] | None:
    """(bytes, seconds on the wire) of the KV READ a reference decode reports in its
    answer, None when the answer has no such figures (vLLM's, or no transfer)."""
    figures = _timings(answer)
    if figures is None or figures.transfer_bytes is None or figures.transfer_wire_ms is None:
        return None
    return float(figures.transfer_bytes), float(figures.transfer_wire_ms) / 1e3


def _timings(answer: dict[str, Any]) -> Timings | None:
    """The answer's ``disagg`` timings; None when it has none this can read (vLLM's)."""
    try:
        return Timings.from_wire(answer.get(TIMINGS))
    except ValueError:
        return None


def vllm_transfer(metrics_text: str) -> dict[str, float]:
    """``bytes`` and ``seconds`` that vLLM's NIXL connector has moved so far, summed over
    engines, from its ``/metrics`` page (empty when this vLLM does not export them): its
    histograms sum over all transfers, so deltas around one request give that request's
    bytes and seconds or, with other transfers in flight, the average rate of all."""
    out: dict[str, float] = {}
    names = {VLLM_KV_BYTES: "bytes", VLLM_KV_SECONDS: "seconds"}
    for line in metrics_text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in names:
            continue
        try:
            value = float(line.rpartition(" ")[2])
        except ValueError:
            continue
        out[names[name]] = out.get(names[name], 0.0) + value
    return out


def vllm_sources(metrics_text: str) -> dict[str, float]:
    """``source`` → prompt tokens, summed over engines, from a vLLM ``/metrics`` page
    (empty when this vLLM does not export them)."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(VLLM_SOURCES + "{"):
            continue
        labels, _, value = line.rpartition(" ")
        key = 'source="'
        start = labels.find(key)
        if start < 0:
            continue
        source = labels[start + len(key) : labels.index('"', start + len(key))]
        try:
            out[source] = out.get(source, 0.0) + float(value)
        except ValueError:
            continue
    return out


def vllm_recomputed(before: Mapping[str, float], after: Mapping[str, float]) -> bool | None:
    """Whether a vLLM decode computed a request's prompt itself, from its prompt-token
    sources before and after the request: no token arrived by KV transfer while it
    computed prompt tokens. None when the metrics are missing (no evidence). Other requests
    in flight can hide a recompute (their transfers count too), never invent one."""
    if not before or not after:
        return None
    moved = after.get("external_kv_transfer", 0.0) - before.get("external_kv_transfer", 0.0)
    computed = after.get("local_compute", 0.0) - before.get("local_compute", 0.0)
    return moved <= 0 and computed > 0
