"""The OpenAI/vLLM request contract: fields honoured or refused by name, the chat
template, request ids, and what the proxy refuses across a P/D split."""

from __future__ import annotations

import pytest

from disagg_worker.serve.api import transfer_params
from disagg_worker.serve.rules.openai import (
    OWNED,
    CompletionRequest,
    OpenAIError,
    chat_prompt,
    parse_body,
    parse_request,
    proxy_refusal,
    request_id,
    too_large,
)


def _encode(text: str) -> list[int]:
    return [256, *text.encode()]


def _parse(body: object, chat: bool = False) -> object:
    return parse_request(body, "tiny", chat=chat, encode=_encode)


def _error(body: object, chat: bool = False) -> OpenAIError:
    with pytest.raises(OpenAIError) as info:
        _parse(body, chat)
    return info.value


def test_completion_fields_parsed() -> None:
    req = parse_request(
        {"prompt": "hi", "max_completion_tokens": 5, "min_tokens": 2, "stream": True,
         "stream_options": {"include_usage": True}, "temperature": 0, "seed": 1},
        "tiny", chat=False, encode=_encode,
    )  # fmt: skip
    assert req.prompt == [256, 104, 105]
    assert (req.max_tokens, req.min_tokens, req.stream, req.include_usage) == (5, 2, True, True)


@pytest.mark.parametrize(
    ("body", "param", "start"),
    [
        ({"prompt": "x", "top_p": 0.5}, "top_p", "top_p: not supported by the reference worker"),
        ({"prompt": "x", "logprobs": 2}, "logprobs", "logprobs: not supported"),
        ({"prompt": "x", "temperature": 0.7}, "temperature", "temperature: the reference"),
        ({"prompt": "x", "min_tokens": -1}, "min_tokens", "min_tokens: must be an integer"),
        ({"prompt": "x", "max_tokens": -1}, "max_tokens", "max_tokens: must be an integer from 1"),
        ({"prompt": "x", "max_tokens": 10**30}, "max_tokens", "max_tokens: must be an integer"),
        ({"prompt": "x", "max_tokens": True}, "max_tokens", "max_tokens: must be an integer"),
        ({"prompt": "x", "max_completion_tokens": 0}, "max_completion_tokens", "max_completion"),
        ({"prompt": "x", "ignore_eos": "yes"}, "ignore_eos", "ignore_eos: must be true or false"),
        ({"prompt": "x", "seed": "1"}, "seed", "seed: must be an integer"),
        ({"prompt": "x", "seed": 2**64}, "seed", "seed: must be an integer"),
        ({"prompt": "x", "user": 5}, "user", "user: must be a string"),
        ({"prompt": "x", "model": ["tiny"]}, "model", "model: must be a string; send 'tiny'"),
        ({"prompt": "\ud800"}, "prompt", "prompt: text with a lone surrogate"),
        ({"prompt": [[1], [2]]}, "prompt", "prompt: must be a string or a list of token ids"),
        (
            {"prompt": "x", "stream_options": {"include_usage": 1}},
            "stream_options.include_usage",
            "stream_options.include_usage: must be true or false",
        ),
        (
            {"prompt": "x", "kv_transfer_params": {"do_remote_prefill": "yes"}},
            "kv_transfer_params.do_remote_prefill",
            "kv_transfer_params.do_remote_prefill: must be true or false",
        ),
        ({"prompt": "x", "min_tokens": 9, "max_tokens": 3}, "min_tokens", "min_tokens: 9 exceeds"),
        ({"prompt": "x", "stream": "yes"}, "stream", "stream: must be true or false"),
        ({"prompt": "x", "stream_options": 1}, "stream_options", "stream_options: must be"),
        ({"prompt": "x", "messages": []}, "messages", "messages: not supported"),
        ({"prompt": "x", "model": "gpt"}, "model", "model: 'gpt' is not served here"),
        (
            {"prompt": "x", "stream": True, "kv_transfer_params": {"do_remote_decode": True}},
            "stream",
            "stream: a prefill answers kv_transfer_params",
        ),
    ],
)
def test_completion_refusals_name_the_field(body: object, param: str, start: str) -> None:
    err = _error(body)
    assert err.param == param and err.message.startswith(start), err.message


def test_optional_fields_may_be_null() -> None:
    body = {"prompt": [1, 2], "model": None, "max_tokens": None, "seed": None, "user": None,
            "ignore_eos": None, "stream_options": {"include_usage": None}}  # fmt: skip
    req = _parse(body)
    assert isinstance(req, CompletionRequest)
    assert (req.model, req.max_tokens, req.ignore_eos, req.include_usage) == (
        "tiny",
        16,
        False,
        False,
    )


