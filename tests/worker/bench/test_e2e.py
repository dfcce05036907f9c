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
    assert set(result["engine_idle_cpu_cores"]) == {"both", "prefill", "decode", "proxy"}
    assert "ttft P/D" in table(cases).splitlines()[0]
