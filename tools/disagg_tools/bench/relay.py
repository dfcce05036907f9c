"""A relay that loses ``kv_transfer_params`` on the way to a decode worker, as a
misconfigured sidecar or gateway does (llm-d-router #1461). The decode then computes every
prompt itself and still answers the right tokens.

Benchmark tool (I/O: aiohttp). The routing benchmark injects fallbacks through it; the
tests use it to prove that each detector (the router's counter, the worker's, the canary
on the reference worker and on vLLM) sees what the tokens hide. ``GET /metrics`` passes
through, so a canary behind it reads the engine's own counters. ``app[DROPPED]`` counts
what it dropped: ``pd``, P/D decode hops (``do_remote_prefill``) that lost the prefill's
KV, the fallbacks injected; ``local``, other params (a decode-alone flag) it dropped.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from disagg_worker.serve.rules.kv_params import FIELD, hop_of

DROPPED = web.AppKey("dropped", dict)


def params_dropper(decode: str) -> web.Application:
    """An app relaying completions, chat completions and /tokenize to ``decode`` without
    their kv_transfer_params, and decode's /health and /metrics unchanged; counts in
    ``app[DROPPED]``."""
    dropped = {"pd": 0, "local": 0}

    async def relay(request: web.Request) -> web.Response:
        sent = await request.json()
        params = sent.pop(FIELD, None)
        if isinstance(params, dict):
            dropped["pd" if hop_of(params) == "decode" else "local"] += 1
        async with (
            aiohttp.ClientSession() as session,
            session.post(decode + request.path, json=sent) as resp,
        ):
            return web.json_response(await resp.json(content_type=None), status=resp.status)

    async def page(request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as session, session.get(decode + request.path) as resp:
            return web.Response(text=await resp.text(), status=resp.status)

    app = web.Application()
    app[DROPPED] = dropped
    for path in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
        app.router.add_post(path, relay)
    for path in ("/health", "/metrics"):
        app.router.add_get(path, page)
    return app
