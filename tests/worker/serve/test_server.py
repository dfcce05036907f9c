"""`disagg worker serve` as a real process: the HTTP contract in aggregated mode (completions
and chat, whole or streamed), errors that name the field, metrics, and a clean stop on
SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error

import pytest

from disagg_tools.local.children import ChildError
from disagg_worker.model.kvcache import PagedKVCache
from disagg_worker.model.model import (
    GenerationRequest,
    ReferenceModel,
    decode,
    encode,
    get_preset,
    kv_layout,
)
from tests.worker.serve.conftest import (
    StartWorker,
    get,
    metric,
    post,
    stream,
    wait_until,
)


def test_completion_matches_the_model_in_process(start_worker: StartWorker) -> None:
    worker = start_worker("both", seed=3)
    status, out = post(worker.url + "/v1/completions", {"prompt": "Hello", "max_tokens": 6})
    assert status == 200
    spec = get_preset("tiny")
    model = ReferenceModel(spec, PagedKVCache(kv_layout(spec, 16, 4)), seed=3)
    expected = model.generate(GenerationRequest(encode("Hello"), 6), [0, 1])
    choice = out["choices"][0]
    assert choice["token_ids"] == expected.tokens
    assert choice["text"] == decode(expected.tokens)
    assert out["usage"] == {"prompt_tokens": 6, "completion_tokens": 6, "total_tokens": 12}
    assert out["kv_transfer_params"] is None
    assert out["disagg"]["role"] == "both"


def test_token_id_prompts_and_blocks_are_returned(start_worker: StartWorker) -> None:
    worker = start_worker("both", num_blocks=8)
    body = {"prompt": [256, *range(40)], "max_tokens": 3, "ignore_eos": True}
    status, out = post(worker.url + "/v1/completions", body)
    assert status == 200 and len(out["choices"][0]["token_ids"]) == 3
    assert get(worker.url + "/debug/blocks") == {"used": 0, "free": 8, "held": {}, "waiting": 0}
    page = get(worker.url + "/metrics")
    assert metric(page, 'disagg_requests_total{kind="completion",outcome="ok"}') == 1
    assert metric(page, "disagg_kv_blocks_free") == 8


def test_errors_name_the_field_and_the_fix(start_worker: StartWorker) -> None:
    url = start_worker("both", num_blocks=4).url + "/v1/completions"
    cases = [
        ({"prompt": 5}, 400, "prompt", "prompt: must be a string or a list of token ids"),
        ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens", "max_tokens: must be an integer"),
        ({"prompt": "x", "top_p": 0.9}, 400, "top_p", "top_p: not supported by the reference"),
        ({"prompt": "x", "n": 2}, 400, "n", "n: not supported by the reference worker"),
        ({"prompt": "x", "model": "gpt"}, 404, "model", "model: 'gpt' is not served here"),
        (
            {"prompt": [1] * 100, "max_tokens": 1},
            400,
            "prompt",
            "prompt: the request needs 7 KV blocks and this cache has 4",
        ),
        (
            {"prompt": "x", "kv_transfer_params": {"do_remote_decode": True}},
            400,
            "kv_transfer_params.do_remote_decode",
            "kv_transfer_params.do_remote_decode: this worker's role is 'both'",
        ),
    ]
    for body, status, param, message in cases:
        got, out = post(url, body)
        assert (got, out["error"]["param"]) == (status, param), body
        assert out["error"]["message"].startswith(message), out
    assert get(url.replace("/v1/completions", "/debug/blocks"))["used"] == 0


def test_sigterm_stops_the_worker_and_frees_its_port(start_worker: StartWorker) -> None:
    worker = start_worker("both")
    assert get(worker.url + "/health")["status"] == "ok"
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", worker.ready["http_port"]))


def test_bad_settings_fail_at_start_naming_the_variable(start_worker: StartWorker) -> None:
    with pytest.raises(ChildError, match="DISAGG_MODEL: unknown reference model 'huge'"):
        start_worker("both", model="huge")


def _streamed(events: list[object], chat: bool) -> tuple[str, list[int], str | None]:
    """Text, token ids and finish reason of a completion or chat stream (then [DONE])."""
    assert events[-1] == "[DONE]"
    text, ids, reason = "", [], None
    for event in events[:-1]:
        assert isinstance(event, dict)
        assert event["object"] == ("chat.completion.chunk" if chat else "text_completion")
        (choice,) = event["choices"]
        text += choice["delta"].get("content", "") if chat else choice["text"]
        ids += choice.get("token_ids") or []
        reason = choice["finish_reason"] or reason
    return text, ids, reason


def test_streamed_text_equals_the_whole_answer(start_worker: StartWorker) -> None:
    url = start_worker("both").url
    body = {"prompt": "Stream me", "max_tokens": 12, "ignore_eos": True}
    _, whole = post(url + "/v1/completions", body)
    status, events, headers = stream(url + "/v1/completions", body)
    assert status == 200 and len(events) >= 13  # a chunk per token, then [DONE]
    text, ids, reason = _streamed(events, chat=False)
    assert ids == whole["choices"][0]["token_ids"] and text == whole["choices"][0]["text"]
    assert reason == "length" and headers["X-Request-Id"]
    usage = {**body, "stream_options": {"include_usage": True}}
    _, events, _ = stream(url + "/v1/completions", usage)
    assert events[-2]["usage"]["completion_tokens"] == 12 and events[-2]["choices"] == []


def test_chat_completion_whole_and_streamed(start_worker: StartWorker) -> None:
    url = start_worker("both").url
    messages = [{"role": "user", "content": "Hi"}]
    body = {"messages": messages, "max_completion_tokens": 7, "ignore_eos": True}
    status, chat = post(url + "/v1/chat/completions", body)
    assert status == 200 and chat["object"] == "chat.completion"
    message = chat["choices"][0]["message"]
    assert message["role"] == "assistant"
    # the documented template, as a plain completion: the same tokens
    _, plain = post(url + "/v1/completions", {"prompt": "user: Hi\nassistant: ",
                                               "max_tokens": 7, "ignore_eos": True})  # fmt: skip
    assert message["content"] == plain["choices"][0]["text"]
    assert chat["usage"] == plain["usage"]
    status, events, _ = stream(url + "/v1/chat/completions", body)
    assert status == 200 and events[0]["choices"][0]["delta"]["role"] == "assistant"
    text, ids, reason = _streamed(events, chat=True)
    assert (text, ids, reason) == (message["content"], plain["choices"][0]["token_ids"], "length")
    got, out = post(url + "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert (got, out["error"]["param"]) == (400, "messages[0].content")


def test_errors_before_a_stream_are_json(start_worker: StartWorker) -> None:
    url = start_worker("both").url
    status, (out,), _ = stream(url + "/v1/completions", {"prompt": "x", "max_tokens": 0})
    assert (status, out["error"]["param"]) == (400, "max_tokens")


def test_max_completion_tokens_is_honoured(start_worker: StartWorker) -> None:
    url = start_worker("both").url + "/v1/completions"
    body = {"prompt": "x", "max_completion_tokens": 3, "min_tokens": 3, "ignore_eos": True}
    status, out = post(url, body)
    assert status == 200 and len(out["choices"][0]["token_ids"]) == 3


def test_unknown_route_and_wrong_method_answer_json(start_worker: StartWorker) -> None:
    url = start_worker("both").url
    status, out = post(url + "/v1/embeddings", {"input": "x"})
    assert status == 404 and out["error"]["code"] == 404
    assert out["error"]["message"].startswith("/v1/embeddings: no such route")
    assert "POST /v1/chat/completions" in out["error"]["message"]
    try:
        get(url + "/v1/completions")
    except urllib.error.HTTPError as e:
        assert e.code == 405
        out = json.load(e)
    assert out["error"]["message"].startswith("GET /v1/completions: method not allowed; use POST")


def test_a_client_leaving_mid_stream_leaves_the_worker_serving(start_worker: StartWorker) -> None:
    worker = start_worker("both", num_blocks=32)
    body = {"prompt": "x", "max_tokens": 300, "ignore_eos": True, "stream": True}
    req = urllib.request.Request(
        worker.url + "/v1/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.readline().startswith(b"data: ")
    wait_until(lambda: get(worker.url + "/debug/blocks")["used"] == 0, 60, "blocks freed")
    status, out = post(worker.url + "/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert status == 200 and len(out["choices"][0]["token_ids"]) <= 2
    log = worker.log_path.read_text()
    assert "Traceback" not in log and "never retrieved" not in log, log[-2000:]
