"""The ranks of one tensor-parallel engine: the gloo group their all-gathers run on, and
the small control channel rank 0 drives the other ranks with.

I/O layer. The ranks of an engine in one pod share its network namespace, so both run over
loopback: gloo (torch.distributed) for the engine's all-gathers, found through a TCPStore
that rank 0 opens on a free port; pyzmq PUSH/PULL for control (each rank's commands in
order on one socket from rank 0, answers to rank 0 on one socket it reads). An engine
whose ranks span the pods of a group (``DISAGG_NODES``) runs both over the pod network, on
the group's fixed ports (:func:`group_ports`), gloo on the interface of the pod's address.
Messages are msgpack arrays (never pickle): ``["fwd", tokens, start, table]``,
``["read", call, ...]``, ``["stop"]`` down; ``["ready", rank, port, host]``,
``["done", call, rank, stats]``, ``["fail", call, rank, reason, message]``,
``["error", rank, message]`` up.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any

import msgspec
import torch
import torch.distributed as dist
import zmq

# an all-gather waits this long for the other ranks: they run the same forward at once,
# so only a dead or stopped rank makes it wait (then the engine fails and the pod restarts)
GATHER_TIMEOUT_S = 60.0
LOOPBACK = "127.0.0.1"

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(list[Any])


def encode(msg: list[Any]) -> bytes:
    return _enc.encode(msg)


def decode(frame: bytes) -> list[Any]:
    return _dec.decode(frame)


# Rank 0's, in the store: the ranks of a group's other pods read them (their pods have
# names of their own; the engine is rank 0's).
INCARNATION_KEY = "incarnation"
ENGINE_ID_KEY = "engine_id"


def open_store(size: int, port: int = 0) -> dist.TCPStore:
    """Rank 0's rendezvous for the gloo group, on ``port`` (0: a free one, ``.port``); it
    listens on every address, so ranks of a group's other pods reach it too."""
    return dist.TCPStore(
        LOOPBACK,
        port,
        size,
        is_master=True,
        timeout=timedelta(seconds=GATHER_TIMEOUT_S * 2),
        wait_for_workers=False,
    )


def join_store(host: str, port: int, size: int) -> dist.TCPStore:
    """A rank's connection to rank 0's store (waits for it as long as a start may take)."""
    timeout = timedelta(seconds=GATHER_TIMEOUT_S * 2)
    return dist.TCPStore(host, port, size, is_master=False, timeout=timeout)


def group_ports(base: int, rank: int) -> tuple[int, int, int]:
    """(store, rank 0's answers, rank 0's commands to ``rank``) of a group on ``base``."""
    return base, base + 1, base + 1 + rank


def interface_of(address: str) -> str | None:
    """The network interface holding ``address`` (gloo's GLOO_SOCKET_IFNAME), or None."""
    import fcntl
    import socket
    import struct

    if address.startswith("127."):
        return "lo"  # every loopback address is the lo interface's

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()))
            except OSError:
                continue  # no IPv4 address
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


class Collective:
    """This rank's member of the engine's gloo group: :meth:`gather` concatenates every
    rank's tensor along its last dimension, in rank order."""

    def __init__(self, rank: int, size: int, store: dist.Store, address: str = LOOPBACK) -> None:
        # gloo's pairs meet on the interface of this rank's address (loopback in one pod)
        interface = interface_of(address)
        if interface is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        self.rank, self.size = rank, size
        dist.init_process_group(
            "gloo",
            store=store,
            rank=rank,
            world_size=size,
            timeout=timedelta(seconds=GATHER_TIMEOUT_S),
        )

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(self.size)]
        dist.all_gather(parts, tensor)
        return torch.cat(parts, dim=-1)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


SEND_TIMEOUT_MS = 5000  # a send to a rank that died would otherwise wait for ever


class Sender:
    """A PUSH socket any thread may send on (one at a time); a send that cannot be queued
    within SEND_TIMEOUT_MS (the other side is gone) raises ``zmq.Again``."""

    def __init__(self, sock: zmq.Socket[bytes]) -> None:
        sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        sock.setsockopt(zmq.LINGER, 0)
        self._sock, self._lock = sock, threading.Lock()

    def send(self, msg: list[Any], *, wait: bool = True) -> None:
        with self._lock:
            self._sock.send(encode(msg), 0 if wait else zmq.NOBLOCK)

    def close(self) -> None:
        with self._lock:
            self._sock.close(linger=0)
