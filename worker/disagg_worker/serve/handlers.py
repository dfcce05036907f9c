"""The worker's HTTP routes: ``/v1/completions`` and ``/v1/chat/completions`` (whole or
streamed), ``/tokenize`` (vLLM's shape), ``/health``, ``/metrics``, ``/debug/blocks``,
``/v1/models``.

I/O layer (aiohttp). A stream is server-sent events, one chunk per token as the engine makes
it, then a chunk with ``finish_reason``, the usage chunk when asked, and ``data: [DONE]``.
An error before the first token is a JSON answer with its status; one after it (rare: the
engine fails mid-generation) is an ``{"error": ...}`` event, then ``[DONE]``.
Each completion is a server span under the caller's ``traceparent`` (the proxy's hop span;
none or an invalid one: a new trace), whole streams included.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import json
import logging
import os
import time
import uuid
from dataclasses import replace
from typing import Any

from aiohttp import web

from disagg_worker.model.model import decode, encode
from disagg_worker.serve.api import json_error
from disagg_worker.serve.routes import CLIENT_MAX_SIZE, json_route_errors, read_json
from disagg_worker.serve.rules.kv_params import FIELD, KvTransferParams, ParamsError, hop_of
from disagg_worker.serve.rules.openai import (
    RELEASE_PATH,
    TOKENIZE_PATH,
    CompletionRequest,
    OpenAIError,
    parse_request,
    parse_tokenize,
    request_id,
)
from disagg_worker.serve.rules.shapes import chunk, response_body, usage_chunk
from disagg_worker.serve.rules.timings import FIELD as TIMINGS
from disagg_worker.serve.server import Outcome, Worker
from disagg_worker.serve.tracing import server_span

log = logging.getLogger("disagg.worker")
DONE = b"data: [DONE]\n\n"


async def _generate(worker: Worker, chat: bool, request: web.Request) -> web.StreamResponse:
    """POST /v1/completions and /v1/chat/completions in the request's server span."""
    with server_span(worker.tracer, request) as span:
        span.set({"disagg.role": worker.config.role, "disagg.engine_id": worker.config.engine_id})
        response = await _answer(worker, chat, request)
        span.answered(response.status)
        return response


async def _answer(worker: Worker, chat: bool, request: web.Request) -> web.StreamResponse:
    """Parse, run, answer (errors as JSON)."""
    # the caller's id (the proxy sends one per request) made unique: it keys held blocks
    given = request_id(request.headers.get("X-Request-Id"), lambda: "")
    rid = f"{given}-{uuid.uuid4().hex[:8]}" if given else f"cmpl-{uuid.uuid4().hex}"
    kind = "completion"
    try:
        data = await read_json(request)
        kind = _kind(data)
        req = parse_request(data, worker.config.model, chat=chat, encode=encode)
        if req.stream:
            return await _stream(worker, request, req, rid, kind)
        out = await worker.run(req, rid)
    except Exception as e:
        worker.metrics.request(kind, "error")
        return json_error(_openai_error(e, rid), rid)
    worker.metrics.request(kind, "ok")
    return web.json_response(_whole(worker, req, rid, out), headers={"X-Request-Id": rid})


def _whole(worker: Worker, req: CompletionRequest, rid: str, out: Outcome) -> dict[str, Any]:
    gen = out.gen
    body = response_body(req, rid, int(time.time()), decode(gen.tokens), gen.tokens,
                         gen.finish_reason)  # fmt: skip
    params = out.kv_transfer_params
    body[FIELD] = params.to_wire() if params is not None else None
    cfg = worker.config
    timings = replace(out.timings, engine_id=cfg.engine_id, role=cfg.role,
                      kv_source=out.kv_source, kv_digest=out.kv_digest)  # fmt: skip
    body[TIMINGS] = timings.to_wire()
    return body


async def _stream(
    worker: Worker, request: web.Request, req: CompletionRequest, rid: str, kind: str
) -> web.StreamResponse:
    """Run the request, sending each token as the engine thread reports it."""
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue[int | None] = asyncio.Queue()

    def on_token(token: int) -> None:  # the engine thread
        loop.call_soon_threadsafe(tokens.put_nowait, token)

    task = asyncio.ensure_future(worker.run(req, rid, on_token))
    # tokens are queued from the engine thread before its result: None comes last
    task.add_done_callback(lambda _: tokens.put_nowait(None))
    try:
        token = await tokens.get()
    except asyncio.CancelledError:  # the client left before the first token
        _abandon(task)
        raise
    if token is None:
        task.result()  # the error before any token: the caller answers it as JSON
    headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
               "X-Request-Id": rid}  # fmt: skip
    resp = web.StreamResponse(headers=headers)
    await resp.prepare(request)
    try:
        await _events(resp, req, rid, token, tokens)
        out = task.result()
    except (ConnectionResetError, asyncio.CancelledError) as e:
        # the client left: the engine stops at its next step, then the blocks are freed
        _abandon(task)
        log.info("request %s: client left the stream", rid)
        if isinstance(e, asyncio.CancelledError):  # aiohttp cancelled this handler
            raise
        return resp
    except Exception as e:  # the engine failed mid-stream: the status line is gone
        worker.metrics.request(kind, "error")
        await _send(resp, _openai_error(e, rid).body())
    else:
        worker.metrics.request(kind, "ok")
        await _send(resp, chunk(req, rid, int(time.time()), "", [], out.gen.finish_reason))
        if req.include_usage:
            await _send(resp, usage_chunk(req, rid, int(time.time()), len(out.gen.tokens)))
    await resp.write(DONE)
    await resp.write_eof()
    return resp


