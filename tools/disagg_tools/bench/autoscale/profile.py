"""``disagg bench profile``: what one pod of each pool does, measured, as the planner reads it.

Benchmark step (I/O: worker processes on 127.0.0.1 and streamed requests through the
proxy). It starts one reference prefill worker, one decode worker and the proxy (each start
timed: ``start_s``), then measures the two curves the planner sizes by
(:class:`~disagg_operator.planning.autoscale.Profile`): prefill's prompt tokens/s against
TTFT p90, decode's sequences in flight against ITL p90, with its capacity and its most
output tokens/s. How each is measured: docs/autoscaling.md (Profiles).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_contract.config import WorkerConfig
from disagg_tools.bench.stream import MIN_TOKENS, StreamError, percentile, stream_completion
from disagg_tools.local.children import Child, disagg_argv, start_child, stop_children, wait_ready

BOS = 1


def _prompt(n: int, salt: int) -> list[int]:
    """A prompt of ``n`` tokens no other request shares (no cached prefix helps it)."""
    return [BOS] + [(i * 37 + 11 + salt * 101) % 256 for i in range(n - 1)]


def start(log_dir: Path, children: list[Child]) -> tuple[str, dict[str, float]]:
    """Prefill, decode and the proxy; (the proxy's completions URL, seconds each worker
    took from its start to ready)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    urls, took = {}, {}
    for role in ("prefill", "decode"):
        env = {**base, "DISAGG_ROLE": role, "DISAGG_ENGINE_ID": f"profile-{role}",
               "DISAGG_HTTP_PORT": "0", "DISAGG_SIDE_CHANNEL_PORT": "0"}  # fmt: skip
        t0 = time.monotonic()
        child = start_child(role, disagg_argv("worker", "serve"), env, log_dir)
        children.append(child)
        urls[role] = f"http://127.0.0.1:{wait_ready(child, 120)['http_port']}"
        took[role] = time.monotonic() - t0
    argv = disagg_argv(
        "proxy", "--port", "0", "--prefill", urls["prefill"], "--decode", urls["decode"]
    )
    proxy = start_child("proxy", argv, base, log_dir)
    children.append(proxy)
    return f"http://127.0.0.1:{wait_ready(proxy, 60)['http_port']}/v1/completions", took


def prefill_point(url: str, rate: float, seconds: float, prompt: int, seed: int) -> dict[str, Any]:
    """One rate, open loop: (prompt tokens/s arrived, TTFT p90 s, failures)."""
    rng = random.Random(seed)
    times, t = [], 0.0
    while t < seconds:
        t += rng.expovariate(rate)
        times.append(t)
    ttfts: list[float] = []
    failed = 0
    start = time.monotonic()

    def one(k: int) -> float | None:
        wait = start + times[k] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        body = {"prompt": _prompt(prompt, seed * 10_000 + k), "max_tokens": MIN_TOKENS,
                "ignore_eos": True}  # fmt: skip
        try:
            return stream_completion(url, body, timeout_s=120).ttft_ms / 1000
        except (OSError, StreamError):
            return None

    with ThreadPoolExecutor(max_workers=64) as pool:
        for got in pool.map(one, range(len(times))):
            if got is None:
                failed += 1
            else:
                ttfts.append(got)
    arrived = len(times) * prompt / seconds
    p90 = percentile(ttfts, 90) if ttfts else math.inf
    return {"load": round(arrived, 1), "ttft_p90_s": round(p90, 4), "failed": failed}


def decode_point(url: str, clients: int, seconds: float, output: int) -> dict[str, Any]:
    """``clients`` closed-loop streams for ``seconds``: ITL p90 s over their requests."""
    itls: list[float] = []
    tokens = [0]
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        k = 0
        while time.monotonic() < stop:
            body = {"prompt": _prompt(16, n * 1000 + k), "max_tokens": output, "ignore_eos": True}
            k += 1
            try:
                got = stream_completion(url, body, timeout_s=120)
            except (OSError, StreamError):
                continue
            tokens[0] += got.tokens
            if got.tokens > 1:
                itls.append((got.ttlt_ms - got.ttft_ms) / 1000 / (got.tokens - 1))

    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    p90 = percentile(itls, 90) if itls else math.inf
    per_s = tokens[0] / seconds
    return {"load": clients, "itl_p90_s": round(p90, 5), "requests": len(itls),
            "output_tokens_per_s": round(per_s, 1)}  # fmt: skip


def measure(args: argparse.Namespace, progress: Callable[[str], None]) -> dict[str, Any]:
    """Start the workers and the proxy here, sweep both curves through the proxy."""
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="disagg-profile-") as tmp:
        try:
            url, took = start(Path(tmp), children)
            prefill, decode = sweep(url, args, progress)
        finally:
            stop_children(children)
    return result_of(args, prefill, decode, took)