def test_chat_template_and_validation() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert chat_prompt(messages) == "system: be brief\nuser: hi\nassistant: "
    req = parse_request({"messages": messages}, "tiny", chat=True, encode=_encode)
    assert req.prompt == _encode("system: be brief\nuser: hi\nassistant: ") and req.chat
    cases = [
        ({"messages": "hi"}, "messages", "messages: must be a non-empty list"),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "messages[0].content: must"),
        ({"messages": [{"role": 1, "content": "x"}]}, "messages[0].role", "messages[0].role:"),
        ({"messages": [{"role": "user", "content": "x", "name": "a"}]}, "messages[0].name", ""),
        ({"messages": messages, "prompt": "x"}, "prompt", "prompt: not supported"),
        ({"messages": [{"role": "user", "content": "\udfff"}]}, "messages", "messages: text"),
    ]
    for body, param, start in cases:
        err = _error(body, chat=True)
        assert err.param == param and err.message.startswith(start), err.message


@pytest.mark.parametrize(
    ("body", "start"),
    [
        ({"n": 2}, "n: "),
        ({"best_of": 3}, "best_of: "),
        ({"use_beam_search": True}, "use_beam_search: "),
        ({"kv_transfer_params": {}}, "kv_transfer_params: the proxy sets this field"),
    ],
)
def test_proxy_refuses_what_a_split_cannot_do(body: dict[str, object], start: str) -> None:
    message = proxy_refusal({"prompt": "x", **body}, ("kv_transfer_params",))
    assert message is not None and message.startswith(start) and "; " in message


def test_proxy_accepts_single_sequence_requests() -> None:
    single = {"prompt": "x", "n": 1, "best_of": 1, "use_beam_search": False}
    assert proxy_refusal(single, ("kv_transfer_params",)) is None
    assert proxy_refusal({**single, "toy": 1}, ("toy",)) == f"toy: {OWNED}"


def test_request_id_honours_safe_client_ids_only() -> None:
    assert request_id("abc-1.2:3_x", lambda: "gen") == "abc-1.2:3_x"
    for bad in (None, "", "a b", "x" * 129, "id\r\nX-Evil: 1", "ü"):
        assert request_id(bad, lambda: "gen") == "gen"
    assert request_id("x" * 128, lambda: "gen") == "x" * 128


