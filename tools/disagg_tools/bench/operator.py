"""``disagg bench operator``: the operator against the API emulator, measured.

Benchmark script (dev extra: kmock, psutil). Starts the emulator and the real operator in
this process and plays the kubelet (pods turn Ready as soon as they exist), so the figures
are the operator's and the API's alone: create latency, steady-state writes, a mass
converge and its API calls per CR, memory, rollouts (:mod:`.rollout`), failover
(:mod:`.failover`) and sizing (:mod:`.sizing`). Phases, keys and figures:
docs/operator.md (Benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from disagg_contract import commandline
from disagg_operator.api import API_VERSION, PLURAL
from disagg_tools.bench import failover, rollout, sizing
from disagg_tools.bench.kubelet import Kubelet, deployment_ready, serve_crd
from disagg_tools.bench.rules import manifests

NS = "bench"
KEYS = {
    "Pod": "v1/pods",
    "Service": "v1/services",
    "Secret": "v1/secrets",
    "NetworkPolicy": "networking.k8s.io/v1/networkpolicies",
    "PodDisruptionBudget": "policy/v1/poddisruptionbudgets",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench operator",
        description="The operator against the API emulator, measured.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--crs", type=int, default=50, help="CRs for the create→children latency")
    p.add_argument("--converge", type=int, default=1000, help="CRs created at once")
    p.add_argument(
        "--steady-seconds", type=_positive, default=60.0, help="steady-state window (> 0)"
    )
    p.add_argument(
        "--prefill", type=int, default=1, help="prefill pods of each CR (latency, converge)"
    )
    p.add_argument("--decode", type=int, default=1, help="decode pods of each CR (ditto)")
    p.add_argument("--rollout-prefill", type=int, default=8, help="prefill pods rolled (0: skip)")
    p.add_argument("--rollout-decode", type=int, default=16, help="decode pods rolled")
    p.add_argument("--timeout", type=float, default=600.0, help="give up on a phase after this")
    failover.add_arguments(p)
    sizing.add_arguments(p)
    return p


def body(name: str, prefill: int = 1, decode: int = 1) -> dict[str, Any]:
    return manifests.deployment(name, NS, prefill=prefill, decode=decode)


def expected(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(emulator key, name) of every child the operator should create for CR ``body``."""
    from disagg_operator.render.objects import render

    meta = {**body["metadata"], "uid": "u"}
    children = render({**body, "metadata": meta}, hmac_key="k")
    return [(KEYS[o["kind"]], o["metadata"]["name"]) for o in children]


class Bench:
    """The emulator, its HTTP client side, the simulated kubelet and the RSS sampler."""

    def __init__(
        self,
        emulator: Any,
        progress: Callable[[str], None],
        make: Callable[[str], dict[str, Any]] = body,
    ) -> None:
        import psutil

        self.emu, self.progress = emulator, progress
        self.body = make  # the CR create() sends for a name
        self.pods = Kubelet(emulator, NS)  # its ready_after: pod start-up, 0 by default
        self.proc = psutil.Process()
        self.rss_peak = self.proc.memory_info().rss

    def present(self, name: str, children: list[tuple[str, str]]) -> bool:
        return all(self.emu.find(key, NS, child) for key, child in children)

    def ready(self, name: str) -> bool:
        return deployment_ready(self.emu, NS, name)

    async def kubelet(self) -> None:
        """Play the kubelet (:class:`~.kubelet.Kubelet`) and sample RSS every 20 ms, until
        cancelled."""
        while True:
            self.pods.tick()
            self.rss_peak = max(self.rss_peak, self.proc.memory_info().rss)
            await asyncio.sleep(0.02)

    async def create(self, http: Any, name: str) -> None:
        path = f"/apis/{API_VERSION}/namespaces/{NS}/{PLURAL}"
        async with http.post(path, json=self.body(name)) as resp:
            assert resp.status == 201, await resp.text()

    async def until(
        self, what: str, check: Callable[[], bool], timeout: float, every: float = 0.005
    ) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up waiting for {what}")
            await asyncio.sleep(every)

    def writes(self) -> int:
        return sum(1 for c in self.emu.calls if c.verb in {"create", "patch", "update", "delete"})


