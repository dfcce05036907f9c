"""Worker HTTP server (`disagg worker serve`): the reference engine behind an OpenAI-style
``/v1/completions`` subset with vLLM's ``kv_transfer_params`` convention.

I/O layer. Three kinds of request, told apart by ``kv_transfer_params``:

- none: generate here, start to finish (any role).
- ``{"do_remote_decode": true}`` (prefill role): compute the prompt's KV and the first
  token, hold the blocks for a decode, answer ``kv_transfer_params`` =
  ``{do_remote_prefill: true, do_remote_decode: false, remote_engine_id, remote_block_ids,
  remote_host, remote_port, remote_request_id, tp_size}``. As vLLM does, the response also
  carries the first token as ``choices[0].text``; a proxy ignores it because decode
  recomputes it. Blocks are freed on decode's notification or when the lease expires.
- ``{"do_remote_prefill": true, ...}`` (decode role): READ the blocks from the prefill
  worker with NIXL, recompute the last prompt token and continue generation.

Engine work runs on one thread (the engine is not re-entrant); transfers on another pool.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from disagg_worker.config import WorkerConfig
from disagg_worker.engine.kvcache import BlockAllocator, CacheFullError, PagedKVCache
from disagg_worker.engine.model import ReferenceEngine, get_preset, kv_layout
from disagg_worker.serve.api import (
    ApiError,
    CompletionRequest,
    WorkerMetrics,
    check_model,
    completion_body,
    parse_completion,
    remote_params,
)

log = logging.getLogger("disagg.worker")


class Worker:
    """Engine, cache, allocator and (for prefill/decode) the transfer agent of one pod."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        spec = get_preset(config.model)
        self.layout = kv_layout(spec, config.block_size, config.num_blocks)
        self.cache = PagedKVCache(self.layout, config.device)
        self.engine = ReferenceEngine(spec, self.cache, config.seed)
        self.allocator = BlockAllocator(config.num_blocks)
        self.held: dict[str, list[int]] = {}
        self.metrics = WorkerMetrics(self)
        self.agent: Any = None
        self._compute = ThreadPoolExecutor(1, thread_name_prefix="engine")
        self._io = ThreadPoolExecutor(4, thread_name_prefix="transfer")

    def start(self) -> None:
        if self.config.role == "both":
            return
        from disagg_worker.transfer.engine import KVTransferAgent

        self.agent = KVTransferAgent(
            self.config, self.layout, self.cache.regions, on_release=self._released
        )
        self.agent.start()

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()
        self._io.shutdown(wait=True, cancel_futures=True)
        self._compute.shutdown(wait=True, cancel_futures=True)

    def _released(self, request_id: str, block_ids: list[int], reason: str) -> None:
        """Transfer-agent callback (its thread): decode is done with, or gave up on, a hold."""
        if self.held.pop(request_id, None) is None:
            log.warning("release of unknown request %s (%s)", request_id, reason)
            return
        self.allocator.free(block_ids)

    def block_report(self) -> dict[str, Any]:
        """Blocks used and free, and the block sets held for a decode, by request id."""
        held = {k: len(v) for k, v in list(self.held.items())}
        return {"used": self.allocator.num_used, "free": self.allocator.num_free, "held": held}

    @property
    def side_channel_port(self) -> int | None:
        if self.agent is None or self.config.role != "prefill":
            return None  # only a prefill listens: decode initiates every transfer
        return int(self.agent.side_channel_port)

    def metrics_text(self) -> bytes:
        """Our metrics, then the transfer agent's (its own registry, distinct names)."""
        text = self.metrics.render()
        return text if self.agent is None else text + bytes(self.agent.metrics_text())

    async def _compute_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._compute, lambda: fn(*args, **kwargs))

    # --- the three request kinds ------------------------------------------------------

    async def complete(self, req: CompletionRequest, request_id: str) -> dict[str, Any]:
        self.engine.check_request(req.prompt, req.max_tokens)
        params = req.kv_transfer_params or {}
        if params.get("do_remote_decode"):
            return await self._prefill(req, request_id)
        if params.get("do_remote_prefill"):
            return await self._decode(req, request_id, params)
        table = self._allocate(self.engine.blocks_needed(len(req.prompt), req.max_tokens))
        try:
            gen = await self._compute_call(
                self.engine.generate, req.prompt, table, req.max_tokens, ignore_eos=req.ignore_eos
            )
        finally:
            self.allocator.free(table)
        return completion_body(req, request_id, gen, self.config, None, timings=_timings(gen))

    async def _prefill(self, req: CompletionRequest, request_id: str) -> dict[str, Any]:
        self._require_role("prefill", "do_remote_decode")
        table = self._allocate(self.layout.blocks_for_tokens(len(req.prompt)))
        try:
            gen = await self._compute_call(
                self.engine.generate, req.prompt, table, 1, ignore_eos=True
            )
            self.held[request_id] = table
            self.agent.publish(request_id, table)
        except BaseException:
            self.held.pop(request_id, None)
            self.allocator.free(table)
            raise
        params = remote_params(self.config, self.side_channel_port, request_id, table)
        return completion_body(req, request_id, gen, self.config, params, timings=_timings(gen))

    async def _decode(
        self, req: CompletionRequest, request_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        self._require_role("decode", "do_remote_prefill")
        check_model(self.config, params)
        peer, remote_ids, remote_req = _peer(params)
        want = self.layout.blocks_for_tokens(len(req.prompt))
        if len(remote_ids) != want:
            raise ApiError(
                400,
                f"kv_transfer_params.remote_block_ids: {len(remote_ids)} blocks for a "
                f"{len(req.prompt)}-token prompt, expected {want}; send decode the same "
                "prompt as prefill",
                "kv_transfer_params.remote_block_ids",
            )
        table = self._allocate(self.engine.blocks_needed(len(req.prompt), req.max_tokens))
        try:
            stats, transfer_ms = await self._read(peer, remote_req, remote_ids, table)
            gen = await self._compute_call(
                self.engine.generate,
                req.prompt,
                table,
                req.max_tokens,
                ignore_eos=req.ignore_eos,
                prompt_cached=True,
            )
        except _InFlight as e:  # the read thread still owns the blocks; it frees them
            raise e.error from None
        except BaseException:
            self.allocator.free(table)
            raise
        self.allocator.free(table)
        timings = {**_timings(gen), "transfer_ms": transfer_ms, **_stats_fields(stats)}
        return completion_body(req, request_id, gen, self.config, None, timings=timings)

    async def _read(
        self, peer: Any, remote_req: str, remote_ids: list[int], table: list[int]
    ) -> tuple[Any, float]:
        """READ the prefill's blocks into the head of ``table``; map failures to 502/504."""
        from disagg_worker.transfer.engine import TransferError

        deadline = self.config.transfer_deadline_s
        local_ids = table[: len(remote_ids)]
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        future = loop.run_in_executor(
            self._io,
            lambda: self.agent.read(peer, remote_req, remote_ids, local_ids, deadline_s=deadline),
        )
        try:
            # The agent enforces the deadline itself; this outer bound only guards a hang.
            stats = await asyncio.wait_for(asyncio.shield(future), deadline + 5.0)
        except TransferError as e:
            status = 504 if _is_timeout(e) else 502
            raise ApiError(status, f"KV transfer from {_where(peer)} failed: {e}") from e
        except asyncio.TimeoutError:
            # A READ may still land in these blocks: free them only when the thread is done.
            future.add_done_callback(lambda _: self.allocator.free(table))
            err = ApiError(504, f"KV transfer from {_where(peer)} exceeded {deadline}s")
            raise _InFlight(err) from None
        return stats, (time.perf_counter() - start) * 1000.0

    def _require_role(self, role: str, flag: str) -> None:
        if self.config.role != role:
            raise ApiError(
                400,
                f"kv_transfer_params.{flag}: this worker's role is {self.config.role!r}; "
                f"send this request to a {role} worker",
                f"kv_transfer_params.{flag}",
            )

    def _allocate(self, count: int) -> list[int]:
        try:
            return self.allocator.allocate(count)
        except CacheFullError as e:
            raise ApiError(503, str(e)) from None


class _InFlight(Exception):
    """A transfer was abandoned while its thread still runs; carries the answer to give."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _is_timeout(error: Exception) -> bool:
    return getattr(error, "reason", "") == "deadline"


def _peer(params: dict[str, Any]) -> tuple[Any, list[int], str]:
    from disagg_worker.transfer.engine import PeerRef

    missing = [
        k
        for k in ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port")
        if params.get(k) in (None, "")
    ]
    if missing:
        raise ApiError(
            400,
            f"kv_transfer_params.{missing[0]}: required with do_remote_prefill; pass the "
            "kv_transfer_params the prefill worker returned",
            f"kv_transfer_params.{missing[0]}",
        )
    ids = params["remote_block_ids"]
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise ApiError(400, "kv_transfer_params.remote_block_ids: must be a list of integers")
    peer = PeerRef(
        str(params["remote_host"]), int(params["remote_port"]), params["remote_engine_id"]
    )
    return peer, ids, str(params.get("remote_request_id") or params["remote_engine_id"])


def _where(peer: Any) -> str:
    return f"prefill {peer.engine_id} at {peer.host}:{peer.port}"


def _timings(gen: Any) -> dict[str, float]:
    return {
        "prompt_ms": gen.prompt_ms,
        "first_step_ms": gen.first_step_ms,
        "decode_ms": gen.decode_ms,
    }


def _stats_fields(stats: Any) -> dict[str, float]:
    """The agent's TransferStats as response fields (``transfer_ms`` is ours: wall time)."""
    names = {
        "bytes": "transfer_bytes",
        "descriptors": "transfer_descriptors",
        "handshake_ms": "transfer_handshake_ms",
        "post_ms": "transfer_post_ms",
        "transfer_ms": "transfer_wire_ms",
    }
    out: dict[str, float] = {}
    for attr, key in names.items():
        value = getattr(stats, attr, None)
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out


async def _completions(worker: Worker, request: web.Request) -> web.Response:
    """POST /v1/completions: parse, run, answer JSON (errors too)."""
    # the caller's id (the proxy sends one per request) made unique: it keys held blocks
    given = request.headers.get("X-Request-Id")
    request_id = f"{given}-{uuid.uuid4().hex[:8]}" if given else f"cmpl-{uuid.uuid4().hex}"
    try:
        req = parse_completion(await _json(request), worker.config.model)
        body = await worker.complete(req, request_id)
    except ApiError as e:
        worker.metrics.request(req_kind(request), "error")
        return e.response()
    except ValueError as e:  # engine.check_request names the field
        worker.metrics.request(req_kind(request), "error")
        return ApiError(400, str(e), str(e).split(":")[0]).response()
    except Exception as e:  # a bug: answer JSON, keep serving, leave a trace in the log
        log.exception("request %s failed", request_id)
        worker.metrics.request(req_kind(request), "error")
        return ApiError(500, f"internal error: {type(e).__name__}: {e}").response()
    worker.metrics.request(req_kind(request), "ok")
    return web.json_response(body)


def build_app(worker: Worker) -> web.Application:
    """Routes: POST /v1/completions, GET /health, /metrics, /debug/blocks, /v1/models."""

    async def health(_: web.Request) -> web.Response:
        return web.json_response(
            {"status": "ok", "role": worker.config.role, "engine_id": worker.config.engine_id}
        )

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=worker.metrics_text(), content_type="text/plain")

    async def blocks(_: web.Request) -> web.Response:
        return web.json_response(worker.block_report())

    async def models(_: web.Request) -> web.Response:
        data = [{"id": worker.config.model, "object": "model", "owned_by": "disagg"}]
        return web.json_response({"object": "list", "data": data})

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/v1/completions", functools.partial(_completions, worker))
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/debug/blocks", blocks)
    app.router.add_get("/v1/models", models)
    return app


def req_kind(request: web.Request) -> str:
    return str(request.get("disagg_kind", "completion"))


async def _json(request: web.Request) -> Any:
    try:
        data = await request.json()
    except ValueError:
        raise ApiError(400, "body: not valid JSON") from None
    params = data.get("kv_transfer_params") if isinstance(data, dict) else None
    if isinstance(params, dict):
        if params.get("do_remote_decode"):
            request["disagg_kind"] = "prefill"
        elif params.get("do_remote_prefill"):
            request["disagg_kind"] = "decode"
    return data
