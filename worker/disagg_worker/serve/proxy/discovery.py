"""The proxy's pools from a Service name: every ready pod behind a headless Service.

I/O layer (DNS). A headless Service's name resolves to one address per ready pod (the
endpoints controller leaves unready pods out), so resolving it again every few seconds
follows scale-ups, rollouts and failures. A ClusterIP or a cached single answer would
pin the proxy to one pod; this spreads requests over all of them by the pool's policy.

:class:`Refresher` keeps one :class:`~disagg_worker.serve.proxy.upstream.Pool` current: once
before serving (the first answer) and then every ``refresh_s``. A name that does not
resolve (a headless Service with no ready pod answers NXDOMAIN) empties the pool, and its
requests get a 503 naming the Service until a pod is ready again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable

from disagg_worker.serve.proxy.upstream import Pool

log = logging.getLogger("disagg.proxy")
Resolve = Callable[[str, int], Awaitable[list[str]]]


def parse_service(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (a Service's DNS name and port) → (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: write HOST:PORT, e.g. demo-prefill.default.svc:8000")
    return host, int(port)


async def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (cluster DNS), sorted, as base URLs on ``port``;
    OSError when none (NXDOMAIN)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found = sorted({str(info[4][0]) for info in infos})
    return [f"http://[{a}]:{port}" if ":" in a else f"http://{a}:{port}" for a in found]


class Periodic:
    """Runs ``refresh`` once at start, then every ``refresh_s`` seconds until closed (what
    the proxy reads of the cluster: Service addresses, EndpointSlice zones). Closing sets a
    flag before the cancel: a refresh can lose the cancel (on Python 3.10 an aiohttp call
    whose own timeout fires with it ends in the TimeoutError the refresh logs) and the loop
    must end anyway."""

    refresh_s: float
    _task: asyncio.Task[None] | None = None
    _closing = False

    async def refresh(self) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.refresh_s)
            await self.refresh()

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class Refresher(Periodic):
    """Keeps ``pool`` equal to what its Service resolves to."""

    def __init__(
        self, pool: Pool, host: str, port: int, refresh_s: float, resolver: Resolve = resolve
    ) -> None:
        self.pool, self.host, self.port = pool, host, port
        self.refresh_s = refresh_s
        self._resolve = resolver  # cluster DNS in a pod; a test's stand-in elsewhere

    async def refresh(self) -> None:
        try:
            urls = await self._resolve(self.host, self.port)
        except OSError as e:  # NXDOMAIN: no ready pod behind the Service
            log.debug("resolving %s: %s", self.host, e)
            urls = []
        self.pool.set_urls(urls)
