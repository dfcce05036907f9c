"""`disagg bench e2e --engine vllm`: real vLLM, aggregated vs prefill → NIXL → decode.

Benchmark script (I/O: starts vLLM engines, talks HTTP). Both sides run the operator's
rendered pods for examples/vllm-cpu.yaml as ``disagg up`` runs them. All three engines run
at once and the two sides' requests alternate, because this host's speed drifts by tens of
percent within minutes (two runs a few minutes apart differed by 1.5x). Each P/D request is
proven to have read its KV, and the judge's logprobs catch partly wrong KV that equal
tokens from a degenerate model hide. ``--mode both`` runs a pull pair and a push pair
(spec.kvTransfer.mode) beside the aggregated engine, all three sides interleaved. The figures
and their meaning: docs/vllm.md (Figures).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from disagg_contract import commandline
from disagg_operator.api import ROLES
from disagg_operator.engines.vllm.fields import KVTransferFields
from disagg_tools.bench.e2e import IDLE_WINDOW_S, format_columns, idle_cpu, progress
from disagg_tools.bench.rules import e2e_vllm_figures as figures
from disagg_tools.bench.stream import MIN_TOKENS, stream_completion
from disagg_tools.local.stack import Run, launch, start_aggregated, stop_run
from disagg_tools.vllm.rules import judge, metrics
from disagg_worker.serve.pd.evidence import VLLM_KV_BYTES, VLLM_KV_SECONDS, vllm_sources

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "examples" / "vllm-cpu.yaml"
VOCAB = 1020  # tiny-llama's ordinary token ids: 4 .. 1023
# decode's NIXL histograms whose sums a request's READ grows (vLLM 0.32.0 and 0.33.0,
# nixl/stats.py NixlPromMetrics), and its failed-transfer counter
NIXL_HISTOGRAMS = {
    "xfer_s": VLLM_KV_SECONDS.removesuffix("_sum"),
    "bytes": VLLM_KV_BYTES.removesuffix("_sum"),
    "descriptors": "vllm:nixl_num_descriptors",
}
NIXL_FAILED = "vllm:nixl_num_failed_transfers"
# The pool whose engine posts the transfers, so whose NIXL histograms a request grows: the
# decode READs in pull mode, the prefill WRITEs in push mode (vLLM's NixlPushConnector).
TRANSFER_POOL = {"pull": "decode", "push": "prefill"}
MODES = ("pull", "push")


def prompt(tokens: int, case: int, i: int) -> list[int]:
    """A prompt no other request shares a first block with (BOS, then distinct ids)."""
    return [0] + [4 + (case * 7919 + i * 104729 + j * 37) % VOCAB for j in range(tokens - 1)]


def _request(url: str, p: list[int], gen: int) -> dict[str, Any]:
    """One timed request: ``gen`` tokens streamed on prompt ``p``, with the judge's logprobs."""
    body = {"prompt": p, "max_tokens": gen, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True, **judge.request_fields()}  # fmt: skip
    got = stream_completion(url, body)
    return {"ttft": got.ttft_ms, "ttlt": got.ttlt_ms, "tokens": got.tokens,
            "token_ids": got.token_ids, "tops": judge.tops_of({"logprobs": {
                "top_logprobs": got.top_logprobs}}), "route": got.route}  # fmt: skip


