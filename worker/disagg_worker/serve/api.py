"""The worker's side of the HTTP contract: vLLM's ``kv_transfer_params`` answers, errors as
responses, and metrics (request parsing and body shapes: :mod:`serve.openai`).

I/O-free layer (aiohttp only to turn an error into a response, prometheus-client for the
metric registry). The shapes follow OpenAI's ``/v1/completions`` and
vLLM's ``kv_transfer_params``, so a proxy written for vLLM works against this worker and
ours works against vLLM. Extension: every response carries ``disagg`` — the engine id, role
and where the time went (``prompt_ms``, ``first_step_ms``, ``decode_ms``, ``transfer_ms``).
Both are typed values, dicts only on the wire: the params a :class:`KvTransferParams`, the
figures a :class:`~disagg_worker.serve.rules.timings.Timings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Summary, generate_latest
from prometheus_client.core import CounterMetricFamily

from disagg_contract.config import WorkerConfig
from disagg_worker.serve.rules.kv_params import (
    SIGNATURE,
    DecodeBounds,
    KvTransferParams,
    ParamsError,
    Remote,
    read_remote,
)
from disagg_worker.serve.rules.limits import shown
from disagg_worker.serve.rules.openai import OpenAIError

if TYPE_CHECKING:
    from disagg_worker.serve.cancel import Job
    from disagg_worker.serve.server import Worker


def json_error(error: OpenAIError, request_id: str | None = None) -> web.Response:
    """The error as JSON; a 503 that says when to come back carries Retry-After."""
    headers = {"X-Request-Id": request_id} if request_id else {}
    retry = getattr(error, "retry_after_s", None)
    if retry is not None:
        headers["Retry-After"] = str(retry)
    return web.json_response(error.body(), status=error.status, headers=headers or None)


def remote_params(
    config: WorkerConfig,
    port: int | None,
    request_id: str,
    block_ids: list[int],
    *,
    incarnation: str,
    prompt_digest: str,
    first_token: int,
) -> KvTransferParams:
    """What a prefill answers so a decode can fetch the blocks (vLLM's field names), and
    ours: the prefill process (``remote_incarnation``: a decode re-handshakes with a
    restarted prefill), the prompt the blocks hold (``prompt_digest``) and the first token
    (``first_token``: decode need not compute it again)."""
    return KvTransferParams.build(
        do_remote_prefill=True,
        do_remote_decode=False,
        remote_engine_id=config.engine_id,
        remote_block_ids=list(block_ids),
        remote_host=config.advertised_host,
        remote_port=port,
        remote_request_id=request_id,
        tp_size=config.tp_size,
        remote_model=model_fingerprint(config),
        remote_incarnation=incarnation,
        prompt_digest=prompt_digest,
        first_token=first_token,
    )


def model_fingerprint(config: WorkerConfig) -> str:
    """Which weights made the KV (extension field): KV from other weights is garbage even
    when the layouts match, so decode refuses it."""
    return f"{config.model}/seed={config.seed}"


def check_model(config: WorkerConfig, params: KvTransferParams) -> None:
    theirs = params.remote_model
    if theirs is not None and theirs != model_fingerprint(config):
        raise OpenAIError(
            400,
            f"kv_transfer_params.remote_model: the prefill ran {shown(theirs)}, this decode runs "
            f"{model_fingerprint(config)}; give both roles the same DISAGG_MODEL and DISAGG_SEED",
            "kv_transfer_params.remote_model",
        )


def check_signature(params: KvTransferParams, key: bytes | None) -> None:
    """400 unless ``params`` carry this deployment's signature (no key: nothing checked)."""
    problem = params.verify(key)
    if problem is not None:
        raise transfer_error(ParamsError(SIGNATURE, problem))


def transfer_params(params: Any, num_blocks: int, vocab_size: int) -> Remote:
    """Decode's view of a prefill's ``kv_transfer_params`` (a :class:`KvTransferParams` or
    its wire object): every key it acts on checked against its cache (``num_blocks``) and
    model (``vocab_size``), 400 naming the key otherwise."""
    wire = params.to_wire() if isinstance(params, KvTransferParams) else params
    try:
        return read_remote(wire, DecodeBounds(num_blocks, vocab_size))
    except ParamsError as e:
        raise transfer_error(e) from None


def transfer_error(error: ParamsError) -> OpenAIError:
    """A decode's refusal of the params it was given, with what to send instead."""
    return OpenAIError(
        400, f"{error}; pass the kv_transfer_params the prefill worker returned", error.where
    )


class WorkerMetrics:
    """Prometheus metrics of one worker, in a registry of its own."""

    def __init__(self, worker: Worker) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "disagg_requests", "Completion requests by kind and outcome",
            ["kind", "outcome"], registry=self.registry,
        )  # fmt: skip
        self._recomputed = Counter(
            "disagg_decode_recomputed",
            "Requests a decode worker computed from the prompt instead of reading their KV, "
            "by reason (no_kv_transfer_params: sent without do_remote_prefill)",
            ["reason"], registry=self.registry,
        )  # fmt: skip
        # what the autoscaler reads (the engine seam's DemandSeries names them)
        self._prompt_tokens = Counter(
            "disagg_prompt_tokens", "Prompt tokens computed here (not those read from a prefill)",
            registry=self.registry,
        )  # fmt: skip
        self._generation_tokens = Counter(
            "disagg_generation_tokens", "Output tokens generated", registry=self.registry
        )
        # work nobody waits for: docs/worker.md, "Cancellation"
        self._cancelled = Counter(
            "disagg_requests_cancelled", "Requests whose client left (or whose proxy gave up) "
            "before their answer, by kind and stage (queued: no engine step had run for it; "
            "running: stopped at the engine's next step)", ["kind", "stage"],
            registry=self.registry,
        )  # fmt: skip
        self._stop_s = Summary(
            "disagg_cancel_stop_seconds", "From a request's cancel until the engine let go of "
            "it (the step in flight ran out) and its blocks could be freed",
            registry=self.registry,
        )  # fmt: skip
        self.registry.register(_Steps(worker))
        alloc = worker.allocator
        for name, text, fn in (
            ("disagg_kv_blocks_used", "KV blocks in use", lambda: alloc.num_used),
            ("disagg_kv_blocks_free", "KV blocks free", lambda: alloc.num_free),
            ("disagg_kv_blocks_held", "Blocks held for a decode", lambda: _held(worker)),
            ("disagg_requests_running", "Requests in flight", lambda: worker.running),
            (
                "disagg_requests_waiting",
                "Requests waiting for KV blocks or the prefill engine",
                lambda: worker.waiting,
            ),
        ):
            Gauge(name, text, registry=self.registry).set_function(fn)

    def request(self, kind: str, outcome: str) -> None:
        self._requests.labels(kind, outcome).inc()

    def tokens(self, prompt: int, generated: int) -> None:
        self._prompt_tokens.inc(prompt)
        self._generation_tokens.inc(generated)

    def recomputed(self, reason: str) -> None:
        self._recomputed.labels(reason).inc()

    def cancelled(self, kind: str, job: Job) -> None:
        self._cancelled.labels(kind, job.stage).inc()
        if job.cancelled_at is not None:  # the engine had it (running, or in its queue)
            self._stop_s.observe(job.stop_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Steps:
    """``disagg_engine_steps_total``: the engine's forward passes (a prompt or a decode
    step each), counted by the model itself on the engine thread."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def collect(self) -> list[CounterMetricFamily]:
        steps = CounterMetricFamily(
            "disagg_engine_steps", "Forward passes the engine ran (a prompt or a decode step)"
        )
        steps.add_metric([], self._worker.model.steps)
        return [steps]


def _held(worker: Worker) -> int:
    return sum(len(v) for v in list(worker.held.values()))
