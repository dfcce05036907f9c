"""`disagg bench e2e --engine vllm`: real vLLM, aggregated vs prefill → NIXL → decode.

Benchmark script (I/O: starts vLLM engines, talks HTTP). Both sides run the operator's
rendered pods for examples/vllm-cpu.yaml as ``disagg up`` runs them (each engine on its own
core): the aggregated engine is the decode pod without its KV connector, on the decode
engine's core; the P/D pair runs behind the disagg proxy. All three engines run at once
and the two sides' requests alternate (which goes first too), so each figure is compared
with the other side's at the same moment of a host whose speed drifts by tens of percent
within minutes (measured here: two runs a few minutes apart differed by 1.5x). Every
request uses a fresh prompt (no prefix-cache hits on either side), greedy.

- ``ttft_*_ms``: client wall time of a ``max_tokens: 1`` request (P/D: through the proxy,
  both hops).
- ``decode_tps_*``: (gen - 1) / (last chunk - first token's chunk) of one streamed
  gen-token request, client side: vLLM reports no per-request decode time.
- ``transfer_ms``: vLLM's own "Avg xfer time" from decode's KV-transfer metrics over the
  case's requests; ``transfer_count`` how many it counted.
- ``tokens_match``: the gen-token greedy answers of both sides are equal, token for token,
  for every request of the case; ``logprobs_gap``: the judge's largest difference of the
  top-5 logprobs of one more gen-token request per case, position by position
  (:mod:`disagg_worker.vllm.judge`; ``logprobs_match`` when within its tolerance): equal
  tokens from a degenerate model can hide partly wrong KV, its logprobs cannot.
- breakdown of ``ttft_disagg_ms``: prefill hop and decode hop as the proxy times them; the
  rest is the client ↔ proxy HTTP. Inside the decode hop, vLLM's own request phases on
  the decode engine (means over the case's requests, from its ``/metrics``):
  ``decode_kv_wait_ms`` (its queue phase: from taking the request to the step that runs
  it, the NIXL read and the steps around it included) and ``decode_first_step_ms`` (its
  prefill phase: the one-token step after the read); the rest of the hop is vLLM's API
  server and HTTP. ``prefill_step_ms`` / ``agg_step_ms``: the prefill phase of the
  prefill engine and of the aggregated engine (the prompt's forward pass).
- ``engine_idle_cpu_cores``: each engine's process tree, idle after start-up and warm-up,
  all three in one window: CPU seconds over a :data:`IDLE_WINDOW_S` window / wall seconds
  (NIXL's progress thread and vLLM's queue readers spin a core each unless the engine-idle
  shim is on: docs/derivation.md).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from disagg_operator.api import ROLES, KVTransfer
from disagg_operator.local import vllm
from disagg_operator.local.stack import Run, launch, start_aggregated
from disagg_worker.bench.e2e import IDLE_WINDOW_S, format_columns, idle_cpu, progress, timed_post
from disagg_worker.serve.localrun import stop_children
from disagg_worker.vllm import judge, metrics

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "examples" / "vllm-cpu.yaml"
VOCAB = 1020  # tiny-llama's ordinary token ids: 4 .. 1023


def prompt(tokens: int, case: int, i: int) -> list[int]:
    """A prompt no other request shares a first block with (BOS, then distinct ids)."""
    return [0] + [4 + (case * 7919 + i * 104729 + j * 37) % VOCAB for j in range(tokens - 1)]


def _stream(url: str, body: dict[str, Any]) -> tuple[float, float, list[int]]:
    """A streamed request: (ms to the first token's chunk, ms to the end, token ids)."""
    data = json.dumps({**body, "stream": True}).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first = 0.0
    tokens: list[int] = []
    with urllib.request.urlopen(req, timeout=300) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            ids = choices[0].get("token_ids") or []
            if ids and not tokens:
                first = (time.perf_counter() - start) * 1000.0
            tokens += ids
    return first, (time.perf_counter() - start) * 1000.0, tokens


def _request(url: str, n: int, case: int, i: int, repeat: int, gen: int) -> dict[str, Any]:
    """Repeat ``i`` of a case on one side: a ttft request and a gen-token streamed request,
    each on a fresh prompt of ``n`` tokens."""
    p = prompt(n, case, i)
    ttft, first = timed_post(url, {"prompt": p, "max_tokens": 1, "temperature": 0})
    q = prompt(n, case, repeat + i)
    body = {"prompt": q, "max_tokens": gen, "temperature": 0, "ignore_eos": True}
    first_ms, full_ms, tokens = _stream(url, {**body, "return_token_ids": True})
    proxy = first.get("disagg", {}).get("proxy", {})
    return {"ttft": ttft, "first": first_ms, "full": full_ms, "tokens": tokens, "proxy": proxy}


def _judge(url: str, n: int, case: int, repeat: int, gen: int) -> Any:
    """The judge's request: a fresh prompt, the same on both sides, with top logprobs."""
    body = {"prompt": prompt(n, case, 2 * repeat), "max_tokens": gen, "temperature": 0}
    _, answer = timed_post(url, {**body, "ignore_eos": True, **judge.request_fields()})
    return judge.tops_of(answer["choices"][0])


def _phases(run: Run) -> dict[str, dict[str, tuple[float, float]]]:
    """Each engine's request-phase histograms, by role (vLLM's /metrics)."""
    out = {}
    for role, urls in run.workers.items():
        with urllib.request.urlopen(urls[0] + "/metrics", timeout=30) as resp:
            out[role] = metrics.histograms(resp.read().decode())
    return out


def _phase_means(
    before: dict[str, dict[str, tuple[float, float]]],
    after: dict[str, dict[str, tuple[float, float]]],
) -> dict[str, float | None]:
    """``<role>_queue_ms`` and ``<role>_step_ms``: the mean queue and prefill phase of the
    requests each engine served between two readings."""
    out = {}
    for role in after:
        for key, name in (("queue", metrics.QUEUE_TIME), ("step", metrics.PREFILL_TIME)):
            out[f"{role}_{key}_ms"] = metrics.mean_ms(before[role], after[role], name)
    return out


Sides = dict[str, dict[int, list[dict[str, Any]]]]


def _measure(
    runs: dict[str, Run], urls: dict[str, str], lengths: list[int], args: argparse.Namespace
) -> tuple[Sides, dict[str, dict[int, dict[str, Any]]]]:
    """Per prompt length, the two sides' requests interleaved (which goes first alternates),
    so both meet the same moment of this host; then each side's vLLM phases and the judge's
    request, and decode's transfer figures."""
    results: Sides = {side: {} for side in runs}
    figures: dict[str, dict[int, dict[str, Any]]] = {side: {} for side in runs}
    pd = runs["P/D"]
    log = pd.logs[pd.names[pd.workers["decode"][0]]]
    for case, n in enumerate(lengths):
        since = vllm.log_size(log)
        for url in urls.values():
            timed_post(url, {"prompt": prompt(n, case, 999), "max_tokens": 1})  # warm-up
        # vLLM's phases of the timed requests alone (a first request and the judge's, with
        # its logprobs, take steps of their own)
        before = {side: _phases(run) for side, run in runs.items()}
        for i in range(args.repeat):
            progress(f"  {n} tokens: {i + 1}/{args.repeat}")
            order = list(urls) if i % 2 == 0 else list(urls)[::-1]
            for side in order:
                row = _request(urls[side], n, case, i, args.repeat, args.gen_tokens)
                results[side].setdefault(n, []).append(row)
        for side, run in runs.items():
            figures[side][n] = _phase_means(before[side], _phases(run))
            results[side][n][0]["tops"] = _judge(urls[side], n, case, args.repeat, args.gen_tokens)
        expect = 2 * args.repeat + 2  # warm-up, repeats, the judge's request
        figures["P/D"][n].update(vllm.transfer_figures(log, since, wait_s=25.0, expect=expect))
    return results, figures


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def _tps(rows: list[dict[str, Any]], gen: int) -> float:
    """Tokens per second after the first, within each streamed request."""
    return float(statistics.median((gen - 1) / ((r["full"] - r["first"]) / 1e3) for r in rows))


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def cases(
    agg: dict[int, list[dict[str, Any]]],
    pd: dict[int, list[dict[str, Any]]],
    figures: dict[int, dict[str, Any]],
    gen: int,
    agg_figures: dict[int, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    out = []
    for n in agg:
        a, d, f, g = agg[n], pd[n], figures.get(n, {}), (agg_figures or {}).get(n, {})
        prefill_hop = statistics.median(r["proxy"].get("prefill_hop_ms", 0.0) for r in d)
        decode_hop = statistics.median(r["proxy"].get("decode_hop_ms", 0.0) for r in d)
        ttft_agg, ttft_pd = _median(a, "ttft"), _median(d, "ttft")
        gap = judge.gap(d[0]["tops"], a[0]["tops"])
        out.append(
            {
                "prompt_tokens": n,
                "ttft_agg_ms": round(ttft_agg, 2),
                "ttft_disagg_ms": round(ttft_pd, 2),
                "overhead_ms": round(ttft_pd - ttft_agg, 2),
                "prefill_hop_ms": round(prefill_hop, 2),
                "decode_hop_ms": round(decode_hop, 2),
                # vLLM's own request phases (means over the case's requests)
                "agg_step_ms": _ms(g.get("decode_step_ms")),
                "prefill_step_ms": _ms(f.get("prefill_step_ms")),
                "decode_kv_wait_ms": _ms(f.get("decode_queue_ms")),
                "decode_first_step_ms": _ms(f.get("decode_step_ms")),
                "transfer_ms": round(f.get("Avg xfer time (ms)", 0.0), 3),
                "transfer_count": int(f.get(metrics.COUNT, 0)),
                "transfer_failed": int(f.get(metrics.FAILED, 0)),
                "transfer_kb": round(f.get("Avg MB per transfer", 0.0) * 1e3, 1),
                "transfer_descriptors": round(f.get("Avg number of descriptors", 0.0), 1),
                "decode_tps_agg": round(_tps(a, gen), 1),
                "decode_tps_disagg": round(_tps(d, gen), 1),
                "tokens_match": all(x["tokens"] == y["tokens"] for x, y in zip(a, d, strict=True)),
                "logprobs_gap": round(gap, 4) if math.isfinite(gap) else None,  # None: apart
                "logprobs_match": gap <= judge.TOLERANCE,
            }
        )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("prompt", "prompt_tokens", "{:>6}"),
        ("ttft agg", "ttft_agg_ms", "{:>9.1f}"),
        ("ttft P/D", "ttft_disagg_ms", "{:>9.1f}"),
        ("overhead", "overhead_ms", "{:>9.1f}"),
        ("prefill hop", "prefill_hop_ms", "{:>11.1f}"),
        ("decode hop", "decode_hop_ms", "{:>10.1f}"),
        ("kv wait", "decode_kv_wait_ms", "{:>8.1f}"),
        ("1st step", "decode_first_step_ms", "{:>9.1f}"),
        ("transfer", "transfer_ms", "{:>9.3f}"),
        ("xfers", "transfer_count", "{:>6}"),
        ("kB", "transfer_kb", "{:>7.0f}"),
        ("tok/s agg", "decode_tps_agg", "{:>10.1f}"),
        ("tok/s P/D", "decode_tps_disagg", "{:>10.1f}"),
        ("match", "tokens_match", "{!s:>6}"),
        ("logprobs", "logprobs_match", "{!s:>8}"),
    ]
    return format_columns(
        cols,
        rows,
        "times in ms, medians. transfer = vLLM's own average NIXL READ time (decode's KV "
        "Transfer metrics); decode hop = decode engine incl. its READ and its first step; "
        "kv wait and 1st step = decode's own request phases (means: queue = from taking "
        "the request to its first scheduled step, the read included; prefill = that step).",
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="disagg bench e2e --engine vllm", description=__doc__.split("\n")[0]
    )
    p.add_argument("--engine", choices=["vllm"], default="vllm")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prompts", default="16,128,512", help="prompt lengths in tokens")
    p.add_argument("--repeat", type=int, default=20, help="fresh prompts per length and side")
    p.add_argument("--gen-tokens", type=int, default=32, help="tokens per throughput request")
    p.add_argument("--model", required=True, help="local model dir (disagg model tiny-llama DIR)")
    p.add_argument("--manifest", default=str(MANIFEST))
    p.add_argument(
        "--keep-cpu-binding",
        action="store_true",
        help="P/D engines keep the rendered CPU binding (nobind) instead of a core each",
    )
    p.add_argument(
        "--nixl-delay-us",
        type=int,
        help="spec.kvTransfer.nixlProgressDelayMicroseconds for this run (0: NIXL's own "
        "spinning progress thread; default: the manifest's)",
    )
    p.add_argument(
        "--queue-poll-us",
        type=int,
        help="spec.<role>.queuePollMicroseconds of both pools for this run (0: vLLM's own "
        "sched_yield loop on its message queue; default: the manifest's)",
    )
    p.add_argument(
        "--keep-cpu-affinity",
        choices=["true", "false"],
        help="spec.<role>.keepCpuAffinity of both pools for this run (false: vLLM's NIXL "
        "worker pin moves each engine's model thread to the host's highest CPU; default: "
        "the manifest's)",
    )
    args = p.parse_args(argv)
    lengths = [int(x) for x in args.prompts.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="disagg-bench-manifest-") as folder:
        keep = None if args.keep_cpu_affinity is None else args.keep_cpu_affinity == "true"
        manifest, idle = _manifest(
            Path(args.manifest), args.nixl_delay_us, args.queue_poll_us, Path(folder), keep
        )
        return _bench(args, lengths, manifest, idle)


NIXL_DELAY_DEFAULT = KVTransfer.model_fields["nixl_progress_delay_microseconds"].default


def _manifest(
    path: Path, delay: int | None, poll: int | None, folder: Path, keep: bool | None = None
) -> tuple[Path, dict[str, Any]]:
    """The manifest to run (with the settings given written in) and the engine-idle
    settings it runs with (None: the pool's derived default)."""
    body = yaml.safe_load(path.read_text())
    spec = body["spec"]
    kv = spec.setdefault("kvTransfer", {})
    if delay is not None:
        kv["nixlProgressDelayMicroseconds"] = delay
    for role in ROLES:
        if poll is not None:
            spec[role]["queuePollMicroseconds"] = poll
        if keep is not None:
            spec[role]["keepCpuAffinity"] = keep
    settings = {
        "nixl_progress_delay_us": int(kv.get("nixlProgressDelayMicroseconds", NIXL_DELAY_DEFAULT)),
        "queue_poll_us": {
            role: spec[role].get("queuePollMicroseconds", "derived") for role in ROLES
        },
        "keep_cpu_affinity": {role: spec[role].get("keepCpuAffinity", "derived") for role in ROLES},
    }
    if delay is None and poll is None and keep is None:
        return path, settings
    out = folder / path.name
    out.write_text(yaml.safe_dump(body))
    return out, settings


def _bench(
    args: argparse.Namespace, lengths: list[int], manifest: Path, idle: dict[str, Any]
) -> int:
    runs = {"agg": Run([], {}), "P/D": Run([], {})}
    with tempfile.TemporaryDirectory(prefix="disagg-bench-vllm-") as tmp:
        try:
            progress("aggregated vLLM (the decode pod without its KV connector) ...")
            (Path(tmp) / "agg").mkdir()
            agg = start_aggregated(
                manifest, Path(tmp) / "agg", runs["agg"], model=args.model, say=progress
            )
            progress("P/D: prefill and decode vLLM behind the disagg proxy ...")
            (Path(tmp) / "pd").mkdir()
            launch(manifest, Path(tmp) / "pd", Path(tmp) / "pd", runs["P/D"], model=args.model,
                   keep_cpu_binding=args.keep_cpu_binding, say=progress)  # fmt: skip
            progress(f"  engines idle for {IDLE_WINDOW_S:g} s ...")
            engines = [
                (side, c) for side, r in runs.items() for c in r.children
                if c.name in r.names.values()
            ]  # fmt: skip
            labels = [f"{side} {c.name}" for side, c in engines]
            cores = idle_cpu([c for _, c in engines], IDLE_WINDOW_S, labels)
            idle_by_side: dict[str, dict[str, float]] = {side: {} for side in runs}
            for (side, c), label in zip(engines, labels, strict=True):
                idle_by_side[side][c.name] = cores[label]
            pd = runs["P/D"].proxy_url
            urls = {"agg": agg + "/v1/completions", "P/D": pd + "/v1/completions"}
            results, figures = _measure(runs, urls, lengths, args)
        finally:
            stop_children([c for r in runs.values() for c in r.children])
    rows = cases(results["agg"], results["P/D"], figures["P/D"], args.gen_tokens, figures["agg"])
    result = {
        "engine": "vllm",
        "manifest": str(manifest),
        "repeat": args.repeat,
        "cpu_binding": "rendered" if args.keep_cpu_binding else "a core per engine",
        **idle,
        "engine_idle_cpu_cores": idle_by_side,
        "cases": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(rows))
        print(f"idle engines (cores, {IDLE_WINDOW_S:g} s window): {idle_by_side}")
    return 0
