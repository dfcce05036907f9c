"""JSON answers for requests no route takes: an unknown path (404, naming the routes
served) and a known path with the wrong method (405, naming the methods it takes).

I/O layer (an aiohttp middleware), shared by the worker and the proxy: an OpenAI client
parses every error as ``{"error": {...}}``, and aiohttp's own answers are plain text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

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
