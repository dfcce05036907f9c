"""The worker behind `disagg worker serve`: the reference model, its KV cache and the
transfer agent, serving vLLM's ``kv_transfer_params`` convention (routes:
:mod:`serve.handlers`).

I/O layer. A request without ``kv_transfer_params`` runs here start to finish; a prefill
one computes the prompt's KV and holds its blocks for a decode; a decode one READs them
and continues (docs/local-run.md, the convention). Engine work runs on one thread (the
engine is not re-entrant) and transfers on a pool of their own, so a hung prefill costs
only the requests that name it. Admission, leases, incarnations, traces: docs/worker.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from disagg_contract.config import WorkerConfig
from disagg_worker.model.kvcache import BlockAllocator, PagedKVCache
from disagg_worker.model.model import (
    VOCAB_SIZE,
    Generation,
    GenerationRequest,
    ReferenceModel,
    Shard,
    get_preset,
    kv_layout,
)
from disagg_worker.serve.admission import Admission
from disagg_worker.serve.api import (
    WorkerMetrics,
    check_model,
    check_signature,
    remote_params,
    transfer_params,
)
from disagg_worker.serve.cancel import Job, on_engine
from disagg_worker.serve.rules.kv_params import KvTransferParams, Remote, hop_of
from disagg_worker.serve.rules.openai import CompletionRequest, OpenAIError
from disagg_worker.serve.rules.otlp import settings_of
from disagg_worker.serve.rules.timings import Timings
from disagg_worker.serve.tracing import ActiveSpan, Tracer
from disagg_worker.transfer.handshake import load_secret
from disagg_worker.transfer.rules.protocol import prompt_digest
from disagg_worker.transfer.rules.ranks import rank_heads

log = logging.getLogger("disagg.worker")
OnToken = Callable[[int], None]
# transfer threads: each read waits on one peer; 64 keep reads from one hung prefill (held
# to their deadline) from delaying reads from the healthy ones
TRANSFER_THREADS = 64


@dataclass(frozen=True)
class Outcome:
    """What one request produced: the tokens, a prefill's answer to decode, the timings."""

    gen: Generation
    kv_transfer_params: KvTransferParams | None
    timings: Timings
    kv_digest: dict[str, list[str]] | None = None  # model KV head → per prompt block
    # where the prompt's KV came from: "computed" here, or "transferred" from a prefill
    kv_source: str = "computed"


def pace_s(tokens: int, tokens_per_s: float, took_s: float) -> float:
    """How much longer a prefill of ``tokens`` that computed in ``took_s`` holds the engine
    at a pace of ``tokens_per_s`` (``prefill_pace_tokens_per_s``; 0: none)."""
    return max(0.0, tokens / tokens_per_s - took_s) if tokens_per_s > 0 else 0.0


