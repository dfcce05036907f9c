"""`disagg bench transfer` end to end at a tiny size: real processes, JSON shape, chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disagg_tools.bench import transfer as bench_transfer


def test_bench_prints_the_documented_json_and_a_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "bench.png"
    argv = ["--json", "--tokens", "16,32", "--repeat", "2", "--layout", "layer"]
    assert bench_transfer.main([*argv, "--plot", str(chart)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["handshake_ms"] > 0
    cases = result["cases"]
    assert [(c["tokens"], c["mode"]) for c in cases] == [
        (16, "merged"),
        (16, "per_block"),
        (32, "merged"),
        (32, "per_block"),
    ]
    for c in cases:
        assert c["bytes"] == c["tokens"] * 128 * 1024
        assert c["ratio"] == pytest.approx(c["gbps"] / c["limit_gbps"], rel=0.01)
        assert c["memcpy_gbps"] > 0 and c["p99_ms"] >= c["p50_ms"] > 0
    # 64 regions: merged = one descriptor per region, per-block = one per block per region
    assert [c["descriptors"] for c in cases] == [64, 64, 64, 128]
    assert chart.stat().st_size > 10_000


def test_bad_options_are_refused() -> None:
    with pytest.raises(SystemExit):
        bench_transfer.parse_args(["--modes", "fast"])


def test_bench_between_tp_sizes_reads_every_head_once_verified(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Prefill TP 2 → decode TP 1 and back, real rank processes: every byte verified, one
    descriptor per KV head (a run of blocks per head), the limit measured in the same run."""
    for prefill, decode in ((2, 1), (1, 2)):
        argv = ["--json", "--tokens", "32", "--repeat", "1"]
        assert (
            bench_transfer.main([*argv, "--prefill-tp", str(prefill), "--decode-tp", str(decode)])
            == 0
        )
        result = json.loads(capsys.readouterr().out)
        assert (result["prefill_tp"], result["decode_tp"], result["readers"]) == (
            prefill,
            decode,
            decode,
        )
        (case,) = result["cases"]
        assert case["verified"] is True
        assert case["bytes"] == 32 * 128 * 1024  # every head of every block, read once
        assert case["descriptors"] == 8  # the model's 8 KV heads
        assert case["ratio"] == pytest.approx(case["gbps"] / case["limit_gbps"], rel=0.01)


def test_tp_sizes_that_do_not_split_the_heads_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        bench_transfer.parse_args(["--prefill-tp", "3"])
    assert "--prefill-tp: 8 KV heads do not split over 3 ranks" in capsys.readouterr().err
