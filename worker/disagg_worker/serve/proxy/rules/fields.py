"""The request fields the P/D router checks before the prefill hop, and the OpenAI-shaped
refusal it answers (HTTP 400, ``param`` naming the field).

Computes only (its package is pure). Why at the router: the prefill hop rewrites the
fields that shape the output (``max_tokens`` to 1, ``stream`` off, ``stream_options``
and ``min_tokens`` dropped: :func:`disagg_worker.serve.pd.base.one_token`), so an engine
sees a bad one only at the decode hop, after a prefill was computed and its KV held. The
router refuses only what every engine it fronts refuses: vLLM 0.32's rules
(``sampling_params.py`` ``SamplingParams._verify_args``,
``entrypoints/openai/completion/protocol.py`` and ``chat_completion/protocol.py``),
whose request models read numbers with pydantic's lax mode (``"16"`` and ``16.0`` are
16), so the router reads them the same way. Stricter in one place, on purpose:
``stream`` must be a JSON boolean, since the router itself branches on it (vLLM would
read ``"false"`` as false; a truthy string would stream here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from disagg_worker.serve.rules.limits import shown
from disagg_worker.serve.rules.openai import OWNED, SPLIT_REFUSALS

# vLLM's error type for a refused field (serve/exception_handling/error_response.py,
# create_error_response's default and its VLLMValidationError branch)
BAD_REQUEST = "BadRequestError"
Body = Mapping[str, Any]

_INT = TypeAdapter(int | None)
_FLOAT = TypeAdapter(float | None)
_TOKEN = Annotated[int, Field(ge=0)]
# vLLM 0.32 CompletionRequest.prompt (prompt_embeds aside)
_PROMPT = TypeAdapter(list[_TOKEN] | list[list[_TOKEN]] | str | list[str])


@dataclass(frozen=True)
class Refusal:
    """A field the router refuses: which (``param``) and a message that says the fix."""

    param: str
    message: str

    def body(self) -> dict[str, Any]:
        """The OpenAI error body, as vLLM answers a refused field."""
        error = {"message": self.message, "type": BAD_REQUEST, "param": self.param, "code": 400}
        return {"error": error}


def refusal(body: Body, chat: bool, owned: Sequence[str] = ()) -> Refusal | None:
    """The first field of a completion (``chat``: a chat completion) request that an
    engine would refuse or a P/D split cannot honour, or None; ``owned``: the fields the
    P/D protocol writes on both hops (:attr:`disagg_worker.serve.pd.base.PdProtocol.owned`)."""
    checks: tuple[Callable[[Body], Refusal | None], ...] = (
        _messages if chat else _prompt,
        _model,
        _lengths,
        _sampling,
        _streaming,
        _split,
    )
    for check in checks:
        found = check(body)
        if found is not None:
            return found
    for key in owned:
        if key in body:
            return Refusal(key, f"{key}: {OWNED}")
    return None


def _prompt(body: Body) -> Refusal | None:
    """vLLM's prompt types (prompt_embeds, when sent, instead); an empty string passes
    (the reference engine serves it, and vLLM's prefill refuses it before computing
    anything)."""
    if body.get("prompt") is None:
        if body.get("prompt_embeds") in (None, []):
            return Refusal("prompt", "prompt: missing; send the text, or a list of token ids")
        return None
    if not _valid(_PROMPT, body["prompt"]):
        return Refusal(
            "prompt",
            f"prompt: {shown(body['prompt'])} is not a string, a list of token ids (integers "
            "from 0), or a list of either",
        )
    return None


def _messages(body: Body) -> Refusal | None:
    """A list of objects, each with a string ``role`` (every vLLM message type requires
    one; content may be null, a string or parts)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return Refusal("messages", "messages: must be a list of {role, content} objects")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return Refusal(f"messages[{i}]", f"messages[{i}]: must be an object {{role, content}}")
        if not isinstance(message.get("role"), str):
            where = f"messages[{i}].role"
            return Refusal(where, f"{where}: must be a string (user, assistant, system, ...)")
    return None