def test_a_body_is_one_json_object_nested_within_the_bound() -> None:
    assert parse_body(b'{"prompt": [1, 2]}') == {"prompt": [1, 2]}
    cases = [
        (b"[1]", "body: must be a JSON object"),
        (b'{"prompt": ', "body: not valid JSON"),
        (b'{"prompt": "\xff"}', "body: not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "body: JSON nested deeper than 64 levels"),
        (b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}", "body: JSON nested deeper than 64 levels"),
    ]
    for raw, start in cases:
        with pytest.raises(OpenAIError) as info:
            parse_body(raw)
        err = info.value
        assert (err.status, err.param) == (400, "body") and err.message.startswith(start), err
    assert parse_body(b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}")


def test_a_body_over_the_limit_is_413_saying_what_to_do() -> None:
    err = too_large(5 * 1024 * 1024)
    assert (err.status, err.param) == (413, "body")
    assert err.message.startswith("body: 5242880 bytes is over the 4 MiB limit (4194304 bytes)")
    assert too_large(None).message.startswith("body: over the 4 MiB limit (4194304 bytes); ")


def test_errors_never_echo_more_than_a_bound() -> None:
    err = OpenAIError(400, "x" * 100_000, "p" * 1000)
    assert len(err.message) == 1000 and err.message.endswith("... (100000 characters)")
    assert err.param is not None and len(err.param) == 128 and str(err) == err.message
    err = _error({"prompt": "x", "k" * 100_000: 1})
    assert err.message.startswith("k" * 32) and "k" * 65 not in err.message
    assert err.param is not None and err.param.startswith("k" * 64)
    err = _error({"prompt": "x", "model": "m" * 100_000})
    assert err.message.startswith("model: 'mmm") and "(100000 characters)" in err.message
    assert len(err.message) < 200


PREFILL_ANSWER = {
    "do_remote_prefill": True,
    "do_remote_decode": False,
    "remote_engine_id": "p0",
    "remote_block_ids": [3, 4],
    "remote_host": "10.0.0.7",
    "remote_port": 5600,
    "remote_request_id": "cmpl-1-abc",
    "tp_size": 1,
    "remote_model": "tiny/seed=0",
}


def test_transfer_params_read_what_decode_uses_and_keep_the_rest() -> None:
    extra = {"remote_incarnation": "i-7", "prompt_digest": "sha256:00", "vllm_new": [1]}
    got = transfer_params({**PREFILL_ANSWER, **extra}, num_blocks=8, vocab_size=258)
    assert (got.host, got.port, got.engine_id) == ("10.0.0.7", 5600, "p0")
    assert (got.block_ids, got.request_id) == ((3, 4), "cmpl-1-abc")
    assert got.params.to_wire() == {**PREFILL_ANSWER, **extra}  # unknown keys pass through
    assert (got.incarnation, got.prompt_digest, got.first_token) == ("i-7", "sha256:00", None)
    assert transfer_params({**PREFILL_ANSWER, "first_token": 257}, 8, 258).first_token == 257
    bare = {k: v for k, v in PREFILL_ANSWER.items() if k not in ("remote_request_id", "tp_size")}
    assert transfer_params(bare, 8, 258).request_id == "p0"  # a prefill that sends no id
    for host in ("fd00::7", "fe80::1%eth0", "p0.prefill.svc", "p_0"):
        assert transfer_params({**PREFILL_ANSWER, "remote_host": host}, 8, 258).host == host


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("remote_host", None, "required with do_remote_prefill"),
        ("remote_host", "", "must be a string of 1 to 253 characters"),
        ("remote_host", 7, "must be a string of 1 to 253 characters"),
        ("remote_host", "h" * 254, "must be a string of 1 to 253 characters"),
        ("remote_host", "[::1]", "must be a host name or an IP address"),
        ("remote_host", "tcp://x", "must be a host name or an IP address"),
        ("remote_port", [5600], "must be an integer from 1 to 65535"),
        ("remote_port", "5600", "must be an integer from 1 to 65535"),
        ("remote_port", 0, "must be an integer from 1 to 65535"),
        ("remote_port", 65536, "must be an integer from 1 to 65535"),
        ("remote_port", True, "must be an integer from 1 to 65535"),
        ("remote_engine_id", None, "required with do_remote_prefill"),
        ("remote_engine_id", {"a": 1}, "must be a string of 1 to 253 characters"),
        ("remote_block_ids", "3", "must be a list of block ids"),
        ("remote_block_ids", [3, -1], "must be a list of integers >= 0"),
        ("remote_block_ids", [3, False], "must be a list of integers >= 0"),
        ("remote_block_ids", [3.0], "must be a list of integers >= 0"),
        ("remote_block_ids", list(range(9)), "9 ids, more than this decode's 8 blocks"),
        ("remote_request_id", "r" * 129, "must be 1 to 128 of [A-Za-z0-9._:-]"),
        ("remote_request_id", "a\r\nb", "must be 1 to 128 of [A-Za-z0-9._:-]"),
        ("remote_request_id", "", "must be 1 to 128 of [A-Za-z0-9._:-]"),
        ("remote_request_id", 7, "must be 1 to 128 of [A-Za-z0-9._:-]"),
        ("tp_size", 0, "must be an integer >= 1"),
        ("tp_size", "2", "must be an integer >= 1"),
        ("remote_model", ["tiny"], "must be a string"),
        ("remote_incarnation", 7, "must be the prefill's agent name"),
        ("remote_incarnation", "i" * 263, "must be the prefill's agent name"),
        ("prompt_digest", 5, "must be a string"),
        ("first_token", 258, "must be a token id in [0, 258)"),
        ("first_token", -1, "must be a token id in [0, 258)"),
        ("first_token", True, "must be a token id in [0, 258)"),
        ("first_token", "5", "must be a token id in [0, 258)"),
    ],
)
def test_each_transfer_param_is_refused_by_name(key: str, value: object, problem: str) -> None:
    params = {**PREFILL_ANSWER, key: value}
    with pytest.raises(OpenAIError) as info:
        transfer_params(params, num_blocks=8, vocab_size=258)
    err = info.value
    assert (err.status, err.param) == (400, f"kv_transfer_params.{key}")
    assert err.message.startswith(f"kv_transfer_params.{key}: {problem}; pass the "), err.message
    assert len(err.message) < 200  # names the field, never echoes the value


def test_tokenize_counts_as_the_completion_would() -> None:
    from disagg_worker.model.model import encode
    from disagg_worker.serve.rules.openai import parse_tokenize

    assert parse_tokenize({"prompt": "hi"}, "m", encode) == encode("hi")
    chat = [{"role": "user", "content": "hi"}]
    assert parse_tokenize({"model": "m", "messages": chat}, "m", encode) == encode(
        "user: hi\nassistant: "
    )
    with pytest.raises(OpenAIError, match="temperature: not supported by /tokenize"):
        parse_tokenize({"prompt": "hi", "temperature": 0}, "m", encode)
    with pytest.raises(OpenAIError, match="not served here"):
        parse_tokenize({"model": "other", "prompt": "hi"}, "m", encode)
