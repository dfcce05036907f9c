"""The OpenAI/vLLM request contract, in one place: a body within its limits, which body
fields the reference worker honours (everything else is refused by name), the chat
template, request ids, and what the P/D proxy refuses. What the worker answers is
:mod:`serve.shapes`; ``kv_transfer_params``, :mod:`.kv_params`.

No torch: the proxy imports it too. The worker passes its tokenizer in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_worker.serve.rules.kv_params import FIELD, KvTransferParams, ParamsError
from disagg_worker.serve.rules.limits import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    MAX_TOKENS,
    MIB,
    PARAM_CHARS,
    SHOWN_CHARS,
    bounded,
    nested_deeper,
    shown,
)
from disagg_worker.serve.rules.limits import REQUEST_ID as REQUEST_ID
from disagg_worker.serve.rules.limits import is_int as is_int

# Every body field the reference worker accepts, and what it does with it. One table: the
# parser, the refusal messages and docs/local-run.md all follow it.
HONOURED: dict[str, str] = {
    "model": "must be the served preset (default)",
    "prompt": "/v1/completions: a string (bytes, BOS first) or a list of token ids",
    "messages": "/v1/chat/completions: [{role, content: str}], rendered by CHAT_TEMPLATE",
    "max_tokens": "tokens to generate (default 16)",
    "max_completion_tokens": "the same; wins over max_tokens",
    "min_tokens": "EOS is masked until this many tokens are out",
    "ignore_eos": "keep generating past EOS",
    "temperature": "0 or null only: the engine is greedy",
    "seed": "accepted; greedy output does not depend on it",
    "stream": "server-sent events, one chunk per token, then [DONE]",
    "stream_options": "{include_usage: bool}",
    "kv_transfer_params": "vLLM's P/D convention (do_remote_decode / do_remote_prefill)",
    "user": "accepted and ignored (an opaque client tag)",
    "return_kv_digest": "true: disagg.kv_digest holds a SHA-256 per KV head and prompt block "
    "of the prompt's K/V as this worker holds it (the judge compares P/D with aggregated)",
}
CHAT_ONLY = frozenset({"messages"})
# a prefill's route to free a hold whose decode failed (the proxy posts the params back)
RELEASE_PATH = "/v1/kv/release"
COMPLETION_ONLY = frozenset({"prompt"})
CHAT_TEMPLATE = "each message as '<role>: <content>\\n', then 'assistant: '"

# What cannot work across a P/D split: one prefill hands one sequence's KV to one decode.
# Field → (refused?, why; what to do).
SPLIT_REFUSALS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "n": (
        lambda v: v not in (None, 1),
        "more than one completion per request cannot be split across prefill and decode; "
        "send n 1 and repeat the request",
    ),
    "best_of": (
        lambda v: v not in (None, 1),
        "the proxy hands one sequence from prefill to decode; send best_of 1 or omit it",
    ),
    "use_beam_search": (
        lambda v: bool(v),
        "beams cannot be split across prefill and decode; omit it or send false",
    ),
}
# A field the P/D protocol owns (the proxy writes it on both hops): refused from a client.
OWNED = "the proxy sets this field on both hops; omit it, or send it to a worker directly"


# The error type of a decode whose READ of the prefill's KV failed (502) or timed out (504).
TRANSFER_FAILED = "kv_transfer_error"


class OpenAIError(Exception):
    """An error answered in OpenAI's JSON error format:
    ``{"error": {"message", "type", "param", "code"}}``.
    Message and param are cut to their bounds here, whatever they quote."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        message = bounded(message)
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = None if param is None else bounded(param, PARAM_CHARS)

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        if self.status in (502, 504):
            kind = TRANSFER_FAILED
        error = {"message": self.message, "type": kind, "param": self.param, "code": self.status}
        return {"error": error}


