"""`disagg bench vllm-memory --model DIR`: what a vLLM CPU engine holds beyond its KV
cache and weights — the runtime allowance of the CPU-pool memory formula, measured.

Benchmark script (I/O: starts real vLLM). For each KV size (``VLLM_CPU_KVCACHE_SPACE``,
GiB) it starts one engine on ``DIR`` with the example's flags, waits for ``/health``, sends
one completion, then sums the memory of the engine's process tree: RSS, and PSS (shared
pages split between the processes that map them, so torch's libraries count once). The
runtime is PSS less the KV space and the checkpoint's weights; the slope between two KV
sizes says whether the KV space really costs what it is set to. Prints a table, or JSON
with ``--json``. Needs the `vllm` extra (``make .venv-vllm/.vllm-installed``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from disagg_contract import commandline
from disagg_tools.local import serving
from disagg_tools.local.children import start_child, stop_children
from disagg_tools.local.engines.vllm import SERVER
from disagg_tools.local.rules.pods import LOCAL

GIB = 1024**3
FLAGS = ("--dtype", "bfloat16", "--max-model-len", "1024", "--enforce-eager")


def measure(model: Path, kv_gib: int, log_dir: Path) -> dict[str, Any]:
    port = next(serving.free_ports())
    argv = [sys.executable, "-m", SERVER, "--model", str(model), *FLAGS]
    argv += ["--host", LOCAL, "--port", str(port)]
    core = serving.host_cores()[0]
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(kv_gib),
        "VLLM_CPU_OMP_THREADS_BIND": str(core),
    }
    child = start_child(f"vllm-kv{kv_gib}", argv, env, log_dir)
    try:
        url = f"http://{LOCAL}:{port}"
        started = serving.wait_healthy(child, url, 600, lambda line: print(line, file=sys.stderr))
        serving.warm_up(url)
        time.sleep(2)  # let allocations from the first request settle
        rss = pss = 0
        tree = [psutil.Process(child.proc.pid)]
        tree += tree[0].children(recursive=True)
        for proc in tree:
            info = proc.memory_full_info()
            rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
    finally:
        stop_children([child])
    weights = sum(f.stat().st_size for f in model.glob("*.safetensors"))
    return {
        "kv_gib": kv_gib,
        "start_s": round(started, 1),
        "processes": len(tree),
        "rss_gib": round(rss / GIB, 3),
        "pss_gib": round(pss / GIB, 3),
        "weights_gib": round(weights / GIB, 3),
        "runtime_gib": round((pss - kv_gib * GIB - weights) / GIB, 3),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["KV GiB  start s  procs  RSS GiB  PSS GiB  weights GiB  runtime GiB (PSS-KV-W)"]
    for r in rows:
        lines.append(
            f"{r['kv_gib']:>6}  {r['start_s']:>7}  {r['processes']:>5}  {r['rss_gib']:>7.2f}  "
            f"{r['pss_gib']:>7.2f}  {r['weights_gib']:>11.3f}  {r['runtime_gib']:>11.2f}"
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        slope = (b["pss_gib"] - a["pss_gib"]) / (b["kv_gib"] - a["kv_gib"])
        lines.append(f"PSS per GiB of KV space: {slope:.2f} GiB")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench vllm-memory",
        description=__doc__,
    )
    p.add_argument("--model", required=True, help="checkpoint dir (disagg model tiny-llama DIR)")
    p.add_argument("--kv-gib", default="1,2", help="KV sizes to measure, comma-separated")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.kv_gib.split(",")]
    with tempfile.TemporaryDirectory(prefix="disagg-vllm-memory-") as logs:
        rows = [measure(Path(args.model).resolve(), k, Path(logs)) for k in sizes]
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0
