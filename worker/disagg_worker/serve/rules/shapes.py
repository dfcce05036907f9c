"""What the worker answers, in OpenAI's shapes: a whole completion or chat completion,
one stream chunk per token, and the usage event (the request side: :mod:`serve.openai`).

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from disagg_worker.serve.rules.openai import CompletionRequest


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def response_body(
    req: CompletionRequest,
    request_id: str,
    created: int,
    text: str,
    tokens: Sequence[int],
    finish_reason: str,
) -> dict[str, Any]:
    """A whole answer: ``text_completion`` or ``chat.completion``."""
    if req.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    choice["token_ids"] = list(tokens)
    body = _envelope(req, request_id, created, "chat.completion", [choice])
    body["usage"] = usage(len(req.prompt), len(tokens))
    return body


def chunk(
    req: CompletionRequest,
    request_id: str,
    created: int,
    text: str,
    tokens: Sequence[int],
    finish_reason: str | None,
    *,
    first: bool = False,
) -> dict[str, Any]:
    """One stream event: ``text_completion`` or ``chat.completion.chunk`` (with ``delta``)."""
    choice: dict[str, Any] = {"index": 0}
    if req.chat:
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        if text or first:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text
        choice["logprobs"] = None
    choice["token_ids"] = list(tokens) or None
    choice["finish_reason"] = finish_reason
    return _envelope(req, request_id, created, "chat.completion.chunk", [choice])


def usage_chunk(req: CompletionRequest, request_id: str, created: int, n: int) -> dict[str, Any]:
    """The last event before ``[DONE]`` when ``stream_options.include_usage`` is set."""
    event = _envelope(req, request_id, created, "chat.completion.chunk", [])
    event["usage"] = usage(len(req.prompt), n)
    return event


def _envelope(
    req: CompletionRequest, request_id: str, created: int, chat_object: str, choices: list[Any]
) -> dict[str, Any]:
    """The fields every answer and event shares; ``object`` is ``chat_object`` for chat,
    ``text_completion`` otherwise."""
    return {
        "id": request_id,
        "object": chat_object if req.chat else "text_completion",
        "created": created,
        "model": req.model,
        "choices": choices,
    }