def too_large(size: int | None) -> OpenAIError:
    """413 for a body over MAX_BODY_BYTES (``size`` None: a chunked body, length unknown)."""
    what = f"{size} bytes is " if size is not None else ""
    return OpenAIError(
        413,
        f"body: {what}over the {MAX_BODY_BYTES // MIB} MiB limit ({MAX_BODY_BYTES} bytes); "
        "shorten the prompt, or split the work across requests",
        "body",
    )


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object nested at most MAX_JSON_DEPTH deep; 400 naming
    ``body`` otherwise."""
    deep = OpenAIError(
        400, f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels; flatten it", "body"
    )
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:  # deeper than the parser's stack: far past the bound
        raise deep from None
    except ValueError:  # malformed, or not UTF-8
        raise OpenAIError(400, "body: not valid JSON; send one UTF-8 JSON object", "body") from None
    if not isinstance(data, dict):
        raise OpenAIError(400, "body: must be a JSON object", "body")
    if nested_deeper(data, MAX_JSON_DEPTH):
        raise deep
    return data


@dataclass(frozen=True)
class CompletionRequest:
    """The subset of a completion or chat request the reference engine honours."""

    model: str
    prompt: list[int]
    max_tokens: int
    ignore_eos: bool
    kv_transfer_params: KvTransferParams | None
    min_tokens: int = 0
    stream: bool = False
    include_usage: bool = False
    chat: bool = False
    kv_digest: bool = False


def parse_request(
    data: Any, served_model: str, *, chat: bool, encode: Callable[[str], list[int]]
) -> CompletionRequest:
    """Validate a body; errors name the field and what to send instead."""
    if not isinstance(data, dict):
        raise OpenAIError(400, "body: must be a JSON object", "body")
    _refuse_unknown(data, chat)
    model = _model(data, served_model)
    _check_ignored(data)
    max_tokens, min_tokens = _lengths(data)
    params = _transfer_params(data.get(FIELD))
    stream = _bool(data, "stream")
    if stream and params is not None and params.do_remote_decode:
        raise OpenAIError(
            400,
            "stream: a prefill answers kv_transfer_params in one whole response; send false",
            "stream",
        )
    text_or_ids = chat_prompt(data.get("messages")) if chat else data.get("prompt")
    return CompletionRequest(
        model=model,
        prompt=_prompt_tokens(text_or_ids, encode, "messages" if chat else "prompt"),
        max_tokens=max_tokens,
        ignore_eos=_bool(data, "ignore_eos"),
        kv_transfer_params=params,
        min_tokens=min_tokens,
        stream=stream,
        kv_digest=_bool(data, "return_kv_digest"),
        include_usage=_include_usage(data.get("stream_options")),
        chat=chat,
    )


TOKENIZE_PATH = "/tokenize"  # vLLM's path and shapes: {model, prompt} or {model, messages}
# keys vLLM's tokenize requests take that change nothing here
TOKENIZE_IGNORED = frozenset(
    {"add_special_tokens", "add_generation_prompt", "return_token_strs", "continue_final_message"}
)


def parse_tokenize(data: Any, served_model: str, encode: Callable[[str], list[int]]) -> list[int]:
    """The tokens of a ``POST /tokenize`` body, as the completion or chat request with the
    same prompt or messages would count them."""
    if not isinstance(data, dict):
        raise OpenAIError(400, "body: must be a JSON object", "body")
    _model(data, served_model)
    chat = "messages" in data
    for key in data:
        if key not in ("model", "messages" if chat else "prompt") and key not in TOKENIZE_IGNORED:
            raise OpenAIError(
                400, f"{bounded(key, SHOWN_CHARS)}: not supported by /tokenize; remove it", key
            )
    text_or_ids = chat_prompt(data["messages"]) if chat else data.get("prompt")
    return _prompt_tokens(text_or_ids, encode, "messages" if chat else "prompt")


def _refuse_unknown(data: dict[str, Any], chat: bool) -> None:
    other = COMPLETION_ONLY if chat else CHAT_ONLY
    for key in data:
        if key not in HONOURED or key in other:
            route = "/v1/chat/completions" if chat else "/v1/completions"
            raise OpenAIError(
                400,
                f"{bounded(key, SHOWN_CHARS)}: not supported by the reference worker on "
                f"{route}; remove it "
                f"(supported: {', '.join(k for k in HONOURED if k not in other)})",
                key,
            )


def _model(data: dict[str, Any], served_model: str) -> str:
    model = data.get("model")
    if model is None:
        return served_model
    if not isinstance(model, str):
        raise OpenAIError(
            400, f"model: must be a string; send {served_model!r} or omit it", "model"
        )
    if model != served_model:
        raise OpenAIError(
            404, f"model: {shown(model)} is not served here; use {served_model!r}", "model"
        )
    return model


def _check_ignored(data: dict[str, Any]) -> None:
    """Fields accepted without effect still have vLLM's types, so a body that works here
    works against vLLM too."""
    if data.get("temperature") not in (None, 0, 0.0):
        raise OpenAIError(
            400, "temperature: the reference engine is greedy; send 0 or omit it", "temperature"
        )
    _int(data, "seed", 0, -(2**63), 2**64 - 1)  # vLLM's range: a 64-bit seed
    if data.get("user") is not None and not isinstance(data["user"], str):
        raise OpenAIError(400, "user: must be a string", "user")


def _lengths(data: dict[str, Any]) -> tuple[int, int]:
    """max_tokens (max_completion_tokens wins) and min_tokens. The engine checks the
    prompt and max_tokens together against its model's positions."""
    max_tokens = _int(data, "max_tokens", 16, 1, MAX_TOKENS)
    max_tokens = _int(data, "max_completion_tokens", max_tokens, 1, MAX_TOKENS)
    min_tokens = _int(data, "min_tokens", 0, 0, MAX_TOKENS)
    if min_tokens > max_tokens:
        raise OpenAIError(
            400, f"min_tokens: {min_tokens} exceeds max_tokens {max_tokens}", "min_tokens"
        )
    return max_tokens, min_tokens


