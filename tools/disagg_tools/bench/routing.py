"""`disagg bench e2e --routing threshold`: from which prompt length P/D answers first, and
whether the threshold policy takes the right path for every length.

Benchmark script (I/O: starts worker processes and routers, talks HTTP; the figures are
:mod:`.routing_figures`'). One prefill and one decode worker (reference engine) behind three
routers (decode alone, always P/D, threshold): a sweep finds the break-even length, then
every threshold probe is judged against the router of the path it took, and a relay that
drops ``kv_transfer_params`` checks that fallbacks are counted. What each phase sends and
reports: docs/routing.md (the threshold, measured).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_tools.bench.e2e import format_columns, progress, timed_post
from disagg_tools.bench.relay import DROPPED, params_dropper
from disagg_tools.bench.rules.routing_figures import (
    PATHS,
    Probe,
    case_figures,
    crossover,
    interleaved,
    router_figures,
    router_paths,
    worst_during,
)
from disagg_tools.bench.stream import MIN_TOKENS, stream_completion
from disagg_tools.local.children import (
    Child,
    disagg_argv,
    serve_in_thread,
    start_child,
    stop_children,
    wait_ready,
)
from disagg_worker.model.model import BOS, get_preset
from disagg_worker.serve.pd.kv_transfer_params import LOCAL_PARAMS

RECOMPUTED = "disagg_proxy_decode_recomputed_total"
THRESHOLD = ["--disaggregate", "threshold", "--threshold-tokens"]
NEVER = 1 << 30  # a threshold no prompt reaches: decode alone for every request
WARM_UP = 20  # requests per router before each phase (measured: a router's first requests
# ran 5-40% slower than later ones at 4-32 tokens)
WORKER_RECOMPUTED = 'disagg_decode_recomputed_total{reason="no_kv_transfer_params"}'
SETTLE_S = 0.3  # after the last probe: the load request then in flight ends too


def _prompt(n: int, salt: int) -> list[int]:
    return [BOS] + [(i * 37 + 11 + salt * 101) % 256 for i in range(n - 1)]


def _start(
    role: str, env: dict[str, str], log: Path, children: list[Child], core: int | None
) -> str:
    """A worker; ``core``: the one CPU it runs on (its own hardware, as a pod on its own
    node would have), None: unpinned."""
    worker_env = {**env, "DISAGG_ROLE": role, "DISAGG_ENGINE_ID": f"routing-{role}"}
    argv = disagg_argv("worker", "serve")
    if core is not None:
        argv = ["taskset", "-c", str(core), *argv]
    child = start_child(role, argv, worker_env, log)
    children.append(child)
    return f"http://127.0.0.1:{wait_ready(child, 120)['http_port']}"


def _proxy(
    prefill: str,
    decode: str,
    flags: list[str],
    env: dict[str, str],
    log: Path,
    children: list[Child],
) -> str:
    argv = disagg_argv("proxy", "--port", "0", "--prefill", prefill, "--decode", decode)
    child = start_child(f"proxy-{len(children)}", [*argv, *flags], env, log)
    children.append(child)
    return f"http://127.0.0.1:{wait_ready(child, 60)['http_port']}"


def _page(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        return str(resp.read().decode())


class Router:
    """A router under test; a probe's path is what the router's stream headers say
    (``X-Disagg-Path``)."""

    def __init__(self, url: str, gen: int) -> None:
        self.url, self.gen = url, gen

    def probe(self, n: int, salt: int) -> Probe:
        """One fresh prompt of ``n`` tokens, streamed for ``gen`` tokens."""
        body = {"prompt": _prompt(n, salt), "max_tokens": self.gen, "ignore_eos": True}
        start = time.monotonic()
        out = stream_completion(self.url + "/v1/completions", body)
        end = time.monotonic()
        if out.route.get("path") not in PATHS:
            raise RuntimeError(f"router {self.url}: a stream without X-Disagg-Path ({out.route})")
        return Probe(start, end, out.ttft_ms, out.ttlt_ms, out.tokens, out.route["path"])

    def served(self) -> int:
        """Requests the router has answered, by its own counter."""
        return sum(router_paths(_page(self.url)).values())


class Load:
    """``clients`` threads generating on decode alone until stopped; each request's
    (start, end, ms) on the monotonic clock."""

    def __init__(self, decode: str, clients: int, tokens: int) -> None:
        self.stop = threading.Event()
        self.done: list[tuple[float, float, float]] = []
        body = {"prompt": _prompt(64, 99), "max_tokens": tokens, "ignore_eos": True,
                "kv_transfer_params": LOCAL_PARAMS.to_wire()}  # fmt: skip
        self.threads = [
            threading.Thread(target=self._run, args=(decode, body), daemon=True)
            for _ in range(clients)
        ]

    def _run(self, decode: str, body: dict[str, Any]) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            ms, _ = timed_post(decode + "/v1/completions", body)
            self.done.append((start, time.monotonic(), ms))  # list.append is atomic

    def worst(self, probes: list[Probe]) -> list[float]:
        """Per probe, the slowest load request in flight meanwhile."""
        done = list(self.done)
        return [worst_during(done, p.start, p.end) for p in probes]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)


def _turns(routers: dict[str, Router], n: int, repeat: int, salt: int) -> dict[str, list[Probe]]:
    """One warm-up per router at ``n`` tokens, then ``repeat`` fresh prompts per router,
    the routers in turn, in every order (:func:`interleaved`)."""
    for router in routers.values():
        router.probe(n, 0)
    probes: dict[str, list[Probe]] = {k: [] for k in routers}
    for i, name in enumerate(interleaved(list(routers), repeat)):
        probes[name].append(routers[name].probe(n, salt + i // len(routers)))
    time.sleep(SETTLE_S)
    return probes


def warm_up(routers: dict[str, Router], lengths: list[int], count: int) -> None:
    """``count`` requests per router, in turn; each round at the next length measured."""
    for i, name in enumerate(interleaved(list(routers), count)):
        routers[name].probe(lengths[(i // len(routers)) % len(lengths)], 2000 + i)


def sweep(
    routers: dict[str, Router], lengths: list[int], repeat: int, load: Load
) -> dict[int, dict[str, Any]]:
    """Decode alone against P/D at each length: their spreads."""
    out: dict[int, dict[str, Any]] = {}
    for n in lengths:
        progress(f"  {n} tokens: decode alone and P/D in turn")
        probes = _turns(routers, n, repeat, 1)
        out[n] = {}
        for name, done in probes.items():
            out[n].update(router_figures(name, done, load.worst(done)))
    return out


def _case(n: int, routers: dict[str, Router], repeat: int, cut: int, load: Load) -> dict[str, Any]:
    """One length through the three routers in turn (:func:`case_figures`)."""
    progress(f"  {n} tokens: decode alone, always P/D and the threshold router in turn")
    probes = _turns(routers, n, repeat, 1000)
    return case_figures(n, cut, probes, {k: load.worst(v) for k, v in probes.items()})


def _metric(url: str, name: str) -> float:
    """A counter's value (summed over its label sets when ``name`` has none)."""
    text = _page(url)
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def fallbacks(prefill: str, decode: str, count: int, env: dict[str, str], log: Path,
              children: list[Child]) -> dict[str, int]:  # fmt: skip
    """``count`` P/D requests whose kv_transfer_params a relay drops before decode."""
    before = _metric(decode, WORKER_RECOMPUTED)
    relay_app = params_dropper(decode)
    with serve_in_thread(relay_app) as relay:
        proxy = _proxy(prefill, relay, [], env, log, children)
        for i in range(count):
            timed_post(proxy + "/v1/completions", {"prompt": _prompt(100, 50 + i), "max_tokens": 2})
        detected = _metric(proxy, RECOMPUTED)
    return {
        "fallbacks_injected": relay_app[DROPPED]["pd"],
        "fallbacks_detected": int(detected),
        "worker_detected": int(_metric(decode, WORKER_RECOMPUTED) - before),
    }