async def _events(
    resp: web.StreamResponse,
    req: CompletionRequest,
    rid: str,
    token: int | None,
    tokens: asyncio.Queue[int | None],
) -> None:
    """A chunk per token until the end marker (None), UTF-8 decoded across chunks."""
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    created, first = int(time.time()), True
    while token is not None:
        piece = text.decode(bytes([token]) if token < 256 else b"")
        await _send(resp, chunk(req, rid, created, piece, [token], None, first=first))
        first = False
        token = await tokens.get()
    tail = text.decode(b"", final=True)
    if tail:  # a sequence cut short at the end: its replacement character
        await _send(resp, chunk(req, rid, created, tail, [], None))


def _abandon(task: asyncio.Future[Any]) -> None:
    """Cancel a stream's generation whose client left (:meth:`Worker.run` stops the engine
    and frees the blocks once it has); its outcome is retrieved, not lost."""
    task.cancel()
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Consume an abandoned stream's outcome so a late error is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("abandoned stream failed: %s", task.exception())


async def _send(resp: web.StreamResponse, event: dict[str, Any]) -> None:
    await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")


def _openai_error(error: Exception, rid: str) -> OpenAIError:
    if isinstance(error, OpenAIError):
        return error
    if isinstance(error, ValueError):  # engine.check_request names the field
        return OpenAIError(400, str(error), str(error).split(":")[0])
    # a bug: answer JSON, keep serving, leave a trace in the log
    log.error("request %s failed", rid, exc_info=error)
    return OpenAIError(500, f"internal error: {type(error).__name__}: {error}")


async def _release(worker: Worker, request: web.Request) -> web.Response:
    """POST /v1/kv/release ``{"kv_transfer_params": <what this prefill answered>}``: the
    decode hop failed or its client left, so free the blocks now rather than at the lease's
    end. 200 ``{"released": bool}`` (false: already read, expired or never held here)."""
    try:
        data = await read_json(request)
        rid = _held_id(data.get(FIELD))
        if not rid:
            raise OpenAIError(
                400,
                "kv_transfer_params.remote_request_id: required; send the kv_transfer_params "
                "this prefill answered",
                "kv_transfer_params.remote_request_id",
            )
    except OpenAIError as e:
        return json_error(e)
    released = worker.release(rid)
    if released:
        log.info("request %s: blocks released early (its decode failed)", rid)
    return web.json_response({"released": released})


def build_app(worker: Worker) -> web.Application:
    """Routes: POST /v1/completions, /v1/chat/completions, /v1/kv/release, /tokenize; GET /health,
    /metrics, /debug/blocks, /v1/models. Others answer JSON 404/405."""

    # which process answers: a restarted engine in the same pod has another pid or start
    # (the decode canary re-proves the path then: serve.canary_verdict.engine_identity)
    instance = {"pid": os.getpid(), "started_at": round(time.time(), 3)}

    async def health(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "status": "ok",
                "role": worker.config.role,
                "engine_id": worker.config.engine_id,
                **instance,
            }
        )

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=worker.metrics_text(), content_type="text/plain")

    async def blocks(_: web.Request) -> web.Response:
        return web.json_response(worker.block_report())

    async def release(request: web.Request) -> web.Response:
        return await _release(worker, request)

    async def tokenize(request: web.Request) -> web.Response:
        try:
            tokens = parse_tokenize(await read_json(request), worker.config.model, encode)
        except OpenAIError as e:
            return json_error(e)
        body = {"count": len(tokens), "tokens": tokens, "max_model_len": worker.spec.max_positions}
        return web.json_response(body)

    async def models(_: web.Request) -> web.Response:
        data = [{"id": worker.config.model, "object": "model", "owned_by": "disagg"}]
        return web.json_response({"object": "list", "data": data})

    app = web.Application(
        client_max_size=CLIENT_MAX_SIZE, middlewares=[json_route_errors(_route_error)]
    )
    app.router.add_post("/v1/completions", functools.partial(_generate, worker, False))
    app.router.add_post("/v1/chat/completions", functools.partial(_generate, worker, True))
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/debug/blocks", blocks)
    app.router.add_post(RELEASE_PATH, release)
    app.router.add_get("/v1/models", models)
    app.router.add_post(TOKENIZE_PATH, tokenize)
    app.on_startup.append(worker.tracer.start_export)
    app.on_cleanup.append(worker.tracer.close)
    return app


def build_metrics_app(worker: Worker) -> web.Application:
    """GET /metrics alone: the listener Prometheus reaches (``metricsPort``), which serves
    no completion and no debug page, so a NetworkPolicy can open it to a monitoring
    namespace without opening the serving port."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=worker.metrics_text(), content_type="text/plain")

    app = web.Application(middlewares=[json_route_errors(_route_error)])
    app.router.add_get("/metrics", metrics)
    return app


def _route_error(status: int, message: str) -> web.Response:
    return json_error(OpenAIError(status, message))


def _held_id(wire: Any) -> str | None:
    """The request id a prefill's params hold their blocks under (None: none readable)."""
    try:
        return KvTransferParams.from_wire(wire).remote_request_id
    except ParamsError:
        return None


def _kind(data: Any) -> str:
    """The metrics label: prefill, decode or a whole completion."""
    return hop_of(data.get(FIELD) if isinstance(data, dict) else None)
