"""`python -m disagg_tools.bench.pd_hops --model DIR`: where real vLLM's P/D first token
goes, hop by hop, beside an aggregated engine.

Benchmark script (I/O: starts vLLM engines as ``disagg bench e2e --engine vllm`` does,
talks HTTP). The two sides' requests alternate and each runs alone, so each engine's
histograms grow by that one request: the hops come from them and the router's stream
header (:mod:`disagg_tools.bench.rules.pd_hops`). The figures: docs/benchmarks.md (Where
real vLLM's P/D time goes).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_tools.bench.e2e import progress
from disagg_tools.bench.e2e_vllm import MANIFEST, prompt
from disagg_tools.bench.rules import pd_hops
from disagg_tools.bench.stream import MIN_TOKENS, stream_completion
from disagg_tools.local.stack import Run, launch, start_aggregated, stop_run
from disagg_tools.vllm.rules import judge, metrics
from disagg_worker.serve.pd.evidence import VLLM_KV_SECONDS

NIXL_SECONDS = VLLM_KV_SECONDS.removesuffix("_sum")  # decode's READ time, per request


def _reading(url: str) -> dict[str, tuple[float, float]]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        page = resp.read().decode()
    return metrics.histograms(page, (*pd_hops.HISTOGRAMS, NIXL_SECONDS))


def _timed(url: str, p: list[int], gen: int) -> tuple[float, dict[str, Any]]:
    """One streamed request as ``disagg bench e2e --engine vllm`` times it: its first
    token's time and the router's route headers (empty from an engine)."""
    body = {"prompt": p, "max_tokens": gen, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True, **judge.request_fields()}  # fmt: skip
    got = stream_completion(url + "/v1/completions", body)
    return got.ttft_ms, got.route


def _agg_row(url: str, p: list[int], gen: int) -> dict[str, Any]:
    before = _reading(url)
    ttft, _ = _timed(url, p, gen)
    return {"ttft": ttft, "parts": pd_hops.agg_parts(ttft, pd_hops.grown(before, _reading(url)))}


def _pd_row(run: Run, p: list[int], gen: int) -> dict[str, Any]:
    prefill, decode = run.workers["prefill"][0], run.workers["decode"][0]
    before = {url: _reading(url) for url in (prefill, decode)}
    ttft, route = _timed(run.proxy_url, p, gen)
    after = {url: _reading(url) for url in (prefill, decode)}
    if "prefill_hop_ms" not in route:
        raise pd_hops.HopError(f"the router's answer named no prefill hop: {route}")
    transfer = (after[decode][NIXL_SECONDS][0] - before[decode][NIXL_SECONDS][0]) * 1e3
    grown = {url: pd_hops.grown(before[url], after[url]) for url in (prefill, decode)}
    parts = pd_hops.pd_parts(ttft, route["prefill_hop_ms"], grown[prefill], grown[decode], transfer)
    return {"ttft": ttft, "parts": parts}


def _measure(agg: str, pd: Run, args: argparse.Namespace) -> dict[str, Any]:
    """The two sides' requests alternating (which goes first too), a fresh prompt each."""
    _timed(agg, prompt(args.tokens, 0, 999), MIN_TOKENS)  # warm-up
    _timed(pd.proxy_url, prompt(args.tokens, 0, 998), MIN_TOKENS)
    rows: dict[str, list[dict[str, Any]]] = {"agg": [], "P/D": []}
    for i in range(args.repeat):
        progress(f"  {args.tokens} tokens: {i + 1}/{args.repeat}")
        for side in ("agg", "P/D") if i % 2 == 0 else ("P/D", "agg"):
            p = prompt(args.tokens, 1, i)
            if side == "agg":
                rows[side].append(_agg_row(agg, p, args.gen_tokens))
            else:
                rows[side].append(_pd_row(pd, p, args.gen_tokens))
    return {"prompt_tokens": args.tokens, **pd_hops.profile(rows["agg"], rows["P/D"])}


def _run(args: argparse.Namespace) -> dict[str, Any]:
    runs = {"agg": Run([], {}), "P/D": Run([], {})}
    manifest = Path(args.manifest)
    with tempfile.TemporaryDirectory(prefix="disagg-bench-hops-") as tmp:
        try:
            progress("aggregated vLLM (the decode pod without its KV connector) ...")
            (Path(tmp) / "agg").mkdir()
            agg = start_aggregated(
                manifest, Path(tmp) / "agg", runs["agg"], model=args.model, say=progress
            )
            progress("P/D: prefill and decode vLLM behind the disagg proxy ...")
            (Path(tmp) / "pd").mkdir()
            launch(manifest, Path(tmp) / "pd", Path(tmp) / "pd", runs["P/D"], model=args.model,
                   say=progress)  # fmt: skip
            return _measure(agg, runs["P/D"], args)
        finally:
            for r in runs.values():
                stop_run(r)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="python -m disagg_tools.bench.pd_hops",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--model", required=True, help="local model dir (disagg model tiny-llama DIR)")
    p.add_argument("--manifest", default=str(MANIFEST), help="a vLLM manifest to run")
    p.add_argument("--tokens", type=int, default=512, help="prompt length in tokens")
    p.add_argument("--repeat", type=int, default=12, help="fresh prompts per side")
    p.add_argument("--gen-tokens", type=int, default=32,
                   help=f"tokens each timed request streams (at least {MIN_TOKENS})")  # fmt: skip
    args = p.parse_args(argv)
    if args.gen_tokens < MIN_TOKENS:
        p.error(f"--gen-tokens: at least {MIN_TOKENS}")
    print(json.dumps(_run(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
