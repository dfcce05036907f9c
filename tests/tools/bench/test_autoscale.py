"""`disagg bench autoscale`: the traces' shapes, the fleet model on inputs whose answer is
known, the static search, and a small run's keys."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from disagg_operator.planning import autoscale
from disagg_operator.planning.autoscale import ROLES, Limits
from disagg_tools.bench.autoscale import run
from disagg_tools.bench.autoscale.rules import policies, traces
from disagg_tools.bench.autoscale.rules.fleet import Fleet, Step

LENGTHS = traces.AZURE_CONV_2023


def test_the_lengths_are_the_azure_2023_conversation_trace_s() -> None:
    # lognormal means from the medians and spreads computed from the published CSV
    assert LENGTHS.prompt_mean == pytest.approx(1020 * math.exp(0.985**2 / 2))
    assert LENGTHS.output_mean == pytest.approx(129 * math.exp(0.859**2 / 2))


def test_the_trace_shapes() -> None:
    day = traces.make("diurnal", 1000, 40.0, random.Random(1))
    assert day.rate(0) == pytest.approx(10.0) and day.rate(500) == pytest.approx(40.0)
    burst = traces.make("bursty", 3600, 40.0, random.Random(1))
    rates = {burst.rate(t) for t in range(3600)}
    assert rates == {4.0, 40.0}  # quiet, and bursts 10x it
    on = sum(1 for t in range(3600) if burst.rate(t) == 40.0) / 3600
    assert 0.05 < on < 0.4  # 60 s bursts about every 300 s
    assert traces.make("steady", 10, 7.0, random.Random(1)).rate(3) == 7.0
    with pytest.raises(ValueError, match="the traces are"):
        traces.make("spiky", 10, 1.0, random.Random(1))


def test_arrivals_average_the_rate() -> None:
    rng = random.Random(3)
    for rate in (0.5, 20.0, 400.0):
        got = sum(traces.arrivals(rate, 1.0, rng) for _ in range(2000)) / 2000
        assert got == pytest.approx(rate, rel=0.05)


def _fleet(prefill: int, decode: int) -> Fleet:
    fleet = Fleet(run.ILLUSTRATIVE, LENGTHS, run.TARGETS)
    fleet.resize({"prefill": prefill, "decode": decode}, -1e9)
    return fleet


def test_enough_pods_meet_the_slo_and_too_few_prefills_queue_then_fail() -> None:
    rate = 10.0  # requests/s: ~1600 prompt tokens each, about 1.3 prefill pods at target
    ample = _fleet(4, 4)
    steps = [ample.step(t, round(rate)) for t in range(120)]
    assert all(s.met == s.arrived for s in steps[5:])
    assert steps[-1].ttft_s < run.TARGETS.ttft_s and steps[-1].itl_s < run.TARGETS.itl_s
    short = _fleet(1, 4)  # one prefill clears 15k tokens/s of 16k offered: the backlog grows
    steps = [short.step(t, round(rate)) for t in range(600)]
    assert steps[-1].prefill_backlog_tokens > 0 and steps[-1].ttft_s > steps[10].ttft_s
    assert sum(s.failed for s in steps) > 0  # its clients give up past 60 s


def test_new_pods_serve_after_their_start_up_and_are_billed_from_the_ask() -> None:
    fleet = _fleet(1, 1)
    fleet.resize({"prefill": 3, "decode": 1}, now=0.0)
    assert fleet.pods["prefill"].serving(119.0) == 1 and fleet.pods["prefill"].serving(120.0) == 3
    fleet.step(0.0, 0)
    assert fleet.pod_seconds == 4.0 and fleet.scale_events == 3  # two at the start, one now
    fleet.resize({"prefill": 2, "decode": 1}, now=1.0)
    assert sorted(fleet.pods["prefill"].ready_at)[-1] == 120.0  # a starting pod went first


def test_the_static_search_finds_the_cheapest_counts_that_meet_the_slo() -> None:
    peak = run.peak_for(10, run.ILLUSTRATIVE, run.TARGETS, LENGTHS)
    found = run.cheapest_static(peak, run.ILLUSTRATIVE, LENGTHS, seed=7)
    steady = traces.Trace("steady", 600.0, peak)

    def attainment(counts: dict[str, int]) -> float:
        fleet = Fleet(run.ILLUSTRATIVE, LENGTHS, run.TARGETS)
        got = run.simulate(steady, policies.Static(counts), fleet, counts, seed=7)
        return float(got["slo_attainment"])

    assert attainment(found) >= run.ATTAINMENT
    for role in ROLES:  # one pod less in either role misses it
        assert attainment({**found, role: found[role] - 1}) < run.ATTAINMENT


def test_a_small_run_reports_each_figure_per_trace_and_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run.main(["--json", "--sizes", "10", "--traces", "steady", "--duration-s", "300"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "reference-cpu" and out["targets"]["ttft_p90_s"] == 1.0
    results = out["10"]["steady"]
    assert set(results) == set(run.POLICIES)
    for figures in results.values():
        assert set(figures) >= {"slo_attainment", "pod_hours", "scale_events", "failed_requests"}
    static = out["10"]["static_pods"]
    assert results["static"]["pod_hours"] == pytest.approx(
        sum(static.values()) * 300 / 3600, abs=0.01
    )


def test_a_measured_profile_is_what_the_autoscale_bench_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`disagg bench profile` small: real reference workers behind the proxy, one prefill
    point (the stop latency is below any TTFT) and decode at 1 and 2 streams."""
    from disagg_tools.bench.autoscale import profile

    out = tmp_path / "profile.json"
    argv = ["--json", "--out", str(out), "--seconds", "2", "--first-rate", "2"]
    argv += ["--ttft-stop-s", "0.0001", "--max-clients", "2", "--prompt-tokens", "64"]
    assert profile.main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    (point,) = figures["prefill"]["points"]
    assert point["failed"] == 0 and point["ttft_p90_s"] > 0
    assert point["load"] == pytest.approx(2 * 64, rel=0.6)  # Poisson arrivals at 2/s, 64 tokens
    assert [p["load"] for p in figures["decode"]["points"]] == [1, 2]
    assert all(
        p["requests"] > 0 and p["output_tokens_per_s"] > 0 for p in figures["decode"]["points"]
    )
    loaded = run.load_profiles(str(out))
    assert loaded["prefill"].curve.points == ((point["load"], point["ttft_p90_s"]),)
    assert loaded["decode"].capacity == figures["decode"]["capacity"] > 0
    assert loaded["decode"].max_tokens_per_s == max(
        p["output_tokens_per_s"] for p in figures["decode"]["points"]
    )
    assert 0 < loaded["prefill"].start_s < 120


