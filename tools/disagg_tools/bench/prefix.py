"""`disagg bench prefix`: how well the router knows what each vLLM decode holds, from its KV
events or from what it sent there, and what that does to time to first token.

Benchmark tool (starts two real vLLM engines and three routers; figures from
:mod:`.rules.prefix`, pure). Each engine keeps a small prefix cache (``--cache-blocks``
blocks of ``--block`` tokens) and publishes its KV events; the routers, all three in front
of both engines, send every request to a decode alone: ``events`` (prefix index from the
engines' events), ``approximate`` (from what it sent) and ``round-robin`` (no prefix
affinity). A multi-turn chat trace (each turn the last one plus the answer and a new user
message; fixed seed; each router its own conversations) is sent one request at a time, the
routers in turn, so every request's truth is the chosen engine's prefix-cache hits counter
grown over it. The engines' cache is shared by the three routers' conversations: evictions
one router causes are seen in the others' events, never in their approximate index.

    disagg bench prefix --model DIR [--turns 6] [--conversations 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_tools.bench.rules import prefix as rules
from disagg_tools.bench.stream import stream_completion
from disagg_tools.local import serving
from disagg_tools.local.children import Child, disagg_argv, start_child, stop_children
from disagg_tools.vllm.rules.metrics import counter

HITS, QUERIES = "vllm:prefix_cache_hits", "vllm:prefix_cache_queries"
SIDES = ("events", "approximate", "round-robin")
HASH_SEED = "0"


def vllm_argv(model: str, port: int, events_port: int, args: argparse.Namespace) -> list[str]:
    events = {"enable_kv_cache_events": True, "publisher": "zmq",
              "endpoint": f"tcp://*:{events_port}", "topic": f"kv@{port}@bench"}  # fmt: skip
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--served-model-name", "bench", "--port", str(port), "--host", "127.0.0.1",
        "--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager",
        "--block-size", str(args.block), "--num-gpu-blocks-override", str(args.cache_blocks),
        "--prefix-caching-hash-algo", "sha256_cbor", "--kv-events-config", json.dumps(events),
    ]  # fmt: skip


def router_argv(side: str, decodes: list[str], endpoints: list[str], block: int) -> list[str]:
    """A router whose every request goes to decode alone (a threshold no prompt reaches),
    so the three differ only in how they pick the decode and what they predict."""
    argv = ["--prefill", "http://127.0.0.1:9", "--decode", *decodes, "--port", "0",
            "--disaggregate", "threshold", "--threshold-tokens", "1000000000"]  # fmt: skip
    if side == "round-robin":
        return [*argv, "--policy", "round-robin"]
    argv += ["--policy", "least-loaded", "--decode-prefix-cache", "--block-tokens", str(block)]
    if side == "approximate":
        return argv
    pairs = [f"{u}={e}" for u, e in zip(decodes, endpoints, strict=True)]
    return [*argv, "--prefix-index", "events", "--kv-hash-seed", HASH_SEED,
            *[a for p in pairs for a in ("--kv-events-endpoint", p)]]  # fmt: skip


def page(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text: str = resp.read().decode()
    return text


def counters(decodes: list[str]) -> dict[str, tuple[float, float]]:
    return {u: (counter(p, HITS), counter(p, QUERIES)) for u, p in ((u, page(u)) for u in decodes)}


def settled(decodes: list[str], before: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """The counters once the engine that served has counted the request (its queries grew;
    vLLM updates them from its output loop, a moment after the answer)."""
    end = time.monotonic() + 2.0
    while True:
        after = counters(decodes)
        if any(after[u][1] > before[u][1] for u in decodes) or time.monotonic() > end:
            return after
        time.sleep(0.02)


def one(router: str, decodes: list[str], messages: list[dict[str, str]], gen: int) -> Any:
    before = counters(decodes)
    # ignore_eos: every answer is gen tokens long (a random model may end at once)
    body = {"model": "bench", "messages": messages, "max_tokens": gen, "temperature": 0,
            "ignore_eos": True}  # fmt: skip
    got = stream_completion(router + "/v1/chat/completions", body)
    after = settled(decodes, before)
    grew = {u: after[u][0] - before[u][0] for u in decodes}
    served = got.route.get("decode_url")
    if served not in grew:  # no header: the engine whose queries grew
        served = max(decodes, key=lambda u: after[u][1] - before[u][1])
    return got, served, int(grew[served])


def start(name: str, argv: list[str], env: dict[str, str], logs: Path, run: list[Child]) -> Child:
    child = start_child(name, argv, env, logs)
    run.append(child)
    return child


def run_trace(args: argparse.Namespace, routers: dict[str, str], decodes: list[str]) -> Any:
    """Every turn of every router's conversations, routers interleaved."""
    rng = {s: random.Random(args.seed + i) for i, s in enumerate(SIDES)}
    chats = {s: rules.conversations(args.seed + 10 * i, args.conversations, args.words)
             for i, s in enumerate(SIDES)}  # fmt: skip
    rows: list[rules.Row] = []
    for turn in range(args.turns):
        for c in range(args.conversations):
            for side in SIDES[turn % 3 :] + SIDES[: turn % 3]:  # each goes first in turn
                got, served, hits = one(routers[side], decodes, chats[side][c], args.gen)
                route = got.route
                predicted = route.get("cached_tokens") if side != "round-robin" else None
                rows.append(rules.Row(side, turn, served, int(route.get("prompt_tokens", 0)),
                                      predicted, hits, got.ttft_ms))  # fmt: skip
                chats[side][c] = rules.next_turn(chats[side][c], got.text, rng[side], args.words)
    return rows


