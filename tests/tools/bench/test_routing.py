"""`disagg bench e2e --routing threshold`: its figures computed from fixed probes whose
answers are known, and one real run that reports what it measured the way it says."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from disagg_tools.bench.routing import table
from disagg_tools.bench.rules.routing_figures import (
    Probe,
    case_figures,
    crossover,
    interleaved,
    router_paths,
    worst_during,
)


def _probe(ttft: float, path: str, start: float = 0.0, end: float = 1.0) -> Probe:
    return Probe(start=start, end=end, ttft_ms=ttft, ttlt_ms=ttft + 30.0, tokens=16, path=path)


def test_every_probe_is_judged_against_the_path_it_took() -> None:
    """Two of three threshold probes went to decode alone, one through prefill: the mode
    (decode) would hide that one, and judging it against decode alone's 10 ms would call a
    fine 21 ms P/D request slow."""
    probes = {
        "decode": [_probe(10.0, "decode"), _probe(9.0, "decode"), _probe(11.0, "decode")],
        "pd": [_probe(20.0, "pd"), _probe(19.0, "pd"), _probe(22.0, "pd")],
        "threshold": [_probe(10.5, "decode"), _probe(12.0, "decode"), _probe(21.0, "pd")],
    }
    case = case_figures(16, 100, probes, {name: [0.0] * 3 for name in probes})
    assert case["expected_path"] == "decode"
    assert case["path_counts"] == {"decode": 2, "pd": 1}
    assert case["misrouted"] == 1
    assert [(p["path"], p["vs_path"], p["within_target"]) for p in case["threshold_probes"]] == [
        ("decode", 1.05, True),  # 10.5 / 10 (decode alone's median)
        ("decode", 1.2, False),  # 12 / 10
        ("pd", 1.05, True),  # 21 / 20 (always-P/D's median)
    ]
    assert (case["within_target"], case["probes"]) == (2, 3)
    assert case["ttft_decode_ms"] == {"median": 10.0, "p10": 9.0, "p90": 11.0}
    assert case["ttlt_pd_ms"] == {"median": 50.0, "p10": 49.0, "p90": 52.0}
    assert case["vs_best"] == 1.2  # threshold median 12 / the faster router's 10
    assert case["stream_tokens"] == 16


def test_load_delay_is_the_slowest_load_request_in_flight_during_a_probe() -> None:
    done = [(0.0, 1.0, 100.0), (1.0, 2.5, 150.0), (2.5, 3.0, 50.0)]  # start, end, ms
    assert worst_during(done, 0.9, 1.1) == 150.0  # overlaps the first two
    assert worst_during(done, 2.6, 2.9) == 50.0
    assert worst_during(done, 5.0, 6.0) == 0.0  # none in flight


def _figures(pairs: dict[int, tuple[float, float]]) -> dict[int, dict[str, dict[str, float]]]:
    def s(v: float) -> dict[str, float]:
        return {"median": v, "p10": v, "p90": v}

    return {n: {"ttft_decode_ms": s(d), "ttft_pd_ms": s(p)} for n, (d, p) in pairs.items()}


def test_break_even_is_where_p_d_answers_first_at_that_length_and_every_longer_one() -> None:
    figures = _figures({4: (5, 4), 16: (10, 12), 64: (30, 25), 256: (50, 45), 1024: (200, 150)})
    assert crossover(figures) == 64  # 16 is slower on P/D, everything from 64 on faster
    # the answer does not move with the shortest length swept
    assert crossover({n: f for n, f in figures.items() if n != 4}) == 64
    assert crossover(_figures({16: (10, 10), 64: (20, 15)})) == 16  # equal counts as paid
    assert crossover(_figures({16: (10, 9), 64: (20, 25)})) is None  # the longest is slower
    assert crossover({}) is None


def test_probes_are_interleaved_in_every_order() -> None:
    names = ("decode", "pd", "threshold")
    sent = interleaved(names, 6)
    rounds = [tuple(sent[i : i + 3]) for i in range(0, 18, 3)]
    assert sorted(rounds) == sorted(itertools.permutations(names))
    assert interleaved(("decode", "pd"), 4) == ["decode", "pd", "pd", "decode"] * 2


def test_router_paths_sums_the_router_counter_by_path() -> None:
    text = "\n".join([
        "# HELP disagg_proxy_requests_total Requests answered",
        'disagg_proxy_requests_total{path="decode",reason="below_threshold"} 3.0',
        'disagg_proxy_requests_total{path="pd",reason="above_threshold"} 5.0',
        'disagg_proxy_requests_total{path="pd",reason="tokens_unknown"} 1.0',
        'disagg_proxy_requests_created{path="pd",reason="always"} 1.7e9',
    ])  # fmt: skip
    assert router_paths(text) == {"decode": 3, "pd": 6}


def test_the_routing_bench_reports_streamed_probes_path_counts_and_relay_counts() -> None:
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "e2e", "--routing", "threshold"]
    argv += ["--json", "--prompts", "16,300", "--repeat", "2", "--threshold", "100"]
    argv += ["--fallbacks", "3", "--load-tokens", "4", "--warm-up", "3"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stream_tokens"] == 16
    # every router got the same warm-up, counted by the routers themselves
    assert result["served_before_cases"] == {"decode": 3, "pd": 3, "threshold": 3}
    expected = {16: {"decode": 2, "pd": 0}, 300: {"decode": 0, "pd": 2}}
    for case in result["cases"]:
        assert case["path_counts"] == expected[case["prompt_tokens"]]
        assert case["misrouted"] == 0 and case["stream_tokens"] >= 16
        for name in ("decode", "pd", "threshold"):
            ttft, ttlt = case[f"ttft_{name}_ms"], case[f"ttlt_{name}_ms"]
            assert ttft["p10"] <= ttft["median"] <= ttft["p90"] < ttlt["p90"]
        ref = case[f"ttft_{case['expected_path']}_ms"]["median"]
        judged = case["threshold_probes"]
        for probe in judged:
            assert probe["vs_path"] == pytest.approx(probe["ttft_ms"] / ref, abs=1e-3)
        assert case["within_target"] == sum(p["within_target"] for p in judged)
    # the relay counted the P/D hops whose params it dropped; both detectors saw each
    assert result["fallbacks_injected"] == 3
    assert result["fallbacks_detected"] == 3 and result["worker_detected"] == 3
    assert "always P/D" in table(result["cases"], 100).splitlines()[0]