def _page(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        return str(resp.read().decode())


def _counted(page: str, transfers: str) -> dict[str, Any]:
    """What a decode engine's /metrics ``page`` says of the KV it loaded so far (prompt
    tokens by source), and the transfer pool's page ``transfers`` of its NIXL histograms'
    sums and failed transfers (:data:`TRANSFER_POOL`)."""
    nixl = metrics.histograms(transfers, NIXL_HISTOGRAMS.values())
    out: dict[str, Any] = {"sources": vllm_sources(page)}
    out.update({key: nixl[name][0] for key, name in NIXL_HISTOGRAMS.items()})
    out["failed"] = metrics.counter(transfers, NIXL_FAILED)
    return out


def _grown(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The growth of :func:`_counted` from one reading to the next."""
    out = {k: after[k] - before[k] for k in (*NIXL_HISTOGRAMS, "failed")}
    s0, s1 = before["sources"], after["sources"]
    out["sources"] = {k: v - s0.get(k, 0.0) for k, v in s1.items()} if s0 and s1 else {}
    return out


def _pd_request(url: str, pools: dict[str, str], p: list[int], gen: int) -> dict[str, Any]:
    """A timed P/D request with the engines' counters read around it (``pools``: the
    decode's URL and the transfer pool's, by key "decode" and "transfers")."""

    def counted() -> dict[str, Any]:
        page = _page(pools["decode"])
        same = pools["transfers"] == pools["decode"]
        return _counted(page, page if same else _page(pools["transfers"]))

    before = counted()
    row = _request(url, p, gen)
    row["kv"] = _grown(before, counted())
    return row


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
) -> list[dict[str, Any]]:
    """Per prompt length, the two sides' requests interleaved (which goes first alternates),
    so both meet the same moment of this host; each engine's vLLM phases over the timed
    requests alone (read after the warm-up)."""
    rows = []
    pools = {side: _pools(run, mode) for side, (run, mode) in _pairs(runs, args.mode).items()}
    for c, n in enumerate(lengths):
        for url in urls.values():  # warm-up
            _request(url, prompt(n, c, 999), MIN_TOKENS)
        before = {side: _phases(run) for side, run in runs.items()}
        sides: dict[str, list[dict[str, Any]]] = {side: [] for side in urls}
        for i in range(args.repeat):
            progress(f"  {n} tokens: {i + 1}/{args.repeat}")
            for side in interleaved(list(urls), i):
                p = prompt(n, c, i)
                if side in pools:
                    sides[side].append(_pd_request(urls[side], pools[side], p, args.gen_tokens))
                else:
                    sides[side].append(_request(urls[side], p, args.gen_tokens))
        phases = {side: _phase_means(before[side], _phases(run)) for side, run in runs.items()}
        for side, (_, mode) in _pairs(runs, args.mode).items():
            row = figures.case(n, sides["agg"], sides[side], phases[side], phases["agg"])
            rows.append({"mode": mode, **row})
    return rows


def interleaved(sides: list[str], i: int) -> list[str]:
    """The order of the sides' requests in round ``i``: each side goes first in turn (two
    sides: one order, then the reverse), so none always meets the host's same moment."""
    if len(sides) == 2:
        return sides if i % 2 == 0 else sides[::-1]
    k = i % len(sides)
    return sides[k:] + sides[:k]


def pd_sides(mode: str) -> dict[str, str]:
    """The P/D sides a run of ``--mode`` measures (side name → transfer mode); one mode keeps
    the name "P/D"."""
    if mode == "both":
        return {f"P/D {m}": m for m in MODES}
    return {"P/D": mode}


def _pairs(runs: dict[str, Run], mode: str) -> dict[str, tuple[Run, str]]:
    return {side: (runs[side], m) for side, m in pd_sides(mode).items()}


