"""`disagg proxy`: the P/D proxy — each completion or chat completion goes to a prefill
worker, then to a decode worker with the ``kv_transfer_params`` the prefill returned.

I/O layer (aiohttp server and client; no torch). Speaks vLLM's convention only, so it fronts
real ``vllm serve`` instances with the NixlConnector as well as the reference worker:

1. prefill: the client's body with ``max_tokens: 1`` (and ``max_completion_tokens: 1`` when
   sent), ``stream: false`` and
   ``kv_transfer_params: {do_remote_decode: true, do_remote_prefill: false, remote_*: null}``;
2. decode: the client's body (``stream`` and ``stream_options`` as sent) with the prefill
   response's ``kv_transfer_params``;
3. answer: the decode response, plus ``disagg.proxy`` (hop times, which workers) and
   ``disagg.prefill`` (the prefill's own figures) when the workers report them; a stream is
   passed through chunk by chunk as decode writes it.

Both hops carry one X-Request-Id (the client's when it is a safe token) and share one
deadline (``--timeout-s``; in a stream, up to decode's first byte, then per read). What a
split cannot do (``n`` > 1, ``best_of`` > 1, beam search, a client's ``kv_transfer_params``)
is refused before any hop. Any failure answers a JSON error that names the hop, the worker
and the cause: a worker's 4xx/503/504 keeps its status, other worker failures and invalid
answers are 502, the deadline 504.

Faults: a hop whose worker is full (503) or cannot be reached is tried once on each other
worker of its pool; when none takes it, a 503 goes to the client with the worker's
``Retry-After``. When the decode hop fails (or the client leaves before it ends), the proxy
posts the prefill's ``kv_transfer_params`` back to it (``POST /v1/kv/release``, best effort:
vLLM answers 404 and keeps its lease) so the blocks are freed now, not when the lease ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from disagg_worker.serve.discovery import Refresher, parse_service
from disagg_worker.serve.limits import bounded
from disagg_worker.serve.openai import RELEASE_PATH, ApiError, proxy_refusal, request_id
from disagg_worker.serve.routes import CLIENT_MAX_SIZE, json_route_errors, read_json
from disagg_worker.serve.upstream import (
    POLICIES,
    Backend,
    HopError,
    Pool,
    error_kind,
    first_taker,
    hop_failure,
    message_of,
    prefill_gone,
    relay_status,
)

log = logging.getLogger("disagg.proxy")
RELEASE_TIMEOUT_S = 2.0
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


class Proxy:
    """Two pools, one client session, and the two-hop request flow."""

    def __init__(
        self,
        prefill: Sequence[str] | Pool,
        decode: Sequence[str] | Pool,
        policy: str = "round-robin",
        timeout_s: float = 60.0,
        after_prefill: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        refreshers: Sequence[Refresher] = (),
        prefill_retries: int = 1,
    ) -> None:
        """``prefill`` and ``decode``: worker URLs, or pools that ``refreshers`` keep
        current from their Services (:mod:`disagg_worker.serve.discovery`)."""
        self.prefill = prefill if isinstance(prefill, Pool) else Pool(prefill, policy)
        self.decode = decode if isinstance(decode, Pool) else Pool(decode, policy)
        self.timeout_s = timeout_s
        self.after_prefill = after_prefill  # a test seam: act between the two hops
        # a decode whose READ from its prefill failed is retried from another prefill, this
        # many times at most (0: never); ``retried`` counts the retries made
        self.prefill_retries, self.retried = prefill_retries, 0
        self.refreshers = list(refreshers)
        self._session: aiohttp.ClientSession | None = None
        self._releases: set[asyncio.Task[None]] = set()

    async def start(self, _: web.Application | None = None) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        for refresher in self.refreshers:
            await refresher.start()

    async def close(self, _: web.Application | None = None) -> None:
        for refresher in self.refreshers:
            await refresher.close()
        if self._releases:
            await asyncio.wait(self._releases, timeout=RELEASE_TIMEOUT_S)
        if self._session is not None:
            await self._session.close()

    def release_later(
        self, prefill: Backend, params: dict[str, Any], headers: dict[str, str]
    ) -> None:
        """The decode hop failed: tell the prefill to free the blocks (in the background,
        best effort; the lease stays the backstop)."""
        task = asyncio.ensure_future(self._release(prefill.url, params, headers))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(self, url: str, params: dict[str, Any], headers: dict[str, str]) -> None:
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=RELEASE_TIMEOUT_S)
        body = {"kv_transfer_params": params}
        try:
            async with self._session.post(
                url + RELEASE_PATH, json=body, headers=headers, timeout=timeout
            ) as resp:
                await resp.read()
        except (asyncio.TimeoutError, aiohttp.ClientError) as e:
            log.debug("release at %s failed: %s", url, e)

    async def complete(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        """Both hops for one request; ``headers`` (request id, the client's Authorization)
        go to both."""
        deadline = time.monotonic() + self.timeout_s
        t0 = time.perf_counter()
        tried: list[str] = []
        while True:
            p, pre, params = await self._prefill(path, body, headers, deadline, tried)
            t1 = time.perf_counter()
            second = {**body, "kv_transfer_params": params}
            try:
                d, out = await self._hop("decode", self.decode, path, second, headers, deadline)
                break
            except HopError as e:  # the prefill's blocks go now; its READ may be retried
                self.release_later(p, params, headers)
                if not self._retry(e, p, tried):
                    raise
            except BaseException:  # the client left: the prefill's blocks go now
                self.release_later(p, params, headers)
                raise
        t2 = time.perf_counter()
        ms = 1000.0
        figures = out.get("disagg")
        if not isinstance(figures, dict):
            figures = out["disagg"] = {}
        figures["proxy"] = {
            "prefill_url": p.url,
            "decode_url": d.url,
            "prefill_hop_ms": (t1 - t0) * ms,
            "decode_hop_ms": (t2 - t1) * ms,
            "total_ms": (t2 - t0) * ms,
            "prefill_retries": len(tried),
        }
        if isinstance(pre.get("disagg"), dict):
            figures["prefill"] = pre["disagg"]
        return out

    async def stream(
        self, request: web.Request, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> web.StreamResponse:
        """Prefill as for :meth:`complete`, then decode's event stream, passed through as it
        comes. An error before decode's first byte is raised (answered as JSON); after it,
        it ends the stream with an ``{"error": ...}`` event."""
        assert self._session is not None, "Proxy.start() first"
        deadline = time.monotonic() + self.timeout_s
        tried: list[str] = []
        while True:
            p, _, params = await self._prefill(path, body, headers, deadline, tried)
            second = {**body, "kv_transfer_params": params}
            try:
                backend, resp = await self._open_decode(path, second, headers, deadline)
                break
            except HopError as e:  # before decode's first byte: nothing reached the client
                self.release_later(p, params, headers)
                if not self._retry(e, p, tried):
                    raise
            except BaseException:
                self.release_later(p, params, headers)
                raise
        backend.inflight += 1
        try:
            return await _relay_stream(request, resp, f"decode {backend.url + path}", headers)
        except BaseException:  # cancelled when the client left: decode must stop too
            resp.close()
            raise
        finally:
            resp.release()
            backend.inflight -= 1

    async def _open_decode(
        self, path: str, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> tuple[Backend, aiohttp.ClientResponse]:
        """The streaming decode hop, on the next decode worker when one is full or down."""
        return await first_taker(
            self.decode, lambda b: self._open(b.url + path, body, headers, deadline)
        )

    async def _open(
        self, url: str, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> aiohttp.ClientResponse:
        """POST a streaming hop: the deadline bounds the answer's head, ``--timeout-s``
        each later read. A 4xx/5xx is raised as the hop's error."""
        assert self._session is not None
        where, left = f"decode {url}", deadline - time.monotonic()
        timeout = aiohttp.ClientTimeout(total=None, sock_read=self.timeout_s)
        try:
            post = self._session.post(url, json=body, headers=headers, timeout=timeout)
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
            raise HopError(
                relay_status(resp.status),
                f"{where} answered {resp.status}: {message_of(data)}",
                retry_after=resp.headers.get("Retry-After", ""),
                kind=error_kind(data),
            )
        return resp

    def _retry(self, error: HopError, prefill: Backend, tried: list[str]) -> bool:
        """Whether a failed decode hop is retried from another prefill (its READ from
        ``prefill`` failed, another prefill is there, retries are left); counts it."""
        tried.append(prefill.url)
        if not prefill_gone(error) or len(tried) > self.prefill_retries:
            return False
        if not self.prefill.has_other(tried):
            return False
        self.retried += 1
        log.warning(
            "decode could not read its KV from prefill %s; retrying: %s", prefill.url, error
        )
        return True

    async def _prefill(
        self,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        deadline: float,
        avoid: Sequence[str] = (),
    ) -> tuple[Backend, dict[str, Any], dict[str, Any]]:
        """The prefill hop (on a worker not in ``avoid`` when there is one): the worker,
        its answer and the kv_transfer_params for decode."""
        first = prefill_body(body)
        p, pre = await self._hop("prefill", self.prefill, path, first, headers, deadline, avoid)
        params = pre.get("kv_transfer_params")
        if not isinstance(params, dict):
            raise HopError(
                502,
                f"prefill {p.url} returned no kv_transfer_params; is it a prefill worker "
                "(vLLM: --kv-transfer-config with kv_role kv_producer or kv_both)?",
            )
        if self.after_prefill is not None:
            await self.after_prefill(params)
        return p, pre, params

    async def aggregated(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        """One request straight to a decode worker, no prefill hop (it prefills locally, on
        purpose: ``do_remote_prefill: false`` says so, so the worker does not count a
        fallback), bounded by the same deadline."""
        body = {**body, "kv_transfer_params": LOCAL_PARAMS}
        deadline = time.monotonic() + self.timeout_s
        _, out = await self._hop("decode", self.decode, path, body, headers, deadline)
        return out

    async def _hop(
        self,
        role: str,
        pool: Pool,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        deadline: float,
        avoid: Sequence[str] = (),
    ) -> tuple[Backend, dict[str, Any]]:
        """POST to the pool's pick; when it is full or unreachable, to each other worker
        (those in ``avoid`` last)."""
        return await first_taker(
            pool, lambda b: self._post(role, b.url + path, body, headers, deadline), avoid
        )

    async def _post(
        self, role: str, url: str, body: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> dict[str, Any]:
        assert self._session is not None, "Proxy.start() first"
        left = deadline - time.monotonic()
        where = f"{role} {url}"
        if left <= 0:
            raise HopError(504, f"{where}: not tried, the {self.timeout_s:g}s deadline passed")
        try:
            async with self._session.post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=left)
            ) as resp:
                data = await resp.json(content_type=None)
                status, retry_after = resp.status, resp.headers.get("Retry-After", "")
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            raise hop_failure(where, self.timeout_s, e) from None
        if status >= 400 or not isinstance(data, dict):
            message = f"{where} answered {status}: {message_of(data)}"
            kind = error_kind(data)
            raise HopError(relay_status(status), message, retry_after=retry_after, kind=kind)
        return data


def prefill_body(body: dict[str, Any]) -> dict[str, Any]:
    """The client's request as a prefill gets it (vLLM's toy proxy does the same): one
    token, no streaming, and no minimum lengths, which a one-token request cannot honour."""
    first = {**body, "max_tokens": 1, "stream": False, "kv_transfer_params": PREFILL_PARAMS}
    if "max_completion_tokens" in first:
        first["max_completion_tokens"] = 1
    for key in ("stream_options", "min_tokens", "min_completion_tokens"):
        first.pop(key, None)
    return first


async def _relay_stream(
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


def build_app(proxy: Proxy) -> web.Application:
    """POST /v1/completions, /v1/chat/completions; GET /health. Others: JSON 404/405."""

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
        info = {"status": "ok", "policy": proxy.prefill.policy, "prefill_retries": proxy.retried}
        return web.json_response({**info, **pools})

    app = web.Application(client_max_size=CLIENT_MAX_SIZE, middlewares=[json_route_errors(_error)])
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_get("/health", health)
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
    p.add_argument("--policy", choices=POLICIES, default="round-robin")
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


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from disagg_worker.serve.localrun import serve

    prefill, decode, refreshers = pools(args)
    proxy = Proxy(
        prefill, decode, args.policy, args.timeout_s,
        refreshers=refreshers, prefill_retries=args.prefill_retries,
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
