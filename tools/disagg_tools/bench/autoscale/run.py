"""``disagg bench autoscale``: every trace and policy at each fleet size, on the fleet model.

Benchmark step (pure but for printing). For each size (``--sizes``, pods at the trace's
peak for the planner's need) and trace (:mod:`.traces`), the policies of :mod:`.policies`
replay the same arrivals (one seed per trace) on their own :class:`~.fleet.Fleet`. The
static counts are searched first: the cheapest per role meeting 0.99 attainment at the
trace's peak rate, steady. Figures per trace and policy: ``slo_attainment`` (requests
meeting both targets / requests), ``pod_hours``, ``scale_events``, ``failed_requests``,
and the peak pods per role.

The pools' profiles are :data:`REFERENCE_CPU` unless ``--profile`` names others: a FILE
(JSON: per role ``curve`` [[load, latency], ...], ``start_s``, decode ``capacity``, what
``disagg bench profile --out`` writes), or ``illustrative`` for :data:`ILLUSTRATIVE`: the
shape of a GPU pool serving an 8B model (prefill saturating near 15k prompt tokens/s, decode
ITL 15 ms alone and 100 ms at 128 sequences, 120 s start-ups), not a measurement of ours.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

from disagg_contract import commandline
from disagg_operator.api import Autoscaling
from disagg_operator.planning.autoscale import (
    ROLES,
    Curve,
    Limits,
    Profile,
    Targets,
    from_spec,
    profiles_from,
)
from disagg_tools.bench.autoscale.rules import policies, traces
from disagg_tools.bench.autoscale.rules.fleet import Fleet, Step

ILLUSTRATIVE = {
    "prefill": Profile(
        Curve(((2000, 0.12), (8000, 0.25), (12000, 0.5), (14000, 1.0), (15000, 2.0))), 120.0
    ),
    "decode": Profile(
        Curve(((1, 0.015), (16, 0.02), (32, 0.028), (64, 0.045), (96, 0.07), (128, 0.1))),
        120.0,
        capacity=128,
    ),
}
# measured: `disagg bench profile --out` of the reference engine on a 2-core host, the file
# examples/autoscaling/profile-reference-cpu.json (a test keeps the two equal)
REFERENCE_CPU_FILE = {
    "percentile": 90,
    "prefill": {
        "curve": [[563.2, 0.1502], [1177.6, 0.2886], [1792.0, 0.4804], [3430.4, 0.5636],
                  [8140.8, 8.5114]],
        "start_s": 2.17,
    },
    "decode": {
        "curve": [[1, 0.00456], [2, 0.00467], [4, 0.00481], [8, 0.00473], [16, 0.00456],
                  [32, 0.00469]],
        "start_s": 2.12,
        "capacity": 102,
        "max_tokens_per_s": 422.4,
    },
}  # fmt: skip
REFERENCE_CPU = profiles_from(REFERENCE_CPU_FILE)
TARGETS = Targets(ttft_s=1.0, itl_s=0.05)
# the spec.autoscaling whose settings the planner runs with (its bounds are each size's):
# plan every 2 s on a 4 s mean (Prometheus scraping every second), shrink after 30 s, and
# keep 30% of the last hour's largest need through the gaps (docs/autoscaling.md, bursts)
PLANNER_SPEC = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "profile"},
    "prefill": {"max": 1},
    "decode": {"max": 1},
    "periodSeconds": 2,
    "scaleDownSeconds": 30,
    "reservePercent": 30,
}
ATTAINMENT = 0.99
POLICIES = ("static", "hpa-queue", "saturation", "planner")


def pods_for(
    rate: float, profiles: dict[str, Profile], targets: Targets, lengths: traces.Lengths
) -> dict[str, float]:
    """Pods each role needs at ``rate`` requests/s by the profiles (fractional)."""
    prefill = profiles["prefill"].per_pod(targets.ttft_s, 1.0, tokens=False)
    decode = profiles["decode"].per_pod(targets.itl_s, 1.0, tokens=True)
    return {
        "prefill": rate * lengths.prompt_mean / prefill,
        "decode": rate * lengths.output_mean / decode,
    }


def peak_for(
    size: int, profiles: dict[str, Profile], targets: Targets, lengths: traces.Lengths
) -> float:
    """The peak rate at which the profiles need ``size`` pods in all."""
    per_request = sum(pods_for(1.0, profiles, targets, lengths).values())
    return size / per_request


def simulate(
    trace: traces.Trace,
    policy: Any,
    fleet: Fleet,
    start: dict[str, int],
    seed: int,
    rate: Callable[[float], float] | None = None,
    record: list[Step] | None = None,
) -> dict[str, Any]:
    """Replay ``trace`` (or ``rate``) with ``policy`` deciding every ``policy.period_s``;
    ``record`` gets every step."""
    rng = random.Random(seed)
    fleet.resize(start, -1e9)  # the starting pods serve from the start
    history: list[Step] = []
    arrived = met = failed = 0
    peak = dict.fromkeys(ROLES, 0)
    next_at = 0.0
    t = 0.0
    while t < trace.duration_s:
        if t >= next_at:
            current = {r: fleet.pods[r].count for r in ROLES}
            fleet.resize(policy.decide(history, current, t), t)
            next_at = t + policy.period_s
        n = traces.arrivals((rate or trace.rate)(t), fleet.dt, rng)
        step = fleet.step(t, n)
        history.append(step)
        if record is not None:
            record.append(step)
        if len(history) > 600:
            del history[:-600]
        arrived, met, failed = arrived + n, met + step.met, failed + step.failed
        peak = {r: max(peak[r], step.pods[r]) for r in ROLES}
        t += fleet.dt
    return {
        "slo_attainment": round(met / arrived, 4) if arrived else 1.0,
        "pod_hours": round(fleet.pod_seconds / 3600, 2),
        "scale_events": fleet.scale_events,
        "failed_requests": failed,
        "requests": arrived,
        "peak_pods": peak,
    }


def cheapest_static(
    peak: float, profiles: dict[str, Profile], lengths: traces.Lengths, seed: int
) -> dict[str, int]:
    """The fewest pods per role meeting ATTAINMENT at ``peak`` requests/s, steady for 10
    minutes: prefill searched with decode ample, then decode with that prefill."""
    need = pods_for(peak, profiles, TARGETS, lengths)
    counts = {r: max(1, math.floor(need[r] * 0.5)) for r in ROLES}
    ample = {r: max(2, math.ceil(need[r] * 3)) for r in ROLES}

    def meets(c: dict[str, int]) -> bool:
        trace = traces.Trace("steady", 600.0, peak)
        fleet = Fleet(profiles, lengths, TARGETS)
        got = simulate(trace, policies.Static(c), fleet, c, seed)
        return bool(got["slo_attainment"] >= ATTAINMENT)

    for role in ROLES:
        while not meets({**ample, role: counts[role]}):
            counts[role] = max(counts[role] + 1, math.ceil(counts[role] * 1.05))
        ample[role] = counts[role]
    while not meets(counts):  # both at their least together: grow the slower
        for role in ROLES:
            counts[role] += 1
    return counts


RESERVES = tuple(k / 10 for k in range(11))  # the ideal policy's reserves, of static's pods


def reactive_bound(
    trace: traces.Trace,
    static: dict[str, int],
    profiles: dict[str, Profile],
    lengths: traces.Lengths,
    seed: int,
) -> dict[str, Any]:
    """What the best reactive policy reaches on ``trace`` (:class:`policies.Ideal`) at each
    reserve of :data:`RESERVES` (the pods it keeps, as a share of ``static``'s in each role):
    its attainment and pod-hours over static's; ``cheapest`` is the least pod-hours that
    meets :data:`ATTAINMENT` (None when no reserve does)."""
    static_hours = sum(static.values()) * trace.duration_s / 3600
    sweep = []

    def need(rate: float) -> dict[str, float]:
        return pods_for(rate, profiles, TARGETS, lengths)

    for reserve in RESERVES:
        floor = {r: max(1, math.ceil(static[r] * reserve)) for r in ROLES}
        policy = policies.Ideal(trace.rate, need, floor)
        fleet = Fleet(profiles, lengths, TARGETS)
        start = policy.decide([], floor, 0.0)
        got = simulate(trace, policy, fleet, start, seed)
        sweep.append({
            "reserve": reserve,
            "slo_attainment": got["slo_attainment"],
            "pod_hours_vs_static": round(got["pod_hours"] / static_hours, 3),
        })  # fmt: skip
    meeting = [s for s in sweep if s["slo_attainment"] >= ATTAINMENT]
    cheapest = min(meeting, key=lambda s: s["pod_hours_vs_static"]) if meeting else None
    return {"sweep": sweep, "cheapest": cheapest}


def run(
    sizes: Sequence[int],
    kinds: Sequence[str],
    duration_s: float,
    profiles: dict[str, Profile],
    seed: int = 7,
    progress: Callable[[str], None] = lambda _: None,
    bound: bool = True,
    planner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every policy on every trace at every size; with ``bound``, each trace's
    :func:`reactive_bound` too (under ``reactive_bound``, by trace). ``planner``: the
    spec.autoscaling the planner runs with (default :data:`PLANNER_SPEC`)."""
    lengths = traces.AZURE_CONV_2023
    out: dict[str, Any] = {"targets": {"ttft_p90_s": TARGETS.ttft_s, "itl_p90_s": TARGETS.itl_s}}
    for size in sizes:
        peak = peak_for(size, profiles, TARGETS, lengths)
        static = cheapest_static(peak, profiles, lengths, seed)
        per_size: dict[str, Any] = {"peak_requests_per_s": round(peak, 2), "static_pods": static}
        limits = Limits({r: (1, max(4, size * 4)) for r in ROLES})
        for k, kind in enumerate(kinds):
            trace = traces.make(kind, duration_s, peak, random.Random(seed + k))
            results = {}
            for name in POLICIES:
                progress(f"size {size}: {kind} trace, {name}")
                policy = _policy(name, static, profiles, limits, planner or PLANNER_SPEC)
                fleet = Fleet(profiles, lengths, TARGETS)
                # every policy starts where the trace starts: the static counts at the
                # trace's first rate (the quiet rate of a burst, the trough of a day)
                share = trace.rate(0.0) / peak
                start = static if name == "static" else _scaled(static, share)
                results[name] = simulate(trace, policy, fleet, start, seed + 100 + k)
            per_size[kind] = results
            if bound:
                progress(f"size {size}: {kind} trace, the reactive bound")
                per_size.setdefault("reactive_bound", {})[kind] = reactive_bound(
                    trace, static, profiles, lengths, seed + 100 + k
                )
        out[str(size)] = per_size
    return out


def _scaled(counts: dict[str, int], share: float) -> dict[str, int]:
    return {r: max(1, math.ceil(counts[r] * share)) for r in ROLES}


def _policy(
    name: str,
    static: dict[str, int],
    profiles: dict[str, Profile],
    limits: Limits,
    spec: dict[str, Any] = PLANNER_SPEC,
) -> Any:
    if name == "static":
        return policies.Static(static)
    if name == "hpa-queue":
        return policies.Hpa()
    if name == "saturation":
        return policies.Saturation(profiles)
    auto = Autoscaling.model_validate(spec)
    _, _, settings = from_spec(auto)
    return policies.Planner(profiles, TARGETS, limits, settings, float(auto.period_seconds))


def load_profiles(path: str) -> dict[str, Profile]:
    with open(path, encoding="utf-8") as f:
        return profiles_from(json.load(f))


def table(result: dict[str, Any]) -> str:
    lines = []
    for size, per in result.items():
        if not isinstance(per, dict) or "static_pods" not in per:
            continue
        lines.append(
            f"{size} pods at peak ({per['peak_requests_per_s']} req/s; static {per['static_pods']})"
        )
        head = ("trace", "policy", "attainment", "pod-hours", "events", "failed")
        lines.append("  {:8} {:11} {:>10} {:>10} {:>7} {:>7}".format(*head))
        for kind, results in per.items():
            if not isinstance(results, dict) or "planner" not in results:
                continue
            for name, r in results.items():
                lines.append(
                    f"  {kind:8} {name:11} {r['slo_attainment']:>10.4f} {r['pod_hours']:>10.2f} "
                    f"{r['scale_events']:>7} {r['failed_requests']:>7}"
                )
        for kind, b in (per.get("reactive_bound") or {}).items():
            best = b["cheapest"]
            met = f"no reserve meets {ATTAINMENT}"
            if best:
                met = (f"{ATTAINMENT} at reserve {best['reserve']:.1f}, "
                       f"{best['pod_hours_vs_static']:.2f}x static's pod-hours")  # fmt: skip
            sweep = " ".join(
                f"{x['reserve']:.1f}:{x['slo_attainment']:.3f}/{x['pod_hours_vs_static']:.2f}x"
                for x in b["sweep"]
            )
            lines.append(f"  {kind:8} reactive bound: {met}; by reserve: {sweep}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench autoscale",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--sizes", default="10,100,1000", help="pods at the peak, comma-separated")
    p.add_argument("--traces", default=",".join(traces.KINDS), help="traces, comma-separated")
    p.add_argument("--duration-s", type=float, default=3600.0, help="each trace's length")
    p.add_argument(
        "--profile",
        help="the pools' profiles: a FILE disagg bench profile --out wrote, or illustrative "
        "(a GPU pool's shape, 120 s start-ups); default: the reference engine's measured on "
        "a 2-core host. With --live: the profile given, else one measured in the loop",
    )
    p.add_argument("--seed", type=int, default=7, help="seed of the traces' arrivals")
    p.add_argument(
        "--planner-reserve",
        type=int,
        default=PLANNER_SPEC["reservePercent"],
        metavar="PERCENT",
        help="the planner's spec.autoscaling.reservePercent (0-100)",
    )
    p.add_argument(
        "--no-bound",
        action="store_true",
        help="skip the reactive bound (the ideal policy at each reserve: module policies)",
    )
    live = p.add_argument_group("--live: the closed loop on this machine")
    live.add_argument("--live", action="store_true", help="run the closed loop (module live)")
    live.add_argument(
        "--ttft-target-ms", type=float, default=1000.0, help="the planner's TTFT target"
    )
    live.add_argument("--prompt-tokens", type=int, default=512, help="tokens per prompt")
    live.add_argument("--step", type=float, default=2.0, help="demand multiplier of the step")
    live.add_argument(
        "--base-s", type=float, default=30.0, help="seconds of demand before the step"
    )
    live.add_argument("--step-s", type=float, default=90.0, help="seconds of the step")
    live.add_argument("--drop-s", type=float, default=75.0, help="seconds after the drop")
    live.add_argument(
        "--paced",
        type=float,
        default=0.0,
        metavar="TOKENS_PER_S",
        help="each prefill pod takes at least prompt tokens / this many seconds, its engine "
        "busy throughout: pods that stand for accelerator pods, each at its own pace, where "
        "the loop's pods share this host's cores (0: their compute alone)",
    )
    args = p.parse_args(argv)
    if not 0 <= args.planner_reserve <= 100:
        p.error(f"--planner-reserve: {args.planner_reserve}; give a percentage, 0 to 100")
    if args.paced < 0:
        p.error(f"--paced: {args.paced:g} tokens/s; give a pace above 0, or 0 for none")
    if args.live and args.profile == "illustrative":
        p.error("--profile illustrative: the live loop replays its own pods; give a FILE, or "
                "leave --profile out to measure them in the loop")  # fmt: skip
    if args.live:
        return _live(args)
    profiles = REFERENCE_CPU
    if args.profile == "illustrative":
        profiles = ILLUSTRATIVE
    elif args.profile:
        profiles = load_profiles(args.profile)
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.traces.split(",")
    planner = {**PLANNER_SPEC, "reservePercent": args.planner_reserve}
    result = run(
        sizes, kinds, args.duration_s, profiles, args.seed, planner=planner,
        progress=lambda text: print(text, file=sys.stderr, flush=True), bound=not args.no_bound,
    )  # fmt: skip
    result["profile"] = args.profile or "reference-cpu"
    result["planner_spec"] = planner
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


def _live(args: argparse.Namespace) -> int:
    """``--live``: the profile measured in the loop unless ``--profile`` gives one."""
    import asyncio

    from disagg_tools.bench.autoscale import live

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    given = None
    if args.profile:
        with open(args.profile, encoding="utf-8") as f:
            given = json.load(f)
    result = asyncio.run(live.run(args, given, say))
    print(json.dumps(result, indent=2) if args.json else live.table(result))
    return 0
