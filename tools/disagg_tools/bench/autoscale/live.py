"""``disagg bench autoscale --live``: the closed loop on this machine, and the fleet model
run on the same load to see whether the two agree.

Benchmark step (I/O: the API emulator, the real operator, the local kubelet running every
pod as processes, Debian's Prometheus scraping them as the Prometheus Operator would, and a
load generator in a process of its own). One reference deployment with the router,
monitoring and autoscaling gets three phases of Poisson requests (base, a step the planner
should meet with prefill, not decode, and a drop), and the fleet model replays the same
rates so the simulation is checked against the loop. Setup, phases and figures:
docs/autoscaling.md (The closed loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import json
import logging
import multiprocessing
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from disagg_contract.config import WorkerConfig
from disagg_operator.api import Autoscaling
from disagg_operator.planning.autoscale import ROLES, Profile, from_spec
from disagg_operator.planning.pods import is_ready
from disagg_tools.bench.autoscale import profile
from disagg_tools.bench.autoscale.rules import policies
from disagg_tools.bench.autoscale.rules.fleet import Fleet, Step
from disagg_tools.bench.autoscale.rules.traces import Lengths, Trace
from disagg_tools.bench.autoscale.run import simulate as replay
from disagg_tools.bench.failover import until
from disagg_tools.bench.kubelet import DD_KEY, deployment_ready, serve_crd
from disagg_tools.bench.stream import MIN_TOKENS, StreamError, percentile, stream_completion
from disagg_tools.local import prometheus

NS = "live"
NAME = "live"
PERIOD_S = 2
SCALE_DOWN_S = 20
HEADROOM = 0.9  # the planner's (Settings.headroom)
BASE = 0.6  # the base phase, of one prefill pod's share
PACE_ENV = WorkerConfig.env_name("prefill_pace_tokens_per_s")


def _prompt(n: int, salt: int) -> list[int]:
    return [1] + [(i * 37 + 11 + salt * 101) % 256 for i in range(n - 1)]


def drive(url: str, phases: list[tuple[float, float]], prompt: int, seed: int) -> dict[str, Any]:
    """Open-loop Poisson requests to ``url``: (rate, seconds) per phase, in a process of
    its own. Returns when the first phase began (wall clock) and per request (phase, sent
    at, TTFT s or None when it failed, the router's prefill hop ms and prefill URL)."""
    rng = random.Random(seed)
    plan, t = [], 0.0
    for phase, (rate, seconds) in enumerate(phases):
        end = t + seconds
        while True:
            t += rng.expovariate(rate)
            if t >= end:
                t = end
                break
            plan.append((phase, t))
    start = time.time() + 0.5

    def one(k: int) -> tuple[int, float, float | None, float | None, str]:
        phase, at = plan[k]
        wait = start + at - time.time()
        if wait > 0:
            time.sleep(wait)
        sent = time.time()
        body = {"prompt": _prompt(prompt, seed * 100_000 + k), "max_tokens": MIN_TOKENS,
                "ignore_eos": True}  # fmt: skip
        try:
            got = stream_completion(url, body, timeout_s=60)
        except (OSError, StreamError):
            return phase, sent, None, None, ""
        hop = got.route.get("prefill_hop_ms")
        where = str(got.route.get("prefill_url") or "")
        return phase, sent, got.ttft_ms / 1000, hop, where

    with concurrent.futures.ThreadPoolExecutor(max_workers=96) as pool:
        return {"start": start, "requests": list(pool.map(one, range(len(plan))))}


def _rates(profiles: dict[str, Profile], target_s: float, prompt: int, step: float) -> list[float]:
    """Requests/s of the three phases (module docstring)."""
    share = profiles["prefill"].per_pod(target_s, HEADROOM, tokens=False) / prompt
    base = BASE * share
    return [base, base * step, 0.2 * base]


def profile_in_loop(url: str, prompt: int, target_ms: float, took: dict[str, float]) -> Any:
    """``disagg bench profile``'s sweep through the loop's router, one pod of each pool
    serving among everything else the loop runs (its process of its own)."""
    args = profile.defaults()
    args.prompt_tokens, args.ttft_stop_s = prompt, 2 * target_ms / 1000
    args.first_rate, args.step, args.seconds = 0.25, 1.5, 8.0
    args.max_clients = 8
    prefill, decode = profile.sweep(url, args, lambda text: None)
    return profile.file_of(profile.result_of(args, prefill, decode, took))


def simulate(
    profiles: dict[str, Profile],
    auto: dict[str, Any],
    phases: list[tuple[float, float]],
    prompt: int,
    seed: int,
) -> list[tuple[float, int, float]]:
    """The fleet model on the same rates with the planner as spec.autoscaling ``auto``
    sets it up: (time, arrived, TTFT s) per second."""
    targets, limits, settings = from_spec(Autoscaling.model_validate(auto))
    lengths = Lengths(prompt_median=prompt, prompt_sigma=0.0, output_median=MIN_TOKENS,
                      output_sigma=0.0)  # fmt: skip
    fleet = Fleet(profiles, lengths, targets)
    period = float(auto["periodSeconds"])
    planner = policies.Planner(profiles, targets, limits, settings=settings, period_s=period,
                               output_mean=lengths.output_mean)  # fmt: skip
    edges, t = [], 0.0
    for rate, seconds in phases:
        edges.append((t, t + seconds, rate))
        t += seconds

    def rate_at(now: float) -> float:
        return next(r for a, b, r in edges if a <= now < b)

    steps: list[Step] = []
    start = {r: limits.replicas[r][0] for r in ROLES}
    trace = Trace("steady", t, 0.0)  # its length; the rate is the phases'
    replay(trace, planner, fleet, start, seed, rate=rate_at, record=steps)
    return [(s.t, s.arrived, s.ttft_s) for s in steps]


def _p90(values: list[float]) -> float | None:
    return round(percentile(values, 90) * 1000, 1) if values else None


def _manifest(prometheus_url: str, target_ms: float, paced: float = 0.0) -> dict[str, Any]:
    """The loop's deployment; ``paced``: each prefill pod's pace in prompt tokens/s
    (``--paced``), 0 for its compute alone."""
    pace = [{"name": PACE_ENV, "value": f"{paced:g}"}] if paced else []
    return {
        "apiVersion": "disagg.dev/v1alpha1",
        "kind": "DisaggregatedDeployment",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "model": "tiny",
            "engine": {"type": "reference", "image": "ghcr.io/disagg-dev/disagg-worker-cpu:0.1.0"},
            "prefill": {"device": "cpu", "env": pace},
            "decode": {"device": "cpu"},
            "router": {"enabled": True, "replicas": 1},
            "monitoring": {"enabled": True, "interval": "1s"},
            "autoscaling": {
                "targets": {"ttftMilliseconds": target_ms, "itlMilliseconds": 200},
                "profile": {"configMap": "profile"},
                "prefill": {"min": 1, "max": 3},
                "decode": {"min": 1, "max": 2},
                "periodSeconds": PERIOD_S,
                "scaleDownSeconds": SCALE_DOWN_S,
                "prometheusUrl": prometheus_url,
            },
        },
    }