def tokenize_ms(decode: str, messages: list[dict[str, str]], repeat: int = 20) -> float:
    """The median time of the router's one extra call, vLLM's POST /tokenize."""
    body = json.dumps({"model": "bench", "messages": messages}).encode()
    times = []
    for _ in range(repeat):
        req = urllib.request.Request(decode + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
        times.append((time.perf_counter() - t0) * 1000)
    return rules.percentile(times, 50)


def bench(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    logs = Path(tempfile.mkdtemp(prefix="bench-prefix-"))
    ports = serving.free_ports()
    children: list[Child] = []
    try:
        decodes, endpoints = [], []
        for i in range(2):
            port, events = next(ports), next(ports)
            env = {**os.environ, "PYTHONHASHSEED": HASH_SEED, "VLLM_CPU_KVCACHE_SPACE": "1",
                   "VLLM_CPU_OMP_THREADS_BIND": str(i % len(serving.host_cores()))}  # fmt: skip
            child = start(f"decode-{i}", vllm_argv(args.model, port, events, args), env, logs,
                          children)  # fmt: skip
            decodes.append(f"http://127.0.0.1:{port}")
            endpoints.append(f"tcp://127.0.0.1:{events}")
            serving.wait_healthy(child, decodes[-1], 300, say)
        routers = {}
        for side in SIDES:
            port = next(ports)
            argv = router_argv(side, decodes, endpoints, args.block)
            argv[argv.index("--port") + 1] = str(port)
            child = start(f"router-{side}", disagg_argv("proxy", *argv), dict(os.environ), logs,
                          children)  # fmt: skip
            routers[side] = f"http://127.0.0.1:{port}"
            serving.wait_healthy(child, routers[side], 60, say)
        say(f"  engines {decodes}, routers {routers}; logs in {logs}")
        rows = run_trace(args, routers, decodes)
        cost = tokenize_ms(decodes[0], rules.conversations(args.seed, 1, args.words)[0])
    finally:
        stop_children(children)
    return {
        "block": args.block, "cache_blocks": args.cache_blocks, "turns": args.turns,
        "conversations": args.conversations, "seed": args.seed, "tokenize_p50_ms": round(cost, 2),
        "figures": rules.figures(rows, args.block), "rows": [r.__dict__ for r in rows],
    }  # fmt: skip


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="disagg bench prefix",
        description=__doc__.split("\n")[0],
        formatter_class=commandline.HelpFormatter,
    )
    p.add_argument("--model", required=True, help="a local checkpoint (disagg model tiny-llama)")
    p.add_argument("--block", type=int, default=32, help="KV block size (CPU: a multiple of 32)")
    p.add_argument("--cache-blocks", type=int, default=40, help="each engine's KV blocks")
    p.add_argument("--turns", type=int, default=6, help="turns of each conversation")
    p.add_argument("--conversations", type=int, default=3, help="per router")
    p.add_argument("--words", type=int, default=12, help="words per user message")
    p.add_argument("--gen", type=int, default=16, help="tokens each answer generates")
    p.add_argument("--seed", type=int, default=0, help="the trace's random seed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = bench(args, print)
    if args.json:
        print(json.dumps(result, indent=1))
    print(rules.table(result["figures"]))
    print(f"vLLM /tokenize (the router's extra call): {result['tokenize_p50_ms']} ms median")
    return 0