def _pools(run: Run, mode: str) -> dict[str, str]:
    """The decode's URL and that of the pool whose engine posts the transfers."""
    return {"decode": run.workers["decode"][0], "transfers": run.workers[TRANSFER_POOL[mode]][0]}


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("mode", "mode", "{!s:>4}"),
        ("prompt", "prompt_tokens", "{:>6}"),
        ("read", "kv_read", "{:>4}"),
        ("recomp", "recomputed", "{:>6}"),
        ("ttft agg", "ttft_agg_ms", "{:>6.1f}"),
        ("ttft P/D", "ttft_disagg_ms", "{:>6.1f}"),
        ("overhead", "overhead_ms", "{:>6.1f}"),
        ("prefill hop", "prefill_hop_ms", "{:>6.1f}"),
        ("kv wait", "decode_kv_wait_ms", "{:>6.1f}"),
        ("1st step", "decode_first_step_ms", "{:>6.1f}"),
        ("transfer", "transfer_ms", "{:>6.3f}"),
        ("kB", "transfer_kb", "{:>5.0f}"),
        ("tok/s agg", "decode_tps_agg", "{:>6.1f}"),
        ("tok/s P/D", "decode_tps_disagg", "{:>6.1f}"),
        ("match", "tokens_match", "{!s:>5}"),
        ("logprobs", "logprobs_match", "{!s:>5}"),
    ]
    return format_columns(
        cols,
        rows,
        "times in ms, median [p10-p90] of streamed requests; read / recomp = P/D requests "
        "whose decode loaded the prompt's KV / computed it itself (its own prompt-token "
        "sources; any recompute: no P/D figure). transfer = vLLM's own NIXL time per request "
        "(the decode's READ in pull mode, the prefill's WRITE in push mode); kv wait and "
        "1st step = decode's own request phases (means: queue = from "
        "taking the request to its first scheduled step, the read included; prefill = that "
        "step).",
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench e2e --engine vllm",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--engine", choices=["vllm"], default="vllm", help="the engine measured")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--prompts", default="16,128,512", help="prompt lengths in tokens")
    p.add_argument("--repeat", type=int, default=20, help="fresh prompts per length and side")
    p.add_argument("--gen-tokens", type=int, default=32,
                   help=f"tokens each timed request streams (at least {MIN_TOKENS})")  # fmt: skip
    p.add_argument("--model", required=True, help="local model dir (disagg model tiny-llama DIR)")
    p.add_argument("--manifest", default=str(MANIFEST), help="a vLLM manifest to run")
    p.add_argument(
        "--mode",
        choices=[*MODES, "both"],
        default="pull",
        help="spec.kvTransfer.mode of the P/D pair (both: a pull pair and a push pair, each "
        "beside the aggregated engine, the three sides interleaved; five engines, ~16 GB)",
    )
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
    if args.gen_tokens < MIN_TOKENS:
        p.error(f"--gen-tokens: at least {MIN_TOKENS}, so a first token is timed inside a "
                "request that goes on generating")  # fmt: skip
    lengths = [int(x) for x in args.prompts.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="disagg-bench-manifest-") as folder:
        keep = None if args.keep_cpu_affinity is None else args.keep_cpu_affinity == "true"
        manifest, idle = _manifest(
            Path(args.manifest), args.nixl_delay_us, args.queue_poll_us, Path(folder), keep
        )
        manifests = {side: with_mode(manifest, m, Path(folder)) for side, m in
                     pd_sides(args.mode).items()}  # fmt: skip
        return _bench(args, lengths, manifests, idle)


def with_mode(path: Path, mode: str, folder: Path) -> Path:
    """``path`` with spec.kvTransfer.mode set to ``mode``, written into ``folder``."""
    body = yaml.safe_load(path.read_text())
    body["spec"].setdefault("kvTransfer", {})["mode"] = mode
    out = folder / f"{path.stem}-{mode}{path.suffix}"
    out.write_text(yaml.safe_dump(body))
    return out


NIXL_DELAY_DEFAULT = KVTransferFields.model_fields["nixl_progress_delay_microseconds"].default


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
    args: argparse.Namespace, lengths: list[int], manifests: dict[str, Path], idle: dict[str, Any]
) -> int:
    """``manifests``: each P/D side's manifest (the aggregated engine runs the first's)."""
    runs = {"agg": Run([], {}), **{side: Run([], {}) for side in manifests}}
    with tempfile.TemporaryDirectory(prefix="disagg-bench-vllm-") as tmp:
        try:
            progress("aggregated vLLM (the decode pod without its KV connector) ...")
            (Path(tmp) / "agg").mkdir()
            first = next(iter(manifests.values()))
            agg = start_aggregated(
                first, Path(tmp) / "agg", runs["agg"], model=args.model, say=progress
            )
            urls = {"agg": agg + "/v1/completions"}
            for n, (side, manifest) in enumerate(manifests.items()):
                progress(f"{side}: prefill and decode vLLM behind the disagg proxy ...")
                folder = Path(tmp) / f"pd{n}"
                folder.mkdir()
                launch(manifest, folder, folder, runs[side], model=args.model,
                       keep_cpu_binding=args.keep_cpu_binding, say=progress)  # fmt: skip
                urls[side] = runs[side].proxy_url + "/v1/completions"
            progress(f"  engines idle for {IDLE_WINDOW_S:g} s ...")
            engines = [
                (side, name, c) for side, r in runs.items() for name, c in r.engines.items()
            ]  # fmt: skip
            labels = [f"{side} {name}" for side, name, _ in engines]
            cores = idle_cpu([c for _, _, c in engines], IDLE_WINDOW_S, labels)
            idle_by_side: dict[str, dict[str, float]] = {side: {} for side in runs}
            for (side, name, _), label in zip(engines, labels, strict=True):
                idle_by_side[side][name] = cores[label]
            rows = _measure(runs, urls, lengths, args)
        finally:
            for r in runs.values():
                stop_run(r)
    result = {
        "engine": "vllm",
        "manifest": args.manifest,
        "mode": args.mode,
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