async def run(
    args: Any, given: dict[str, Any] | None, progress: Callable[[str], None]
) -> dict[str, Any]:
    """The loop (module docstring); ``given``: a profile, else one measured in the loop."""
    import kmock

    from disagg_operator.controller.config import OperatorConfig
    from disagg_operator.controller.run import configure_logging, running
    from disagg_operator.planning.autoscale import profiles_from
    from disagg_tools.emulator.server import Emulator
    from disagg_tools.local.kubelet import run as kubelet_run
    from disagg_tools.local.kubelet.node import NodeConfig

    configure_logging("warning")
    logging.getLogger("kopf").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="disagg-live-") as tmp:
        work = Path(tmp)
        prom = prometheus.Prometheus(work / "prometheus", scrape_interval="1s")
        await prom.start()
        timeline: list[tuple[float, dict[str, Any]]] = []
        try:
            async with Emulator() as emu, kmock.Server(emu):
                serve_crd(emu)
                host = str(emu.url).rstrip("/")
                async with (
                    running(OperatorConfig(host=host, canary_seconds=5.0, autoscale_tick=0.5)),
                    kubelet_run.running(host, work / "kubelet", NodeConfig(tick_s=0.25)),
                ):
                    watch = asyncio.create_task(_watch(emu, prom, timeline))
                    try:
                        result, measured = await _loop(emu, prom, given, args, progress)
                    finally:
                        watch.cancel()
        finally:
            prom.stop()
    profiles = profiles_from(measured)
    out = _figures(result, timeline, profiles, result["phases"], args)
    return {"profile": "given" if given else measured, **out}


