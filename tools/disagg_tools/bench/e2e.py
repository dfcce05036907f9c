"""`disagg bench e2e`: time to first and to last token and decode throughput, aggregated
vs disaggregated, with the disaggregated request broken down hop by hop.

Benchmark script (I/O: starts worker processes, talks HTTP). Aggregated: one ``role:
both`` worker; disaggregated: proxy → prefill worker → NIXL READ → decode worker, all on
127.0.0.1. The paths alternate within each round so both meet the same moment of a noisy
host. Rounds, figures and options: docs/local-run.md (Benchmark); the figures:
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_contract.presets import tp_problem
from disagg_tools.bench.stream import MIN_TOKENS, Streamed, spread, stream_completion
from disagg_tools.local.children import (
    Child,
    disagg_argv,
    free_port_range,
    loopback_group_env,
    start_child,
    stop_children,
    wait_ready,
)
from disagg_worker.model.model import BOS, get_preset
from disagg_worker.serve.rules.timings import FIELD as TIMINGS
from disagg_worker.serve.rules.timings import ProxyFigures, Timings

KEYS = (
    "prompt_tokens",
    "ttft_agg_ms",
    "ttft_disagg_ms",
    "ttlt_agg_ms",
    "ttlt_disagg_ms",
    "overhead_ms",
    "transfer_ms",
    "decode_tps_agg",
    "decode_tps_disagg",
    "stream_tokens",
    "tokens_match",
)


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries the figures)."""
    print(message, file=sys.stderr, flush=True)


