"""The fault-injecting relay counts the P/D requests whose ``kv_transfer_params`` it
dropped: what the routing bench reports as ``fallbacks_injected``."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from aiohttp import web

from disagg_tools.bench.relay import DROPPED, params_dropper
from disagg_tools.local.children import serve_in_thread
from disagg_worker.serve.pd.kv_transfer_params import LOCAL_PARAMS


def _echo() -> web.Application:
    """A stand-in decode (edge: its answer is known): answers the body it received."""

    async def complete(request: web.Request) -> web.Response:
        return web.json_response({"received": await request.json()})

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    return app


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        answer: dict[str, Any] = json.load(resp)
    return answer


def test_the_relay_counts_only_the_p_d_params_it_dropped() -> None:
    pd = {"do_remote_prefill": True, "remote_engine_id": "p", "remote_block_ids": [1]}
    sent = [{"kv_transfer_params": pd}, {"kv_transfer_params": pd}, {"kv_transfer_params": pd},
            {"kv_transfer_params": LOCAL_PARAMS.to_wire()}, {}]  # fmt: skip
    with serve_in_thread(_echo()) as decode:
        relay = params_dropper(decode)
        with serve_in_thread(relay) as url:
            seen = [_post(url + "/v1/completions", {"prompt": [1], **b})["received"] for b in sent]
    assert all("kv_transfer_params" not in body for body in seen)
    # three P/D hops lost their KV; a decode-alone request lost a flag, no KV
    assert relay[DROPPED] == {"pd": 3, "local": 1}