def _paths(counts: dict[str, int]) -> str:
    return " ".join(f"{'alone' if k == 'decode' else k}:{v}" for k, v in counts.items() if v)


def table(cases: list[dict[str, Any]], threshold: int | None, load: int = 0) -> str:
    cols = [
        ("prompt", "prompt_tokens", "{:>6}"),
        ("decode alone", "ttft_decode_ms", "{:.1f}"),
        ("always P/D", "ttft_pd_ms", "{:.1f}"),
        ("threshold", "ttft_threshold_ms", "{:.1f}"),
        ("load alone", "load_decode_ms", "{:.1f}"),
        ("load P/D", "load_pd_ms", "{:.1f}"),
        ("paths", "paths", "{}"),
        ("vs best", "vs_best", "{:>7.2f}"),
        ("vs path", "vs_path", "{:>7.2f}"),
        ("ok", "ok", "{}"),
    ]
    rows = [{**c, "paths": _paths(c["path_counts"]), "ok": f"{c['within_target']}/{c['probes']}"}
            for c in cases]  # fmt: skip
    busy = f"{load} client(s) generating on decode" if load else "decode idle"
    note = (f"TTFT in ms of streamed requests, median [p10-p90], {busy}; threshold {threshold} "
            "non-cached tokens; paths: the threshold router's probes by the path each took; "
            "vs best = its median / the faster router's; vs path, ok: each of its probes "
            "against the router of the path it took, ok within 10%")  # fmt: skip
    return format_columns(cols, rows, note)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="disagg bench e2e --routing threshold",
                                description=__doc__.split("\n")[0],
                                formatter_class=commandline.HelpFormatter)  # fmt: skip
    p.add_argument("--routing", choices=["threshold"], required=True)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prompts", default="4,8,16,32,64,128,256,512,1024,2048",
                   help="prompt lengths in tokens")  # fmt: skip
    p.add_argument("--repeat", type=int, default=6, help="requests per router and length "
                   "(6: each of the routers' orders once)")  # fmt: skip
    p.add_argument("--gen-tokens", type=int, default=MIN_TOKENS,
                   help=f"tokens each probe streams (at least {MIN_TOKENS})")  # fmt: skip
    p.add_argument("--warm-up", type=int, default=WARM_UP, help="requests per router per phase")
    p.add_argument("--model", default="tiny", help="reference model preset")
    p.add_argument("--load", type=int, default=0, help="clients generating on decode")
    p.add_argument("--load-tokens", type=int, default=16, help="tokens per load request")
    p.add_argument("--threshold", type=int, default=None, help="default: measured here")
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="prefill and decode share every core (default: CPU 0, CPU 1)")  # fmt: skip
    p.add_argument("--fallbacks", type=int, default=5, help="requests whose params are dropped")
    return p


