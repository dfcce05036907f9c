"""`disagg bench e2e --routing threshold`: from which prompt length P/D pays for itself,
and whether the threshold policy takes the right path for every length.

Benchmark script (I/O: starts worker processes and routers, talks HTTP). One prefill and
one decode worker (reference engine), each on a CPU of its own (``--no-pin``: sharing
both), optionally kept busy as a serving decode is (``--load`` clients generating on
decode alone all along). For each prompt length, medians over ``--repeat`` fresh prompts
(``max_tokens: 1``, client wall time) through three routers:

- ``decode``: a threshold router no prompt reaches: decode alone prefills it;
- ``pd``: an always-P/D router: prefill computes it, decode reads its KV;
- ``threshold``: a threshold router at the threshold measured here (or ``--threshold``),
  with the path each request took;

and, under load, the slowest of decode's other requests in flight meanwhile
(``load_*_ms``): a prompt that decode prefills delays them. A path's cost is the TTFT plus
that delay; the threshold is the break-even length (:func:`crossover`).

Then ``--fallbacks`` requests go through a relay that drops kv_transfer_params before
decode (what a misconfigured sidecar does): ``fallbacks_detected`` is what the router's
``disagg_proxy_decode_recomputed_total`` counted of them, ``worker_detected`` the decode's
``disagg_decode_recomputed_total``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from disagg_worker.bench.e2e import format_columns, progress, timed_post
from disagg_worker.bench.relay import params_dropper
from disagg_worker.engine.model import BOS, get_preset
from disagg_worker.serve.localrun import (
    Child,
    disagg_argv,
    serve_in_thread,
    start_child,
    stop_children,
    wait_ready,
)
from disagg_worker.serve.proxy.hops import LOCAL_PARAMS

RECOMPUTED = "disagg_proxy_decode_recomputed_total"
THRESHOLD = ["--disaggregate", "threshold", "--threshold-tokens"]
NEVER = 1 << 30  # a threshold no prompt reaches: decode alone for every request
TOLERANCE = 0.10  # the target: within 10% of the path the request stands for
WARM_UP = 20  # requests through the threshold router before its cases (measured: its first
# requests ran 5-40% slower than the swept routers' at 4-32 tokens)
WORKER_RECOMPUTED = 'disagg_decode_recomputed_total{reason="no_kv_transfer_params"}'


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


class Load:
    """``clients`` threads generating on decode alone until stopped; each request's
    (start, end, ms) on the monotonic clock."""

    def __init__(self, decode: str, clients: int, tokens: int) -> None:
        self.stop = threading.Event()
        self.done: list[tuple[float, float, float]] = []
        body = {"prompt": _prompt(64, 99), "max_tokens": tokens, "ignore_eos": True,
                "kv_transfer_params": LOCAL_PARAMS}  # fmt: skip
        self.threads = [
            threading.Thread(target=self._run, args=(decode, body), daemon=True)
            for _ in range(clients)
        ]

    def _run(self, decode: str, body: dict[str, Any]) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            ms, _ = timed_post(decode + "/v1/completions", body)
            self.done.append((start, time.monotonic(), ms))  # list.append is atomic

    def worst_during(self, t0: float, t1: float) -> float:
        """The slowest load request that was in flight at some moment of [t0, t1] (0 when
        none ended yet)."""
        return max((ms for s, e, ms in list(self.done) if s < t1 and e > t0), default=0.0)

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)


Probe = tuple[float, float, float, str]  # start, end, TTFT ms, the path taken
SETTLE_S = 0.3  # after the last probe: the load request then in flight ends too


def _probe(url: str, n: int, salt: int) -> Probe:
    """One fresh prompt of ``n`` tokens: (start, end, TTFT ms, the path it took)."""
    body: dict[str, Any] = {"prompt": _prompt(n, salt), "max_tokens": 1}
    start = time.monotonic()
    ms, out = timed_post(url + "/v1/completions", body)
    path = out["disagg"]["proxy"]["path"]
    return start, time.monotonic(), ms, path


def _summary(probes: list[Probe], load: Load) -> tuple[float, float, list[str]]:
    """Medians of the probes' TTFT and of the slowest load request each overlapped; the
    paths they took."""
    worst = [load.worst_during(start, end) for start, end, _, _ in probes]
    ttft = statistics.median(ms for _, _, ms, _ in probes)
    return ttft, statistics.median(worst), [p for *_, p in probes]


def _ttft(url: str, n: int, repeat: int, load: Load) -> tuple[float, float, list[str]]:
    """:func:`_summary` of ``repeat`` fresh prompts of ``n`` tokens through ``url``."""
    probes = [_probe(url, n, i + 1) for i in range(repeat)]
    time.sleep(SETTLE_S)
    return _summary(probes, load)


def sweep(
    decode: str, pd: str, lengths: list[int], repeat: int, load: Load
) -> dict[int, dict[str, float]]:
    out = {}
    for n in lengths:
        progress(f"  {n} tokens: decode alone vs P/D")
        _ttft(decode, n, 1, load), _ttft(pd, n, 1, load)  # warm-up
        alone, alone_load, _ = _ttft(decode, n, repeat, load)
        both, both_load, _ = _ttft(pd, n, repeat, load)
        out[n] = {"ttft_decode_ms": alone, "ttft_pd_ms": both,
                  "load_decode_ms": alone_load, "load_pd_ms": both_load}  # fmt: skip
    return out


def cost(figures: dict[str, float], path: str) -> float:
    """What a path costs at one length: the request's TTFT plus the slowest request it
    delayed on decode (a prompt prefilled by decode stalls the requests it serves)."""
    return figures[f"ttft_{path}_ms"] + figures[f"load_{path}_ms"]


def crossover(figures: dict[int, dict[str, float]]) -> int | None:
    """The break-even length: the shortest from which, at every longer length measured,
    the work P/D takes off decode (decode alone's cost there minus its cost at the shortest
    length: the prompt's prefill, which decode's other requests would wait for) is at
    least what P/D adds to the request (its cost minus decode alone's; negative when P/D
    is faster). None when it never is."""
    if not figures:
        return None
    base = cost(figures[min(figures)], "decode")
    found = None
    for n in sorted(figures, reverse=True):
        saved = cost(figures[n], "decode") - base
        added = cost(figures[n], "pd") - cost(figures[n], "decode")
        if saved < added:
            break
        found = n
    return found


def _metric(url: str, name: str) -> float:
    """A counter's value (summed over its label sets when ``name`` has none)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def fallbacks(prefill: str, decode: str, count: int, env: dict[str, str], log: Path,
              children: list[Child]) -> dict[str, int]:  # fmt: skip
    """``count`` P/D requests whose kv_transfer_params a relay drops before decode."""
    before = _metric(decode, WORKER_RECOMPUTED)
    with serve_in_thread(params_dropper(decode)) as relay:
        proxy = _proxy(prefill, relay, [], env, log, children)
        for i in range(count):
            timed_post(proxy + "/v1/completions", {"prompt": _prompt(100, 50 + i), "max_tokens": 2})
        detected = _metric(proxy, RECOMPUTED)
    return {
        "fallbacks_injected": count,
        "fallbacks_detected": int(detected),
        "worker_detected": int(_metric(decode, WORKER_RECOMPUTED) - before),
    }


