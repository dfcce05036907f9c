"""What each hop of the proxy sends, the HTTP calls that send it (:class:`HopClient`), and
how decode's event stream reaches the client.

I/O layer (aiohttp). What the bodies carry for a split is the P/D protocol's
(:mod:`disagg_worker.serve.pd`); the calls here send them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web

from disagg_worker.serve.proxy.upstream import (
    HopError,
    error_kind,
    error_param,
    hop_failure,
    message_of,
    relay_status,
)
from disagg_worker.serve.rules.limits import bounded

log = logging.getLogger("disagg.proxy")
RELEASE_TIMEOUT_S = 2.0

# A streamed answer's route, in headers (its body is decode's events, passed unchanged):
# what ``disagg.proxy`` says of a whole answer. Name → (the figure, its type).
STREAM_HEADERS: dict[str, tuple[str, type]] = {
    "X-Disagg-Path": ("path", str),  # pd (prefill, then decode) or decode (decode alone)
    "X-Disagg-Route-Reason": ("route_reason", str),
    "X-Disagg-Prefill-Url": ("prefill_url", str),
    "X-Disagg-Prefill-Hop-Ms": ("prefill_hop_ms", float),
    "X-Disagg-Prefill-Retries": ("prefill_retries", int),
    "X-Disagg-Decode-Url": ("decode_url", str),
    "X-Disagg-Prompt-Tokens": ("prompt_tokens", int),  # when counted (the policy needs them)
    "X-Disagg-Cached-Tokens": ("cached_tokens", int),  # what the router expects decode holds
}


def stream_headers(route: Mapping[str, Any]) -> dict[str, str]:
    """The :data:`STREAM_HEADERS` of a streamed answer whose route figures are ``route``
    (a figure it lacks, as the prefill's for decode alone, is left out)."""
    return {
        name: f"{route[key]:.3f}" if kind is float else str(route[key])
        for name, (key, kind) in STREAM_HEADERS.items()
        if key in route
    }


def route_of(headers: Mapping[str, str]) -> dict[str, Any]:
    """:func:`stream_headers` read back, typed: a client's view of a stream's route."""
    return {
        key: kind(headers[name]) for name, (key, kind) in STREAM_HEADERS.items() if name in headers
    }


async def relay_stream(
    request: web.Request,
    resp: aiohttp.ClientResponse,
    where: str,
    headers: dict[str, str],
    route: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Copy decode's event stream to the client as the bytes arrive (no re-framing: the
    worker's ``data:`` lines and ``[DONE]`` pass unchanged); ``route``: the
    :func:`stream_headers` it answers with."""
    out = web.StreamResponse(
        headers={
            "Content-Type": resp.headers.get("Content-Type", "text/event-stream"),
            "Cache-Control": "no-cache",
            "X-Request-Id": headers["X-Request-Id"],
            **(route or {}),
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


def answered_error(where: str, status: int, data: Any, retry_after: str = "") -> HopError:
    """The hop's error for a worker's error answer (or a 2xx that is no JSON object): it
    names the hop, the worker and its message. A client error is the client's to fix:
    the client gets it flat (the worker's own message, type and field, ``param``)."""
    message = message_of(data)
    client = 400 <= status < 500
    return HopError(
        relay_status(status),
        f"{where} answered {status}: {message}",
        retry_after=retry_after,
        kind=error_kind(data),
        param=error_param(data) if client else None,
        relayed=message if client else None,
    )


class HopClient:
    """The proxy's HTTP calls to workers: one session (no connection limit), a JSON hop, a
    streamed hop, a page, and a release; ``timeout_s`` bounds each later read of a
    stream."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        # the system resolver (cluster DNS), as discovery's: never c-ares, which would
        # read neither /etc/hosts nor what a host's resolver is told
        connector = aiohttp.TCPConnector(limit=0, resolver=aiohttp.ThreadedResolver())
        self.session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def post(
        self, role: str, url: str, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> dict[str, Any]:
        """POST a JSON hop within ``deadline``: the answer, or the hop's error (a
        prefill hop whose worker dropped the connection may go to another worker)."""
        assert self.session is not None, "HopClient.start() first"
        left = deadline - time.monotonic()
        where = f"{role} {url}"
        if left <= 0:
            raise HopError(504, f"{where}: not tried, the {self.timeout_s:g}s deadline passed")
        try:
            async with self.session.post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=left)
            ) as resp:
                data = await resp.json(content_type=None)
                status, retry_after = resp.status, resp.headers.get("Retry-After", "")
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise hop_failure(where, self.timeout_s, e, stateless=role == "prefill") from None
        if status >= 400 or not isinstance(data, dict):
            raise answered_error(where, status, data, retry_after)
        return data

    async def open(
        self, url: str, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> aiohttp.ClientResponse:
        """POST a streaming hop: the deadline bounds the answer's head, ``--timeout-s``
        each later read. A 4xx/5xx is raised as the hop's error."""
        assert self.session is not None
        where, left = f"decode {url}", deadline - time.monotonic()
        timeout = aiohttp.ClientTimeout(total=None, sock_read=self.timeout_s)
        try:
            post = self.session.post(url, json=body, headers=headers, timeout=timeout)
            resp = await asyncio.wait_for(post, max(left, 0.001))
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise hop_failure(where, self.timeout_s, e) from None
        if resp.status >= 400:
            try:
                data: Any = await resp.json(content_type=None)
            except (aiohttp.ClientError, ValueError):
                data = f"(an unreadable {resp.content_type} body)"
            finally:
                resp.release()
            raise answered_error(where, resp.status, data, resp.headers.get("Retry-After", ""))
        return resp

    async def get(self, url: str, headers: dict[str, str], timeout_s: float) -> tuple[int, Any]:
        """GET a worker's JSON page: its status and body when it answered one (2xx, or a
        4xx, the client's to fix); a HopError when it cannot be reached, runs past
        ``timeout_s``, fails (5xx) or answers no JSON."""
        assert self.session is not None, "HopClient.start() first"
        where = f"GET {url}"
        try:
            async with self.session.get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                status, data = resp.status, await resp.json(content_type=None)
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise hop_failure(where, timeout_s, e) from None
        if not 200 <= status < 300 and not 400 <= status < 500:
            raise HopError(relay_status(status), f"{where} answered {status}: {message_of(data)}")
        return status, data

    async def text(self, url: str, timeout_s: float) -> str:
        """GET a worker's page (its /metrics) as text; a failure is a HopError."""
        assert self.session is not None, "HopClient.start() first"
        try:
            async with self.session.get(
                url, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                if resp.status != 200:
                    raise HopError(502, f"GET {url} answered {resp.status}")
                return await resp.text()
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise hop_failure(f"GET {url}", timeout_s, e) from None

    async def release(
        self, url: str, call: tuple[str, dict[str, Any]], headers: dict[str, str]
    ) -> None:
        """Tell a prefill to free the blocks it holds for a failed decode: ``call`` is the
        protocol's (path, body) for it (best effort)."""
        assert self.session is not None
        timeout = aiohttp.ClientTimeout(total=RELEASE_TIMEOUT_S)
        path, body = call
        try:
            async with self.session.post(
                url + path, json=body, headers=headers, timeout=timeout
            ) as resp:
                await resp.read()
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            log.debug("release at %s failed: %s", url, e)