async def latency(bench: Bench, http: Any, count: int, timeout: float) -> list[float]:
    samples = []
    for i in range(count):
        name, started = f"lat-{i}", time.monotonic()
        children = expected(bench.body(name))
        await bench.create(http, name)
        await bench.until(
            f"children of {name}", functools.partial(bench.present, name, children), timeout
        )
        samples.append(time.monotonic() - started)
        bench.progress(f"create→children {i + 1}/{count}: {samples[-1] * 1000:.0f} ms")
    names = [f"lat-{i}" for i in range(count)]
    await bench.until("all Ready", lambda: all(bench.ready(n) for n in names), timeout)
    return samples


def _positive(text: str) -> float:
    """A window in seconds: writes per minute over none is no figure."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0 seconds")
    return value


async def steady(bench: Bench, seconds: float, timeout: float) -> float:
    """Writes per minute once nothing changes (after writes stop for 2 s)."""
    quiet_since, last = time.monotonic(), bench.writes()
    deadline = time.monotonic() + timeout
    while time.monotonic() - quiet_since < 2.0 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if bench.writes() != last:
            quiet_since, last = time.monotonic(), bench.writes()
    start, began = bench.writes(), time.monotonic()
    while time.monotonic() - began < seconds:
        bench.progress(
            f"steady state: {time.monotonic() - began:.0f}/{seconds:.0f} s, "
            f"{bench.writes() - start} writes"
        )
        await asyncio.sleep(min(1.0, seconds))
    return (bench.writes() - start) * 60.0 / seconds


def calls_by_kind(calls: list[Any], per: int) -> dict[str, float]:
    """API calls per CR by ``verb resource[/subresource]``, most frequent first."""
    counts = collections.Counter(
        f"{c.verb} {c.resource}" + (f"/{c.subresource}" if c.subresource else "") for c in calls
    )
    return {key: round(n / per, 2) for key, n in counts.most_common()}


async def converge(bench: Bench, http: Any, count: int, timeout: float) -> float:
    names = [f"conv-{i}" for i in range(count)]
    children = {n: expected(bench.body(n)) for n in names}
    started = time.monotonic()
    gate = asyncio.Semaphore(16)

    async def one(name: str) -> None:
        async with gate:
            await bench.create(http, name)

    await asyncio.gather(*(one(n) for n in names))

    pending = set(names)

    def done() -> bool:  # only CRs not seen converged yet: a converged CR stays so here
        pending.difference_update(
            [n for n in pending if bench.ready(n) and bench.present(n, children[n])]
        )
        bench.progress(f"converging: {count - len(pending)}/{count} Ready")
        return not pending

    # checking 1000 CRs costs CPU the operator shares: look every 50 ms, not every 5 ms
    await bench.until(f"{count} CRs to converge", done, timeout, every=0.05)
    return time.monotonic() - started


async def settle(bench: Bench, limit: float = 30.0) -> None:
    """Wait (up to ``limit`` s) until the API sees no call for half a second."""
    seen, deadline = -1, time.monotonic() + limit
    while len(bench.emu.calls) != seen and time.monotonic() < deadline:
        seen = len(bench.emu.calls)
        await asyncio.sleep(0.5)


async def run(args: argparse.Namespace, progress: Callable[[str], None]) -> dict[str, Any]:
    import aiohttp
    import kmock

    from disagg_operator.controller.config import OperatorConfig
    from disagg_operator.controller.run import configure_logging, running
    from disagg_tools.emulator.server import Emulator

    configure_logging("warning")
    logging.getLogger("kopf").setLevel(logging.ERROR)  # shutdown notes would garble the table
    shaped = functools.partial(body, prefill=args.prefill, decode=args.decode)
    async with Emulator() as emu, kmock.Server(emu):
        serve_crd(emu)
        bench = Bench(emu, progress, shaped)
        baseline = bench.rss_peak
        host = str(emu.url).rstrip("/")
        kubelet = asyncio.create_task(bench.kubelet())
        try:
            async with running(OperatorConfig(host=host)), aiohttp.ClientSession(host) as http:
                samples = await latency(bench, http, args.crs, args.timeout)
                per_min = await steady(bench, args.steady_seconds, args.timeout)
                first = len(emu.calls)
                converge_s = await converge(bench, http, args.converge, args.timeout)
                await settle(bench)
                phase = emu.calls[first:]
                rolled = {}
                if args.rollout_prefill and args.rollout_decode:
                    rolled = await rollout.run(
                        bench,
                        http,
                        namespace=NS,
                        prefill=args.rollout_prefill,
                        decode=args.rollout_decode,
                        timeout=args.timeout,
                        progress=progress,
                    )
                await settle(bench)  # let in-flight syncs finish before stopping kopf
        finally:
            kubelet.cancel()
    failed_over = await failover.run(args, body, NS, progress) if args.failover else {}
    sized = await sizing.run(args, shaped, NS, progress) if args.sizing else {}
    samples.sort()
    return {
        "create_to_children_p50_s": round(statistics.median(samples), 4),
        "create_to_children_p99_s": round(
            samples[min(len(samples) - 1, int(0.99 * len(samples)))], 4
        ),
        "steady_writes_per_min": round(per_min, 2),
        "converge_s": round(converge_s, 3),
        "converge_crs": args.converge,
        "pods_per_cr": {"prefill": args.prefill, "decode": args.decode},
        "api_calls_per_cr": round(len(phase) / max(args.converge, 1), 2),
        "api_calls_by_kind": calls_by_kind(phase, max(args.converge, 1)),
        "rss_mb": round(bench.rss_peak / 2**20, 1),
        "rss_baseline_mb": round(baseline / 2**20, 1),
        "crs": args.crs,
        "steady_seconds": args.steady_seconds,
        "api_calls": len(emu.calls),
        **rolled,
        **failed_over,
        **sized,
    }


# key: (comparison, bound); a string bound names the result key that holds it.
TARGETS: dict[str, tuple[str, float | str]] = {
    "create_to_children_p50_s": ("<=", 1.0),
    "steady_writes_per_min": ("<=", 0.0),
    "converge_s": ("<=", 30.0),  # at 1000 CRs
    "api_calls_per_cr": ("<=", 12.0),
    "rss_mb": ("<=", 300.0),  # at 1000 CRs
    "rollout_min_ready_fraction": (">=", "rollout_min_ready_target"),
    "rollout_kv_min_ready_fraction": (">=", "rollout_kv_min_ready_target"),
    "rollout_kv_peak_extra_pods": ("<=", 1.0),  # the rollout phase's maxSurge
    "rollout_mixed_pairs": ("<=", 0.0),
    "failover_s": ("<=", 15.0),
}


# api_calls_per_cr grows with each CR's pods (a create each, and budgets from 2 pods on):
# its bound is for the default shape, one prefill and one decode pod.
DEFAULT_SHAPE = {"prefill": 1, "decode": 1}
PER_SHAPE = {"api_calls_per_cr"}


def table(result: dict[str, Any]) -> str:
    lines = [f"{'figure':30} {'value':>10}  target"]
    for key, value in result.items():
        if isinstance(value, dict):
            lines += [f"  {k:28} {v!s:>10}" for k, v in value.items()]
            continue
        mark = ""
        if key in PER_SHAPE and result.get("pods_per_cr", DEFAULT_SHAPE) != DEFAULT_SHAPE:
            mark = "(target at 1P+1D only)"
        elif key in TARGETS:
            op, bound = TARGETS[key]
            limit = float(result[bound]) if isinstance(bound, str) else bound
            met = value <= limit if op == "<=" else value >= limit
            mark = f"{op} {limit:g}  " + ("ok" if met else "MISSED")
        lines.append(f"{key:30} {value!s:>10}  {mark}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    tty = sys.stderr.isatty()
    last = [0.0]

    def progress(text: str) -> None:
        if tty:
            print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)
        elif time.monotonic() - last[0] > 2.0:
            last[0] = time.monotonic()
            print(text, file=sys.stderr, flush=True)

    try:
        result = asyncio.run(run(args, progress))
    except TimeoutError as e:
        print(
            f"\ndisagg bench operator: {e} (raise --timeout or lower --crs/--converge)",
            file=sys.stderr,
        )
        return 1
    if tty:
        print(file=sys.stderr)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0
