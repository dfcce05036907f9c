"""`disagg bench e2e`: its figures computed from fixed rounds whose answers are known, and
real runs of both paths that report what they measured the way they say."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

from disagg_tools.bench.e2e import KEYS, Round, case_figures, table
from disagg_tools.bench.stream import Streamed


def _whole(ids: list[int], decode_ms: float, **disagg: Any) -> dict[str, Any]:
    return {"choices": [{"token_ids": ids}], "disagg": {"decode_ms": decode_ms, **disagg}}


def _round(agg_ttft: float, pd_ttft: float, ids: list[int], pd_ids: list[int] | None = None,
           hop: float = 6.0) -> Round:  # fmt: skip
    pd_ids = ids if pd_ids is None else pd_ids
    prefill = {"prompt_ms": 4.0, "first_step_ms": 1.0}
    split = _whole(pd_ids, 30.0, transfer_ms=1.5, first_step_ms=0.0, transfer_bytes=4096.0,
                   proxy={"prefill_hop_ms": hop}, prefill=prefill)  # fmt: skip
    return Round(
        agg=Streamed(agg_ttft, agg_ttft + 40.0, len(ids), ids, "x" * len(ids)),
        pd=Streamed(pd_ttft, pd_ttft + 42.0, len(pd_ids), pd_ids, "x" * len(pd_ids)),
        agg_whole=_whole(ids, 30.0),
        pd_whole=split,
        pd_whole_ms=40.0,
    )


def test_case_figures_are_spreads_of_the_streamed_and_whole_requests() -> None:
    ids = list(range(16))
    rounds = [_round(10.0, 16.0, ids), _round(12.0, 15.0, ids), _round(11.0, 19.0, ids, hop=8)]
    case = case_figures(64, rounds)
    assert case["ttft_agg_ms"] == {"median": 11.0, "p10": 10.0, "p90": 12.0}
    assert case["ttlt_disagg_ms"] == {"median": 58.0, "p10": 57.0, "p90": 61.0}
    # per round, P/D minus aggregated: 6, 3, 8 (not the difference of the medians, 5)
    assert case["overhead_ms"] == {"median": 6.0, "p10": 3.0, "p90": 8.0}
    # the whole P/D request: 40 ms = hop 6 + transfer 1.5 + first step 0 + decode 30 + rest
    assert case["rest_ms"] == {"median": 2.5, "p10": 0.5, "p90": 2.5}
    assert case["prefill_compute_ms"]["median"] == 5.0
    assert case["decode_tps_agg"]["median"] == 500.0  # 15 steps in 30 ms
    assert case["transfer_bytes"] == 4096.0
    assert (case["stream_tokens"], case["tokens_match"]) == (16, True)
    assert set(KEYS) <= set(case)


def test_a_stream_that_differs_from_the_aggregated_answer_is_no_match() -> None:
    ids = list(range(16))
    case = case_figures(64, [_round(10.0, 16.0, ids), _round(10.0, 16.0, ids, [*ids[:15], 99])])
    assert case["tokens_match"] is False


def test_the_table_shows_each_figure_beside_its_spread() -> None:
    case = case_figures(64, [_round(10.0, 16.0, list(range(16)))] * 2)
    lines = table([case]).splitlines()
    assert "ttft P/D" in lines[0] and "16.0 [16.0-16.0]" in lines[2]
    assert len(lines[0]) == len(lines[1]) == len(lines[2])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "e2e", "--json", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240)


def test_bench_times_first_tokens_from_streams_of_16_tokens() -> None:
    done = _run("--prompts", "17,40", "--repeat", "2", "--gen-tokens", "16", "--idle-s", "1")
    assert done.returncode == 0, done.stderr
    assert "17 tokens: request 1/2" in done.stderr  # progress goes to stderr
    result = json.loads(done.stdout)
    cases = result["cases"]
    assert [c["prompt_tokens"] for c in cases] == [17, 40]
    for case in cases:
        assert set(KEYS) <= set(case)
        assert case["stream_tokens"] == 16 and case["tokens_match"] is True
        for path in ("agg", "disagg"):
            ttft, ttlt = case[f"ttft_{path}_ms"], case[f"ttlt_{path}_ms"]
            assert ttft["p10"] <= ttft["median"] <= ttft["p90"]
            # each request's first token precedes its last, so each order statistic does
            assert all(ttft[k] < ttlt[k] for k in ttft)
        assert case["transfer_bytes"] == 2 * 4 * 2 * 32 * 4 * 16 * (-(-case["prompt_tokens"] // 16))
        assert case["transfer_ms"]["median"] > 0 and case["decode_tps_disagg"]["median"] > 0
    assert (result["prefill_tp"], result["decode_tp"]) == (1, 1)
    assert set(result["engine_idle_cpu_cores"]) == {"both", "prefill", "decode", "proxy"}


def test_bench_refuses_a_stream_too_short_to_time() -> None:
    done = _run("--prompts", "17", "--gen-tokens", "3")
    assert done.returncode == 2 and "--gen-tokens: at least 16" in done.stderr


def test_bench_between_tp_sizes_reports_token_identity() -> None:
    """Prefill TP 2 → decode TP 1 against aggregated TP 1: tokens_match in every case; the
    prefill's two ranks in two pods (--prefill-nodes 2), timed beside the same P/D with
    both ranks in one pod."""
    done = _run("--prompts", "33", "--repeat", "1", "--gen-tokens", "16", "--idle-s", "0.5",
                "--prefill-tp", "2", "--decode-tp", "1", "--prefill-nodes", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["prefill_tp"], result["decode_tp"], result["prefill_nodes"]) == (2, 1, 2)
    assert {"prefill", "prefill-pod-1", "prefill-one", "proxy-one"} <= set(
        result["engine_idle_cpu_cores"]
    )
    (case,) = result["cases"]
    assert case["tokens_match"] is True
    assert {"ttft_onepod_ms", "spanning_overhead_ms"} <= set(case)
    # both heads of 3 blocks, one from each prefill rank
    assert case["transfer_bytes"] == 2 * 4 * 2 * 32 * 4 * 16 * 3


def test_a_one_pod_path_is_timed_beside_the_spanning_one_and_must_match_too() -> None:
    ids = list(range(16))
    rounds = []
    for pd_ttft, one_ttft in ((16.0, 15.0), (19.0, 15.0), (14.0, 15.0)):
        r = _round(10.0, pd_ttft, ids)
        one = Streamed(one_ttft, one_ttft + 40.0, 16, ids, "x" * 16)
        rounds.append(replace(r, one=one, one_whole=_whole(ids, 30.0)))
    case = case_figures(64, rounds)
    # per round, spanning minus one pod: 1, 4, -1
    assert case["spanning_overhead_ms"] == {"median": 1.0, "p10": -1.0, "p90": 4.0}
    assert case["ttft_onepod_ms"]["median"] == 15.0 and case["tokens_match"] is True
    wrong = replace(rounds[0], one_whole=_whole([*ids[:15], 99], 30.0))
    assert case_figures(64, [wrong])["tokens_match"] is False
    assert "spanning" in table([case]).splitlines()[0]