class Worker:
    """Model, cache, allocator and (for prefill/decode) the transfer agent of one pod."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.spec = spec = get_preset(config.model)
        self.group: Any = None  # the other ranks (serve.tp.RankGroup) when TP > 1
        self.broken: str | None = None  # why the engine stopped (a rank died)
        shard = Shard()
        if config.tp_size > 1:
            if config.device != "cpu":
                raise ValueError(
                    f"DISAGG_TP_SIZE: {config.tp_size} ranks run on device cpu only "
                    f"(this worker's is {config.device}); use DISAGG_TP_SIZE 1"
                )
            shard = Shard(0, config.tp_size, gather=self._gather, mirror=self._mirror)
        self.layout = kv_layout(spec, config.block_size, config.num_blocks, shard)
        self.cache = PagedKVCache(self.layout, config.device)
        self.model = ReferenceModel(spec, self.cache, config.seed, shard)
        self.incarnation = f"{config.engine_id or config.role}-{uuid.uuid4().hex[:8]}"
        self.allocator = BlockAllocator(config.num_blocks)
        self.admission = Admission(
            self.allocator, max_waiting=config.max_queued, wait_s=config.queue_timeout_s
        )
        self.held: dict[str, list[int]] = {}
        # the deployment's handshake key signs (prefill) and checks (decode) kv_transfer_params
        self.key = load_secret(config.hmac_secret_path)
        self.metrics = WorkerMetrics(self)
        # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the operator renders it from spec.tracing)
        tracing = settings_of(os.environ, service=f"disagg-{config.role}")
        self.tracer = Tracer(tracing, self.metrics.registry)
        self.agent: Any = None
        self._compute = ThreadPoolExecutor(1, thread_name_prefix="engine")
        self._io = ThreadPoolExecutor(TRANSFER_THREADS, thread_name_prefix="transfer")
        self._prefill_turn = asyncio.Lock()
        self._turn_waiting = 0
        self.running = 0  # requests in flight (the autoscaler's victims go least busy first)

    def start(self) -> None:
        """The transfer agent, then the other ranks; on any failure what was started is
        stopped again (NIXL handles released, rank processes ended) and the error raised."""
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        if self.config.role != "both":
            from disagg_worker.transfer.agent import KVTransferAgent

            self.agent = KVTransferAgent(
                self.config, self.layout, self.cache.regions,
                model_kv_heads=self.spec.num_kv_heads, incarnation=self.incarnation,
                on_release=self._released,
            )  # fmt: skip
            self.agent.start()
        if self.config.tp_size > 1:
            from disagg_worker.serve.tp import RankGroup

            self.group = RankGroup(self.config, self.incarnation, self._broken)
            self.group.start()
            if self.side_channel_port is not None:
                self.agent.prefill.rank_ports = [self.side_channel_port, *self.group.ports]
                if self.group.spans:  # where each rank lives: this pod, or another's
                    self.agent.prefill.rank_hosts = ["", *self.group.hosts]

    def _gather(self, tensor: Any) -> Any:
        return self.group.gather(tensor)

    def _mirror(self, tokens: Any, start: int, table: Any) -> None:
        self.group.mirror(tokens, start, table)

    def _broken(self, why: str) -> None:
        """A rank died: this engine cannot compute; stop serving (the pod restarts)."""
        self.broken = why
        os.kill(os.getpid(), signal.SIGTERM)

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
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
        """Blocks used and free, the block sets held for a decode (by request id), and the
        requests waiting for blocks."""
        held = {k: len(v) for k, v in list(self.held.items())}
        return {
            "used": self.allocator.num_used,
            "free": self.allocator.num_free,
            "held": held,
            "waiting": self.waiting,
        }

    @property
    def waiting(self) -> int:
        """Requests waiting for KV blocks or for the prefill engine's turn."""
        return self.admission.waiting + self._turn_waiting

    def release(self, request_id: str) -> bool:
        """Free the blocks held for ``request_id`` now: its decode failed or its client
        left (the proxy says so). False when nothing is held under that id."""
        if self.agent is None or self.config.role != "prefill":
            return False
        return bool(self.agent.prefill.release(request_id))

    @property
    def side_channel_port(self) -> int | None:
        if self.agent is None or self.config.role != "prefill":
            return None  # only a prefill listens: decode initiates every transfer
        return int(self.agent.prefill.side_channel_port)

    def metrics_text(self) -> bytes:
        """Our metrics, then the transfer agent's (its own registry, distinct names)."""
        text = self.metrics.render()
        return text if self.agent is None else text + bytes(self.agent.metrics_text())

    async def _compute_call(self, fn: Any, *args: Any, job: Job | None = None) -> Any:
        """``fn(*args)`` on the engine thread; cancelled, it raises only once the engine let
        go of the request (:func:`serve.cancel.on_engine`)."""
        return await on_engine(self._compute, lambda: fn(*args), job)

    # --- the three request kinds ------------------------------------------------------

    async def run(
        self, req: CompletionRequest, request_id: str, on_token: OnToken | None = None
    ) -> Outcome:
        """One request of any kind; ``on_token`` sees each token as it is made. Cancelled
        (its client left), the engine stops it at its next step and its blocks are freed
        once it has; the cancel is counted."""
        self.model.check_request(req.prompt, req.max_tokens)
        job = Job(on_token)
        self.running += 1
        try:
            outcome = await self._run(req, request_id, job)
        except asyncio.CancelledError:
            self.metrics.cancelled(_kind(req), job)
            log.info("request %s: cancelled (%s), its client left", request_id, job.stage)
            raise
        finally:
            self.running -= 1
        computed = outcome.kv_source == "computed"  # a decode that read its KV computed none
        self.metrics.tokens(len(req.prompt) if computed else 0, len(outcome.gen.tokens))
        return outcome

    async def _run(self, req: CompletionRequest, request_id: str, job: Job) -> Outcome:
        params = req.kv_transfer_params
        if params is not None and params.do_remote_decode:
            return await self._prefill(req, request_id, job)
        if params is not None and params.do_remote_prefill:
            return await self._decode(req, request_id, params, job)
        if self.config.role == "decode" and params is None:
            # P/D did not happen and nobody said so (an explicit do_remote_prefill: false is
            # a decode-only request on purpose): count it
            self.metrics.recomputed("no_kv_transfer_params")
            log.info("request %s: a decode computed its prompt (no kv_transfer_params)", request_id)
        table = await self.admission.allocate(
            self.model.blocks_needed(len(req.prompt), req.max_tokens)
        )
        try:
            gen = await self._generate(req, table, job)
            digest = await self._digest(req, table)
        finally:
            self.allocator.free(table)
        return Outcome(gen, None, _timings(gen), digest)

    async def _digest(
        self, req: CompletionRequest, table: list[int]
    ) -> dict[str, list[str]] | None:
        """The prompt's KV digest by model KV head (``return_kv_digest``), of the heads this
        rank holds; None when not asked."""
        if not req.kv_digest:
            return None
        rows = await self._compute_call(self.cache.digest, table, len(req.prompt))
        cfg = self.config
        heads = rank_heads(cfg.tp_rank, cfg.tp_size, self.spec.num_kv_heads)
        return {str(h): row for h, row in zip(heads, rows, strict=True)}

    async def _generate(
        self,
        req: CompletionRequest,
        table: list[int],
        job: Job,
        prompt_cached: bool = False,
        first_token: int | None = None,
    ) -> Any:
        """The request's whole generation over ``table`` (aggregated, or decode after its
        READ put the prompt's KV there: ``prompt_cached``, with the prefill's
        ``first_token`` when it sent one); ``job`` stops it between steps."""
        ask = GenerationRequest(
            req.prompt, req.max_tokens, req.ignore_eos, req.min_tokens, prompt_cached, first_token
        )
        generate = self.model.generate
        return await self._compute_call(generate, ask, table, job.on_token, job.stop, job=job)

    async def _prefill(self, req: CompletionRequest, request_id: str, job: Job) -> Outcome:
        self._require_role("prefill", "do_remote_decode")
        digest = prompt_digest(req.prompt)
        # the engine's turn first, then the blocks: requests queued behind the engine hold
        # none (a cache reserved by a queue would fail everyone)
        await self._take_turn()
        try:
            table = await self.admission.allocate(self.layout.blocks_for_tokens(len(req.prompt)))
            try:
                began = time.perf_counter()
                ask = GenerationRequest(req.prompt, 1, ignore_eos=True)
                gen = await self._compute_call(
                    self.model.generate, ask, table, job.on_token, job.stop, job=job
                )
                rest = pace_s(len(req.prompt), self.config.prefill_pace_tokens_per_s,
                              time.perf_counter() - began)  # fmt: skip
                if rest > 0:  # unpaced (the default): no extra turn of the event loop
                    await asyncio.sleep(rest)
                self.held[request_id] = table
                self.agent.prefill.publish(request_id, table, digest)
            except BaseException:
                self.held.pop(request_id, None)
                self.allocator.free(table)
                raise
        finally:
            self._prefill_turn.release()
        params = remote_params(
            self.config, self.side_channel_port, request_id, table,
            incarnation=self.incarnation, prompt_digest=digest, first_token=gen.tokens[0],
        )  # fmt: skip
        if self.key is not None:
            params = params.sign(self.key)
        return Outcome(gen, params, _timings(gen))

    async def _take_turn(self) -> None:
        """Wait for the prefill engine; the wait counts against the waiting room's bound."""
        self.admission.check_room(self._turn_waiting)
        self._turn_waiting += 1
        try:
            await self._prefill_turn.acquire()
        finally:
            self._turn_waiting -= 1

    async def _decode(
        self,
        req: CompletionRequest,
        request_id: str,
        params: KvTransferParams,
        job: Job,
    ) -> Outcome:
        self._require_role("decode", "do_remote_prefill")
        check_model(self.config, params)
        peer, remote = _peer(params, self.config.num_blocks, self.key)
        remote_ids = list(remote.block_ids)
        want = self.layout.blocks_for_tokens(len(req.prompt))
        if len(remote_ids) != want:
            raise OpenAIError(
                400,
                f"kv_transfer_params.remote_block_ids: {len(remote_ids)} blocks for a "
                f"{len(req.prompt)}-token prompt, expected {want}; send decode the same "
                "prompt as prefill",
                "kv_transfer_params.remote_block_ids",
            )
        digest = prompt_digest(req.prompt)
        _check_digest(remote, digest)
        table = await self.admission.allocate(
            self.model.blocks_needed(len(req.prompt), req.max_tokens)
        )
        try:
            with self.tracer.span("kv_transfer") as span:
                stats, transfer_ms = await self._read(
                    peer, remote.request_id, remote_ids, table, digest
                )
                self._transferred(span, peer, stats, transfer_ms)
            gen = await self._generate(
                req, table, job, prompt_cached=True, first_token=remote.first_token
            )
            kv_digest = await self._digest(req, table)
        except _InFlight as e:  # the read thread still owns the blocks; it frees them
            if e.error is None:  # cancelled: the client left
                raise asyncio.CancelledError from None
            raise e.error from None
        except BaseException:
            self.allocator.free(table)
            raise
        self.allocator.free(table)
        moved: dict[str, Any] = _stats_fields(stats)  # the transfer_* fields of Timings
        timings = replace(_timings(gen), transfer_ms=transfer_ms, **moved)
        return Outcome(gen, None, timings, kv_digest, "transferred")

    async def _read(
        self, peer: Any, remote_req: str, remote_ids: list[int], table: list[int], digest: str
    ) -> tuple[Any, float]:
        """READ the prefill's blocks into the head of ``table``; map failures to HTTP
        (a prompt mismatch 400, a deadline 504, anything else 502)."""
        from disagg_worker.transfer.decode import Read
        from disagg_worker.transfer.peers import TransferError

        deadline = self.config.transfer_deadline_s
        ask = Read(peer, remote_req, remote_ids, table[: len(remote_ids)], deadline,
                   prompt_digest=digest)  # fmt: skip
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        if self.group is not None:  # every rank reads its heads; rank 0 claims, notifies

            def read() -> Any:
                return self.group.read(self.agent.decode, ask)
        else:

            def read() -> Any:
                return self.agent.decode.read(ask)

        future = loop.run_in_executor(self._io, read)
        try:
            # The agent enforces the deadline itself (each rank's too, and rank 0 waits for
            # their answers a margin more); this outer bound only guards a hang.
            stats = await asyncio.wait_for(asyncio.shield(future), deadline + 10.0)
        except TransferError as e:
            raise _transfer_error(e, peer) from e
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:
            # A READ may still land in these blocks (its thread runs on when we stop
            # waiting, or when the client leaves): free them only when the thread is done.
            future.add_done_callback(lambda _: self.allocator.free(table))
            if isinstance(e, asyncio.CancelledError):
                raise _InFlight(None) from e
            err = OpenAIError(504, f"KV transfer from {_where(peer)} exceeded {deadline}s")
            raise _InFlight(err) from None
        return stats, (time.perf_counter() - start) * 1000.0

    def _transferred(self, span: ActiveSpan, peer: Any, stats: Any, transfer_ms: float) -> None:
        """A READ's figures on its span: what moved, how long it took, which way."""
        span.set({
            "disagg.kv_transfer.bytes": int(stats.bytes),
            "disagg.kv_transfer.seconds": transfer_ms / 1000.0,
            "disagg.kv_transfer.descriptors": int(stats.descriptors),
            "disagg.kv_transfer.path": "push" if getattr(stats, "pushed", False) else "read",
            "disagg.kv_transfer.backends": ",".join(self.config.backends),
            "disagg.kv_transfer.ucx_tls": os.environ.get("UCX_TLS"),
            "disagg.kv_transfer.handshake_seconds": stats.handshake_ms / 1000.0,
            "server.address": peer.host, "server.port": peer.port,
        })  # fmt: skip

    def _require_role(self, role: str, flag: str) -> None:
        if self.config.role != role:
            raise OpenAIError(
                400,
                f"kv_transfer_params.{flag}: this worker's role is {self.config.role!r}; "
                f"send this request to a {role} worker",
                f"kv_transfer_params.{flag}",
            )


