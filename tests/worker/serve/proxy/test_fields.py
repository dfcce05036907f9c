"""The fields the router checks before the prefill hop: vLLM 0.32's rules for them (cases
from its source and tests, each named), what the reference engine serves that vLLM does
not (never refused), and the OpenAI error body."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from disagg_worker.serve.proxy.rules.fields import BAD_REQUEST, refusal
from disagg_worker.serve.rules.openai import OWNED

HI = {"prompt": "hi"}
CHAT = {"messages": [{"role": "user", "content": "hi"}]}

# (body, chat?, the param refused); where each rule comes from in vLLM 0.32
REFUSED: list[tuple[dict[str, Any], bool, str]] = [
    # sampling_params.py SamplingParams._verify_args: "max_tokens must be at least 1"
    ({**HI, "max_tokens": 0}, False, "max_tokens"),
    ({**HI, "max_tokens": -3}, False, "max_tokens"),
    ({**CHAT, "max_tokens": 0}, True, "max_tokens"),
    # chat_completion/protocol.py: max_completion_tokens wins and is the one verified
    ({**CHAT, "max_completion_tokens": 0}, True, "max_completion_tokens"),
    # pydantic int | None: a fraction or a word is no count
    ({**HI, "max_tokens": 1.5}, False, "max_tokens"),
    ({**HI, "max_tokens": "many"}, False, "max_tokens"),
    ({**HI, "max_tokens": [16]}, False, "max_tokens"),
    # _verify_args: min_tokens >= 0 and <= max_tokens
    ({**HI, "min_tokens": -1}, False, "min_tokens"),
    ({**HI, "max_tokens": 4, "min_tokens": 5}, False, "min_tokens"),
    ({**CHAT, "max_completion_tokens": 4, "min_tokens": 5}, True, "min_tokens"),
    # _verify_args: temperature finite and in [0, 2]; top_p in (0, 1]
    ({**HI, "temperature": -0.1}, False, "temperature"),
    ({**HI, "temperature": 2.5}, False, "temperature"),
    ({**HI, "temperature": math.nan}, False, "temperature"),
    ({**HI, "temperature": math.inf}, False, "temperature"),
    ({**HI, "temperature": "hot"}, False, "temperature"),
    ({**HI, "top_p": 0}, False, "top_p"),
    ({**HI, "top_p": 1.01}, False, "top_p"),
    # sampling_params.py _verify_num_sequences: n an int of at least 1
    ({**HI, "n": 0}, False, "n"),
    ({**HI, "n": "one"}, False, "n"),
    # a split: one prefill hands one sequence to one decode (serve/rules/openai.py)
    ({**HI, "n": 2}, False, "n"),
    ({**CHAT, "best_of": 3}, True, "best_of"),
    ({**HI, "use_beam_search": True}, False, "use_beam_search"),
    # completion/protocol.py validate_prompt_and_prompt_embeds; vLLM's tests/entrypoints/
    # openai/completion/test_prompt_validation.py test_empty_prompt: prompt None, embeds []
    ({"max_tokens": 5}, False, "prompt"),
    ({"prompt": None, "prompt_embeds": []}, False, "prompt"),
    # CompletionRequest.prompt's types; vLLM's tests/entrypoints/openai/completion/
    # test_completion_error.py test_negative_prompt_token_ids_flat and _nested
    ({"prompt": [-1]}, False, "prompt"),
    ({"prompt": [[-1]]}, False, "prompt"),
    ({"prompt": {"text": "hi"}}, False, "prompt"),
    ({"prompt": ["a", 1]}, False, "prompt"),
    # ChatCompletionRequest.messages: a list of messages, each with a role
    ({"prompt": "hi"}, True, "messages"),
    ({"messages": "hi"}, True, "messages"),
    ({"messages": ["hi"]}, True, "messages[0]"),
    ({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]}, True, "messages[1].role"),
    ({**HI, "model": 7}, False, "model"),
    # the router branches on stream: a JSON boolean only
    ({**HI, "stream": "false"}, False, "stream"),
    ({**HI, "stream": 1}, False, "stream"),
    # completion/protocol.py validate_stream_options: only with stream true
    ({**HI, "stream_options": {"include_usage": True}}, False, "stream_options"),
    ({**CHAT, "stream": False, "stream_options": {"include_usage": True}}, True,
     "stream_options"),
    ({**HI, "stream": True, "stream_options": "usage"}, False, "stream_options"),
    ({**HI, "stream": True, "stream_options": {"include_usage": "yes"}}, False,
     "stream_options.include_usage"),
    # the P/D protocol's own field (the proxy writes it on both hops)
    ({**HI, "kv_transfer_params": {"do_remote_decode": True}}, False, "kv_transfer_params"),
]  # fmt: skip

# Served by at least one engine the router fronts, so never refused before the hops.
PASSED: list[tuple[dict[str, Any], bool]] = [
    (HI, False),
    (CHAT, True),
    # the reference engine serves an empty prompt (BOS alone); vLLM's prefill refuses it
    ({"prompt": "", "max_tokens": 1}, False),
    ({"prompt": [1, 2, 3]}, False),
    ({"prompt": [[1, 2], [3]]}, False),
    ({"prompt": ["a", "b"]}, False),
    ({"prompt_embeds": "<base64>"}, False),
    # vLLM reads numbers with pydantic's lax mode: "16" and 16.0 are 16
    ({**HI, "max_tokens": "16"}, False),
    ({**HI, "max_tokens": 16.0, "temperature": "0.5"}, False),
    ({**HI, "max_tokens": None, "temperature": None, "top_p": None, "n": None}, False),
    ({**HI, "max_tokens": 1, "temperature": 0, "top_p": 1, "n": 1}, False),
    ({**HI, "temperature": 2, "top_p": 0.01}, False),
    ({**HI, "min_tokens": 16}, False),  # no explicit maximum: the engine's default decides
    ({**HI, "max_tokens": 4, "max_completion_tokens": 8, "min_tokens": 6}, False),
    ({**CHAT, "max_completion_tokens": 8, "max_tokens": 4, "min_tokens": 6}, True),
    ({**CHAT, "messages": []}, True),  # vLLM's model takes an empty list
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": []}]}, True),
    ({**HI, "stream": True, "stream_options": {"include_usage": True}}, False),
    ({**HI, "stream": False, "stream_options": {}}, False),
    ({**HI, "stream": None}, False),
    ({**HI, "best_of": 1, "use_beam_search": False}, False),
]


@pytest.mark.parametrize(("body", "chat", "param"), REFUSED)
def test_a_field_every_engine_refuses_is_refused_by_name(
    body: dict[str, Any], chat: bool, param: str
) -> None:
    found = refusal(body, chat, ("kv_transfer_params",))
    assert found is not None, body
    assert found.param == param
    assert found.message.startswith(f"{param}: "), found.message


@pytest.mark.parametrize(("body", "chat"), PASSED)
def test_what_an_engine_serves_passes(body: dict[str, Any], chat: bool) -> None:
    assert refusal(body, chat, ("kv_transfer_params",)) is None


def test_the_refusal_is_vllms_error_body() -> None:
    """vLLM 0.32's ErrorResponse for a refused field (serve/engine/protocol.py ErrorInfo,
    serve/exception_handling/error_response.py create_error_response)."""
    found = refusal({**HI, "max_tokens": 0}, False)
    assert found is not None
    body = found.body()
    assert set(body) == {"error"}
    assert body["error"]["type"] == BAD_REQUEST == "BadRequestError"
    assert body["error"]["param"] == "max_tokens" and body["error"]["code"] == 400
    assert "got 0" in body["error"]["message"]
    json.dumps(body)  # plain JSON


def test_an_owned_field_says_the_proxy_writes_it() -> None:
    found = refusal({**HI, "toy": 1}, False, ("toy",))
    assert found is not None and found.message == f"toy: {OWNED}"
    assert refusal({**HI, "toy": 1}, False, ()) is None
