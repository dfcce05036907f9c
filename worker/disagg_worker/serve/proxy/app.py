"""`disagg proxy`'s HTTP app and command line: the routes a client calls, the pools and
the settings (:mod:`.config`) its flags name.

I/O layer (aiohttp). ``POST /v1/completions`` and ``/v1/chat/completions`` run
:class:`~disagg_worker.serve.proxy.flow.Proxy` once their fields pass
(:mod:`.rules.fields`); ``GET /v1/models`` is a decode engine's answer (:mod:`.readonly`);
``GET /health`` shows the pools, their in-flight counts and the policy; ``GET /metrics``
the proxy's Prometheus metrics (:mod:`.metrics`). Each completion is a server span under
the client's ``traceparent`` (a new trace when it sends none or an invalid one:
:mod:`disagg_worker.serve.rules.tracecontext`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import time
import uuid
from typing import Any

from aiohttp import web

from disagg_contract import commandline
from disagg_worker.serve import pd
from disagg_worker.serve.proxy.config import from_args
from disagg_worker.serve.proxy.discovery import Refresher, parse_service
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.readonly import READ_ONLY_ROUTES, read_only
from disagg_worker.serve.proxy.revisions import Pair, Pairs
from disagg_worker.serve.proxy.rules.fields import refusal
from disagg_worker.serve.proxy.rules.kv_events import HASH_ALGOS
from disagg_worker.serve.proxy.rules.locality import MODES as LOCALITY
from disagg_worker.serve.proxy.rules.routing import MODES, PREFIX_INDEXES
from disagg_worker.serve.proxy.upstream import POLICIES, HopError, Pool
from disagg_worker.serve.proxy.zones import KubeApi, Zones, service_of
from disagg_worker.serve.routes import CLIENT_MAX_SIZE, json_route_errors, read_json
from disagg_worker.serve.rules.limits import bounded
from disagg_worker.serve.rules.openai import OpenAIError, request_id
from disagg_worker.serve.tracing import server_span

log = logging.getLogger("disagg.proxy")
ROLES = ("prefill", "decode")
KV_FIELD = "{kv}"  # where a KV revision goes in a Service name


def build_app(proxy: Proxy) -> web.Application:
    """POST /v1/completions, /v1/chat/completions; GET /v1/models, /health, /metrics.
    Others: JSON 404/405."""

    async def generate(request: web.Request) -> web.StreamResponse:
        with server_span(proxy.tracer, request) as span:
            response = await answer(request)
            span.answered(response.status)
            return response

    async def answer(request: web.Request) -> web.StreamResponse:
        rid = request_id(request.headers.get("X-Request-Id"), lambda: f"cmpl-{uuid.uuid4().hex}")
        headers = {"X-Request-Id": rid, **_auth(request)}  # one id: both hops, the answer
        try:
            body = await read_json(request)
        except OpenAIError as e:
            return _error(e.status, e.message, rid, e.param)
        chat = request.path == "/v1/chat/completions"
        refused = refusal(body, chat, proxy.config.protocol.owned)
        if refused is not None:  # before the prefill hop: no KV computed for it
            return web.json_response(refused.body(), status=400, headers={"X-Request-Id": rid})
        try:
            if body.get("stream"):
                return await proxy.stream(request, request.path, body, headers)
            out = await proxy.complete(request.path, body, headers)
        except HopError as e:
            return _hop_error(e, rid)
        return web.json_response(out, headers={"X-Request-Id": rid})

    async def read(request: web.Request) -> web.Response:
        try:
            status, data = await read_only(proxy.http, proxy.pairs, request.path, _auth(request))
        except HopError as e:
            return _hop_error(e)
        return web.json_response(data, status=status)

    async def health(_: web.Request) -> web.Response:
        return web.json_response(health_of(proxy))

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=proxy.metrics.render(), content_type="text/plain")

    app = web.Application(client_max_size=CLIENT_MAX_SIZE, middlewares=[json_route_errors(_error)])
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    for path in READ_ONLY_ROUTES:
        app.router.add_get(path, read)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.on_startup.append(proxy.start)
    app.on_cleanup.append(proxy.close)
    return app


def health_of(proxy: Proxy) -> dict[str, Any]:
    """``GET /health``: the workers of each role (every KV revision's), their in-flight
    counts, the Services they come from, the policy and the hops that moved on; with KV
    revisions, each one's workers too."""
    pairs = proxy.pairs.pairs

    def workers(pools: list[Pool]) -> list[dict[str, Any]]:
        return [{"url": b.url, "inflight": b.inflight} for pool in pools for b in pool.backends]

    def failovers(pools: list[Pool]) -> dict[str, int]:
        return {k: sum(p.failovers[k] for p in pools) for k in ("unreachable", "full")}

    out: dict[str, Any] = {
        "status": "ok",
        "policy": proxy.pairs.policy,
        "routing": dataclasses.asdict(proxy.planner.policy),
        "prefill_retries": proxy.retried,
        "hop_failovers": {
            "prefill": failovers([p.prefill for p in pairs]),
            "decode": failovers([p.decode for p in pairs]),
        },
        "prefill": workers([p.prefill for p in pairs]),
        "decode": workers([p.decode for p in pairs]),
    }
    services = {r: pool.service for r in ROLES if (pool := getattr(pairs[0], r)).service}
    if services:
        out["services"] = services
    if any(p.kv for p in pairs):
        out["kv_revisions"] = {
            p.kv: {
                "prefill": workers([p.prefill]),
                "decode": workers([p.decode]),
                "pools": _loads(p, proxy.config.queue_s),
            }
            for p in pairs
        }
    else:
        out["pools"] = _loads(pairs[0], proxy.config.queue_s)
    return out


def _loads(pair: Pair, queue_s: float) -> dict[str, Any]:
    """Each pool's hops in flight, measured rate and shedding bound (None: no bound yet)."""
    now = time.monotonic()

    def load(pool: Pool) -> dict[str, Any]:
        rate = pool.drain.rate(now)
        return {
            "inflight": pool.drain.inflight,
            "rate_per_s": None if rate is None else round(rate, 3),
            "limit": pool.drain.limit(now, queue_s, len(pool.backends)),
            "queue_s": queue_s,
        }

    return {role: load(getattr(pair, role)) for role in ROLES}


def _auth(request: web.Request) -> dict[str, str]:
    """The client's Authorization, which every hop carries (an engine's API key)."""
    given = request.headers.get("Authorization")
    return {"Authorization": given} if given is not None else {}


def _hop_error(e: HopError, rid: str | None = None) -> web.Response:
    """A failed hop's answer: a worker's client error flat, as the worker gave it (its
    message, type and field; the hop that refused it to the log), any other naming the
    hop; a 503 says when to come back."""
    if e.relayed is not None:
        log.info("request %s: %s", rid, e)
    response = _error(e.status, e.relayed or str(e), rid, e.param, e.kind)
    if e.status == 503:  # no worker had room: say when to come back
        response.headers["Retry-After"] = e.retry_after or "1"
    return response


def _error(
    status: int,
    message: str,
    rid: str | None = None,
    param: str | None = None,
    kind: str = "",
) -> web.Response:
    kind = kind or ("invalid_request_error" if status < 500 else "proxy_error")
    error = {"message": bounded(message), "type": kind, "param": param, "code": status}
    body = {"error": error}
    return web.json_response(body, status=status, headers={"X-Request-Id": rid} if rid else None)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg proxy",
        description="P/D proxy: each completion goes to a prefill worker, then to a decode "
        "worker told where the prefill's KV is, in the engine's P/D protocol.",
    )
    for role in ("prefill", "decode"):
        pool = p.add_mutually_exclusive_group(required=True)
        pool.add_argument(f"--{role}", nargs="+", metavar="URL", help=f"the {role} workers")
        pool.add_argument(
            f"--{role}-service",
            metavar="HOST:PORT",
            help=f"a headless Service over the {role} pods: every ready pod it resolves to, "
            f"resolved again every --refresh-s; with {KV_FIELD} in it, one per --kv-revision",
        )
    p.add_argument(
        "--kv-revision", action="append", metavar="KV",
        help=f"a KV revision to pair requests within (repeat it): its Services are the "
        f"--prefill-service and --decode-service names with {KV_FIELD} replaced by it, and "
        "each request's two hops go to one revision's pods",
    )  # fmt: skip
    p.add_argument("--refresh-s", type=float, default=5.0, help="Service re-resolve period")
    pd.add_argument(p)
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
    routing.add_argument(
        "--threshold-tokens", type=int, default=0, metavar="N",
        help="threshold: the non-cached prompt tokens that send a request through prefill",
    )  # fmt: skip
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
    routing.add_argument(
        "--prefix-index", choices=PREFIX_INDEXES, default="approximate",
        help="what the router knows of each decode's prefix cache: approximate (what it sent "
        "there) or events (the engine's own KV events, --kv-events-*; approximate while a "
        "pod's stream is not whole)",
    )  # fmt: skip
    routing.add_argument(
        "--kv-events-port", type=int, default=5557, metavar="PORT",
        help="events: the port each decode publishes its KV events on (vLLM --kv-events-config)",
    )  # fmt: skip
    routing.add_argument(
        "--kv-events-topic", default="kv@", help="events: their topic (a prefix of it)"
    )
    routing.add_argument(
        "--kv-events-endpoint", action="append", metavar="URL=tcp://HOST:PORT",
        help="events: a worker's socket where it is not its host at --kv-events-port (engines "
        "sharing a host in local runs); repeat it",
    )  # fmt: skip
    routing.add_argument(
        "--kv-hash-algo", choices=HASH_ALGOS, default="sha256_cbor",
        help="events: the engines' --prefix-caching-hash-algo",
    )  # fmt: skip
    routing.add_argument(
        "--kv-hash-seed", default=None, metavar="SEED",
        help="events: the engines' PYTHONHASHSEED (default: unset, vLLM's fixed seed)",
    )  # fmt: skip
    routing.add_argument(
        "--transfer-locality", choices=LOCALITY, default=None,
        help="keep each prefill->decode KV transfer in one zone, as the Services' "
        "EndpointSlices place the pods (Required: 503 when the prefill's zone has no decode; "
        "Preferred: same zone first); needs --prefill-service/--decode-service",
    )  # fmt: skip
    routing.add_argument(
        "--kube-api", default="", metavar="URL",
        help="the API server the EndpointSlices are read from (default: the pod's, with its "
        "ServiceAccount)",
    )  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="listen address (0.0.0.0 in a pod)")
    p.add_argument("--port", type=int, default=8080, help="0: any free port")
    p.add_argument("--timeout-s", type=float, default=60.0, help="deadline for both hops")
    p.add_argument(
        "--pool-queue-s", type=float, default=None, metavar="S",
        help="shed (503, Retry-After, naming the pool) a request whose prefill or decode pool "
        "has more in flight than it starts within S seconds at its measured rate; default "
        "a third of --timeout-s; 0: never shed (docs/routing.md)",
    )  # fmt: skip
    p.add_argument(
        "--otlp-traces-endpoint", default="", metavar="URL",
        help="export each request's spans to this OTLP/HTTP traces URL (JSON, e.g. "
        "http://collector:4318/v1/traces); default OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
        "else none (docs/routing.md, Tracing)",
    )  # fmt: skip
    p.add_argument(
        "--prefill-retries",
        type=int,
        default=1,
        help="a decode that could not read its KV from its prefill is retried from another "
        "prefill this many times (default 1; 0: never)",
    )
    return p


