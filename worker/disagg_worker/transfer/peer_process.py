"""A prefill worker in a child process, driven over a pipe: for tests, bench and probe.

Effectful layer. :func:`spawn_prefill` starts a real process (multiprocessing ``spawn``)
that owns a :class:`KVTransferAgent` with a KV cache filled with :func:`pattern`, so the
reading side can verify every byte it receives. Commands: ``publish``, ``events``,
``ports`` (rank 0 of a tensor-parallel prefill: every rank's side-channel port), ``stop``.
A rank of a tensor-parallel prefill is one such process per rank (``model_kv_heads`` and a
shared ``incarnation``; the TP transfer benchmark fills rank r's cache with seed r).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.rules.layout import KVLayout

_GOLDEN = 2654435761


def pattern(region: int, block: int, block_len: int, seed: int = 0) -> torch.Tensor:
    """The bytes (as int32 words) of ``block`` in ``region`` of a filled cache."""
    n = block_len // 4
    salt = (block * 1_000_003 + region * 7919 + seed * 104_729) & 0xFFFFFFFF
    words = (torch.arange(n, dtype=torch.int64) * _GOLDEN + salt) & 0xFFFFFFFF
    return words.to(torch.int32) if n else torch.empty(0, dtype=torch.int32)


def words(t: torch.Tensor) -> torch.Tensor:
    """A region tensor viewed as int32 words, one row per block."""
    return t.view(torch.uint8).view(t.shape[0], -1).view(torch.int32)


def fill(caches: list[torch.Tensor], layout: KVLayout, seed: int = 0) -> None:
    for r, t in enumerate(caches):
        w = words(t)
        for b in range(layout.num_blocks):
            w[b].copy_(pattern(r, b, layout.block_len, seed))


def alloc(layout: KVLayout, device: str = "cpu") -> list[torch.Tensor]:
    from disagg_worker.transfer.copy import TORCH_DTYPES

    dtype = TORCH_DTYPES[layout.dtype]
    return [
        torch.zeros(layout.region_shape(), dtype=dtype, device=device)
        for _ in range(layout.num_regions)
    ]


def _serve(
    conn: Connection,
    env: dict[str, str],
    layout_json: str,
    seed: int,
    model_kv_heads: int | None = None,
    incarnation: str | None = None,
) -> None:
    from disagg_worker.transfer.agent import KVTransferAgent

    torch.set_num_threads(1)
    config = WorkerConfig.from_env(env)
    layout = KVLayout.model_validate_json(layout_json)
    caches = alloc(layout, config.device)
    fill(caches, layout, seed)
    events: list[tuple[str, list[int], str]] = []

    def on_release(rid: str, ids: list[int], reason: str) -> None:
        events.append((rid, ids, reason))

    agent = KVTransferAgent(
        config, layout, caches, on_release=on_release,
        model_kv_heads=model_kv_heads, incarnation=incarnation,
    )  # fmt: skip
    with agent:
        conn.send(("ready", agent.prefill.side_channel_port))
        while True:
            cmd, *args = conn.recv()
            if cmd == "stop":
                conn.send(("stopped", agent.stats()))
                return
            if cmd == "publish":
                agent.prefill.publish(*args)  # request id, block ids[, prompt digest]
                conn.send(("ok", None))
            elif cmd == "events":
                conn.send(("events", list(events)))
            elif cmd == "stats":
                conn.send(("stats", agent.stats()))
            elif cmd == "ports":
                agent.prefill.rank_ports = list(args[0])
                conn.send(("ok", None))


@dataclass
class PrefillProcess:
    """Handle on a spawned prefill worker."""

    process: Any
    conn: Connection
    port: int

    def call(self, *cmd: Any, timeout: float = 30.0) -> Any:
        self.conn.send(cmd)
        if not self.conn.poll(timeout):
            raise TimeoutError(f"prefill process did not answer {cmd[0]!r} in {timeout} s")
        return self.conn.recv()[1]

    def stop(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(OSError, EOFError, TimeoutError):
                self.call("stop", timeout=10)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)


def spawn_prefill(
    config: WorkerConfig,
    layout: KVLayout,
    *,
    seed: int = 0,
    timeout: float = 60.0,
    model_kv_heads: int | None = None,
    incarnation: str | None = None,
) -> PrefillProcess:
    """Start a prefill worker process; returns once its side channel listens."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    args = (child, config.to_env(), layout.model_dump_json(), seed, model_kv_heads, incarnation)
    proc = ctx.Process(target=_serve, args=args, daemon=True)
    proc.start()
    child.close()
    if not parent.poll(timeout):
        proc.kill()
        raise TimeoutError(f"prefill process did not start within {timeout} s")
    _, port = parent.recv()
    return PrefillProcess(proc, parent, int(port))