def sweep(
    url: str, args: argparse.Namespace, progress: Callable[[str], None]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both curves' points through the completions ``url`` (module docstring)."""
    prefill: list[dict[str, Any]] = []
    rate = args.first_rate
    while True:
        progress(f"prefill: {rate:.2f} requests/s for {args.seconds:g} s")
        point = prefill_point(url, rate, args.seconds, args.prompt_tokens, len(prefill))
        prefill.append(point)
        if point["failed"] or point["ttft_p90_s"] > args.ttft_stop_s:
            break
        rate *= args.step
    decode: list[dict[str, Any]] = []
    clients = 1
    while clients <= args.max_clients:
        progress(f"decode: {clients} streams for {args.seconds:g} s")
        decode.append(decode_point(url, clients, args.seconds, args.output_tokens))
        clients *= 2
    return prefill, decode


def result_of(
    args: argparse.Namespace,
    prefill: list[dict[str, Any]],
    decode: list[dict[str, Any]],
    took: dict[str, float],
) -> dict[str, Any]:
    """The figures of a sweep, with each pool's start-up ``took`` seconds."""
    fields = WorkerConfig.model_fields  # the decode worker runs with these defaults
    blocks, block_size = int(fields["num_blocks"].default), int(fields["block_size"].default)
    per_sequence = math.ceil((16 + args.output_tokens) / block_size)
    return {
        "engine": "reference",
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "prefill": {
            "curve": _rising(
                [[p["load"], p["ttft_p90_s"]] for p in prefill if math.isfinite(p["ttft_p90_s"])]
            ),
            "start_s": round(took["prefill"], 2),
            "points": prefill,
        },
        "decode": {
            "curve": [[p["load"], p["itl_p90_s"]] for p in decode if math.isfinite(p["itl_p90_s"])],
            "start_s": round(took["decode"], 2),
            "capacity": blocks // per_sequence,
            # what the pod gave at most: an engine that decodes one request at a time keeps
            # its ITL flat and queues the rest, so the curve alone would not show its limit
            "max_tokens_per_s": max(p["output_tokens_per_s"] for p in decode),
            "points": decode,
        },
    }


def _rising(points: list[list[float]]) -> list[list[float]]:
    """The points by load (the load is what arrived, and a Poisson sample of a higher rate
    may bring less than the last one did); of equal loads, the first kept."""
    out: list[list[float]] = []
    for point in sorted(points, key=lambda p: p[0]):
        if not out or point[0] > out[-1][0]:
            out.append(point)
    return out


def table(result: dict[str, Any]) -> str:
    lines = [f"prefill (start {result['prefill']['start_s']} s): prompt tokens/s → TTFT p90"]
    lines += [f"  {p['load']:>10.0f}  {p['ttft_p90_s'] * 1000:>8.1f} ms  failed {p['failed']}"
              for p in result["prefill"]["points"]]  # fmt: skip
    decode = result["decode"]
    lines.append(f"decode (start {decode['start_s']} s, KV {decode['capacity']} sequences): "
                 "sequences → ITL p90")  # fmt: skip
    lines += [f"  {p['load']:>10}  {p['itl_p90_s'] * 1000:>8.2f} ms  "
              f"{p['output_tokens_per_s']:>8.1f} tokens/s  ({p['requests']} requests)"
              for p in decode["points"]]  # fmt: skip
    return "\n".join(lines)


def file_of(result: dict[str, Any]) -> dict[str, Any]:
    """What ``--out`` writes of a measurement: the planner's fields, the points left out."""
    keep: dict[str, Any] = {"percentile": 90}  # the curves' latencies are p90
    for r in ("prefill", "decode"):
        keep[r] = {k: v for k, v in result[r].items() if k != "points"}
    return keep


def defaults() -> argparse.Namespace:
    """The options' defaults (for a caller that measures without a command line)."""
    return _parser().parse_args([])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench profile",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", help="write the profile `disagg bench autoscale --profile` reads")
    p.add_argument("--prompt-tokens", type=int, default=512, help="tokens per prompt")
    p.add_argument("--output-tokens", type=int, default=64, help="tokens per answer")
    p.add_argument("--seconds", type=float, default=10.0, help="each point's length")
    p.add_argument("--first-rate", type=float, default=1.0, help="requests/s of the first point")
    p.add_argument("--step", type=float, default=2.0, help="rate multiplier between points")
    p.add_argument("--ttft-stop-s", type=float, default=2.0, help="stop past this TTFT p90")
    p.add_argument("--max-clients", type=int, default=32, help="decode streams at most")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    result = measure(args, lambda text: print(text, file=sys.stderr, flush=True))
    if args.out:
        Path(args.out).write_text(json.dumps(file_of(result), indent=2) + "\n")
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0
