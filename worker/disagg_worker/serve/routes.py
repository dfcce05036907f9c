"""What the worker and the proxy share around their routes: JSON answers for requests no
route takes, and a request body read within its limits. An unknown path gets a 404 naming
the routes served; a known path with the wrong method, a 405 naming the methods it takes.

I/O layer (aiohttp), shared by the worker and the proxy: an OpenAI client parses every
error as ``{"error": {...}}``, and aiohttp's own answers are plain text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from disagg_worker.serve.rules.limits import MAX_BODY_BYTES
from disagg_worker.serve.rules.openai import parse_body, too_large

# An application's client_max_size: aiohttp refuses a body that reaches it, so one more
# than the limit lets a body of exactly MAX_BODY_BYTES through.
CLIENT_MAX_SIZE = MAX_BODY_BYTES + 1

ErrorResponse = Callable[[int, str], web.StreamResponse]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def served(app: web.Application) -> list[str]:
    """``METHOD /path`` of every route, HEAD left out (aiohttp adds it to each GET)."""
    routes = {
        f"{r.method} {r.resource.canonical}"
        for r in app.router.routes()
        if r.resource is not None and r.method != "HEAD"
    }
    return sorted(routes, key=lambda s: (s.split()[1], s))


def json_route_errors(error: ErrorResponse) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Middleware turning aiohttp's 404/405 into ``error(status, message)``."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPMethodNotAllowed as e:
            allowed = ", ".join(sorted(m for m in e.allowed_methods if m != "HEAD"))
            return error(405, f"{request.method} {request.path}: method not allowed; use {allowed}")
        except web.HTTPNotFound:
            routes = ", ".join(served(request.app))
            return error(404, f"{request.path}: no such route; this server serves {routes}")

    return middleware


async def read_json(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object: OpenAIError 413 over MAX_BODY_BYTES, 400 naming ``body``
    when it is not a JSON object or nests too deep (:func:`serve.openai.parse_body`)."""
    size = request.content_length
    if size is not None and size > MAX_BODY_BYTES:
        raise too_large(size)  # refused unread
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:  # a chunked body: no length to check first
        raise too_large(None) from None
    return parse_body(raw)
