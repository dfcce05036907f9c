"""Rank 0 of a tensor-parallel reference engine: it starts the other ranks, mirrors every
forward to them, and fans each decode READ out to them.

I/O layer. Each forward is sent to every rank before rank 0 runs it, so all ranks run it
together and meet in its all-gathers; rank 0 claims for a READ and notifies the prefill
only once every rank has read, so the prefill frees its blocks after its last reader. A
rank that dies breaks the engine and the pod restarts, as a vLLM engine whose worker died
does. Ranks, handshakes and claims: docs/worker.md (Tensor parallelism); ranks across
pods (:mod:`serve.members`): docs/multinode.md.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, replace
from typing import Any

import zmq

from disagg_contract.config import WorkerConfig
from disagg_worker.serve.collective import (
    ENGINE_ID_KEY,
    INCARNATION_KEY,
    LOOPBACK,
    Collective,
    Sender,
    decode,
    group_ports,
    open_store,
)
from disagg_worker.serve.process import die_with_parent
from disagg_worker.transfer.decode import DecodeReader, Read, TransferStats
from disagg_worker.transfer.peers import TransferError

log = logging.getLogger("disagg.worker.tp")
START_TIMEOUT_S = 120.0  # the other ranks import torch and build their engine meanwhile
GROUP_START_TIMEOUT_S = 600.0  # a group's other pods may still be pulling their image
STOP_WAIT_S = 5.0
ANSWER_MARGIN_S = 5.0  # a rank's read ends by its deadline; its answer may take this long more


def rank_env(config: WorkerConfig, rank: int, base: dict[str, str]) -> dict[str, str]:
    """Rank ``rank``'s environment: ``base`` without its DISAGG_* settings, plus rank 0's
    config with this rank and its side-channel port (``sideChannelPort + rank``; any free
    port when rank 0's is 0, as in a local run)."""
    port = config.side_channel_port + rank if config.side_channel_port else 0
    mine = config.model_copy(update={"tp_rank": rank, "side_channel_port": port})
    env = {k: v for k, v in base.items() if not k.startswith("DISAGG_")}
    return {**env, **mine.to_env()}


class RankGroup:
    """Ranks 1..T-1 of this engine, seen from rank 0 (see module docstring)."""

    def __init__(
        self, config: WorkerConfig, incarnation: str, on_broken: Callable[[str], None]
    ) -> None:
        self.config, self.size = config, config.tp_size
        self._incarnation, self._on_broken = incarnation, on_broken
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._down: list[Sender] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._calls: dict[int, tuple[Future[TransferStats], int]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.collective: Collective | None = None
        self.ports: list[int] = []  # each other rank's side-channel port (0: none)
        self.hosts: list[str] = []  # and its pod's address ("": this pod)
        self.spans = config.nodes > 1  # ranks in the group's other pods too
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start this pod's other ranks, wait for every rank's ready message (those of the
        group's other pods too, which start their own), then join the gloo group."""
        cfg = self.config
        up = self._ctx.socket(zmq.PULL)
        if self.spans:  # the group's fixed ports, on every address of the pod
            up_port = group_ports(cfg.group_port, 0)[1]
            up.bind(f"tcp://*:{up_port}")
        else:
            up_port = up.bind_to_random_port(f"tcp://{LOOPBACK}")
        store = open_store(self.size, cfg.group_port if self.spans else 0)
        store.set(INCARNATION_KEY, self._incarnation)
        store.set(ENGINE_ID_KEY, cfg.engine_id)
        for rank in range(1, self.size):
            down = self._ctx.socket(zmq.PUSH)
            if self.spans:
                port = group_ports(cfg.group_port, rank)[2]
                down.bind(f"tcp://*:{port}")
            else:
                port = down.bind_to_random_port(f"tcp://{LOOPBACK}")
            self._down.append(Sender(down))
            if rank not in cfg.ranks_here:
                continue  # a rank of another pod of the group: that pod starts it
            argv = [
                sys.executable, "-m", "disagg_worker.serve.rank_worker",
                "--down", f"tcp://{LOOPBACK}:{port}", "--up", f"tcp://{LOOPBACK}:{up_port}",
                "--store-port", str(store.port), "--incarnation", self._incarnation,
            ]  # fmt: skip
            env = rank_env(self.config, rank, dict(os.environ))
            self._procs.append(subprocess.Popen(argv, env=env, preexec_fn=die_with_parent))
        # every rank ready before the group forms: a rank that fails to start is seen here
        # (its exit), not after the group's join timeout
        try:
            self.ports, self.hosts = self._await_ready(up)
            self.collective = Collective(0, self.size, store, cfg.rank_address)
        except BaseException:
            up.close(linger=0)  # else closing the context would wait for it for ever
            raise
        self._reader = threading.Thread(
            target=self._answers, args=(up,), name="tp-answers", daemon=True
        )
        self._reader.start()
        threading.Thread(target=self._watch, name="tp-watch", daemon=True).start()

    def _await_ready(self, up: zmq.Socket[bytes]) -> tuple[list[int], list[str]]:
        """Each other rank's side-channel port and host ("": this pod's)."""
        ports: dict[int, tuple[int, str]] = {}
        wait_s = GROUP_START_TIMEOUT_S if self.spans else START_TIMEOUT_S
        end = time.monotonic() + wait_s
        while len(ports) < self.size - 1:
            self._check_alive()
            if time.monotonic() > end:
                late = sorted(set(range(1, self.size)) - set(ports))
                raise RuntimeError(
                    f"DISAGG_TP_SIZE {self.size}: ranks {late} not ready after {wait_s:.0f} s"
                )
            if up.poll(200):
                msg = decode(up.recv())
                if msg[0] == "ready":
                    here = int(msg[1]) in self.config.ranks_here
                    ports[int(msg[1])] = (int(msg[2]), "" if here else str(msg[3]))
                elif msg[0] == "error":
                    raise RuntimeError(f"tensor-parallel rank {msg[1]} failed to start: {msg[2]}")
        ranks = range(1, self.size)
        return [ports[r][0] for r in ranks], [ports[r][1] for r in ranks]

    def _check_alive(self) -> None:
        for rank, proc in enumerate(self._procs, start=1):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"tensor-parallel rank {rank} exited with code {proc.returncode}; its "
                    "log is above"
                )

    def gather(self, tensor: Any) -> Any:
        assert self.collective is not None
        return self.collective.gather(tensor)

    def mirror(self, tokens: Sequence[int], start: int, table: Sequence[int]) -> None:
        """Hand a forward to every other rank (before rank 0 runs it)."""
        msg = ["fwd", list(tokens), start, list(table)]
        for down in self._down:
            down.send(msg)

    def read(self, reader: DecodeReader, req: Read) -> TransferStats:
        """Every rank reads its heads at once (rank 0 also claims); once all have, the
        prefill is notified (``req.notify`` is rank 0's, after them all). Raises the first
        rank's TransferError, after every rank's read has ended (their blocks are free to
        reuse only then)."""
        assert req.deadline_s is not None, "a fanned-out read names its deadline"
        futures = self._fan_out(req)
        stats: list[TransferStats] = []
        error: TransferError | None = None
        try:
            stats.append(reader.read(replace(req, notify=False)))
        except TransferError as e:
            error = e
        for rank, future in enumerate(futures, start=1):
            try:
                stats.append(future.result(timeout=req.deadline_s + ANSWER_MARGIN_S))
            except FutureTimeout:
                error = error or TransferError(f"rank {rank} did not answer its read", "deadline")
            except TransferError as e:
                error = error or e
        if error is not None:
            raise error
        reader.notify(req.peer, req.request_id)
        return _combined(stats)

    def _fan_out(self, req: Read) -> list[Future[TransferStats]]:
        futures = []
        peer = req.peer
        where = [peer.host, peer.port, peer.engine_id, peer.incarnation]
        asked = [req.request_id, req.remote_block_ids, req.local_block_ids, req.deadline_s,
                 req.prompt_digest]  # fmt: skip
        for rank, down in enumerate(self._down, start=1):
            call = next(self._ids)
            future: Future[TransferStats] = Future()
            with self._lock:
                self._calls[call] = (future, rank)
            down.send(["read", call, *where, *asked])
            futures.append(future)
        return futures

    def _answers(self, up: zmq.Socket[bytes]) -> None:
        """The ranks' answers, until the group closes; a rank's fatal error breaks it."""
        try:
            while not self._closing.is_set():
                if not up.poll(200):
                    continue
                msg = decode(up.recv())
                kind = msg[0]
                if kind in ("done", "fail"):
                    with self._lock:
                        future, _ = self._calls.pop(int(msg[1]), (None, 0))
                    if future is None:
                        continue
                    if kind == "done":
                        future.set_result(TransferStats(**msg[3]))
                    else:
                        future.set_exception(TransferError(str(msg[4]), str(msg[3])))
                elif kind == "error":
                    self._broken(f"tensor-parallel rank {msg[1]} failed: {msg[2]}")
        finally:
            up.close(linger=0)

    def _watch(self) -> None:
        while not self._closing.wait(0.5):
            for rank, proc in enumerate(self._procs, start=1):
                if proc.poll() is not None:
                    self._broken(f"tensor-parallel rank {rank} exited with code {proc.returncode}")
                    return

    def _broken(self, why: str) -> None:
        if self._closing.is_set():
            return
        log.error("%s; the engine cannot run without it and stops", why)
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        for future, rank in calls:
            future.set_exception(TransferError(f"rank {rank} is gone: {why}", "closed"))
        self._on_broken(why)

    def close(self) -> None:
        """Stop the other ranks (SIGKILL after STOP_WAIT_S), then leave the group."""
        self._closing.set()
        for down in self._down:
            with contextlib.suppress(zmq.ZMQError):
                down.send(["stop"], wait=False)
        end = time.monotonic() + STOP_WAIT_S
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_WAIT_S)
        for down in self._down:
            down.close()
        if self._reader is not None:
            self._reader.join(timeout=2)  # it closes its socket as it ends
        if self.collective is not None:
            self.collective.close()
        self._ctx.term()


def _combined(stats: list[TransferStats]) -> TransferStats:
    """One request's figures over its ranks: bytes and descriptors summed, times the
    slowest rank's."""
    return TransferStats(
        bytes=sum(s.bytes for s in stats),
        descriptors=sum(s.descriptors for s in stats),
        handshake_ms=max(s.handshake_ms for s in stats),
        post_ms=max(s.post_ms for s in stats),
        transfer_ms=max(s.transfer_ms for s in stats),
        total_ms=max(s.total_ms for s in stats),
        claim_ms=max(s.claim_ms for s in stats),
    )


def stats_fields(stats: TransferStats) -> dict[str, Any]:
    """A rank's TransferStats as a message (its fields by name)."""
    return asdict(stats)
