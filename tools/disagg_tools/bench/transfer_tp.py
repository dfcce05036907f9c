"""`disagg bench transfer --prefill-tp A --decode-tp B`: NIXL READs between tensor-parallel
ranks of different sizes, against the copy limit of that many parallel readers.

Benchmark script (effectful). A prefill ranks and B decode ranks, each its own process on
127.0.0.1, over a Llama-3-8B-like cache (32 layers, 8 KV heads, head dim 128, bf16,
16-token blocks) kept as a region per KV head (the reference model's layout). Per
request size every decode rank reads, at once, the heads it serves from the prefill ranks
that hold them (:func:`ranks.sources`; no claim: nothing is published) and verifies every
byte. In the same run, interleaved per repeat, the same B processes copy exactly the same
bytes from the same prefill processes with ``process_vm_readv`` (the kernel copy UCX's CMA
transport does), all at once: ``ratio`` = NIXL GB/s / that limit. Times are the wall time
from the first rank's start to the last rank's end, medians over ``--repeat``; the bytes
are verified once per size, outside the timed reads.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import statistics
import time
import uuid
from multiprocessing.connection import Connection
from typing import Any

import torch

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.peer_process import PrefillProcess, alloc, pattern, spawn_prefill, words
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.ranks import rank_heads, sources

LLAMA3_8B = {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "block_size": 16}
HEADS = LLAMA3_8B["num_kv_heads"]


def rank_layout(tp: int, rank: int, num_blocks: int) -> KVLayout:
    heads = len(rank_heads(rank, tp, HEADS))
    fields = {**LLAMA3_8B, "num_kv_heads": heads}
    return KVLayout(**fields, num_blocks=num_blocks, per_head_regions=True)


def _reader(conn: Connection, env: dict[str, str], layout_json: str, prefill_tp: int) -> None:
    """A decode rank: ``read`` (NIXL, verified) and ``copy`` (process_vm_readv) on demand."""
    from disagg_tools.bench.transfer import vm_readv
    from disagg_worker.transfer.agent import KVTransferAgent
    from disagg_worker.transfer.decode import Read
    from disagg_worker.transfer.peers import PeerRef

    torch.set_num_threads(1)
    config = WorkerConfig.from_env(env)
    layout = KVLayout.model_validate_json(layout_json)
    caches = alloc(layout)
    srcs = sources(config.tp_rank, config.tp_size, prefill_tp, HEADS)
    with KVTransferAgent(config, layout, caches, model_kv_heads=HEADS) as agent:
        conn.send(("ready", None))
        while True:
            cmd, *args = conn.recv()
            if cmd == "stop":
                return
            host, ports, n, verify = args
            peer, ids = PeerRef(host, ports[0][0]), list(range(n))
            try:
                if cmd == "read":
                    if verify:  # nothing an earlier read left can pass for this one
                        for t in caches:
                            t.zero_()
                    stats = agent.decode.read(Read(peer, f"bench-{uuid.uuid4().hex[:8]}", ids, ids,
                                              claim=False, notify=False))  # fmt: skip
                    ok = _verified(caches, srcs, layout, n) if verify else True
                    conn.send(("read", (stats.bytes, stats.descriptors, ok)))
                elif cmd == "copy":
                    spans = _spans(agent.decode, host, ports, caches, srcs, layout, n)
                    t0 = time.perf_counter()
                    for pid, chunk in spans:
                        vm_readv(pid, chunk)
                    conn.send(("copy", time.perf_counter() - t0))
            except Exception as e:  # the parent waits for an answer from every rank
                conn.send(("error", f"decode rank {config.tp_rank}: {type(e).__name__}: {e}"))


def _spans(
    reader: Any,
    host: str,
    ports: list[tuple[int, int]],
    caches: list[torch.Tensor],
    srcs: Any,
    layout: KVLayout,
    n: int,
) -> list[tuple[int, list[tuple[int, int, int]]]]:
    """(prefill pid, [(local address, remote address, bytes)]) for the bytes a read moves:
    the first ``n`` blocks of each head this rank reads, from the region that holds it."""
    from disagg_worker.transfer.peers import PeerRef

    out = []
    for src in srcs:
        port, pid = ports[src.rank]
        remote = reader.peer_info(PeerRef(host, port)).region_addrs
        nbytes = n * layout.block_len
        chunk = [(caches[i].data_ptr(), remote[j], nbytes) for i, j in src.regions]
        out.append((pid, chunk))
    return out


def _verified(caches: list[torch.Tensor], srcs: Any, layout: KVLayout, n: int) -> bool:
    """Each local head region holds the first ``n`` blocks of the prefill region it was read
    from (prefill rank p's cache is filled with seed p)."""
    for src in srcs:
        for i, j in src.regions:
            for b in range(n):
                if not torch.equal(words(caches[i])[b], pattern(j, b, layout.block_len, src.rank)):
                    return False
    return True


def _ask(readers: list[Connection], cmd: str, *args: Any) -> tuple[float, list[Any]]:
    """Send ``cmd`` to every reader at once; (wall seconds until the last answered,
    answers)."""
    t0 = time.perf_counter()
    for conn in readers:
        conn.send((cmd, *args))
    got = [conn.recv() for conn in readers]
    wall = time.perf_counter() - t0
    failed = [a[1] for a in got if a[0] == "error"]
    if failed:
        raise RuntimeError("; ".join(failed))
    return wall, [a[1] for a in got]


def run(
    prefill_tp: int, decode_tp: int, tokens: list[int], repeat: int, progress: Any
) -> dict[str, Any]:
    """Start the ranks, measure every size, stop them; the figures."""
    max_blocks = max(tokens) // LLAMA3_8B["block_size"]
    base = {"side_channel_port": 0}
    prefills: list[PrefillProcess] = []
    readers, procs = [], []
    try:
        incarnation = f"bench-{uuid.uuid4().hex[:8]}"
        for rank in range(prefill_tp):
            cfg = WorkerConfig(role="prefill", tp_size=prefill_tp, tp_rank=rank, **base)
            layout = rank_layout(prefill_tp, rank, max_blocks)
            prefills.append(spawn_prefill(cfg, layout, seed=rank, model_kv_heads=HEADS,
                                          incarnation=incarnation))  # fmt: skip
        ports = [(p.port, p.process.pid) for p in prefills]
        prefills[0].call("ports", [p for p, _ in ports])
        ctx = mp.get_context("spawn")
        for rank in range(decode_tp):
            cfg = WorkerConfig(role="decode", tp_size=decode_tp, tp_rank=rank, **base)
            layout = rank_layout(decode_tp, rank, max_blocks)
            parent, child = ctx.Pipe()
            args = (child, cfg.to_env(), layout.model_dump_json(), prefill_tp)
            proc = ctx.Process(target=_reader, args=args, daemon=True)
            proc.start()
            readers.append(parent)
            procs.append(proc)
        for conn in readers:
            conn.recv()
        cases = [_case(readers, ports, t, repeat, progress) for t in tokens]
    finally:
        for conn in readers:
            with contextlib.suppress(OSError):
                conn.send(("stop",))
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        for p in prefills:
            p.stop()
    return {"prefill_tp": prefill_tp, "decode_tp": decode_tp, "readers": decode_tp, "cases": cases}


def _case(
    readers: list[Connection], ports: list[tuple[int, int]], tokens: int, repeat: int, progress: Any
) -> dict[str, Any]:
    n = tokens // LLAMA3_8B["block_size"]
    where = ("127.0.0.1", ports, n)
    # untimed: the handshakes and first connections, then a read into zeroed caches
    # whose every byte is checked
    _ask(readers, "read", *where, False)
    ok = all(a[2] for a in _ask(readers, "read", *where, True)[1])
    reads, copies, nbytes, ndesc = [], [], 0, 0
    for _ in range(repeat):
        progress(f"  {tokens} tokens")
        copies.append(_ask(readers, "copy", *where, False)[0])
        wall, answers = _ask(readers, "read", *where, False)
        reads.append(wall)
        nbytes = sum(a[0] for a in answers)
        ndesc = sum(a[1] for a in answers)
    read_s, copy_s = statistics.median(reads), statistics.median(copies)
    gbps, limit = nbytes / read_s / 1e9, nbytes / copy_s / 1e9
    return {
        "tokens": tokens,
        "bytes": nbytes,
        "descriptors": ndesc,
        "read_ms": round(read_s * 1000, 3),
        "gbps": round(gbps, 3),
        "limit_gbps": round(limit, 3),
        "ratio": round(gbps / limit, 3),
        "verified": ok,
    }


def table(result: dict[str, Any]) -> str:
    from disagg_tools.bench.e2e import format_columns

    cols = [
        ("tokens", "tokens", "{:>7}"),
        ("MiB", "mib", "{:>8.1f}"),
        ("descs", "descriptors", "{:>6}"),
        ("read ms", "read_ms", "{:>8.2f}"),
        ("GB/s", "gbps", "{:>7.2f}"),
        ("limit", "limit_gbps", "{:>7.2f}"),
        ("ratio", "ratio", "{:>6.2f}"),
        ("ok", "verified", "{!s:>5}"),
    ]
    rows = [{**c, "mib": c["bytes"] / 2**20} for c in result["cases"]]
    note = (
        f"prefill TP {result['prefill_tp']} -> decode TP {result['decode_tp']}: every decode "
        "rank reads its heads at once; limit = the same bytes by process_vm_readv from the "
        f"same {result['readers']} reader processes at once. Wall times, medians."
    )
    return format_columns(cols, rows, note)
