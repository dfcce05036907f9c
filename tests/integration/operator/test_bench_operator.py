"""`disagg bench operator` end to end, small: every phase runs and reports its keys."""

from __future__ import annotations

from disagg_operator.bench import operator as bench


async def test_small_run_reports_the_rollout_figures() -> None:
    small = "--crs 2 --converge 3 --steady-seconds 1 --rollout-prefill 2 --rollout-decode 4"
    args = bench._parser().parse_args([*small.split(), "--timeout", "120"])
    result = await bench.run(args, lambda _: None)
    assert result["steady_writes_per_min"] == 0
    assert result["rollout_pods"] == "2P+4D"
    # 25% of 4 decode pods may be unready: the floor is 0.75 for decode, 1.0 for prefill
    assert result["rollout_min_ready_fraction"] >= result["rollout_min_ready_target"]
    assert result["rollout_kv_min_ready_fraction"] >= result["rollout_kv_min_ready_target"]
    assert result["rollout_mixed_pairs"] == 0
    assert result["rollout_s"] > 0 and result["rollout_kv_s"] > 0
    rollout_lines = [line for line in bench.table(result).splitlines() if "rollout" in line]
    assert rollout_lines and not any("MISSED" in line for line in rollout_lines)
    # (rss_mb is this whole test process here, pytest included: not the bench's figure)