def _measure(args: argparse.Namespace, lengths: list[int], env: dict[str, str], log: Path,
             children: list[Child]) -> dict[str, Any]:  # fmt: skip
    """Start the workers and routers, sweep (unless ``--threshold``), run the cases."""
    cores = (0, 1) if args.pin and (os.cpu_count() or 1) >= 2 else (None, None)
    prefill = _start("prefill", env, log, children, cores[0])
    decode = _start("decode", env, log, children, cores[1])
    pd = _proxy(prefill, decode, [], env, log, children)
    # decode alone through a router too: the client's path, one hop
    alone = _proxy(prefill, decode, [*THRESHOLD, str(NEVER)], env, log, children)
    swept = {"decode": Router(alone, args.gen_tokens), "pd": Router(pd, args.gen_tokens)}
    with Load(decode, args.load, args.load_tokens) as load:
        figures: dict[int, dict[str, Any]] = {}
        if args.threshold is None:  # given, the cases say enough
            warm_up(swept, lengths, args.warm_up)
            figures = sweep(swept, lengths, args.repeat, load)
        threshold = args.threshold if args.threshold is not None else crossover(figures)
        cut = threshold if threshold is not None else lengths[-1] + 1
        routed = _proxy(prefill, decode, [*THRESHOLD, str(cut)], env, log, children)
        routers = {**swept, "threshold": Router(routed, args.gen_tokens)}
        warm_up(routers, lengths, args.warm_up)
        served = {name: r.served() for name, r in routers.items()}
        cases = [_case(n, routers, args.repeat, cut, load) for n in lengths]
    injected = fallbacks(prefill, decode, args.fallbacks, env, log, children)
    swept_figures = {str(n): f for n, f in figures.items()}
    return {"threshold_tokens": threshold, "served_before_cases": served,
            "sweep": swept_figures, "cases": cases, **injected}  # fmt: skip


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.gen_tokens < MIN_TOKENS:
        raise SystemExit(f"--gen-tokens: at least {MIN_TOKENS} (a first token is timed from "
                         "a stream that goes on)")  # fmt: skip
    lengths = sorted(int(x) for x in args.prompts.split(",") if x.strip())
    longest = max([*lengths, 64 + args.load_tokens]) + args.gen_tokens
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    env.update(DISAGG_MODEL=args.model, DISAGG_HTTP_PORT="0", DISAGG_SIDE_CHANNEL_PORT="0",
               DISAGG_NUM_BLOCKS=str((args.load + 2) * (-(-longest // 16) + 2) + 8))  # fmt: skip
    if longest > get_preset(args.model).max_positions:
        raise SystemExit(f"--prompts: {longest} positions exceed the model's")
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="disagg-bench-routing-") as tmp:
        try:
            progress("starting prefill, decode and the proxies ...")
            measured = _measure(args, lengths, env, Path(tmp), children)
        finally:
            stop_children(children)
    result = {"model": args.model, "repeat": args.repeat, "stream_tokens": args.gen_tokens,
              "warm_up": args.warm_up, "load_clients": args.load,
              "load_tokens": args.load_tokens, **measured}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(result["cases"], result["threshold_tokens"], args.load))
        counts = ("threshold_tokens", "fallbacks_injected", "fallbacks_detected", "worker_detected")
        print(", ".join(f"{k} {result[k]}" for k in counts))
    return 0
