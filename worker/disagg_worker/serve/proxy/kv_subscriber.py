"""The router's subscriptions to its decode engines' KV events (vLLM ``--kv-events-config``).

I/O layer (pyzmq SUB sockets, one per decode pod; what they say is read by
:mod:`.rules.kv_events`, pure). Pods come and go with the Service's endpoints: every
``sync_s`` the subscriptions follow the decode pools (a pod that left is dropped with its
blocks). ZMQ reconnects by itself; heartbeats and the socket's monitor say when a peer is
gone, so a dead engine's stream reads as lost (``disconnected``) and the router falls back
to its approximate index for it. Frames are decoded as msgpack data, size-limited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from disagg_worker.serve.proxy.rules.kv_events import (
    UNREADABLE,
    EngineBlocks,
    EventError,
    Hashing,
    decode_batch,
)

log = logging.getLogger("disagg.proxy")
HEARTBEAT_MS = 2000  # ZMTP heartbeats: a peer silent for 3 of them is gone
SYNC_S = 1.0


def endpoint(url: str, port: int) -> str:
    """A worker's base URL (``http://10.0.0.5:8000``) → its events socket on ``port``."""
    host = urlsplit(url).hostname or ""
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


class _Stream:
    """One engine's SUB socket, its monitor and the task reading both."""

    def __init__(self, ctx: zmq.asyncio.Context, address: str, topic: str, blocks: EngineBlocks):
        self.blocks = blocks
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 100_000)
        self.sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
        self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * HEARTBEAT_MS)
        self.sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.sock.connect(address)
        self.tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._watch())]

    async def _read(self) -> None:
        while True:
            frames = await self.sock.recv_multipart()
            try:
                self.blocks.apply(decode_batch(frames))
            except EventError as e:
                log.warning("KV event batch not read: %s", e)
                self.blocks.lost = UNREADABLE

    async def _watch(self) -> None:
        while True:
            event = parse_monitor_message(await self.monitor.recv_multipart())
            if event["event"] == zmq.EVENT_DISCONNECTED:
                self.blocks.disconnected()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.sock.disable_monitor()
        self.monitor.close(linger=0)
        self.sock.close(linger=0)


class KvSubscriber:
    """The event index of every decode engine the router routes to."""

    def __init__(
        self,
        hashing: Hashing,
        port: int,
        topic: str,
        urls: Callable[[], Iterable[str]],
        endpoints: Mapping[str, str] | None = None,
    ) -> None:
        """``port``/``topic``: where each engine publishes (rendered alike on every pod);
        ``urls``: the decode workers' base URLs now (the pools, kept current by discovery);
        ``endpoints``: a worker's socket where it is not its host at ``port``."""
        self.hashing, self.port, self.topic = hashing, port, topic
        self._urls = urls
        self._endpoints = dict(endpoints or {})
        self._ctx = zmq.asyncio.Context()
        self._streams: dict[str, _Stream] = {}
        self._task: asyncio.Task[None] | None = None

    def engine(self, url: str) -> EngineBlocks | None:
        """What the decode at ``url`` holds, by its events (None: not subscribed)."""
        stream = self._streams.get(url)
        return None if stream is None else stream.blocks

    async def sync(self) -> None:
        """Subscribe to decodes that appeared; drop those that left."""
        live = set(self._urls())
        for url in [u for u in self._streams if u not in live]:
            await self._streams.pop(url).close()
        for url in sorted(live - set(self._streams)):
            address = self._endpoints.get(url) or endpoint(url, self.port)
            self._streams[url] = _Stream(self._ctx, address, self.topic, EngineBlocks(self.hashing))
            log.info("subscribed to %s's KV events at %s", url, address)

    async def start(self) -> None:
        await self.sync()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SYNC_S)
            await self.sync()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for stream in self._streams.values():
            await stream.close()
        self._streams.clear()
        self._ctx.term()
