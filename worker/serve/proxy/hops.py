"""What each hop of the proxy sends, and how decode's event stream reaches the client.

I/O layer (aiohttp's stream types). The bodies follow vLLM's convention (its toy P/D proxy
does the same): a prefill gets the client's request for one token with
``do_remote_decode``; a decode the client's request with the prefill's
``kv_transfer_params``, or :data:`LOCAL_PARAMS` when it is to prefill the prompt itself.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from aiohttp import web

from disagg_worker.serve.limits import bounded

# A request a decode computes itself by choice (vLLM reads the flags the same way).
LOCAL_PARAMS = {"do_remote_prefill": False, "do_remote_decode": False}
PREFILL_PARAMS = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}


def prefill_body(body: dict[str, Any]) -> dict[str, Any]:
    """The client's request as a prefill gets it (vLLM's toy proxy does the same): one
    token, no streaming, and no minimum lengths, which a one-token request cannot honour."""
    first = {**body, "max_tokens": 1, "stream": False, "kv_transfer_params": PREFILL_PARAMS}
    if "max_completion_tokens" in first:
        first["max_completion_tokens"] = 1
    for key in ("stream_options", "min_tokens", "min_completion_tokens"):
        first.pop(key, None)
    return first


async def relay_stream(
    request: web.Request, resp: aiohttp.ClientResponse, where: str, headers: dict[str, str]
) -> web.StreamResponse:
    """Copy decode's event stream to the client as the bytes arrive (no re-framing: the
    worker's ``data:`` lines and ``[DONE]`` pass unchanged)."""
    out = web.StreamResponse(
        headers={
            "Content-Type": resp.headers.get("Content-Type", "text/event-stream"),
            "Cache-Control": "no-cache",
            "X-Request-Id": headers["X-Request-Id"],
        }
    )
    await out.prepare(request)
    try:
        async for data in resp.content.iter_any():
            await out.write(data)
    except ConnectionResetError:  # the client left: drop decode's connection, it stops
        resp.close()
        return out
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        # the status line is gone: the failure can only be an event, then the end
        cause = "no data within the read timeout" if isinstance(e, asyncio.TimeoutError) else e
        event = {"error": {"message": bounded(f"{where}: stream broken: {cause}"),
                           "type": "proxy_error", "param": None, "code": 502}}  # fmt: skip
        await out.write(b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n")
    await out.write_eof()
    return out
