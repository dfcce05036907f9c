"""The router's read-only OpenAI routes: ``GET /v1/models``, answered by a decode engine
as the engine answers it.

I/O layer (through the proxy's :class:`~disagg_worker.serve.proxy.hops.HopClient`). The
routes are decided from vLLM 0.32's API routers (``entrypoints/openai/*/api_router.py``):
``GET /v1/models`` is its one read-only OpenAI route; ``GET /v1/responses/{id}`` reads a
response kept by the engine that made it (the router fronts no ``/v1/responses``);
``/v1/models/{id}`` is not served; ``/version``, ``/load`` and ``/tokenizer_info`` are
vLLM's own, not OpenAI's. Such a GET reads nothing a request made, so any decode engine
may answer: the pool's pick in the KV revision the router would pick first, then every
other decode worker of every revision while one fails (unreachable, its deadline, a 5xx,
no JSON); a 503 naming the pool when none answers. An engine's 4xx (an API key refused)
is its answer, relayed.
"""

from __future__ import annotations

from typing import Any

from disagg_worker.serve.proxy.hops import HopClient
from disagg_worker.serve.proxy.revisions import Pairs
from disagg_worker.serve.proxy.upstream import Backend, HopError

READ_ONLY_ROUTES = ("/v1/models",)
READ_TIMEOUT_S = 10.0  # per worker tried: a listing is instant on a live engine


async def read_only(
    http: HopClient, pairs: Pairs, path: str, headers: dict[str, str]
) -> tuple[int, Any]:
    """``GET path`` on the first decode worker that answers (module docstring): its
    status and JSON body. HopError 503 (with Retry-After) naming the pool when none
    does."""
    last: HopError | None = None
    for backend in _order(pairs):
        try:
            return await http.get(backend.url + path, headers, READ_TIMEOUT_S)
        except HopError as e:
            last = e
    cause = f"; the last one tried: {last}" if last is not None else ""
    raise HopError(
        503,
        f"GET {path}: no decode worker answered {_named(pairs)}{cause}; it is answered "
        "once a decode pod is ready",
        retry_after="1",
    )


def _order(pairs: Pairs) -> list[Backend]:
    """The decode pool's pick in the revision the router would pick, its other workers,
    then every other revision's."""
    pool = pairs.choose().decode
    first = pool.candidates() if pool.backends else []
    return first + [b for b in pairs.decodes if all(b is not f for f in first)]


def _named(pairs: Pairs) -> str:
    """The decode pool as an operator knows it: its Services, or its workers' URLs."""
    services = [p.decode.service for p in pairs.pairs if p.decode.service]
    if services:
        return f"behind {', '.join(services)}"
    return f"among {', '.join(b.url for b in pairs.decodes)}"
