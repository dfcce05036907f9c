"""The live loop's figures, computed from a fixed run whose answers are known (the loop
itself needs the whole stack and minutes: ``disagg bench autoscale --live``)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from disagg_operator.bench.autoscale import live
from disagg_operator.planning.autoscale import Curve, Profile

PROFILES = {
    "prefill": Profile(Curve(((1000, 0.2), (4000, 0.5), (5000, 1.0), (6000, 3.0))), 2.0),
    "decode": Profile(Curve(((1, 0.01), (16, 0.02))), 2.0, capacity=64),
}
ARGS = argparse.Namespace(ttft_target_ms=1000.0, prompt_tokens=500, seed=1)
PHASES = [(4.5, 30.0), (10.8, 60.0), (0.9, 40.0)]


def _state(planned: int, ready: int, pods: int, decode: int = 1) -> dict[str, Any]:
    return {
        "planned": {"prefill": planned, "decode": 1},
        "ready": {"prefill": ready, "decode": 1},
        "pods": {"prefill": pods, "decode": decode},
    }


def test_the_phases_are_set_from_one_prefill_pods_share() -> None:
    # one pod: 0.9 x 5000 prompt tokens/s within 1 s, 9 requests/s of 500 tokens
    assert live._rates(PROFILES, 1.0, 500, 2.4) == pytest.approx([4.5, 10.8, 0.9])


def test_the_figures_time_the_scale_up_and_down_and_split_the_requests_by_window() -> None:
    start = 1000.0
    step, drop = start + 30, start + 90
    timeline = [
        (start + 10, _state(1, 1, 1)),
        (step + 4, _state(2, 1, 2)),  # planned 4 s after the step
        (step + 7, _state(2, 2, 2, decode=1)),  # the second prefill Ready at 7 s
        (drop + 25, _state(1, 1, 1)),  # one prefill pod left 25 s after the drop
    ]
    requests: list[Any] = [(0, start + 1, 0.3), (0, start + 2, 0.5)]
    requests += [(1, step + 1, 2.0), (1, step + 3, 3.0)]  # before the pod: slow
    requests += [(1, step + 6, 9.0)]  # after it, but inside the 5 s it is given
    requests += [(1, step + 20 + k, 0.4 + k / 100) for k in range(10)]  # after: fast
    requests += [(2, drop + 5, 0.2), (2, drop + 9, None)]  # one failed in the drop
    got = live._figures({"start": start, "requests": requests}, timeline, PROFILES, PHASES, ARGS)
    assert got["planned_up_s"] == 4.0 and got["scale_up_s"] == 7.0
    assert got["scale_down_s"] == 25.0 and got["decode_added"] == 0
    assert got["requests_after"] == 10
    assert got["ttft_p90_ms_after"] == pytest.approx(1000 * (0.4 + 0.09 - 0.009), abs=1)
    assert got["ttft_p90_ms_before"] is not None and got["ttft_p90_ms_before"] > 2000
    assert got["scale_down_requests"] == 2 and got["scale_down_failed_requests"] == 1
    assert got["failed_requests"] == 1
    assert got["sim_vs_live_ttft_ratio"] == pytest.approx(
        got["sim_ttft_p90_ms_after"] / got["ttft_p90_ms_after"], abs=0.01
    )


def test_the_fleet_model_adds_prefill_for_the_step_and_not_decode() -> None:
    auto = live._manifest("http://unused", 1000.0)["spec"]["autoscaling"]
    sim = live.simulate(PROFILES, auto, PHASES, 500, seed=1)
    assert len(sim) == 130
    after = [ttft for t, n, ttft in sim if 50 <= t < 90 and n]
    assert after and max(after) < 1.0  # the step's load, met again once a pod was added
