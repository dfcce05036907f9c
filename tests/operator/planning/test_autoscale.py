"""The SLO planner (planning.autoscale): profiles read as curves, the forecast, sizing per
role from its own profile, hysteresis and the bounds, on fixed inputs."""

from __future__ import annotations

import math

import pytest

from disagg_operator.api import Autoscaling
from disagg_operator.planning.autoscale import (
    Curve,
    Demand,
    Limits,
    Memory,
    Policy,
    Profile,
    Settings,
    Targets,
    forecast,
    from_spec,
    percentile_of,
    plan,
    profiles_from,
    with_queue,
)

TTFT = Curve(((1000, 0.2), (4000, 0.5), (5000, 1.0), (6000, 3.0)))
ITL = Curve(((1, 0.01), (10, 0.02), (20, 0.05), (40, 0.2)))
PROFILES = {"prefill": Profile(TTFT, 60.0), "decode": Profile(ITL, 30.0, capacity=16)}
TARGETS = Targets(ttft_s=1.0, itl_s=0.05)
WIDE = Limits({"prefill": (1, 100), "decode": (1, 100)})
EXACT = Settings(headroom=1.0)


def test_a_curve_gives_the_load_within_a_latency_and_the_latency_at_a_load() -> None:
    assert TTFT.load_at(1.0) == 5000 and TTFT.load_at(0.75) == pytest.approx(4500)
    assert TTFT.load_at(0.1) == 0 and TTFT.load_at(10.0) == 6000
    assert TTFT.latency_at(500) == 0.2 and TTFT.latency_at(4500) == pytest.approx(0.75)
    assert TTFT.latency_at(7000) == pytest.approx(5.0)  # the last slope carried on


def test_a_decode_pod_gives_the_output_its_sequences_make_within_the_target() -> None:
    # ITL target 50 ms: 20 sequences, but KV holds 16: 16 sequences at their ITL
    share = PROFILES["decode"].per_pod(0.05, 1.0, tokens=True)
    assert share == pytest.approx(16 / ITL.latency_at(16))
    assert PROFILES["prefill"].per_pod(1.0, 0.9, tokens=False) == pytest.approx(4500)


def _flat(prompt: float, output: float, until: float, step: float = 5.0) -> list[Demand]:
    return [Demand(t * step, prompt, output) for t in range(int(until / step) + 1)]


def test_the_forecast_is_the_recent_mean_or_where_its_trend_leads() -> None:
    flat = _flat(1000, 10, 120)
    assert forecast(flat, "prefill", 120, 60, 60, 15) == pytest.approx(1000)
    rising = [Demand(t, 10.0 * t, 0) for t in range(0, 121)]  # +10 tokens/s each second
    got = forecast(rising, "prefill", 120, 30, 60, 15)
    recent = sum(10.0 * t for t in range(106, 121)) / 15
    assert got == pytest.approx(recent + 10 * 30)  # the trend carried one start-up ahead
    assert forecast(rising, "prefill", 120, 300, 60, 15) == pytest.approx(recent + 10 * 300)
    falling = [Demand(t, 2000.0 - 10 * t, 0) for t in range(0, 121)]
    assert forecast(falling, "prefill", 120, 30, 60, 15) == pytest.approx(
        sum(2000.0 - 10 * t for t in range(106, 121)) / 15  # never below the latest
    )


def test_each_role_is_sized_by_its_own_profile() -> None:
    history = _flat(prompt=22_000, output=2_000, until=120)
    got = plan(
        history, PROFILES, Policy(TARGETS, WIDE, EXACT), {"prefill": 1, "decode": 1}, Memory(), 120
    )
    decode_share = 16 / ITL.latency_at(16)
    assert got.needs == {
        "prefill": math.ceil(22_000 / 5000),
        "decode": math.ceil(2000 / decode_share),
    }
    assert got.replicas == got.needs and got.reason == "ScaleUp"
    assert "prefill 5 (needs 5 for 22000 prompt tokens/s" in got.message


