"""A local port forwarded to a Service's ready endpoints, as ``kubectl port-forward svc/...``.

I/O layer (asyncio streams). Each connection goes to one ready endpoint, asked for when the
connection arrives (the Service's EndpointSlices, so a pod that turns unready or goes takes
no new connection), the next one in turn; bytes are copied both ways until either side
closes. No ready endpoint: the connection is closed at once (a client sees a reset, as
kubectl's forward gives when the pod is gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger("disagg.forward")
Endpoints = Callable[[], Awaitable[list[tuple[str, int]]]]
CHUNK = 1 << 16


@contextlib.asynccontextmanager
async def serving(port: int, endpoints: Endpoints, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Listen on ``host:port`` (0: any free port) while the block runs; yields the port."""
    turn = itertools.count()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ready = await endpoints()
        if not ready:
            log.warning("no ready endpoint: connection closed")
            writer.close()
            return
        address, target = ready[next(turn) % len(ready)]
        try:
            up_reader, up_writer = await asyncio.open_connection(address, target)
        except OSError as e:
            log.warning("endpoint %s:%s refused: %s", address, target, e)
            writer.close()
            return
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))

    server = await asyncio.start_server(connected, host, port)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        with contextlib.suppress(asyncio.TimeoutError):  # open keep-alive connections
            await asyncio.wait_for(server.wait_closed(), 2.0)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from ``reader`` to ``writer`` until end of stream; then close ``writer``."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
