"""`disagg bench e2e --routing threshold` measures both paths, routes by the threshold and
detects every injected fallback."""

from __future__ import annotations

import json
import subprocess
import sys

from disagg_worker.bench.routing import crossover, table


def test_the_routing_bench_routes_by_the_threshold_and_detects_every_fallback() -> None:
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "e2e", "--routing", "threshold"]
    argv += ["--json", "--prompts", "16,300", "--repeat", "1", "--threshold", "100"]
    argv += ["--fallbacks", "3", "--load-tokens", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [(c["prompt_tokens"], c["path"]) for c in result["cases"]] == [
        (16, "decode"),
        (300, "pd"),
    ]
    for case in result["cases"]:
        assert case["threshold_tokens"] == 100
        assert case["ttft_decode_ms"] > 0 and case["ttft_pd_ms"] > 0
        assert isinstance(case["within_target"], bool)
    assert result["fallbacks_injected"] == 3
    assert result["fallbacks_detected"] == 3 and result["worker_detected"] == 3
    assert "always P/D" in table(result["cases"], 100).splitlines()[0]


def _figures(pairs: dict[int, tuple[float, float]]) -> dict[int, dict[str, float]]:
    return {
        n: {"ttft_decode_ms": d, "ttft_pd_ms": p, "load_decode_ms": 0.0, "load_pd_ms": 0.0}
        for n, (d, p) in pairs.items()
    }


def test_crossover_is_where_the_moved_prefill_outweighs_the_added_hop() -> None:
    figures = _figures(
        {16: (10, 20), 64: (30, 35), 256: (50, 60), 1024: (200, 210), 2048: (400, 350)}
    )
    # from 64 on, decode alone spends >= 20 ms more than at 16 while P/D adds <= 10
    assert crossover(figures) == 64
    assert crossover(_figures({16: (10, 30), 64: (12, 40)})) is None  # never pays
    assert crossover(_figures({16: (10, 9), 64: (20, 12)})) == 16  # P/D is faster
