"""The live loop's figures and the profile it measures, computed from fixed runs whose
answers are known (the loop itself needs the whole stack and minutes: ``disagg bench
autoscale --live``)."""

from __future__ import annotations

import argparse
import math
from typing import Any

import pytest

from disagg_operator.planning.autoscale import Curve, Profile, profiles_from
from disagg_tools.bench.autoscale import live, profile

PROFILES = {
    "prefill": Profile(Curve(((1000, 0.2), (4000, 0.5), (5000, 1.0), (6000, 3.0))), 2.0),
    "decode": Profile(Curve(((1, 0.01), (16, 0.02))), 2.0, capacity=64),
}
ARGS = argparse.Namespace(ttft_target_ms=1000.0, prompt_tokens=500, seed=1, paced=0.0)
PHASES = [(5.4, 30.0), (10.8, 60.0), (1.08, 40.0)]


def _state(
    planned: int, ready: int, pods: int, decode: int = 1, cpu: float = 50.0
) -> dict[str, Any]:
    return {
        "planned": {"prefill": planned, "decode": 1},
        "ready": {"prefill": ready, "decode": 1},
        "pods": {"prefill": pods, "decode": decode},
        "cpu": cpu,
    }


def test_the_phases_are_set_from_one_prefill_pods_share() -> None:
    # one pod: 0.9 x 5000 prompt tokens/s within 1 s, 9 requests/s of 500 tokens; the
    # base is 0.6 of it, the step doubles it (more than one pod carries), the drop a fifth
    assert live._rates(PROFILES, 1.0, 500, 2.0) == pytest.approx([5.4, 10.8, 1.08])


def test_the_figures_time_the_scale_up_and_down_and_split_the_requests_by_window() -> None:
    start = 1000.0
    step, drop = start + 30, start + 90
    timeline = [
        (start + 10, _state(1, 1, 1)),
        (step + 4, _state(2, 1, 2)),  # planned 4 s after the step
        (step + 7, _state(2, 2, 2, decode=1, cpu=90.0)),  # the second prefill Ready at 7 s
        (drop + 25, _state(1, 1, 1)),  # one prefill pod left 25 s after the drop
    ]
    requests: list[Any] = [(0, start + 1, 0.3), (0, start + 2, 0.5)]
    requests += [(1, step + 1, 2.0), (1, step + 3, 3.0)]  # before the pod: slow
    requests += [(1, step + 6, 9.0)]  # after it, but inside the 5 s it is given
    requests += [(1, step + 20 + k, 0.4 + k / 100, 300.0 + k, f"http://10.0.0.{k % 3}:8000")
                 for k in range(10)]  # after: fast, over three prefill pods  # fmt: skip
    requests += [(2, drop + 5, 0.2), (2, drop + 9, None)]  # one failed in the drop
    got = live._figures({"start": start, "requests": requests}, timeline, PROFILES, PHASES, ARGS)
    assert got["planned_up_s"] == 4.0 and got["scale_up_s"] == 7.0
    assert got["prefill_ready_at_step"] == 1
    assert got["prefill_planned_at_step"] == 1 and got["prefill_planned_most"] == 2
    assert got["host_cpu_percent"] == {"base": 50.0, "step": 70.0, "drop": 50.0}
    assert got["scale_down_s"] == 25.0 and got["decode_added"] == 0
    assert got["requests_after"] == 10
    assert got["requests_after_per_prefill"] == [4, 3, 3]
    assert got["prefill_hop_p90_ms_after"] == pytest.approx(308.0, abs=1)
    assert got["ttft_p90_ms_after"] == pytest.approx(1000 * (0.4 + 0.09 - 0.009), abs=1)
    assert got["ttft_p90_ms_before"] is not None and got["ttft_p90_ms_before"] > 2000
    assert got["scale_down_requests"] == 2 and got["scale_down_failed_requests"] == 1
    assert got["failed_requests"] == 1
    assert got["sim_vs_live_ttft_ratio"] == pytest.approx(
        got["sim_ttft_p90_ms_after"] / got["ttft_p90_ms_after"], abs=0.01
    )


def test_the_scale_up_is_the_first_prefill_pod_the_step_added() -> None:
    # the base phase kept a second prefill pod: the step's scale-up is the third one
    start = 1000.0
    step = start + 30
    timeline = [(start + 10, _state(2, 2, 2)), (step + 12, _state(3, 2, 3)),
                (step + 15, _state(3, 3, 3))]  # fmt: skip
    requests: list[Any] = [(0, start + 1, 0.3), (1, step + 30, 0.4), (2, step + 70, 0.2)]
    got = live._figures({"start": start, "requests": requests}, timeline, PROFILES, PHASES, ARGS)
    assert got["prefill_ready_at_step"] == 2 and got["scale_up_s"] == 15.0
    assert got["requests_after"] == 1


def test_the_fleet_model_adds_prefill_for_the_step_and_not_decode() -> None:
    auto = live._manifest("http://unused", 1000.0)["spec"]["autoscaling"]
    sim = live.simulate(PROFILES, auto, PHASES, 500, seed=1)
    assert len(sim) == 130
    after = [ttft for t, n, ttft in sim if 50 <= t < 90 and n]
    assert after and max(after) < 1.0  # the step's load, met again once a pod was added


def test_a_measured_profile_reads_back_as_the_planner_reads_it() -> None:
    """A sweep's points (a Poisson sample of a higher rate may bring less load than the
    last one did) become a profile file the planner's parser takes."""
    args = profile.defaults()
    prefill = [
        {"load": 500.0, "ttft_p90_s": 0.3, "failed": 0},
        {"load": 1400.0, "ttft_p90_s": 0.9, "failed": 0},
        {"load": 1200.0, "ttft_p90_s": 0.6, "failed": 0},  # arrived less than the last
        {"load": 2000.0, "ttft_p90_s": math.inf, "failed": 3},
    ]
    decode = [
        {"load": 1, "itl_p90_s": 0.005, "requests": 9, "output_tokens_per_s": 200.0},
        {"load": 2, "itl_p90_s": 0.006, "requests": 9, "output_tokens_per_s": 380.0},
    ]
    got = profile.file_of(profile.result_of(args, prefill, decode, {"prefill": 2, "decode": 3}))
    assert got["percentile"] == 90
    assert got["prefill"]["curve"] == [[500.0, 0.3], [1200.0, 0.6], [1400.0, 0.9]]
    assert got["decode"]["max_tokens_per_s"] == 380.0 and got["decode"]["start_s"] == 3
    parsed = profiles_from(got)
    assert parsed["prefill"].curve.load_at(0.75) == pytest.approx(1300.0)


@pytest.mark.parametrize("paced", [0.0, 1024.0])
def test_paced_pods_carry_their_pace_on_prefill_only(paced: float) -> None:
    from disagg_tools.local.stack import render_manifest

    objects, _ = render_manifest(live._manifest("http://127.0.0.1:9090", 1000.0, paced), "k" * 64)
    env = {}
    for obj in objects:
        if obj["kind"] == "Pod":
            (engine,) = [c for c in obj["spec"]["containers"] if c["name"] == "engine"]
            env[obj["metadata"]["labels"]["disagg.dev/role"]] = {
                e["name"]: e.get("value") for e in engine["env"]
            }
    assert env["prefill"].get(live.PACE_ENV) == ("1024" if paced else None)
    assert live.PACE_ENV not in env["decode"]
