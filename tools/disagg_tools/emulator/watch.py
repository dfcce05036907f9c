"""The emulator's request wrapper and watch streaming (see :mod:`disagg_tools.emulator.server`).

Dev/bench tool, HTTP layer: newline-delimited JSON watch events over a chunked response,
ending at ``timeoutSeconds`` or when the client hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import aiohttp.web
import yaml

from disagg_tools.emulator.rules import ops


class Req(NamedTuple):
    """A resource request as the emulator needs it."""

    raw: aiohttp.web.BaseRequest
    where: ops.ResourcePath
    params: dict[str, str]
    ctype: str
    body: bytes

    def payload(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except ValueError:
            return yaml.safe_load(self.body)  # server-side apply bodies are YAML


async def stream(
    raw: aiohttp.web.BaseRequest,
    queue: asyncio.Queue[dict[str, Any]],
    backlog: list[dict[str, Any]],
    wanted: Callable[[dict[str, Any]], bool],
    timeout: float | None,
) -> aiohttp.web.StreamResponse:
    """Send ``backlog`` then live events from ``queue`` that the watch ``wanted``."""
    response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(raw)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout if timeout else None
    # A client that hangs up (kopf stopping) ends the stream; that is not an error.
    with contextlib.suppress(ConnectionResetError):
        for event in backlog:
            if wanted(event):
                await response.write(json.dumps(event).encode() + b"\n")
        while deadline is None or loop.time() < deadline:
            if raw.transport is None or raw.transport.is_closing():
                break
            try:
                event = await asyncio.wait_for(queue.get(), timeout=0.5)
            except asyncio.TimeoutError:
                continue
            if wanted(event):
                await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
    return response
