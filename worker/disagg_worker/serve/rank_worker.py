"""Rank r > 0 of a tensor-parallel reference engine: its share of the model, its KV heads'
cache and transfer agent, driven by rank 0 (:mod:`serve.tp`).

I/O layer; run as ``python -m disagg_worker.serve.rank_worker`` by rank 0, which gives it
its settings as ``DISAGG_*`` env (``DISAGG_TP_RANK`` among them). It runs each forward rank
0 mirrors to it, in order, on one engine thread; each READ rank 0 fans out to it on a
transfer thread (no claim, no notification: rank 0 makes both for the request); a prefill
rank's side channel answers metadata (claims go to rank 0, which holds the blocks; its
notification poll still drives NIXL's progress, which a READ of its regions needs). It
exits when told to stop, when rank 0 dies (SIGTERM from the kernel, or its parent changes)
or when its engine fails (after telling rank 0, which then stops the pod).
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch.distributed as dist
import zmq

from disagg_contract.config import WorkerConfig
from disagg_worker.model.kvcache import PagedKVCache
from disagg_worker.model.model import ReferenceModel, Shard, get_preset, kv_layout
from disagg_worker.serve.collective import (
    ENGINE_ID_KEY,
    INCARNATION_KEY,
    LOOPBACK,
    Collective,
    Sender,
    decode,
    join_store,
)
from disagg_worker.serve.process import die_with_parent, keep_buffers_on_heap, limit_threads
from disagg_worker.serve.tp import stats_fields
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import Read
from disagg_worker.transfer.peers import PeerRef, TransferError

log = logging.getLogger("disagg.worker.rank")
TRANSFER_THREADS = 16


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m disagg_worker.serve.rank_worker")
    p.add_argument("--down", required=True, help="rank 0's command socket (zmq PUSH)")
    p.add_argument("--up", required=True, help="rank 0's answer socket (zmq PULL)")
    p.add_argument("--store-port", type=int, required=True, help="rank 0's gloo TCPStore")
    p.add_argument("--store-host", default=LOOPBACK, help="rank 0's pod (another pod's ranks)")
    p.add_argument(
        "--incarnation", default="", help="the engine's, shared by its ranks (default: the store's)"
    )
    return p.parse_args(argv)


class Rank:
    """One follower rank: engine, cache, agent and the two control sockets."""

    def __init__(self, config: WorkerConfig, args: argparse.Namespace) -> None:
        self._store: dist.TCPStore | None = None
        incarnation = args.incarnation
        if not incarnation:  # a rank of another pod: the engine's id and incarnation are
            self._store = join_store(args.store_host, args.store_port, config.tp_size)
            incarnation = self._store.get(INCARNATION_KEY).decode()
            engine_id = self._store.get(ENGINE_ID_KEY).decode()  # rank 0's, in the store
            config = config.model_copy(update={"engine_id": engine_id})
        self.config, self.rank = config, config.tp_rank
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._down = self._ctx.socket(zmq.PULL)
        self._down.connect(args.down)
        up = self._ctx.socket(zmq.PUSH)
        up.connect(args.up)
        self.up = Sender(up)
        self._store_at = (args.store_host, args.store_port)
        self.collective: Collective | None = None  # joined once rank 0 knows we are ready
        spec = get_preset(config.model)
        shard = Shard(self.rank, config.tp_size, gather=self._gather)
        layout = kv_layout(spec, config.block_size, config.num_blocks, shard)
        self.cache = PagedKVCache(layout, config.device)
        self.model = ReferenceModel(spec, self.cache, config.seed, shard)
        self.agent: KVTransferAgent | None = None
        if config.role != "both":
            self.agent = KVTransferAgent(
                config, layout, self.cache.regions,
                model_kv_heads=spec.num_kv_heads, incarnation=incarnation,
            )  # fmt: skip
            self.agent.start()
        self._forwards: queue.Queue[list[Any] | None] = queue.Queue()
        self._reads = ThreadPoolExecutor(TRANSFER_THREADS, thread_name_prefix="rank-read")
        self._failed = threading.Event()

    def _gather(self, tensor: Any) -> Any:
        assert self.collective is not None
        return self.collective.gather(tensor)

    def run(self) -> None:
        """Say ready (rank 0 waits for every rank before anyone joins the gloo group, so a
        rank that fails to start is seen at once), join the group, then serve."""
        agent = self.agent if self.config.role == "prefill" else None
        port = agent.prefill.side_channel_port if agent else 0
        self.up.send(["ready", self.rank, port, self.config.advertised_host])
        store = self._store or join_store(*self._store_at, self.config.tp_size)
        self.collective = Collective(
            self.rank, self.config.tp_size, store, self.config.rank_address
        )
        engine = threading.Thread(target=self._engine_loop, name="engine", daemon=True)
        engine.start()
        parent = os.getppid()
        while not self._failed.is_set():
            if not self._down.poll(1000):
                if os.getppid() != parent:  # rank 0 is gone
                    break
                continue
            msg = decode(self._down.recv())
            if msg[0] == "fwd":
                self._forwards.put(msg)
            elif msg[0] == "read":
                self._reads.submit(self._read, msg)
            elif msg[0] == "stop":
                break
        self._forwards.put(None)
        engine.join(timeout=5)

    def _engine_loop(self) -> None:
        while (msg := self._forwards.get()) is not None:
            try:
                self.model.forward(msg[1], msg[2], msg[3])
            except Exception as e:  # the ranks no longer compute the same step
                log.exception("forward failed")
                self.up.send(["error", self.rank, f"{type(e).__name__}: {e}"])
                self._failed.set()
                return

    def _read(self, msg: list[Any]) -> None:
        _, call, host, port, engine_id, incarnation, rid, remote, local, deadline, digest = msg
        assert self.agent is not None
        peer = PeerRef(host, port, engine_id, incarnation)
        try:
            stats = self.agent.decode.read(
                Read(peer, rid, remote, local, deadline, claim=False, notify=False,
                     prompt_digest=digest)
            )  # fmt: skip
            self.up.send(["done", call, self.rank, stats_fields(stats)])
        except TransferError as e:
            self.up.send(["fail", call, self.rank, e.reason, str(e)])
        except Exception as e:  # answer anyway: rank 0 waits for every rank
            self.up.send(["fail", call, self.rank, "error", f"{type(e).__name__}: {e}"])

    def close(self) -> None:
        self._reads.shutdown(wait=True, cancel_futures=True)
        if self.agent is not None:
            self.agent.close()
        self._down.close(linger=0)
        self.up.close()
        if self.collective is not None:
            self.collective.close()
        self._ctx.term()


def main(argv: list[str]) -> int:
    die_with_parent()
    args = _args(argv)
    config = WorkerConfig.from_env(os.environ)
    logging.basicConfig(
        level=config.log_level.upper(),
        format='{"ts": "%(asctime)s", "level": "%(levelname)s", "logger": "%(name)s", '
        f'"rank": {config.tp_rank}, "msg": "%(message)s"}}',
    )
    limit_threads()
    keep_buffers_on_heap()
    rank = Rank(config, args)
    try:
        rank.run()
    finally:
        rank.close()
    return 1 if rank._failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