def test_the_ideal_policy_sizes_for_the_true_rate_now_above_its_reserve() -> None:
    def need(rate: float) -> dict[str, float]:
        return {"prefill": rate / 10, "decode": rate / 20}

    ideal = policies.Ideal(lambda t: 100.0 if t >= 60 else 10.0, need, {"prefill": 3, "decode": 1})
    assert ideal.decide([], {"prefill": 0, "decode": 0}, 0.0) == {"prefill": 3, "decode": 1}
    # 10 and 5 pods at 100 requests/s, over the 0.9 headroom
    assert ideal.decide([], {"prefill": 3, "decode": 1}, 60.0) == {"prefill": 12, "decode": 6}


def test_the_reactive_bound_rises_with_its_reserve_and_full_reserve_is_static() -> None:
    peak = run.peak_for(10, run.ILLUSTRATIVE, run.TARGETS, LENGTHS)
    static = run.cheapest_static(peak, run.ILLUSTRATIVE, LENGTHS, seed=7)
    trace = traces.make("bursty", 1800.0, peak, random.Random(2))
    got = run.reactive_bound(trace, static, run.ILLUSTRATIVE, LENGTHS, seed=7)
    sweep = got["sweep"]
    assert [s["reserve"] for s in sweep] == list(run.RESERVES)
    hours = [s["pod_hours_vs_static"] for s in sweep]
    assert hours == sorted(hours) and hours[-1] >= 1.0  # all of static's pods, and more
    # 120 s start-ups and 60 s bursts: with no reserve a burst is over before pods serve
    assert sweep[0]["slo_attainment"] < 0.9 < sweep[-1]["slo_attainment"]
    cheapest = got["cheapest"]
    assert cheapest is None or cheapest["slo_attainment"] >= run.ATTAINMENT
    if cheapest is not None:
        assert all(s["pod_hours_vs_static"] >= cheapest["pod_hours_vs_static"]
                   for s in sweep if s["slo_attainment"] >= run.ATTAINMENT)  # fmt: skip


