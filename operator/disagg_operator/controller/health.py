"""``GET /healthz``: liveness of the operator process, whether it leads or stands by.

I/O shell (aiohttp). Served by ``disagg operator`` for the whole life of the process, so a
standby, which runs no kopf, still answers its probes: it is alive, only waiting. The
body says which (``{"status": "ok", "leader": "standby"}``); the status code never
depends on it, so the kubelet restarts neither replica for being a standby.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web


async def serve(host: str, port: int, state: Callable[[], str]) -> web.AppRunner:
    """Start the endpoint on ``host:port``; ``state()`` names the leader-election state.

    Stop it with ``await runner.cleanup()``."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "leader": state()})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