async def _watch(emu: Any, prom: prometheus.Prometheus, timeline: list[Any]) -> None:
    """Every 0.25 s: Prometheus' targets from the PodMonitors and pods (what the Prometheus
    Operator does), what the deployment plans and runs, and how busy the host's CPUs are."""
    import psutil

    while True:
        monitors = emu.objects_of("monitoring.coreos.com/v1/podmonitors", NS)
        pods = emu.objects_of("v1/pods", NS)
        prom.write(prometheus.targets(monitors, pods))
        status = (emu.find(DD_KEY, NS, NAME) or {}).get("status") or {}
        ready = {r: 0 for r in ROLES}
        for pod in pods:
            role = (pod["metadata"].get("labels") or {}).get("disagg.dev/role")
            if role in ready and is_ready(pod):
                ready[role] += 1
        planned = {r: (status.get(r) or {}).get("plannedReplicas") for r in ROLES}
        live = {r: sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(
            "disagg.dev/role") == r) for r in ROLES}  # fmt: skip
        cpu = psutil.cpu_percent(interval=None)  # the host's, since the last sample
        timeline.append(
            (time.time(), {"planned": planned, "ready": ready, "pods": live, "cpu": cpu})
        )
        await asyncio.sleep(0.25)


async def _loop(
    emu: Any,
    prom: prometheus.Prometheus,
    given: dict[str, Any] | None,
    args: Any,
    progress: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Deploy, measure the profile unless ``given``, then drive the phases; (the load's
    record with its phases, the profile)."""
    from disagg_operator.planning.autoscale import profiles_from

    emu.put_object("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": NS}})  # fmt: skip
    if given is not None:
        _profile_map(emu, given)
    put = time.time()
    emu.put_object(DD_KEY, _manifest(prom.url, args.ttft_target_ms, args.paced))
    progress("waiting for the deployment and its router")

    def router() -> str | None:
        for pod in emu.objects_of("v1/pods", NS):
            labels = pod["metadata"].get("labels") or {}
            if "disagg.dev/router" in labels and is_ready(pod):
                return str(pod["status"]["podIP"])
        return None

    await until("deployment Ready", lambda: deployment_ready(emu, NS, NAME), 180)
    took = {r: _ready_since(emu, r) - put for r in ROLES}
    address = await until("router pod Ready", router, 120)
    url = f"http://{address}:8080/v1/completions"
    loop = asyncio.get_running_loop()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        if given is None:
            progress("measuring the profile in the loop (one pod of each pool; --profile skips)")
            measured: dict[str, Any] = await loop.run_in_executor(
                pool, profile_in_loop, url, args.prompt_tokens, args.ttft_target_ms, took
            )
            _profile_map(emu, measured)
        else:
            measured = given
        profiles = profiles_from(measured)
        rates = _rates(profiles, args.ttft_target_ms / 1000, args.prompt_tokens, args.step)
        phases = [(rates[0], args.base_s), (rates[1], args.step_s), (rates[2], args.drop_s)]
        progress("load: " + ", ".join(f"{r:.2f} req/s for {s:g} s" for r, s in phases))
        result = await loop.run_in_executor(pool, drive, url, phases, args.prompt_tokens, args.seed)
    return {**result, "phases": phases}, measured


def _profile_map(emu: Any, data: dict[str, Any]) -> None:
    emu.put_object("v1/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "profile", "namespace": NS},
                   "data": {"profile.json": json.dumps(data)}})  # fmt: skip


def _ready_since(emu: Any, role: str) -> float:
    """When the first Ready pod of ``role`` turned Ready (wall clock)."""
    times = []
    for pod in emu.objects_of("v1/pods", NS):
        if (pod["metadata"].get("labels") or {}).get("disagg.dev/role") == role and is_ready(pod):
            for c in (pod.get("status") or {}).get("conditions") or []:
                if c.get("type") == "Ready" and c.get("lastTransitionTime"):
                    stamp = str(c["lastTransitionTime"]).replace("Z", "+00:00")
                    times.append(datetime.datetime.fromisoformat(stamp).timestamp())
    return min(times) if times else time.time()


def _figures(
    result: dict[str, Any],
    timeline: list[tuple[float, dict[str, Any]]],
    profiles: dict[str, Profile],
    phases: list[tuple[float, float]],
    args: Any,
) -> dict[str, Any]:
    start = result["start"]
    requests = [(r[0], r[1], r[2]) for r in result["requests"]]
    hops = [(r[1], r[3], r[4]) for r in result["requests"] if r[0] == 1 and len(r) > 3]
    step_at = start + phases[0][1]
    drop_at = step_at + phases[1][1]

    def first(after: float, test: Callable[[dict[str, Any]], bool]) -> float | None:
        return next((t for t, s in timeline if t >= after and test(s)), None)

    planned_up = first(step_at, lambda s: (s["planned"]["prefill"] or 0) >= 2)
    at_step = next((s for t, s in reversed(timeline) if t <= step_at), timeline[0][1])

    def cpu(low: float, high: float) -> float | None:
        seen = [s["cpu"] for t, s in timeline if low <= t < high]
        return round(sum(seen) / len(seen), 1) if seen else None

    # a prefill pod the step added: Ready beyond those Ready when it came (the plan may
    # have kept a second one from the base phase)
    ready_at_step = at_step["ready"]["prefill"]
    ready_up = first(step_at, lambda s: s["ready"]["prefill"] > ready_at_step)
    down = first(drop_at, lambda s: s["pods"]["prefill"] <= 1)
    decode_added = max((s["pods"]["decode"] for t, s in timeline if step_at <= t < drop_at),
                       default=1) - 1  # fmt: skip
    after_from = (ready_up or drop_at) + 5.0
    after = [ttft for phase, sent, ttft in requests
             if phase == 1 and sent >= after_from and ttft is not None]  # fmt: skip
    before = [ttft for phase, sent, ttft in requests
              if phase == 1 and sent < (ready_up or drop_at) and ttft is not None]  # fmt: skip
    base = [ttft for phase, _, ttft in requests if phase == 0 and ttft is not None]
    dropped = [ttft for phase, _, ttft in requests if phase == 2]
    auto = _manifest("http://unused", args.ttft_target_ms)["spec"]["autoscaling"]
    sim = simulate(profiles, auto, phases, args.prompt_tokens, args.seed)
    window = (after_from - start, phases[0][1] + phases[1][1])
    sim_after = [ttft for t, n, ttft in sim if window[0] <= t < window[1] for _ in range(n)]
    live_p90, sim_p90 = _p90(after), _p90(sim_after)
    hop_after = [ms / 1000 for sent, ms, _ in hops if sent >= after_from and ms is not None]
    spread: dict[str, int] = {}
    for sent, _, where in hops:
        if sent >= after_from and where:
            spread[where] = spread.get(where, 0) + 1
    return {
        "rates_per_s": [round(r, 2) for r, _ in phases],
        "phase_s": [s for _, s in phases],
        "prompt_tokens": args.prompt_tokens,
        "prefill_pace_tokens_per_s": args.paced or None,
        "ttft_target_ms": args.ttft_target_ms,
        "ttft_p90_ms_base": _p90(base),
        "prefill_planned_at_step": at_step["planned"]["prefill"],
        "prefill_ready_at_step": ready_at_step,
        "prefill_planned_most": max(
            (s["planned"]["prefill"] or 0 for t, s in timeline if step_at <= t < drop_at),
            default=None,
        ),
        "host_cpu_percent": {
            "base": cpu(start, step_at),
            "step": cpu(step_at, drop_at),
            "drop": cpu(drop_at, drop_at + phases[2][1]),
        },
        "planned_up_s": None if planned_up is None else round(planned_up - step_at, 1),
        "scale_up_s": None if ready_up is None else round(ready_up - step_at, 1),
        "ttft_p90_ms_before": _p90(before),
        "ttft_p90_ms_after": live_p90,
        "requests_after": len(after),
        "prefill_hop_p90_ms_after": _p90(hop_after),
        "requests_after_per_prefill": sorted(spread.values(), reverse=True),
        "decode_added": decode_added,
        "scale_down_s": None if down is None else round(down - drop_at, 1),
        "scale_down_requests": len(dropped),
        "scale_down_failed_requests": sum(1 for t in dropped if t is None),
        "failed_requests": sum(1 for _, _, t in requests if t is None),
        "prometheus_version": prometheus.version(),
        "sim_ttft_p90_ms_after": sim_p90,
        "sim_vs_live_ttft_ratio": (
            round(sim_p90 / live_p90, 2) if live_p90 and sim_p90 is not None else None
        ),
    }


def table(result: dict[str, Any]) -> str:
    rows = [(k, v) for k, v in result.items()]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
