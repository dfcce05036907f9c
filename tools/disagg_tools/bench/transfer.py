"""`disagg bench transfer`: NIXL READ bandwidth between two processes, against its limits.

Benchmark script (effectful). A prefill worker process and a decode worker (this process)
on 127.0.0.1 move a Llama-3-8B-like KV cache (32 layers, 8 KV heads, head dim 128, bf16,
16-token blocks = 128 KiB per token). For each request size, layout (block-major: 1 region;
layer-major: 64 regions, vLLM's), post mode and descriptor mode (merged runs vs one
descriptor per block per region) it times ``DecodeReader.read`` (the claim round trip
included, and reported apart as ``claim_ms``) and verifies every byte.
In the same run, for the same bytes, it measures two limits: a single-thread memmove inside
this process, and ``process_vm_readv`` from the prefill process (the kernel copy UCX's CMA
transport does). ``ratio`` = gbps / limit_gbps. With ``--prefill-tp A --decode-tp B``,
the same between A prefill and B decode rank processes (:mod:`bench.transfer_tp`).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from disagg_contract import commandline
from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import DecodeReader, Read
from disagg_worker.transfer.peer_process import alloc, fill, spawn_prefill, words
from disagg_worker.transfer.peers import PeerRef
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.ranks import check_tp

LLAMA3_8B = {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "block_size": 16}
MODES = {"merged": True, "per_block": False}
_RIDS = itertools.count()


class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.process_vm_readv.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.POINTER(_IOVec),
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    return libc


def vm_readv(pid: int, spans: Sequence[tuple[int, int, int]]) -> None:
    """Copy (local_addr, remote_addr, length) spans out of process ``pid`` (≤1024 per call)."""
    libc = _libc()
    for i in range(0, len(spans), 1024):
        chunk = spans[i : i + 1024]
        local = (_IOVec * len(chunk))(*[_IOVec(lo, n) for lo, _, n in chunk])
        remote = (_IOVec * len(chunk))(*[_IOVec(ro, n) for _, ro, n in chunk])
        want = sum(n for _, _, n in chunk)
        got = libc.process_vm_readv(pid, local, len(chunk), remote, len(chunk), 0)
        if got != want:
            err = ctypes.get_errno()
            raise OSError(err, f"process_vm_readv moved {got} of {want} bytes (errno {err})")


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _pct(ms: list[float], q: float) -> float:
    s = sorted(ms)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms / 1000) / 1e9


class _Progress:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            print(f"\r[{bar}] {self.done}/{self.total} {label:<40}", end="", file=sys.stderr)
            if self.done == self.total:
                print(file=sys.stderr)


def _spans(
    caches: list[torch.Tensor], remote_addrs: list[int], nbytes: int
) -> list[tuple[int, int, int]]:
    return [(t.data_ptr(), ro, nbytes) for t, ro in zip(caches, remote_addrs, strict=True)]


def _memcpy(caches: list[torch.Tensor], expected: list[torch.Tensor], nbytes: int) -> None:
    """Single-thread memmove of the same bytes inside this process."""
    for d, s in zip(caches, expected, strict=True):
        ctypes.memmove(d.data_ptr(), s.data_ptr(), nbytes)


def _verify(caches: list[torch.Tensor], expected: list[torch.Tensor], nblocks: int) -> None:
    for r, (got, want) in enumerate(zip(caches, expected, strict=True)):
        # compare raw words: a random bit pattern in bf16 is often NaN, and NaN != NaN
        if not torch.equal(words(got)[:nblocks], words(want)[:nblocks]):
            raise AssertionError(f"region {r}: transferred bytes differ from the prefill's")


def _run_layout(args: argparse.Namespace, block_major: bool, progress: _Progress) -> dict[str, Any]:
    max_blocks = max(args.tokens) // LLAMA3_8B["block_size"]
    layout = KVLayout(**LLAMA3_8B, num_blocks=max_blocks, block_major=block_major)
    env: dict[str, Any] = {"nixl_threads": args.nixl_threads, "side_channel_port": 0}
    if args.ucx_tls:
        env["ucx_tls"] = args.ucx_tls
    prefill = spawn_prefill(WorkerConfig(role="prefill", engine_id="bench-p", **env), layout)
    cases: list[dict[str, Any]] = []
    try:
        expected = alloc(layout)
        fill(expected, layout)
        caches = alloc(layout)
        _zero(caches, layout.num_blocks)  # fault the pages in before anything is timed
        peer = PeerRef("127.0.0.1", prefill.port, "bench-p")
        for post in args.post:
            cfg = WorkerConfig(role="decode", engine_id=f"bench-d-{post}", **env)
            with KVTransferAgent(cfg, layout, caches, post_mode=post) as agent:
                t0 = time.perf_counter()
                meta = agent.decode.peer_info(peer)
                handshake_ms = (time.perf_counter() - t0) * 1000
                prefill.call("publish", f"warm-{post}", [0])
                first = agent.decode.read(Read(peer, f"warm-{post}", [0], [0])).total_ms
                ctx = {
                    "caches": caches,
                    "expected": expected,
                    "layout": layout,
                    "peer": peer,
                    "remote_addrs": meta.region_addrs,
                    "pid": prefill.process.pid,
                    "prefill": prefill,
                }
                for tokens in args.tokens:
                    for mode in args.modes:
                        cases.append(_case(agent.decode, ctx, tokens, mode, post, args.repeat))
                        progress.step(f"{cases[-1]['layout']} {post} {tokens} {mode}")
    finally:
        prefill.stop()
    return {
        "cases": cases,
        "handshake_ms": round(handshake_ms, 2),
        "first_read_ms": round(first, 2),
    }


def _measure(
    reader: DecodeReader, ctx: dict[str, Any], nb: int, merge: bool, repeat: int
) -> dict[str, Any]:
    """Interleave, per repeat: memcpy, process_vm_readv and the READ, so that load from
    other processes on the machine hits the transfer and its limits alike."""
    caches, expected, layout = ctx["caches"], ctx["expected"], ctx["layout"]
    ids, n = list(range(nb)), nb * layout.block_len
    spans = _spans(caches, ctx["remote_addrs"], n)
    mem, vm, ms, post, claim, ndesc = [], [], [], [], [], 0
    for _ in range(repeat):
        mem += _timed(lambda: _memcpy(caches, expected, n), 1)
        _zero(caches, nb)
        vm += _timed(lambda: vm_readv(ctx["pid"], spans), 1)
        _verify(caches, expected, nb)
        _zero(caches, nb)
        rid = f"b{next(_RIDS)}"
        ctx["prefill"].call("publish", rid, ids)  # decode claims it before the READ
        stats = reader.read(Read(ctx["peer"], rid, ids, ids, merge=merge))
        ms.append(stats.total_ms)
        post.append(stats.post_ms)
        claim.append(stats.claim_ms)
        ndesc = stats.descriptors
        _verify(caches, expected, nb)
    return {
        "ms": ms,
        "post_ms": statistics.median(post),
        "claim_ms": statistics.median(claim),
        "memcpy_ms": statistics.median(mem),
        "limit_ms": statistics.median(vm),
        "descriptors": ndesc,
    }


def _zero(caches: list[torch.Tensor], nb: int) -> None:
    for t in caches:
        t[:nb].zero_()


def _case(
    reader: DecodeReader, ctx: dict[str, Any], tokens: int, mode: str, post: str, repeat: int
) -> dict[str, Any]:
    layout: KVLayout = ctx["layout"]
    nb = layout.blocks_for_tokens(tokens)
    m = _measure(reader, ctx, nb, MODES[mode], repeat)
    nbytes = nb * layout.block_len * layout.num_regions
    gbps, limit = _gbps(nbytes, statistics.median(m["ms"])), _gbps(nbytes, m["limit_ms"])
    return {
        "tokens": tokens,
        "bytes": nbytes,
        "mode": mode,
        "layout": "block_major" if layout.block_major else "layer_major",
        "post": post,
        "descriptors": m["descriptors"],
        "gbps": round(gbps, 3),
        "memcpy_gbps": round(_gbps(nbytes, m["memcpy_ms"]), 3),
        "limit_gbps": round(limit, 3),
        "ratio": round(gbps / limit, 3),
        "p50_ms": round(_pct(m["ms"], 0.5), 3),
        "p99_ms": round(_pct(m["ms"], 0.99), 3),
        "post_ms": round(m["post_ms"], 3),
        "claim_ms": round(m["claim_ms"], 3),
    }


def _table(result: dict[str, Any]) -> str:
    head = (
        f"{'layout':<12}{'post':<9}{'tokens':>7}{'MiB':>7}  {'mode':<10}{'desc':>7}"
        f"{'GB/s':>8}{'memcpy':>8}{'limit':>8}{'ratio':>7}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'post ms':>8}{'claim ms':>9}"
    )
    lines = [head, "-" * len(head)]
    for c in result["cases"]:
        lines.append(
            f"{c['layout']:<12}{c['post']:<9}{c['tokens']:>7}{c['bytes'] / 2**20:>7.0f}  "
            f"{c['mode']:<10}{c['descriptors']:>7}{c['gbps']:>8.2f}{c['memcpy_gbps']:>8.2f}"
            f"{c['limit_gbps']:>8.2f}{c['ratio']:>7.2f}{c['p50_ms']:>9.2f}{c['p99_ms']:>9.2f}"
            f"{c['post_ms']:>8.2f}{c['claim_ms']:>9.2f}"
        )
    lines.append(
        "; ".join(
            f"{name}: handshake {h['handshake_ms']:.1f} ms, first read {h['first_read_ms']:.1f} ms"
            for name, h in result["handshakes"].items()
        )
        + "; every transferred byte verified"
    )
    return "\n".join(lines)


def _plot(result: dict[str, Any], path: str) -> None:
    """Left: GB/s per series, its process_vm_readv limit dashed in the same colour.
    Right: ratio to the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bw, rt) = plt.subplots(1, 2, figsize=(11, 4.5))
    series: dict[str, list[dict[str, Any]]] = {}
    for c in result["cases"]:
        series.setdefault(f"{c['layout']} {c['post']} {c['mode']}", []).append(c)
    for name, cs in series.items():
        x = [c["tokens"] for c in cs]
        (line,) = bw.plot(x, [c["gbps"] for c in cs], marker="o", label=name)
        bw.plot(x, [c["limit_gbps"] for c in cs], "--", color=line.get_color(), alpha=0.5)
        rt.plot(x, [c["ratio"] for c in cs], marker="o", color=line.get_color(), label=name)
    rt.axhline(1.0, color="k", lw=0.8)
    for ax, label in ((bw, "GB/s (dashed: process_vm_readv limit)"), (rt, "gbps / limit")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("request tokens (128 KiB KV per token)")
        ax.set_ylabel(label)
    bw.legend(fontsize=7)
    fig.suptitle("NIXL READ between two processes on 127.0.0.1, every byte verified")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench transfer",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", help="write a chart")
    p.add_argument("--tokens", default="128,512,2048,4096", help="request sizes in tokens")
    p.add_argument("--repeat", type=int, default=8, help="timed reads per case")
    p.add_argument(
        "--layout",
        default="both",
        choices=["block", "layer", "both"],
        help="KV layout: block-major, layer-major (vLLM's), or both",
    )
    p.add_argument("--post", default="prepped", help="prepped,dynamic (comma list)")
    p.add_argument("--modes", default="merged,per_block", help="merged,per_block")
    p.add_argument("--nixl-threads", type=int, default=0, help="NIXL/UCX backend threads")
    p.add_argument("--ucx-tls", help="UCX_TLS for both workers (default: UCX picks)")
    p.add_argument("--prefill-tp", type=int, default=1, help="prefill ranks (processes)")
    p.add_argument("--decode-tp", type=int, default=1, help="decode ranks (processes)")
    args = p.parse_args(argv)
    for flag, tp in (("--prefill-tp", args.prefill_tp), ("--decode-tp", args.decode_tp)):
        why = check_tp(tp, LLAMA3_8B["num_kv_heads"])
        if why is not None:
            p.error(f"{flag}: {why}")
    args.tokens = [int(t) for t in args.tokens.split(",") if t]
    args.post = [m for m in args.post.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("prepped", "dynamic") for m in args.post):
        p.error("--post takes prepped and/or dynamic")
    if any(m not in MODES for m in args.modes):
        p.error("--modes takes merged and/or per_block")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    if (args.prefill_tp, args.decode_tp) != (1, 1):
        from disagg_tools.bench import transfer_tp

        steps = _Progress(len(args.tokens) * args.repeat, sys.stderr.isatty() or not args.json)
        tp = transfer_tp.run(args.prefill_tp, args.decode_tp, args.tokens, args.repeat, steps.step)
        print(json.dumps(tp, indent=2) if args.json else transfer_tp.table(tp))
        return 0
    majors = {"block": [True], "layer": [False], "both": [True, False]}[args.layout]
    total = len(majors) * len(args.post) * len(args.tokens) * len(args.modes)
    progress = _Progress(total, sys.stderr.isatty() or not args.json)
    result: dict[str, Any] = {"cases": []}
    for bm in majors:
        part = _run_layout(args, bm, progress)
        result["cases"] += part["cases"]
        name = "block_major" if bm else "layer_major"
        result.setdefault("handshake_ms", part["handshake_ms"])
        result.setdefault("first_read_ms", part["first_read_ms"])
        result.setdefault("handshakes", {})[name] = {
            "handshake_ms": part["handshake_ms"],
            "first_read_ms": part["first_read_ms"],
        }
    result["nixl_threads"] = args.nixl_threads
    result["ucx_tls"] = args.ucx_tls or "default"
    print(json.dumps(result, indent=2) if args.json else _table(result))
    if args.plot:
        _plot(result, args.plot)
    return 0
