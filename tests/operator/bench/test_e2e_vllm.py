"""`disagg bench e2e --engine vllm`: the figures computed from the measured requests."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.bench.e2e_vllm import cases, prompt, table

GEN = 5


TOPS = [{1: -0.5, 2: -1.5}, {3: -0.25}]  # the judge's top logprobs of one request


def _row(ttft: float, first: float, full: float, tokens: list[int], **proxy: float) -> Any:
    row = {"ttft": ttft, "first": first, "full": full, "tokens": tokens, "proxy": proxy}
    return {**row, "tops": TOPS}


def test_medians_breakdown_and_throughput_within_a_stream() -> None:
    agg = {16: [_row(10, 12, 112, [1, 2, 3]), _row(30, 10, 60, [4, 5, 6]), _row(20, 5, 45, [7])]}
    pd = {
        16: [
            _row(50, 60, 260, [1, 2, 3], prefill_hop_ms=20, decode_hop_ms=25),
            _row(70, 40, 140, [4, 5, 6], prefill_hop_ms=30, decode_hop_ms=35),
            _row(60, 10, 110, [7], prefill_hop_ms=40, decode_hop_ms=45),
        ]
    }
    figures = {
        16: {
            "Avg xfer time (ms)": 1.5,
            "Num successful transfers": 7.0,
            "decode_queue_ms": 6.25,
            "decode_step_ms": 9.5,
            "prefill_step_ms": 14.0,
        }
    }
    (case,) = cases(agg, pd, figures, GEN, {16: {"decode_step_ms": 12.0}})
    assert case["ttft_agg_ms"] == 20 and case["ttft_disagg_ms"] == 60
    assert case["overhead_ms"] == 40
    assert case["prefill_hop_ms"] == 30 and case["decode_hop_ms"] == 35
    assert case["transfer_ms"] == 1.5 and case["transfer_count"] == 7
    # vLLM's own phases: decode's queue (the read) and first step, each engine's prefill
    assert case["decode_kv_wait_ms"] == 6.25 and case["decode_first_step_ms"] == 9.5
    assert case["prefill_step_ms"] == 14.0 and case["agg_step_ms"] == 12.0
    # (GEN - 1) tokens between the first and the last chunk of each stream, median
    assert case["decode_tps_agg"] == pytest.approx(80.0)  # median of 40, 80, 100
    assert case["decode_tps_disagg"] == pytest.approx(40.0)  # median of 20, 40, 40
    assert case["tokens_match"] is True
    assert case["logprobs_gap"] == 0 and case["logprobs_match"] is True


def test_one_differing_answer_is_no_match() -> None:
    agg = {16: [_row(1, 1, 2, [1, 2]), _row(1, 1, 2, [3, 4])]}
    pd = {16: [_row(1, 1, 2, [1, 2]), _row(1, 1, 2, [3, 5])]}
    assert cases(agg, pd, {}, GEN)[0]["tokens_match"] is False


def test_equal_tokens_with_moved_logprobs_are_no_logprob_match() -> None:
    agg = {16: [_row(1, 1, 2, [1, 2])]}
    moved = {**_row(1, 1, 2, [1, 2]), "tops": [{1: -0.5, 2: -1.5}, {3: -0.45}]}
    (case,) = cases(agg, {16: [moved]}, {}, GEN)
    assert case["tokens_match"] is True and case["logprobs_match"] is False
    assert case["logprobs_gap"] == pytest.approx(0.2)
    apart = {**moved, "tops": [{9: -0.1}, {3: -0.25}]}  # no token shared at a position
    (case,) = cases(agg, {16: [apart]}, {}, GEN)
    assert case["logprobs_gap"] is None and case["logprobs_match"] is False


def test_every_request_gets_its_own_first_block() -> None:
    firsts = {tuple(prompt(128, case, i)[:17]) for case in range(3) for i in range(11)}
    assert len(firsts) == 33
    assert all(4 <= t < 1024 for t in prompt(512, 2, 7)[1:])


def test_table_has_a_column_per_figure() -> None:
    agg = {16: [_row(1, 1, 2, [1])]}
    pd = {16: [_row(2, 1, 2, [1], prefill_hop_ms=1, decode_hop_ms=1)]}
    lines = table(cases(agg, pd, {}, GEN)).splitlines()
    assert lines[0].split()[-2:] == ["match", "logprobs"] and lines[2].split()[-2:] == [
        "True",
        "True",
    ]
    assert len(lines[0]) == len(lines[1]) == len(lines[2])