def _model(body: Body) -> Refusal | None:
    if body.get("model") is not None and not isinstance(body["model"], str):
        return Refusal("model", "model: must be a string; send a name GET /v1/models lists")
    return None


def _lengths(body: Body) -> Refusal | None:
    """Each length given is an integer: max_tokens and max_completion_tokens at least 1,
    min_tokens at least 0 and no more than an explicit maximum (without one the engine's
    default applies: 16, or what the context leaves)."""
    values: dict[str, int | None] = {}
    for key, low in (("max_tokens", 1), ("max_completion_tokens", 1), ("min_tokens", 0)):
        value = _read(_INT, body.get(key))
        if value is _BAD or (isinstance(value, int) and value < low):
            return Refusal(key, f"{key}: must be an integer of at least {low}, got "
                                f"{shown(body[key])}; send one, or omit it")  # fmt: skip
        values[key] = value if isinstance(value, int) else None
    ceiling = values["max_completion_tokens"] or values["max_tokens"]
    least = values["min_tokens"]
    if ceiling is not None and least is not None and least > ceiling:
        return Refusal(
            "min_tokens",
            f"min_tokens: {least} exceeds the maximum of {ceiling} tokens; lower it, or raise "
            "max_tokens",
        )
    return None


def _sampling(body: Body) -> Refusal | None:
    """temperature in [0, 2], top_p in (0, 1], n an integer of at least 1 (vLLM's
    ranges; a split refuses n > 1 after)."""
    temperature = _read(_FLOAT, body.get("temperature"))
    if temperature is _BAD or (
        isinstance(temperature, float)
        and not (math.isfinite(temperature) and 0 <= temperature <= 2)
    ):
        return Refusal("temperature", f"temperature: must be a number from 0 to 2, got "
                                      f"{shown(body['temperature'])}")  # fmt: skip
    top_p = _read(_FLOAT, body.get("top_p"))
    if top_p is _BAD or (isinstance(top_p, float) and not 0 < top_p <= 1):
        return Refusal("top_p", f"top_p: must be a number above 0 and at most 1, got "
                                f"{shown(body['top_p'])}")  # fmt: skip
    n = _read(_INT, body.get("n"))
    if n is _BAD or (isinstance(n, int) and n < 1):
        return Refusal("n", f"n: must be an integer of at least 1, got {shown(body['n'])}")
    return None


def _streaming(body: Body) -> Refusal | None:
    """stream a JSON boolean; stream_options an object of booleans, sent only with
    stream true (vLLM's validate_stream_options)."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return Refusal("stream", f"stream: must be true or false, got {shown(stream)}")
    options = body.get("stream_options")
    if options is None:
        return None
    if not isinstance(options, dict):
        return Refusal("stream_options", "stream_options: must be an object {include_usage}")
    if options and not stream:
        return Refusal(
            "stream_options", "stream_options: only with stream true; send stream true or omit it"
        )
    for key in ("include_usage", "continuous_usage_stats"):
        if options.get(key) is not None and not isinstance(options[key], bool):
            where = f"stream_options.{key}"
            return Refusal(where, f"{where}: must be true or false")
    return None


def _split(body: Body) -> Refusal | None:
    """What one prefill handing one sequence to one decode cannot do."""
    for key, (refused, remedy) in SPLIT_REFUSALS.items():
        if key in body and refused(body[key]):
            return Refusal(key, f"{key}: {remedy}")
    return None


_BAD = object()  # a value of the wrong type


def _read(adapter: TypeAdapter[Any], value: Any) -> Any:
    """``value`` as vLLM's request model reads it (pydantic, lax), or :data:`_BAD`."""
    try:
        return adapter.validate_python(value)
    except ValidationError:
        return _BAD


def _valid(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True
