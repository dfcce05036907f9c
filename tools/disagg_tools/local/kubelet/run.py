"""Run the local kubelet and its controllers against an API server until told to stop.

I/O layer. :func:`running` is what tests and ``disagg up --kubelet`` use beside the real
operator (which talks to the same API server): every pod the operator creates then runs
here, its probes decide its readiness, its Services answer with Ready pods only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from disagg_tools.local.engines import BUILTIN, LocalEngine
from disagg_tools.local.kubelet import network
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.kubelet.controllers import Controllers
from disagg_tools.local.kubelet.node import KUBELET_1_36, Kubelet
from disagg_tools.local.rules.backoff import CrashLoop

log = logging.getLogger("disagg.kubelet")


@contextlib.asynccontextmanager
async def running(
    url: str,
    workdir: Path,
    *,
    engines: Mapping[str, LocalEngine] = BUILTIN,
    tick_s: float = 0.1,
    crash_loop: CrashLoop = KUBELET_1_36,
) -> AsyncIterator[Kubelet]:
    """The kubelet and controllers for the API server at ``url`` in this event loop; on
    exit every pod's processes stop. ``crash_loop``: the node's restart back-off. The pods'
    addresses come from a pod network no other local kubelet on this host holds."""
    with network.leased() as net:
        async with _running(url, workdir, engines, tick_s, crash_loop, net) as kubelet:
            yield kubelet


@contextlib.asynccontextmanager
async def _running(
    url: str,
    workdir: Path,
    engines: Mapping[str, LocalEngine],
    tick_s: float,
    crash_loop: CrashLoop,
    net: str,
) -> AsyncIterator[Kubelet]:
    api = Api(url)
    await api.start()
    kubelet = Kubelet(api, workdir, engines, tick_s, crash_loop, net)
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