def test_a_run_reports_the_reactive_bound_per_trace_unless_asked_not_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--json", "--sizes", "10", "--traces", "bursty", "--duration-s", "300"]
    assert run.main(argv) == 0
    bound = json.loads(capsys.readouterr().out)["10"]["reactive_bound"]
    assert set(bound) == {"bursty"} and len(bound["bursty"]["sweep"]) == len(run.RESERVES)
    assert run.main([*argv, "--no-bound"]) == 0
    assert "reactive_bound" not in json.loads(capsys.readouterr().out)["10"]


def _step(t: float, prompt: float, backlog: float, waiting: float = 0.0) -> Step:
    return Step(t=t, arrived=1, met=1, failed=0, ttft_s=0.1, itl_s=0.01,
                prompt_tokens_per_s=prompt, decode_sequences=0.0, output_tokens_per_s=100.0,
                prefill_utilisation=0.5, prefill_backlog_tokens=backlog, kv_usage=0.1,
                decode_waiting=waiting, pods={"prefill": 1, "decode": 1})  # fmt: skip


def test_the_planner_reads_each_queue_as_the_operator_does() -> None:
    """A backlog adds its tokens over the forecast's mean to what arrived (with_queue): a
    pool whose pods are all busy shows the demand they do not clear."""
    limits = Limits({r: (1, 100) for r in ROLES})
    settings = autoscale.Settings(smooth_s=4.0, headroom=1.0, trend_s=1000)
    planner = policies.Planner(run.ILLUSTRATIVE, run.TARGETS, limits, settings, period_s=2.0)
    share = run.ILLUSTRATIVE["prefill"].per_pod(1.0, 1.0, tokens=False)  # 14,000 tokens/s
    calm = [_step(t, share * 0.9, 0.0) for t in range(10)]
    assert planner.decide(calm, {"prefill": 1, "decode": 1}, 9.0)["prefill"] == 1
    queued = [_step(t, share * 0.9, 4 * share) for t in range(10)]  # one pod's 4 s behind
    planner = policies.Planner(run.ILLUSTRATIVE, run.TARGETS, limits, settings, period_s=2.0)
    assert planner.decide(queued, {"prefill": 1, "decode": 1}, 9.0)["prefill"] == 2


def test_the_benchs_planner_runs_the_settings_its_spec_gives() -> None:
    limits = Limits({r: (1, 40) for r in ROLES})
    planner = run._policy("planner", {"prefill": 6, "decode": 5}, run.ILLUSTRATIVE, limits)
    assert planner.period_s == run.PLANNER_SPEC["periodSeconds"]
    assert planner.settings.reserve == run.PLANNER_SPEC["reservePercent"] / 100
    assert planner.settings.scale_down_s == run.PLANNER_SPEC["scaleDownSeconds"]


def test_the_planners_reserve_is_a_flag_and_the_run_says_what_it_ran(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--json", "--sizes", "10", "--traces", "steady", "--duration-s", "60", "--no-bound"]
    assert run.main([*argv, "--planner-reserve", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["planner_spec"]["reservePercent"] == 0
    with pytest.raises(SystemExit):
        run.main([*argv, "--planner-reserve", "101"])
    assert "--planner-reserve: 101; give a percentage" in capsys.readouterr().err


def test_the_default_profile_is_the_measured_one_the_examples_ship(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = Path(__file__).parents[3] / "examples" / "autoscaling" / "profile-reference-cpu.json"
    assert json.loads(path.read_text()) == run.REFERENCE_CPU_FILE
    profiles = run.load_profiles(str(path))
    assert profiles == run.REFERENCE_CPU
    assert profiles["prefill"].start_s < 10 and profiles["decode"].capacity
    # a prefill pod of the reference engine here: thousands of prompt tokens/s within 1 s
    assert 1000 < profiles["prefill"].per_pod(1.0, 1.0, tokens=False) < 10_000

    argv = ["--json", "--sizes", "10", "--traces", "steady", "--duration-s", "60", "--no-bound"]
    assert run.main([*argv, "--profile", "illustrative"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "illustrative"
    static = run.cheapest_static(
        run.peak_for(10, run.ILLUSTRATIVE, run.TARGETS, LENGTHS), run.ILLUSTRATIVE, LENGTHS, 7
    )
    assert out["10"]["static_pods"] == static
    with pytest.raises(SystemExit):
        run.main(["--live", "--profile", "illustrative"])
    assert "the live loop replays its own pods" in capsys.readouterr().err