def test_a_role_shrinks_only_to_the_largest_need_of_the_window_and_not_before_it_saw_one() -> None:
    memory, settings = Memory(), Settings(headroom=1.0, scale_down_s=300)
    busy = _flat(22_000, 200, 120)
    plan(busy, PROFILES, Policy(TARGETS, WIDE, settings), {"prefill": 5, "decode": 1}, memory, 120)
    quiet = [Demand(t, 1000, 200) for t in range(121, 241)]
    early = plan(
        quiet, PROFILES, Policy(TARGETS, WIDE, settings), {"prefill": 5, "decode": 1}, memory, 240
    )
    assert early.replicas["prefill"] == 5  # needs 1 now, but 5 within the window
    later = [Demand(t, 1000, 200) for t in range(300, 600)]
    late = plan(
        later, PROFILES, Policy(TARGETS, WIDE, settings), {"prefill": 5, "decode": 1}, memory, 599
    )
    assert late.replicas["prefill"] == 1 and late.reason == "ScaleDown"
    fresh = plan(quiet, PROFILES, Policy(TARGETS, WIDE), {"prefill": 5, "decode": 1}, Memory(), 240)
    assert fresh.replicas["prefill"] == 5 and fresh.reason == "Steady"  # a restarted planner


def test_bounds_decide_last_and_say_so() -> None:
    history = _flat(prompt=50_000, output=100, until=60)
    capped = Limits({"prefill": (1, 4), "decode": (1, 100)})
    got = plan(
        history, PROFILES, Policy(TARGETS, capped, EXACT), {"prefill": 1, "decode": 1}, Memory(), 60
    )
    assert got.replicas["prefill"] == 4 and got.reason == "AtMaximum"
    ratio = Limits({"prefill": (1, 100), "decode": (1, 100)}, ratio=(0.5, 2.0))
    got = plan(
        history, PROFILES, Policy(TARGETS, ratio, EXACT), {"prefill": 1, "decode": 1}, Memory(), 60
    )
    assert got.replicas == {"prefill": 10, "decode": 5} and got.reason == "RatioBound"
    budget = Limits({"prefill": (1, 100), "decode": (2, 100)}, pods=6)
    got = plan(
        history, PROFILES, Policy(TARGETS, budget, EXACT), {"prefill": 1, "decode": 1}, Memory(), 60
    )
    assert got.replicas == {"prefill": 4, "decode": 2} and got.reason == "BudgetLimited"
    cost = Limits({"prefill": (1, 100), "decode": (1, 100)}, cost={"prefill": 4, "decode": 1},
                  max_cost=20)  # fmt: skip
    got = plan(
        history, PROFILES, Policy(TARGETS, cost, EXACT), {"prefill": 1, "decode": 1}, Memory(), 60
    )
    assert 4 * got.replicas["prefill"] + got.replicas["decode"] <= 20


def test_a_decode_pods_share_is_at_most_what_it_gave() -> None:
    """An engine without continuous batching keeps its ITL flat and queues: its measured
    output tokens/s bound its share, whatever the curve says."""
    flat = Profile(Curve(((1, 0.005), (32, 0.005))), 2.0, capacity=100, max_tokens_per_s=300)
    assert flat.per_pod(0.05, 1.0, tokens=True) == 300
    assert flat.per_pod(0.05, 0.9, tokens=True) == pytest.approx(270)


def test_with_a_scale_up_window_a_role_grows_only_to_the_smallest_need_of_it() -> None:
    memory = Memory()  # no trend (nothing a trend_s ago): the need is the latest mean
    settings = Settings(headroom=1.0, scale_up_s=30, smooth_s=5, trend_s=1000)
    current = {"prefill": 1, "decode": 1}
    quiet = [Demand(t, 1000, 100) for t in range(0, 60)]
    plan(quiet, PROFILES, Policy(TARGETS, WIDE, settings), current, memory, 59)
    spike = [*quiet, *(Demand(t, 22_000, 100) for t in range(60, 70))]
    got = plan(spike, PROFILES, Policy(TARGETS, WIDE, settings), current, memory, 69)
    assert got.needs["prefill"] == 5 and got.replicas["prefill"] == 1  # one pass is not enough
    held = [*spike, *(Demand(t, 22_000, 100) for t in range(70, 100))]
    got = plan(held, PROFILES, Policy(TARGETS, WIDE, settings), current, memory, 99)
    assert got.replicas["prefill"] == 5 and got.reason == "ScaleUp"  # needed all window long


