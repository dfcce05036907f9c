"""Run the local kubelet and its controllers against an API server until told to stop.

I/O layer. :func:`running` is what tests and ``disagg cluster`` use beside the real
operator (which talks to the same API server): every pod the operator creates then runs
here, its probes decide its readiness, its Services answer with Ready pods only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from disagg_tools.local.kubelet import network
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.kubelet.controllers import Controllers
from disagg_tools.local.kubelet.node import Kubelet, NodeConfig

log = logging.getLogger("disagg.kubelet")


@contextlib.asynccontextmanager
async def running(
    url: str, workdir: Path, config: NodeConfig | None = None
) -> AsyncIterator[Kubelet]:
    """The kubelet and controllers for the API server at ``url`` in this event loop; on
    exit every pod's processes stop. The pods' addresses come from a pod network no other
    local kubelet on this host holds (unless ``config`` gives them)."""
    with network.leased() as net:
        async with _running(url, workdir, config or NodeConfig(), net) as kubelet:
            yield kubelet


@contextlib.asynccontextmanager
async def _running(url: str, workdir: Path, config: NodeConfig, net: str) -> AsyncIterator[Kubelet]:
    api = Api(url)
    await api.start()
    kubelet = Kubelet(api, workdir, config, net)
    tick_s = config.tick_s
    controllers = Controllers(api, kubelet)
    stop = asyncio.Event()

    async def control() -> None:
        while not stop.is_set():
            try:
                await controllers.tick()
            except Exception:  # tried again next tick; say why
                log.exception("local controllers tick failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), tick_s)

    tasks = [asyncio.ensure_future(kubelet.run(stop)), asyncio.ensure_future(control())]
    try:
        yield kubelet
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()