def table(cases: list[dict[str, Any]], threshold: int | None, load: int = 0) -> str:
    cols = [
        ("prompt", "prompt_tokens", "{:>6}"),
        ("decode alone", "ttft_decode_ms", "{:>12.1f}"),
        ("always P/D", "ttft_pd_ms", "{:>10.1f}"),
        ("threshold", "ttft_threshold_ms", "{:>9.1f}"),
        ("load alone", "load_decode_ms", "{:>10.1f}"),
        ("load P/D", "load_pd_ms", "{:>8.1f}"),
        ("path", "path", "{:>6}"),
        ("vs best", "vs_best", "{:>7.2f}"),
        ("vs path", "vs_path", "{:>7.2f}"),
        ("ok", "within_target", "{!s:>5}"),
    ]
    busy = f"{load} client(s) generating on decode" if load else "decode idle"
    note = (f"TTFT in ms, medians, {busy}; threshold {threshold} non-cached tokens; vs best "
            "= threshold TTFT / the faster of the others; ok: within 10% of its path")  # fmt: skip
    return format_columns(cols, cases, note)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="disagg bench e2e --routing threshold",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("--routing", choices=["threshold"], required=True)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prompts", default="4,8,16,32,64,128,256,512,1024,2048")
    p.add_argument("--repeat", type=int, default=6, help="requests per router and length "
                   "(6: each of the routers' orders once)")  # fmt: skip
    p.add_argument("--model", default="tiny", help="reference model preset")
    p.add_argument("--load", type=int, default=0, help="clients generating on decode")
    p.add_argument("--load-tokens", type=int, default=16, help="tokens per load request")
    p.add_argument("--threshold", type=int, default=None, help="default: measured here")
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help="prefill and decode share every core (default: CPU 0, CPU 1)")  # fmt: skip
    p.add_argument("--fallbacks", type=int, default=5, help="requests whose params are dropped")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    lengths = sorted(int(x) for x in args.prompts.split(",") if x.strip())
    longest = max([*lengths, 64 + args.load_tokens])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    env.update(DISAGG_MODEL=args.model, DISAGG_HTTP_PORT="0", DISAGG_SIDE_CHANNEL_PORT="0",
               DISAGG_NUM_BLOCKS=str((args.load + 2) * (-(-longest // 16) + 2) + 8))  # fmt: skip
    if longest > get_preset(args.model).max_positions:
        raise SystemExit(f"--prompts: {longest} tokens exceed the model's positions")
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="disagg-bench-routing-") as tmp:
        log = Path(tmp)
        try:
            progress("starting prefill, decode and the proxies ...")
            cores = (0, 1) if args.pin and (os.cpu_count() or 1) >= 2 else (None, None)
            prefill = _start("prefill", env, log, children, cores[0])
            decode = _start("decode", env, log, children, cores[1])
            pd = _proxy(prefill, decode, [], env, log, children)
            # decode alone through a router too: the client's path, one hop
            alone = _proxy(prefill, decode, [*THRESHOLD, str(NEVER)], env, log, children)
            with Load(decode, args.load, args.load_tokens) as load:
                given = args.threshold is not None  # no sweep then: the cases say enough
                figures = {} if given else sweep(alone, pd, lengths, args.repeat, load)
                threshold = args.threshold if given else crossover(figures)
                cut = threshold if threshold is not None else lengths[-1] + 1
                routed = _proxy(prefill, decode, [*THRESHOLD, str(cut)], env, log, children)
                routers = {"decode": alone, "pd": pd, "threshold": routed}
                for i in range(WARM_UP):  # the new router as warm as the swept ones
                    _probe(routed, lengths[i % len(lengths)], 2000 + i)
                cases = [_case(n, routers, args.repeat, cut, load) for n in lengths]
            injected = fallbacks(prefill, decode, args.fallbacks, env, log, children)
        finally:
            stop_children(children)
    result = {"model": args.model, "repeat": args.repeat, "load_clients": args.load,
              "load_tokens": args.load_tokens, "threshold_tokens": threshold,
              "sweep": {str(n): {k: round(v, 2) for k, v in f.items()}
                        for n, f in figures.items()},
              "cases": cases, **injected}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(cases, threshold, args.load))
        print(", ".join(f"{k} {v}" for k, v in injected.items()))
    return 0


def _case(n: int, routers: dict[str, str], repeat: int, cut: int, load: Load) -> dict[str, Any]:
    """One length through the three routers, request by request in turn, in every order
    (so drift on this host, and what one request leaves running, fall on all three
    alike): medians of TTFT and of the load's worst delay."""
    progress(f"  {n} tokens: decode alone, always P/D and the threshold router in turn")
    for url in routers.values():
        _probe(url, n, 0)  # warm-up
    probes: dict[str, list[Probe]] = {k: [] for k in routers}
    # every order of the routers in turn: each follows each other one equally often (a
    # P/D request leaves work behind on both workers that slows whatever comes next)
    orders = itertools.cycle(itertools.permutations(routers))
    for i in range(repeat):
        for name in next(orders):
            probes[name].append(_probe(routers[name], n, 1000 + i))
    time.sleep(SETTLE_S)
    case: dict[str, Any] = {"prompt_tokens": n, "threshold_tokens": cut}
    for name, done in probes.items():
        ttft, worst, _ = _summary(done, load)
        case[f"ttft_{name}_ms"], case[f"load_{name}_ms"] = round(ttft, 2), round(worst, 2)
    paths = [p for *_, p in probes["threshold"]]
    path = max(set(paths), key=paths.count)
    # the target: within TOLERANCE of the path it stands for (decode alone below the
    # threshold, always-P/D from it on)
    ms, ref = case["ttft_threshold_ms"], case["ttft_decode_ms" if n < cut else "ttft_pd_ms"]
    best = min(case["ttft_decode_ms"], case["ttft_pd_ms"])
    case.update(path=path, vs_best=round(ms / best, 3), vs_path=round(ms / ref, 3),
                within_target=ms <= (1.0 + TOLERANCE) * ref)  # fmt: skip
    return case
