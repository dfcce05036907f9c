"""`disagg bench transfer` end to end at a tiny size: real processes, JSON shape, chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disagg_worker.bench import transfer as bench_transfer


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
