"""`disagg_tools.bench.rules.pd_hops`: a real vLLM P/D request's first token split into its
hops from the engines' histograms, on readings whose answers are worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_tools.bench.rules.pd_hops import (
    ENGINE_E2E,
    ENGINE_TTFT,
    PD_PARTS,
    HopError,
    agg_parts,
    grown,
    pd_parts,
    profile,
)
from disagg_tools.vllm.rules.metrics import PREFILL_TIME, QUEUE_TIME


def _reading(count: float, **sums: float) -> dict[str, tuple[float, float]]:
    names = {"ttft": ENGINE_TTFT, "e2e": ENGINE_E2E, "queue": QUEUE_TIME, "step": PREFILL_TIME}
    return {names[k]: (v, count) for k, v in sums.items()} | {
        n: (0.0, count) for k, n in names.items() if k not in sums
    }


def _grown(ttft: float, e2e: float, queue: float, step: float) -> dict[str, float]:
    return {ENGINE_TTFT: ttft, ENGINE_E2E: e2e, QUEUE_TIME: queue, PREFILL_TIME: step}


def test_a_histogram_grows_by_one_request_in_milliseconds() -> None:
    before = _reading(3, ttft=1.0, e2e=2.0, queue=0.5, step=0.25)
    after = _reading(4, ttft=1.018, e2e=2.2, queue=0.506, step=0.257)
    got = grown(before, after)
    assert got == pytest.approx(_grown(18.0, 200.0, 6.0, 7.0))


def test_a_reading_that_saw_another_request_is_refused_by_name() -> None:
    before = _reading(3, ttft=1.0)
    after = {**_reading(4, ttft=1.1), ENGINE_E2E: (0.3, 5)}  # two requests ended
    with pytest.raises(HopError, match="e2e_request_latency_seconds: 2 observations"):
        grown(before, after)
    with pytest.raises(HopError, match="0 observations"):
        grown(before, before)


def test_the_pd_parts_add_up_to_the_clients_first_token() -> None:
    # router's prefill hop 29 ms, prefill engine 23.5 of it; decode's TTFT 18 of which
    # 6 waiting for its KV (0.4 of it the READ) and 7 its first step
    parts = pd_parts(67.0, 29.0, _grown(23.5, 23.5, 0.03, 20.2), _grown(18.0, 225.0, 6.0, 7.0), 0.4)
    assert parts == {
        "prefill_http_ms": 5.5,
        "prefill_engine_ms": 23.5,
        "decode_http_ms": 20.0,
        "decode_kv_wait_ms": 6.0,
        "decode_first_step_ms": 7.0,
        "decode_engine_other_ms": 5.0,
        "transfer_ms": 0.4,
    }
    assert sum(parts[p] for p in PD_PARTS) == pytest.approx(67.0)


def _rows(ttfts: list[float], parts: dict[str, list[float]]) -> list[dict[str, Any]]:
    return [{"ttft": t, "parts": {k: v[i] for k, v in parts.items()}} for i, t in enumerate(ttfts)]


def test_the_extra_first_token_time_splits_into_parts_that_add_up() -> None:
    agg = _rows([40.0, 50.0], {"agg_http_ms": [8.0, 12.0], "agg_engine_ms": [32.0, 38.0]})
    agg_check = [agg_parts(40.0, _grown(32.0, 0, 0, 0)), agg_parts(50.0, _grown(38.0, 0, 0, 0))]
    assert [r["parts"] for r in agg] == agg_check
    pd = _rows(
        [60.0, 80.0],
        {
            "prefill_http_ms": [5.0, 7.0],
            "prefill_engine_ms": [25.0, 33.0],
            "decode_http_ms": [14.0, 20.0],
            "decode_kv_wait_ms": [5.0, 7.0],
            "decode_first_step_ms": [7.0, 9.0],
            "decode_engine_other_ms": [4.0, 4.0],
            "transfer_ms": [0.3, 0.5],
        },
    )
    got = profile(agg, pd)
    # means: P/D 70, aggregated 45; http legs (6 + 17) - 10, engines 29 - 35, then 6, 8, 4
    assert got["extra_split_ms"] == {
        "http_legs_vs_agg": 13.0,
        "prefill_engine_vs_agg_engine": -6.0,
        "decode_kv_wait": 6.0,
        "decode_first_step": 8.0,
        "decode_engine_other": 4.0,
    }
    assert got["extra_mean_ms"] == 25.0  # 70 - 45
    assert got["extra_ms"] == 25.0  # medians of two values are their means here
    assert got["transfer_ms"] == {"median": 0.4, "p10": 0.3, "p90": 0.5}
    with pytest.raises(ValueError, match="no requests"):
        profile([], pd)
