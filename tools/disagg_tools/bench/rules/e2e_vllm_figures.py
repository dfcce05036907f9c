"""Figures of `disagg bench e2e --engine vllm` from its requests: what each side answered,
and whether every P/D request read its KV from the prefill.

The bench (:mod:`.e2e_vllm`) records one :data:`Row` per timed request; these functions
turn a case's rows into its figures. Each P/D request gets a verdict (:func:`kv_verdict`),
and a case with any request not proven to have read its KV reports no P/D figure, because
right tokens from a decode that recomputed the prompt say nothing of P/D.
docs/vllm.md (Figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from disagg_tools.bench.rules.spread import spread
from disagg_tools.vllm.rules import judge

# One timed request (one streamed completion of `gen` tokens on a fresh prompt): `ttft` /
# `ttlt` (ms from the send to the first / last token's event, client side), `tokens`
# received, `token_ids`, `tops` (the judge's top logprobs per position); P/D only: `route`
# (the router's stream headers, disagg_worker.serve.proxy.hops.route_of) and `kv`, the growth
# of the decode engine's own counters over the request alone (requests run one at a time):
# `sources` (vllm:prompt_tokens_by_source_total by source; empty when the engine exports
# none) and its NIXL histograms' sums (`xfer_s`, `bytes`, `descriptors`, `failed`).
Row = Mapping[str, Any]


def kv_verdict(prompt_tokens: int, kv: Mapping[str, Any]) -> str:
    """``read`` when the decode loaded every prompt token but at most the last from the
    prefill (``external_kv_transfer`` ≥ prompt - 1: vLLM's NixlConnector loads all prompt
    blocks, and its scheduler recomputes the last token when the whole prompt arrived);
    ``recomputed`` when it computed more itself (a failed or partial load the recompute
    policy covered: right tokens, no P/D); ``unproven`` when its engine reported no
    sources."""
    sources = kv.get("sources") or {}
    if not sources:
        return "unproven"
    external = sources.get("external_kv_transfer", 0.0)
    return "read" if external >= prompt_tokens - 1 else "recomputed"


def _tps(rows: Sequence[Row]) -> dict[str, float] | None:
    """Tokens per second after the first, of each request, from the tokens it received."""
    rates = [
        (r["tokens"] - 1) / ((r["ttlt"] - r["ttft"]) / 1e3)
        for r in rows
        if r["tokens"] > 1 and r["ttlt"] > r["ttft"]
    ]
    return spread(rates, 1) if len(rates) == len(rows) and rates else None


def _hops(pd: Sequence[Row]) -> dict[str, Any]:
    """The router's prefill hop and the rest of the first token's time, per request; None
    when any request's route lacks the hop (never a zero in its place)."""
    hops = [r.get("route", {}).get("prefill_hop_ms") for r in pd]
    if not pd or any(h is None for h in hops):
        return {"prefill_hop_ms": None, "after_prefill_ms": None}
    return {
        "prefill_hop_ms": spread(hops, 2),
        "after_prefill_ms": spread([r["ttft"] - h for r, h in zip(pd, hops, strict=True)], 2),
    }


def _transfer(pd: Sequence[Row]) -> dict[str, Any]:
    """The NIXL READs of the case's requests, as the decode engine counted them."""
    moved = [r["kv"] for r in pd if r["kv"].get("bytes", 0.0) > 0]
    return {
        "transfer_count": len(moved),
        "transfer_failed": int(sum(r["kv"].get("failed", 0.0) for r in pd)),
        "transfer_ms": spread([k["xfer_s"] * 1e3 for k in moved], 3) if moved else None,
        "transfer_kb": round(sum(k["bytes"] for k in moved) / len(moved) / 1e3, 1)
        if moved
        else None,
        "transfer_descriptors": round(sum(k.get("descriptors", 0.0) for k in moved) / len(moved), 1)
        if moved
        else None,
    }


def _judged(agg: Sequence[Row], pd: Sequence[Row]) -> dict[str, Any]:
    """Tokens and logprobs of each request against the other side's on the same prompt."""
    gaps = [judge.gap(d["tops"], a["tops"]) for a, d in zip(agg, pd, strict=True)]
    worst = max(gaps) if gaps else math.inf
    return {
        "tokens_match": all(a["token_ids"] == d["token_ids"] for a, d in zip(agg, pd, strict=True)),
        "logprobs_judged": len(gaps),
        "logprobs_gap": round(worst, 4) if math.isfinite(worst) else None,  # None: apart
        "logprobs_match": worst <= judge.TOLERANCE,
    }


def case(
    n: int,
    agg: Sequence[Row],
    pd: Sequence[Row],
    phases: Mapping[str, float | None] | None = None,
    agg_phases: Mapping[str, float | None] | None = None,
) -> dict[str, Any]:
    """One prompt length's figures from both sides' rows (request ``i`` of each side on
    the same prompt) and the engines' request phases (means over the case's requests:
    ``decode_queue_ms``, ``decode_step_ms``, ``prefill_step_ms``, the aggregated engine's
    ``decode_step_ms``)."""
    verdicts = [kv_verdict(n, r["kv"]) for r in pd]
    proven = verdicts.count("read") == len(pd) > 0
    ttft_agg = spread([r["ttft"] for r in agg], 2)
    ttft_pd = spread([r["ttft"] for r in pd], 2) if proven else None
    f, g = phases or {}, agg_phases or {}
    return {
        "prompt_tokens": n,
        "requests": len(pd),
        "kv_read": verdicts.count("read"),
        "recomputed": verdicts.count("recomputed"),
        "kv_unproven": verdicts.count("unproven"),
        "ttft_agg_ms": ttft_agg,
        "ttft_disagg_ms": ttft_pd,
        "overhead_ms": round(ttft_pd["median"] - ttft_agg["median"], 2) if ttft_pd else None,
        "ttlt_agg_ms": spread([r["ttlt"] for r in agg], 2),
        "ttlt_disagg_ms": spread([r["ttlt"] for r in pd], 2) if proven else None,
        **(_hops(pd) if proven else {"prefill_hop_ms": None, "after_prefill_ms": None}),
        "agg_step_ms": _ms(g.get("decode_step_ms")),
        "prefill_step_ms": _ms(f.get("prefill_step_ms")),
        "decode_kv_wait_ms": _ms(f.get("decode_queue_ms")) if proven else None,
        "decode_first_step_ms": _ms(f.get("decode_step_ms")) if proven else None,
        **_transfer(pd),
        "decode_tps_agg": _tps(agg),
        "decode_tps_disagg": _tps(pd) if proven else None,
        **_judged(agg, pd),
    }


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
