"""`disagg proxy`'s HTTP app and command line: the routes a client calls, the pools and the
routing policy its flags name.

I/O layer (aiohttp). ``POST /v1/completions`` and ``/v1/chat/completions`` run
:class:`~disagg_worker.serve.proxy.flow.Proxy`; ``GET /health`` shows the pools, their
in-flight counts and the policy; ``GET /metrics`` the proxy's Prometheus metrics
(:mod:`.metrics`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import uuid
from typing import Any

from aiohttp import web

from disagg_worker.serve.limits import bounded
from disagg_worker.serve.openai import ApiError, proxy_refusal, request_id
from disagg_worker.serve.proxy.discovery import Refresher, parse_service
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.routing import MODES, Policy
from disagg_worker.serve.proxy.upstream import POLICIES, HopError, Pool
from disagg_worker.serve.routes import CLIENT_MAX_SIZE, json_route_errors, read_json


def build_app(proxy: Proxy) -> web.Application:
    """POST /v1/completions, /v1/chat/completions; GET /health, /metrics. Others: JSON
    404/405."""

    async def generate(request: web.Request) -> web.StreamResponse:
        rid = request_id(request.headers.get("X-Request-Id"), lambda: f"cmpl-{uuid.uuid4().hex}")
        headers = {"X-Request-Id": rid}  # the same id on both hops and in the answer
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        try:
            body = await read_json(request)
        except ApiError as e:
            return _error(e.status, e.message, rid, e.param)
        refused = proxy_refusal(body)
        if refused:
            return _error(400, refused, rid)
        try:
            if body.get("stream"):
                return await proxy.stream(request, request.path, body, headers)
            out = await proxy.complete(request.path, body, headers)
        except HopError as e:
            response = _error(e.status, str(e), rid)
            if e.status == 503:  # no worker had room: say when to come back
                response.headers["Retry-After"] = e.retry_after or "1"
            return response
        return web.json_response(out, headers={"X-Request-Id": rid})

    async def health(_: web.Request) -> web.Response:
        pools: dict[str, Any] = {
            name: [{"url": b.url, "inflight": b.inflight} for b in pool.backends]
            for name, pool in (("prefill", proxy.prefill), ("decode", proxy.decode))
        }
        services = {
            name: pool.service
            for name, pool in (("prefill", proxy.prefill), ("decode", proxy.decode))
            if pool.service
        }
        if services:
            pools["services"] = services
        info = {
            "status": "ok",
            "policy": proxy.prefill.policy,
            "routing": dataclasses.asdict(proxy.planner.policy),
            "prefill_retries": proxy.retried,
            "hop_failovers": {"prefill": proxy.prefill.failovers, "decode": proxy.decode.failovers},
        }
        return web.json_response({**info, **pools})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=proxy.metrics.render(), content_type="text/plain")

    app = web.Application(client_max_size=CLIENT_MAX_SIZE, middlewares=[json_route_errors(_error)])
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.on_startup.append(proxy.start)
    app.on_cleanup.append(proxy.close)
    return app


def _error(
    status: int, message: str, rid: str | None = None, param: str | None = None
) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "proxy_error"
    error = {"message": bounded(message), "type": kind, "param": param, "code": status}
    body = {"error": error}
    return web.json_response(body, status=status, headers={"X-Request-Id": rid} if rid else None)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="disagg proxy",
        description="P/D proxy: each completion goes to a prefill worker, then to a decode "
        "worker with the returned kv_transfer_params (vLLM's convention).",
    )
    for role in ("prefill", "decode"):
        pool = p.add_mutually_exclusive_group(required=True)
        pool.add_argument(f"--{role}", nargs="+", metavar="URL", help=f"the {role} workers")
        pool.add_argument(
            f"--{role}-service",
            metavar="HOST:PORT",
            help=f"a headless Service over the {role} pods: every ready pod it resolves to, "
            "resolved again every --refresh-s",
        )
    p.add_argument("--refresh-s", type=float, default=5.0, help="Service re-resolve period")
    p.add_argument(
        "--policy", choices=POLICIES, default="least-loaded",
        help="how a worker is picked for each hop (decode: after prefix affinity)",
    )  # fmt: skip
    routing = p.add_argument_group("routing (docs/routing.md)")
    routing.add_argument(
        "--disaggregate", choices=MODES, default="always",
        help="always: every request through prefill; threshold: only those whose "
        "non-cached prompt tokens reach --threshold-tokens (others: decode alone)",
    )  # fmt: skip
    routing.add_argument("--threshold-tokens", type=int, default=0, metavar="N")
    routing.add_argument(
        "--prefill-queue-limit", type=int, default=None, metavar="N",
        help="threshold: also decode alone while every prefill has N requests in flight",
    )  # fmt: skip
    routing.add_argument(
        "--decode-prefix-cache", action="store_true",
        help="the decode engine keeps a prefix cache (vLLM): route repeated prefixes to the "
        "decode that holds them and count only their other tokens",
    )  # fmt: skip
    routing.add_argument(
        "--block-tokens", type=int, default=16, metavar="N",
        help="the decode engine's KV block size in tokens (its prefix cache's unit)",
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="listen address (0.0.0.0 in a pod)")
    p.add_argument("--port", type=int, default=8080, help="0: any free port")
    p.add_argument("--timeout-s", type=float, default=60.0, help="deadline for both hops")
    p.add_argument(
        "--prefill-retries",
        type=int,
        default=1,
        help="a decode that could not read its KV from its prefill is retried from another "
        "prefill this many times (default 1; 0: never)",
    )
    return p


def pools(args: argparse.Namespace) -> tuple[Pool, Pool, list[Refresher]]:
    """The two pools the command line names, and what keeps Service-backed ones current."""
    out, refreshers = [], []
    for role in ("prefill", "decode"):
        service = getattr(args, f"{role}_service")
        if service is None:
            out.append(Pool(getattr(args, role), args.policy))
            continue
        try:
            host, port = parse_service(service)
        except ValueError as e:
            raise SystemExit(f"disagg proxy: --{role}-service {e}") from None
        pool = Pool([], args.policy, service=service)
        refreshers.append(Refresher(pool, host, port, args.refresh_s))
        out.append(pool)
    return out[0], out[1], refreshers


def policy(args: argparse.Namespace) -> Policy:
    """The routing policy the command line names (ValueError names the flag)."""
    return Policy(
        mode=args.disaggregate,
        threshold_tokens=args.threshold_tokens,
        prefill_queue_limit=args.prefill_queue_limit,
        prefix_cache=args.decode_prefix_cache,
        block_tokens=args.block_tokens,
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from disagg_worker.serve.localrun import serve

    prefill, decode, refreshers = pools(args)
    try:
        routing = policy(args)
    except ValueError as e:
        raise SystemExit(f"disagg proxy: {e}") from None
    proxy = Proxy(
        prefill, decode, args.policy, args.timeout_s,
        refreshers=refreshers, prefill_retries=args.prefill_retries, routing=routing,
    )  # fmt: skip

    async def ready(_: int) -> dict[str, Any]:
        return {
            "role": "proxy",
            "prefill": args.prefill or args.prefill_service,
            "decode": args.decode or args.decode_service,
        }

    # a client that leaves cancels its request: the decode hop is dropped and the
    # prefill's blocks released at once (Proxy.complete)
    app = build_app(proxy)
    asyncio.run(serve(app, args.host, args.port, ready, cancel_on_disconnect=True))
    return 0
