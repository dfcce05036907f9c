"""The worker's HTTP contract: request parsing, response bodies, errors and metrics.

Pure-ish layer (aiohttp only to turn an error into a response, prometheus-client for the
metric registry). The request/response shapes follow OpenAI's ``/v1/completions`` and
vLLM's ``kv_transfer_params``, so a proxy written for vLLM works against this worker and
ours works against vLLM. Extension: every response carries ``disagg`` — the engine id, role
and where the time went (``prompt_ms``, ``first_step_ms``, ``decode_ms``, ``transfer_ms``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from disagg_worker.config import WorkerConfig
from disagg_worker.engine.model import Generation, decode, encode

if TYPE_CHECKING:
    from disagg_worker.serve.server import Worker


class ApiError(Exception):
    """An error answered as JSON: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        if self.status in (502, 504):
            kind = "kv_transfer_error"
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.status,
            }
        }

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status)


@dataclass(frozen=True)
class CompletionRequest:
    """The subset of a completion request the reference engine honours."""

    model: str
    prompt: list[int]
    max_tokens: int
    ignore_eos: bool
    kv_transfer_params: dict[str, Any] | None


def parse_completion(data: Any, served_model: str) -> CompletionRequest:
    """Validate a request body; errors name the field and what to send instead."""
    if not isinstance(data, dict):
        raise ApiError(400, "body: must be a JSON object")
    model = data.get("model", served_model)
    if model != served_model:
        raise ApiError(404, f"model: {model!r} is not served here; use {served_model!r}", "model")
    if data.get("stream"):
        raise ApiError(400, "stream: streaming is not supported; send stream false", "stream")
    max_tokens = data.get("max_tokens", 16)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise ApiError(400, "max_tokens: must be an integer", "max_tokens")
    params = data.get("kv_transfer_params")
    if params is not None and not isinstance(params, dict):
        raise ApiError(400, "kv_transfer_params: must be an object", "kv_transfer_params")
    return CompletionRequest(
        model=model,
        prompt=_prompt_tokens(data.get("prompt")),
        max_tokens=max_tokens,
        ignore_eos=bool(data.get("ignore_eos", False)),
        kv_transfer_params=params,
    )


def _prompt_tokens(prompt: Any) -> list[int]:
    """A string (byte-tokenised, BOS first), a token id list, or a one-item list of either."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return encode(prompt)
    if isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        return list(prompt)
    raise ApiError(400, "prompt: must be a string or a list of token ids", "prompt")


def remote_params(
    config: WorkerConfig, port: int | None, request_id: str, block_ids: list[int]
) -> dict[str, Any]:
    """What a prefill answers so a decode can fetch the blocks (vLLM's field names)."""
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": config.engine_id,
        "remote_block_ids": list(block_ids),
        "remote_host": config.advertised_host,
        "remote_port": port,
        "remote_request_id": request_id,
        "tp_size": config.tp_size,
        "remote_model": model_fingerprint(config),
    }


def model_fingerprint(config: WorkerConfig) -> str:
    """Which weights made the KV (extension field): KV from other weights is garbage even
    when the layouts match, so decode refuses it."""
    return f"{config.model}/seed={config.seed}"


def check_model(config: WorkerConfig, params: dict[str, Any]) -> None:
    theirs = params.get("remote_model")
    if theirs is not None and theirs != model_fingerprint(config):
        raise ApiError(
            400,
            f"kv_transfer_params.remote_model: the prefill ran {theirs}, this decode runs "
            f"{model_fingerprint(config)}; give both roles the same DISAGG_MODEL and DISAGG_SEED",
            "kv_transfer_params.remote_model",
        )


def completion_body(
    req: CompletionRequest,
    request_id: str,
    gen: Generation,
    config: WorkerConfig,
    kv_transfer_params: dict[str, Any] | None,
    *,
    timings: dict[str, float],
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": decode(gen.tokens),
        "token_ids": gen.tokens,
        "logprobs": None,
        "finish_reason": gen.finish_reason,
    }
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(req.prompt),
            "completion_tokens": len(gen.tokens),
            "total_tokens": len(req.prompt) + len(gen.tokens),
        },
        "kv_transfer_params": kv_transfer_params,
        "disagg": {"engine_id": config.engine_id, "role": config.role, **timings},
    }


class WorkerMetrics:
    """Prometheus metrics of one worker, in a registry of its own."""

    def __init__(self, worker: Worker) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "disagg_requests", "Completion requests by kind and outcome",
            ["kind", "outcome"], registry=self.registry,
        )  # fmt: skip
        alloc = worker.allocator
        for name, text, fn in (
            ("disagg_kv_blocks_used", "KV blocks in use", lambda: alloc.num_used),
            ("disagg_kv_blocks_free", "KV blocks free", lambda: alloc.num_free),
            ("disagg_kv_blocks_held", "Blocks held for a decode", lambda: _held(worker)),
        ):
            Gauge(name, text, registry=self.registry).set_function(fn)

    def request(self, kind: str, outcome: str) -> None:
        self._requests.labels(kind, outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _held(worker: Worker) -> int:
    return sum(len(v) for v in list(worker.held.values()))