def _transfer_params(wire: Any) -> KvTransferParams | None:
    """kv_transfer_params as every role reads it (each key's type: a decode checks what it
    acts on, :meth:`KvTransferParams.remote`); 400 naming the key."""
    if wire is None:
        return None
    try:
        return KvTransferParams.from_wire(wire)
    except ParamsError as e:
        raise OpenAIError(400, str(e), e.where) from None


def _int(data: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = data.get(key)
    if value is None:
        return default
    if not is_int(value) or not low <= value <= high:
        raise OpenAIError(400, f"{key}: must be an integer from {low} to {high}", key)
    return value


def _bool(data: dict[str, Any], key: str, where: str | None = None) -> bool:
    """``data[key]`` as a boolean (absent or null: false); ``where`` names it in errors."""
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        where = where or key
        raise OpenAIError(400, f"{where}: must be true or false", where)
    return value


def _include_usage(options: Any) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise OpenAIError(
            400, "stream_options: must be an object with only include_usage", "stream_options"
        )
    return _bool(options, "include_usage", "stream_options.include_usage")


def chat_prompt(messages: Any) -> str:
    """The fixed chat template: each message as ``<role>: <content>\\n``, then
    ``assistant: `` for the answer. No model-specific tokens: the weights are random."""
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(400, "messages: must be a non-empty list of {role, content}", "messages")
    parts = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise OpenAIError(400, f"{where}: must be an object {{role, content}}", where)
        for key in message:
            if key not in ("role", "content"):
                raise OpenAIError(
                    400, f"{where}.{key}: not supported; send role and content", f"{where}.{key}"
                )
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                raise OpenAIError(400, f"{where}.{key}: must be a string", f"{where}.{key}")
        parts.append(f"{message['role']}: {message['content']}\n")
    return "".join(parts) + "assistant: "


def _prompt_tokens(prompt: Any, encode: Callable[[str], list[int]], field: str) -> list[int]:
    """A string, a token id list, or a one-item list of either (``field``: where the text
    came from, for errors)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        try:
            return encode(prompt)
        except UnicodeEncodeError:  # JSON can carry a lone surrogate; UTF-8 cannot
            raise OpenAIError(
                400,
                f"{field}: text with a lone surrogate (\\ud800-\\udfff); send valid text",
                field,
            ) from None
    if isinstance(prompt, list) and all(is_int(t) for t in prompt):
        return list(prompt)
    raise OpenAIError(400, "prompt: must be a string or a list of token ids", "prompt")


def proxy_refusal(body: dict[str, Any], owned: Sequence[str]) -> str | None:
    """The message for the first field a P/D split cannot honour, or None; ``owned``: the
    fields the P/D protocol writes (:attr:`disagg_worker.serve.pd.base.PdProtocol.owned`)."""
    for key, (refused, remedy) in SPLIT_REFUSALS.items():
        if key in body and refused(body[key]):
            return f"{key}: {remedy}"
    for key in owned:
        if key in body:
            return f"{key}: {OWNED}"
    return None


def request_id(given: str | None, make: Callable[[], str]) -> str:
    """The client's X-Request-Id when it is a bounded safe token, else ``make()``."""
    if given is not None and REQUEST_ID.fullmatch(given):
        return given
    return make()
