"""`disagg bench e2e` runs both paths for real and reports the agreed JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from disagg_worker.bench.e2e import KEYS, table


def test_bench_reports_every_case_with_the_documented_keys() -> None:
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "e2e", "--json"]
    argv += ["--prompts", "17,40", "--repeat", "1", "--gen-tokens", "3", "--idle-s", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "17 tokens: request 1/1" in done.stderr  # progress goes to stderr
    result = json.loads(done.stdout)
    cases = result["cases"]
    assert [c["prompt_tokens"] for c in cases] == [17, 40]
    for case in cases:
        assert set(KEYS) <= set(case)
        assert case["overhead_ms"] == pytest.approx(
            case["ttft_disagg_ms"] - case["ttft_agg_ms"], abs=0.01
        )
        assert case["transfer_bytes"] == 2 * 4 * 2 * 32 * 4 * 16 * (-(-case["prompt_tokens"] // 16))
        assert case["transfer_ms"] > 0 and case["decode_tps_disagg"] > 0
        assert case["tokens_match"] is True
    assert (result["prefill_tp"], result["decode_tp"]) == (1, 1)
    assert set(result["engine_idle_cpu_cores"]) == {"both", "prefill", "decode", "proxy"}
    assert "ttft P/D" in table(cases).splitlines()[0]


def test_bench_between_tp_sizes_reports_token_identity() -> None:
    """Prefill TP 2 → decode TP 1 against aggregated TP 1: tokens_match in every case."""
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "e2e", "--json"]
    argv += ["--prompts", "33", "--repeat", "1", "--gen-tokens", "4", "--idle-s", "0.5"]
    argv += ["--prefill-tp", "2", "--decode-tp", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["prefill_tp"], result["decode_tp"]) == (2, 1)
    (case,) = result["cases"]
    assert case["tokens_match"] is True
    # both heads of 3 blocks, one from each prefill rank
    assert case["transfer_bytes"] == 2 * 4 * 2 * 32 * 4 * 16 * 3