def timed_post(url: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """POST JSON; (client wall time in ms, the JSON answer)."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as resp:
        out = json.load(resp)
    return (time.perf_counter() - start) * 1000.0, out


def _prompt(n: int) -> list[int]:
    return [BOS] + [(i * 37 + 11) % 256 for i in range(n - 1)]


def start_stack(
    log_dir: Path,
    env: dict[str, str],
    children: list[Child],
    tp: dict[str, int] | None = None,
    nodes: int = 1,
) -> tuple[str, str, str | None]:
    """Start the aggregated worker and the P/D stack (``tp``: ranks per role, default 1;
    ``nodes``: pods the prefill's ranks span); return (agg URL, proxy URL, and with
    ``nodes`` above 1 the URL of the proxy to the same P/D with its prefill in one pod)."""
    urls = {}
    roles = ["both", "prefill", "decode", *(["prefill-one"] if nodes > 1 else [])]
    for role in roles:
        worker_env = {**env, "DISAGG_ROLE": role.split("-")[0], "DISAGG_ENGINE_ID": f"bench-{role}"}
        worker_env["DISAGG_TP_SIZE"] = str((tp or {}).get(role.split("-")[0], 1))
        if role == "prefill" and nodes > 1:
            base = free_port_range((tp or {}).get("prefill", 1) + 2)
            worker_env |= loopback_group_env(nodes, 0, base)
        child = start_child(role, disagg_argv("worker", "serve"), worker_env, log_dir)
        children.append(child)
        if role == "prefill" and nodes > 1:  # the group's other pods
            for node in range(1, nodes):
                pod_env = {**worker_env, **loopback_group_env(nodes, node, base)}
                name = f"prefill-pod-{node}"
                children.append(start_child(name, disagg_argv("worker", "serve"), pod_env, log_dir))
    for child in children:
        if child.name.startswith("prefill-pod-"):
            continue  # serves nothing: its leader's ready line says the group formed
        urls[child.name] = f"http://127.0.0.1:{wait_ready(child, 120)['http_port']}"
    proxies = [("proxy", "prefill")] + ([("proxy-one", "prefill-one")] if nodes > 1 else [])
    front = {}
    for name, prefill in proxies:
        argv = disagg_argv("proxy", "--port", "0", "--prefill", urls[prefill])
        proxy = start_child(name, [*argv, "--decode", urls["decode"]], env, log_dir)
        children.append(proxy)
        front[name] = f"http://127.0.0.1:{wait_ready(proxy, 60)['http_port']}/v1/completions"
    return urls["both"] + "/v1/completions", front["proxy"], front.get("proxy-one")


@dataclass(frozen=True)
class Round:
    """One round of a case: each path's streamed request, each path's whole answer, and
    the whole P/D request's client wall time (ms)."""

    agg: Streamed
    pd: Streamed
    agg_whole: dict[str, Any]
    pd_whole: dict[str, Any]
    pd_whole_ms: float
    one: Streamed | None = None  # the P/D with its prefill in one pod (--prefill-nodes)
    one_whole: dict[str, Any] | None = None


def _round(agg: str, pd: str, body: dict[str, Any], turn: int, one: str | None = None) -> Round:
    """Every path streamed, in an order that rotates with ``turn`` (P/D's first on odd
    turns), then every path whole."""
    paths = [agg, pd, *([one] if one else [])]
    shift = turn % len(paths)
    order = paths[shift:] + paths[:shift] if one else (paths[::-1] if turn % 2 else paths)
    streamed = {url: stream_completion(url, body) for url in order}
    whole = timed_post(agg, body)[1]
    ms, split = timed_post(pd, body)
    if one is None:
        return Round(streamed[agg], streamed[pd], whole, split, ms)
    return Round(
        streamed[agg], streamed[pd], whole, split, ms, streamed[one], timed_post(one, body)[1]
    )


def measure(
    agg: str, pd: str, prompt_tokens: int, repeat: int, gen: int, one: str | None = None
) -> dict[str, Any]:
    """One case: ``repeat`` rounds after a warm-up one (:func:`case_figures`)."""
    body = {"prompt": _prompt(prompt_tokens), "max_tokens": gen, "ignore_eos": True}
    _round(agg, pd, body, 0, one)  # warm-up
    rounds = []
    for i in range(repeat):
        progress(f"  {prompt_tokens} tokens: request {i + 1}/{repeat}")
        rounds.append(_round(agg, pd, body, i, one))
    return case_figures(prompt_tokens, rounds)


def _breakdown(r: Round) -> dict[str, float]:
    """The whole P/D request hop by hop (module docstring), with both paths' tok/s."""
    d = _timings(r.pd_whole)
    pre, proxy = d.prefill or Timings(), d.proxy or ProxyFigures()
    hop, transfer = _had(proxy.prefill_hop_ms, "proxy.prefill_hop_ms"), _had(d.transfer_ms)
    first, decode = _had(d.first_step_ms), _had(d.decode_ms)
    return {
        "prefill_hop_ms": hop,
        "prefill_compute_ms": _had(pre.prompt_ms) + _had(pre.first_step_ms),
        "transfer_ms": transfer,
        "decode_first_step_ms": first,
        "rest_ms": r.pd_whole_ms - hop - transfer - first - decode,
        "decode_tps_agg": _tps(r.agg_whole),
        "decode_tps_disagg": _tps(r.pd_whole),
    }


def _timings(answer: dict[str, Any]) -> Timings:
    return Timings.from_wire(answer.get(TIMINGS))


def _had(value: float | None, what: str = "a timing") -> float:
    """A figure the reference worker and the proxy always report."""
    if value is None:
        raise ValueError(f"the P/D answer's disagg object lacks {what}")
    return value


def _ids(answer: dict[str, Any]) -> list[int]:
    return list(answer["choices"][0]["token_ids"])


def case_figures(prompt_tokens: int, rounds: Sequence[Round]) -> dict[str, Any]:
    """A case's figures from its rounds: every timing's spread, the bytes moved, the
    fewest tokens a stream delivered, and whether every P/D answer matched."""
    rows: dict[str, list[float]] = {
        "ttft_agg_ms": [r.agg.ttft_ms for r in rounds],
        "ttft_disagg_ms": [r.pd.ttft_ms for r in rounds],
        "ttlt_agg_ms": [r.agg.ttlt_ms for r in rounds],
        "ttlt_disagg_ms": [r.pd.ttlt_ms for r in rounds],
        "overhead_ms": [r.pd.ttft_ms - r.agg.ttft_ms for r in rounds],
    }
    for r in rounds:
        for key, value in _breakdown(r).items():
            rows.setdefault(key, []).append(value)
    ones = [r.one for r in rounds if r.one is not None]
    if len(ones) == len(rounds):  # the one-pod P/D beside the spanning one
        rows["ttft_onepod_ms"] = [one.ttft_ms for one in ones]
        rows["spanning_overhead_ms"] = [
            r.pd.ttft_ms - one.ttft_ms for r, one in zip(rounds, ones, strict=True)
        ]
    case: dict[str, Any] = {"prompt_tokens": prompt_tokens}
    case.update({k: spread(v) for k, v in rows.items()})
    case["transfer_bytes"] = max(_timings(r.pd_whole).transfer_bytes or 0.0 for r in rounds)
    case["stream_tokens"] = min(min(r.agg.tokens, r.pd.tokens) for r in rounds)
    case["tokens_match"] = all(
        _ids(r.agg_whole) == _ids(r.pd_whole) == r.agg.token_ids == r.pd.token_ids
        and (r.one is None or r.one.token_ids == r.agg.token_ids == _ids(r.one_whole or {}))
        for r in rounds
    )
    return case


IDLE_WINDOW_S = 10.0


def _stats() -> dict[int, tuple[int, float]]:
    """Every process now: pid → (parent pid, CPU seconds user + system)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        out[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    return out


def tree_cpu_s(pid: int, stats: dict[int, tuple[int, float]]) -> float:
    """CPU seconds of ``pid`` and all its descendants (an engine's workers included)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats.get(current, (0, 0.0))[1]
        todo += [p for p, (parent, _) in stats.items() if parent == current]
    return total


def idle_cpu(
    children: list[Child], seconds: float = IDLE_WINDOW_S, labels: list[str] | None = None
) -> dict[str, float]:
    """CPU cores each idle process tree burns (user + system over a quiet window), by
    ``labels`` (default: the children's names): the background cost, e.g. NIXL progress
    threads, that engines compete with on shared cores. A process that ended counts its
    CPU until it did."""
    keys = labels or [c.name for c in children]
    first = _stats()
    before = [tree_cpu_s(c.proc.pid, first) for c in children]
    t0 = time.monotonic()
    time.sleep(seconds)
    wall, last = time.monotonic() - t0, _stats()
    return {
        key: round((tree_cpu_s(c.proc.pid, last) - spent) / wall, 3)
        for key, c, spent in zip(keys, children, before, strict=True)
    }


def _tps(out: dict[str, Any]) -> float:
    steps = len(out["choices"][0]["token_ids"]) - 1
    return steps / (_had(_timings(out).decode_ms) / 1000.0) if steps > 0 else 0.0


def table(cases: list[dict[str, Any]]) -> str:
    cols = [
        ("prompt", "prompt_tokens", "{:>6}"),
        ("ttft agg", "ttft_agg_ms", "{:.1f}"),
        ("ttft P/D", "ttft_disagg_ms", "{:.1f}"),
        ("overhead", "overhead_ms", "{:.1f}"),
        ("ttlt agg", "ttlt_agg_ms", "{:.1f}"),
        ("ttlt P/D", "ttlt_disagg_ms", "{:.1f}"),
        ("prefill hop", "prefill_hop_ms", "{:.1f}"),
        ("transfer", "transfer_ms", "{:.2f}"),
        ("dec 1st", "decode_first_step_ms", "{:.1f}"),
        ("rest", "rest_ms", "{:.1f}"),
        ("tok/s agg", "decode_tps_agg", "{:.0f}"),
        ("tok/s P/D", "decode_tps_disagg", "{:.0f}"),
        ("match", "tokens_match", "{!s:>6}"),
    ]
    if cases and "spanning_overhead_ms" in cases[0]:  # --prefill-nodes
        cols[3:3] = [
            ("ttft 1 pod", "ttft_onepod_ms", "{:.1f}"),
            ("spanning", "spanning_overhead_ms", "{:.1f}"),
        ]
    return format_columns(
        cols,
        cases,
        "times in ms, median [p10-p90]; ttft/ttlt: first/last token of a streamed request. "
        "Breakdown of the whole P/D request: rest = HTTP + JSON + proxy + queueing; dec 1st "
        "= decode computing the first token (0: the prefill's first_token was used).",
    )


def _cell(fmt: str, value: Any) -> str:
    """A value as ``fmt`` renders it; a spread as its median [p10-p90]; None a dash."""
    if value is None:
        return "-"
    if isinstance(value, dict) and set(value) == {"median", "p10", "p90"}:
        median, p10, p90 = (fmt.format(value[k]).strip() for k in ("median", "p10", "p90"))
        return f"{median} [{p10}-{p90}]"
    return str(fmt.format(value)).strip()


def format_columns(cols: list[tuple[str, str, str]], rows: list[dict[str, Any]], note: str) -> str:
    """A right-aligned table: ``cols`` are (heading, key, format), one line per row, then
    ``note``; each column is as wide as its heading, its widest value, and what its format
    renders of 0 (a missing value, None, is a dash; a spread, median [p10-p90])."""
    cells = [[_cell(fmt, row[key]) for _, key, fmt in cols] for row in rows]
    widths = [
        max(len(name), len(fmt.format(0)), *(len(line[i]) for line in cells))
        for i, (name, _, fmt) in enumerate(cols)
    ]
    head = "  ".join(f"{name:>{w}}" for (name, _, _), w in zip(cols, widths, strict=True))
    lines = [head, "-" * len(head)]
    lines += ["  ".join(f"{c:>{w}}" for c, w in zip(line, widths, strict=True)) for line in cells]
    lines.append(note)
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench e2e",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prompts", default="128,512,2048", help="prompt lengths in tokens")
    p.add_argument("--repeat", type=int, default=5, help="timed rounds per prompt length")
    p.add_argument("--gen-tokens", type=int, default=32,
                   help=f"tokens per request, streamed and whole (>= {MIN_TOKENS})")  # fmt: skip
    p.add_argument("--model", default="tiny", help="reference model preset")
    p.add_argument("--prefill-tp", type=int, default=1, help="prefill rank processes")
    p.add_argument("--decode-tp", type=int, default=1, help="decode rank processes")
    p.add_argument(
        "--prefill-nodes",
        type=int,
        default=1,
        help="pods the prefill's ranks span (a LeaderWorkerSet group); above 1 the same "
        "P/D with its prefill in one pod is measured beside it",
    )
    p.add_argument(
        "--idle-s",
        type=float,
        default=IDLE_WINDOW_S,
        help="the quiet window engine_idle_cpu_cores is measured over",
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.gen_tokens < MIN_TOKENS:
        print(f"--gen-tokens: at least {MIN_TOKENS} (a first token is timed from a stream that "
              "goes on)", file=sys.stderr)  # fmt: skip
        return 2
    lengths = [int(x) for x in args.prompts.split(",") if x.strip()]
    spec = get_preset(args.model)
    longest = max(lengths) + args.gen_tokens
    if longest > spec.max_positions:
        print(f"--prompts: {longest} positions exceed {spec.max_positions}", file=sys.stderr)
        return 2
    for flag, size in (("--prefill-tp", args.prefill_tp), ("--decode-tp", args.decode_tp)):
        why = tp_problem(spec, size)
        if why is not None:
            print(f"{flag}: {why}", file=sys.stderr)
            return 2
    if args.prefill_nodes < 1 or args.prefill_tp % args.prefill_nodes:
        print(f"--prefill-nodes: {args.prefill_tp} prefill ranks do not split evenly over "
              f"{args.prefill_nodes} pods", file=sys.stderr)  # fmt: skip
        return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    env.update(
        DISAGG_MODEL=args.model,
        DISAGG_NUM_BLOCKS=str(2 * (-(-longest // 16)) + 8),
        DISAGG_HTTP_PORT="0",
        DISAGG_SIDE_CHANNEL_PORT="0",
    )
    children: list[Child] = []
    with tempfile.TemporaryDirectory(prefix="disagg-bench-") as tmp:
        try:
            progress("starting aggregated worker, prefill, decode and proxy ...")
            tp = {"prefill": args.prefill_tp, "decode": args.decode_tp}
            agg, pd, one = start_stack(Path(tmp), env, children, tp, args.prefill_nodes)
            idle = idle_cpu(children, args.idle_s)
            cases = [measure(agg, pd, n, args.repeat, args.gen_tokens, one) for n in lengths]
        finally:
            stop_children(children)
    result = {
        "model": args.model,
        "repeat": args.repeat,
        "prefill_tp": args.prefill_tp,
        "decode_tp": args.decode_tp,
        "prefill_nodes": args.prefill_nodes,
        "engine_idle_cpu_cores": idle,
        "cases": cases,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(cases))
        print("idle CPU (cores) per process: " + ", ".join(f"{k} {v}" for k, v in idle.items()))
    return 0