def pools(args: argparse.Namespace) -> tuple[Pairs, list[Refresher]]:
    """The pools the command line names (one pair, or one per ``--kv-revision`` with
    ``{kv}`` in the Service names), and what keeps Service-backed ones current."""
    services = [getattr(args, f"{role}_service") for role in ROLES]
    templated = [s is not None and KV_FIELD in s for s in services]
    if any(templated) != bool(args.kv_revision) or (any(templated) and not all(templated)):
        raise SystemExit(
            f"disagg proxy: --kv-revision goes with {KV_FIELD} in both --prefill-service "
            f"and --decode-service (e.g. demo-p-{KV_FIELD}.ns.svc:8000), and they with it"
        )
    pairs, refreshers = [], []
    for kv in args.kv_revision or [""]:
        pool = []
        for role, service in zip(ROLES, services, strict=True):
            if service is None:
                pool.append(Pool(getattr(args, role), args.policy))
                continue
            service = service.replace(KV_FIELD, kv)
            try:
                host, port = parse_service(service)
            except ValueError as e:
                raise SystemExit(f"disagg proxy: --{role}-service {e}") from None
            pool.append(Pool([], args.policy, service=service))
            refreshers.append(Refresher(pool[-1], host, port, args.refresh_s))
        pairs.append(Pair(kv, *pool))
    return Pairs(pairs, args.policy), refreshers


def zones_of(args: argparse.Namespace, refreshers: list[Refresher]) -> Zones | None:
    """Where the Services' pods sit, with --transfer-locality. Workers given as URLs
    (`disagg up`: one host) have no zones, and outside a cluster (no API server in the env,
    no --kube-api: the local kubelet) none can be read: every pair is then in one zone-less
    group, and the log says why."""
    if args.transfer_locality is None:
        return None
    if not refreshers:
        log.warning(
            "--transfer-locality: workers given as URLs have no zones (only "
            "--prefill-service/--decode-service pods do); any pair is within one"
        )
        return None
    names = [service_of(r.host) for r in refreshers]
    try:
        api = KubeApi.in_cluster(args.kube_api, names[0][1])
    except ValueError as e:
        log.warning("%s; pairing without zones", e)
        return None
    return Zones(api, [name for name, _ in names], args.refresh_s)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from disagg_worker.serve.process import serve

    pairs, refreshers = pools(args)
    try:
        config = from_args(args)
        zones = zones_of(args, refreshers)
    except ValueError as e:
        raise SystemExit(f"disagg proxy: {e}") from None
    proxy = Proxy(pairs, None, config, refreshers=refreshers, zones=zones)

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
