"""`disagg worker serve` as a real process: the HTTP contract in aggregated mode, errors
that name the field, metrics, and a clean stop on SIGTERM."""

from __future__ import annotations

import signal
import socket

import pytest

from disagg_worker.engine.kvcache import PagedKVCache
from disagg_worker.engine.model import ReferenceEngine, decode, encode, get_preset, kv_layout
from disagg_worker.serve.localrun import ChildError
from tests.integration.engine.conftest import StartWorker, get, metric, post


def test_completion_matches_the_engine_in_process(start_worker: StartWorker) -> None:
    worker = start_worker("both", seed=3)
    status, out = post(worker.url + "/v1/completions", {"prompt": "Hello", "max_tokens": 6})
    assert status == 200
    spec = get_preset("tiny")
    engine = ReferenceEngine(spec, PagedKVCache(kv_layout(spec, 16, 4)), seed=3)
    expected = engine.generate(encode("Hello"), [0, 1], 6)
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
    assert get(worker.url + "/debug/blocks") == {"used": 0, "free": 8, "held": {}}
    page = get(worker.url + "/metrics")
    assert metric(page, 'disagg_requests_total{kind="completion",outcome="ok"}') == 1
    assert metric(page, "disagg_kv_blocks_free") == 8


def test_errors_name_the_field_and_the_fix(start_worker: StartWorker) -> None:
    url = start_worker("both", num_blocks=4).url + "/v1/completions"
    cases = [
        ({"prompt": 5}, 400, "prompt", "prompt: must be a string or a list of token ids"),
        ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens", "max_tokens: must be at least 1"),
        ({"prompt": "x", "stream": True}, 400, "stream", "stream: streaming is not supported"),
        ({"prompt": "x", "model": "gpt"}, 404, "model", "model: 'gpt' is not served here"),
        ({"prompt": [1] * 100, "max_tokens": 1}, 503, None, "KV cache full: need 7 blocks"),
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
