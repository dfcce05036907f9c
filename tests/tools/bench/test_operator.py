"""`disagg bench operator` end to end, small: every phase runs and reports its keys."""

from __future__ import annotations

import pytest

from disagg_tools.bench import operator as bench


def test_a_steady_window_of_no_seconds_is_refused_by_name(capsys) -> None:
    with pytest.raises(SystemExit):
        bench._parser().parse_args(["--steady-seconds", "0"])
    assert "--steady-seconds: 0: must be more than 0 seconds" in capsys.readouterr().err


async def test_small_run_reports_the_rollout_figures() -> None:
    small = "--crs 2 --converge 3 --steady-seconds 1 --rollout-prefill 2 --rollout-decode 4"
    small += " --failover-lease-seconds 2 --failover-rounds 2 --sizing 3"
    args = bench._parser().parse_args([*small.split(), "--timeout", "120"])
    result = await bench.run(args, lambda _: None)
    assert result["steady_writes_per_min"] == 0
    assert result["rollout_pods"] == "2P+4D"
    # 25% of 4 decode pods may be unready: the floor is 0.75 for decode, 1.0 for prefill
    assert result["rollout_min_ready_fraction"] >= result["rollout_min_ready_target"]
    assert result["rollout_kv_min_ready_fraction"] >= result["rollout_kv_min_ready_target"]
    assert result["rollout_mixed_pairs"] == 0
    assert 0 < result["rollout_kv_peak_extra_pods"] <= 1  # within maxSurge 1, and used
    assert result["rollout_s"] > 0 and result["rollout_kv_s"] > 0
    assert result["failover_lease_duration_s"] == 2 and result["failover_rounds"] == 2
    assert result["failover_p50_s"] <= result["failover_s"]
    # the standby waits the 2 s lease out by its own clock before it takes over
    assert 1.0 < result["failover_takeover_s"] <= result["failover_s"]
    assert result["converge_crs"] == 3 and result["converge_s"] > 0
    # the operator process alone: it grew while it reconciled the 3 deployments
    assert result["sizing_crs"] == 3
    assert 0 < result["operator_rss_idle_mb"] <= result["operator_rss_mb"]
    # every call of the phase is in the breakdown; each CR created its 7 children (one pod
    # per role: no disruption budget, it could refuse no eviction)
    by_kind = result["api_calls_by_kind"]
    assert abs(sum(by_kind.values()) - result["api_calls_per_cr"]) < 0.05
    assert by_kind["create pods"] == 2 and by_kind["create services"] == 3
    assert "create poddisruptionbudgets" not in by_kind
    assert not [k for k in by_kind if k.startswith(("list ", "get "))]  # reads: the cache
    # the RSS here is the whole test process's, not the bench's own
    missed = {line.split()[0] for line in bench.table(result).splitlines() if "MISSED" in line}
    assert missed <= {"rss_mb"}  # API calls, rollout and failover targets: met