class _InFlight(Exception):
    """A transfer was abandoned while its thread still runs; carries the answer to give
    (None: the request was cancelled)."""

    def __init__(self, error: OpenAIError | None) -> None:
        super().__init__(error.message if error else "cancelled")
        self.error = error


def _transfer_error(error: Any, peer: Any) -> OpenAIError:
    """A failed READ as HTTP: KV of another prompt is the client's error (400), the
    deadline 504, any other failure of the prefill or the path 502."""
    message = f"KV transfer from {_where(peer)} failed: {error}"
    if error.reason == "prompt_differs":
        return OpenAIError(400, message, "prompt")
    return OpenAIError(504 if error.reason == "deadline" else 502, message)


def _check_digest(remote: Remote, digest: str) -> None:
    """The prefill's ``prompt_digest`` (when sent) must be this prompt's."""
    if remote.prompt_digest is not None and remote.prompt_digest != digest:
        raise OpenAIError(
            400,
            "kv_transfer_params.prompt_digest: the prefill computed this KV for another "
            "prompt; send decode the prompt the prefill was given",
            "kv_transfer_params.prompt_digest",
        )


def _peer(params: KvTransferParams, num_blocks: int, key: bytes | None) -> tuple[Any, Remote]:
    """The prefill to READ from, and its checked (and, with a key, signed)
    kv_transfer_params: refused before any connection is opened."""
    from disagg_worker.transfer.peers import PeerRef

    check_signature(params, key)
    remote = transfer_params(params, num_blocks, VOCAB_SIZE)
    return PeerRef(remote.host, remote.port, remote.engine_id, remote.incarnation), remote


def _where(peer: Any) -> str:
    return f"prefill {peer.engine_id} at {peer.host}:{peer.port}"


def _kind(req: CompletionRequest) -> str:
    """The request's hop, as the metrics label it: prefill, decode or completion."""
    params = req.kv_transfer_params
    return hop_of(params.to_wire() if params is not None else None)


def _timings(gen: Any) -> Timings:
    return Timings(prompt_ms=gen.prompt_ms, first_step_ms=gen.first_step_ms,
                   decode_ms=gen.decode_ms)  # fmt: skip


def _stats_fields(stats: Any) -> dict[str, float]:
    """The agent's TransferStats as :class:`Timings` fields (``transfer_ms`` is ours: wall
    time)."""
    names = {
        "bytes": "transfer_bytes",
        "descriptors": "transfer_descriptors",
        "handshake_ms": "transfer_handshake_ms",
        "post_ms": "transfer_post_ms",
        "transfer_ms": "transfer_wire_ms",
        "pushed": "transfer_pushed",  # 1: the prefill wrote the blocks (a push)
    }
    out: dict[str, float] = {}
    for attr, key in names.items():
        value = getattr(stats, attr, None)
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out