def test_a_reserve_keeps_a_share_of_the_largest_need_of_its_window() -> None:
    memory, current = Memory(), {"prefill": 1, "decode": 1}
    settings = Settings(headroom=1.0, scale_down_s=60, reserve=0.4, reserve_window_s=600)
    burst = _flat(50_000, 100, 60)  # prefill needs 10
    got = plan(burst, PROFILES, Policy(TARGETS, WIDE, settings), current, memory, 60)
    assert got.replicas["prefill"] == 10 and got.reason == "ScaleUp"
    current = dict(got.replicas)
    quiet = [Demand(t, 1000, 100) for t in range(200, 300)]  # needs 1, the burst out of 60 s
    got = plan(quiet, PROFILES, Policy(TARGETS, WIDE, settings), current, memory, 299)
    assert got.needs["prefill"] == 1 and got.replicas["prefill"] == 4 and got.reason == "Reserve"
    later = [Demand(t, 1000, 100) for t in range(700, 800)]  # the burst out of the window too
    got = plan(
        later, PROFILES, Policy(TARGETS, WIDE, settings), {**current, "prefill": 4}, memory, 799
    )
    assert got.replicas["prefill"] == 1 and got.reason == "ScaleDown"
    without = Settings(headroom=1.0, scale_down_s=60)  # no reserve: the window alone decides
    memory = Memory()
    plan(burst, PROFILES, Policy(TARGETS, WIDE, without), {"prefill": 1, "decode": 1}, memory, 60)
    got = plan(
        quiet, PROFILES, Policy(TARGETS, WIDE, without), {"prefill": 10, "decode": 1}, memory, 299
    )
    assert got.replicas["prefill"] == 1


def test_a_profile_file_is_read_and_its_faults_name_the_field() -> None:
    data = {
        "percentile": 90,
        "prefill": {"curve": [[1000, 0.2], [4000, 0.5]], "start_s": 60},
        "decode": {"curve": [[1, 0.01]], "start_s": 30, "capacity": 16, "max_tokens_per_s": 900},
    }
    got = profiles_from(data)
    assert got["prefill"] == Profile(Curve(((1000, 0.2), (4000, 0.5))), 60.0)
    assert got["decode"].capacity == 16 and got["decode"].max_tokens_per_s == 900
    assert percentile_of(data) == 90 and percentile_of({}) == 90
    with pytest.raises(ValueError, match="decode: missing"):
        profiles_from({"prefill": data["prefill"]})
    with pytest.raises(ValueError, match=r"prefill.curve and prefill.start_s"):
        profiles_from({**data, "prefill": {"curve": [[1, 2]]}})
    with pytest.raises(ValueError, match="load rising"):
        profiles_from({**data, "prefill": {"curve": [[4000, 0.5], [1000, 0.2]], "start_s": 1}})


def test_spec_autoscaling_becomes_the_planners_targets_bounds_and_windows() -> None:
    auto = Autoscaling.model_validate(
        {
            "targets": {"ttftMilliseconds": 800, "itlMilliseconds": 40},
            "profile": {"configMap": "pools"},
            "prefill": {"min": 1, "max": 4, "cost": 4},
            "decode": {"min": 2, "max": 9, "cost": 1},
            "prefillPerDecode": {"min": 0.25},
            "budget": {"cost": 20},
            "periodSeconds": 5,
            "scaleUpSeconds": 10,
            "scaleDownSeconds": 120,
            "reservePercent": 30,
            "reserveWindowSeconds": 1800,
        }
    )
    targets, limits, settings = from_spec(auto)
    assert targets == Targets(0.8, 0.04)
    assert limits.replicas == {"prefill": (1, 4), "decode": (2, 9)}
    assert limits.ratio == (0.25, math.inf) and limits.pods is None
    assert limits.cost == {"prefill": 4.0, "decode": 1.0} and limits.max_cost == 20
    assert (settings.scale_up_s, settings.scale_down_s) == (10, 120)
    assert settings.smooth_s == 10  # the demand's mean: two periods
    assert (settings.reserve, settings.reserve_window_s) == (0.3, 1800)
    plain = Autoscaling.model_validate(
        {**auto.model_dump(by_alias=True, exclude={"reserve_percent"})}
    )
    assert from_spec(plain)[2].reserve == 0


def test_a_queue_adds_its_tokens_to_what_was_served() -> None:
    # 3000 tokens/s served as 6 requests/s (500 tokens each); 12 waiting over a 4 s mean
    assert with_queue(3000, 12, 6, 4.0) == pytest.approx(3000 + 12 * 500 / 4)
    assert with_queue(3000, 0, 6, 4.0) == 3000  # no queue
    assert with_queue(0, 5, 0, 4.0) == 0  # nothing served: no size to give the queue
