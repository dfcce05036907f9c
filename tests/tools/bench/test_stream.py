"""`disagg_tools.bench.stream`: a streamed completion timed from its events, checked on
fixed inputs whose answers are known."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web

from disagg_tools.bench.stream import StreamError, read_events, stream_completion
from disagg_tools.local.children import serve_in_thread


def _event(payload: Any) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode())


def _chunk(text: str, ids: list[int] | None, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "token_ids": ids, "finish_reason": finish}
    return _event({"object": "text_completion", "choices": [choice]})


def test_first_and_last_token_are_timed_from_the_events_that_carry_them() -> None:
    # sent at 10.000 s: headers at 10.004, tokens at 10.020, .030, .045, then the end
    lines = [
        (10.020, _chunk("a", [97])),
        (10.021, b""),
        (10.030, _chunk("b", [98])),
        (10.045, _chunk("c", [99])),
        (10.050, _chunk("", None, "length")),
        (10.051, _event({"choices": [], "usage": {"completion_tokens": 3}})),
        (10.052, _event(b"[DONE]")),
    ]
    out = read_events(lines, start=10.0)
    assert out.ttft_ms == pytest.approx(20.0)
    assert out.ttlt_ms == pytest.approx(45.0)
    assert (out.tokens, out.token_ids, out.text) == (3, [97, 98, 99], "abc")
    assert out.evidence == {}


def test_a_stream_without_token_ids_counts_its_text_chunks_and_keeps_its_evidence() -> None:
    chat = [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]
    tail = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "kv_transfer_params": {"remote_block_ids": [3]}}  # fmt: skip
    tops = [{"token_id:7": -0.1, "token_id:9": -2.5}]
    bang = [{"index": 0, "delta": {"content": "!"}, "logprobs": {"top_logprobs": tops}}]
    lines = [
        (1.5, _event({"choices": chat})),
        (1.7, _event({"choices": bang})),
        (1.8, _event(tail)),
        (1.9, _event(b"[DONE]")),
    ]
    out = read_events(lines, start=1.0, route={"path": "pd"})
    assert (out.ttft_ms, out.ttlt_ms) == (pytest.approx(500.0), pytest.approx(700.0))
    assert (out.tokens, out.token_ids, out.text) == (2, [], "hi!")
    assert out.evidence == {"kv_transfer_params": {"remote_block_ids": [3]}}
    assert (out.route, out.top_logprobs) == ({"path": "pd"}, tops)


def test_an_error_event_or_a_missing_end_is_a_stream_error() -> None:
    broken = [(1.1, _chunk("a", [97])), (1.2, _event({"error": {"message": "stream broken"}}))]
    with pytest.raises(StreamError, match="stream broken"):
        read_events(broken, start=1.0)
    with pytest.raises(StreamError, match=r"\[DONE\]"):
        read_events([(1.1, _chunk("a", [97]))], start=1.0)
    with pytest.raises(StreamError, match="without a token"):
        read_events([(1.1, _chunk("", None, "stop")), (1.2, _event(b"[DONE]"))], start=1.0)


def _paced(delays_s: list[float]) -> web.Application:
    """A fake server (edge: known answer): waits ``delays_s[i]`` before token i."""

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is True and body["max_tokens"] == len(delays_s)
        route = {"X-Disagg-Path": "pd", "X-Disagg-Prefill-Hop-Ms": "4.250"}
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **route})
        await resp.prepare(request)
        for i, delay in enumerate(delays_s):
            await asyncio.sleep(delay)
            await resp.write(_chunk(chr(65 + i), [65 + i]) + b"\n\n")
        await resp.write(_event(b"[DONE]") + b"\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    return app


def test_stream_completion_times_tokens_as_they_arrive_not_when_the_answer_ends() -> None:
    with serve_in_thread(_paced([0.15, 0.0, 0.4])) as url:
        out = stream_completion(url + "/v1/completions", {"prompt": [1, 2], "max_tokens": 3})
    assert (out.tokens, out.token_ids, out.text) == (3, [65, 66, 67], "ABC")
    assert out.route == {"path": "pd", "prefill_hop_ms": 4.25}  # the router's headers, typed
    # the server slept 150 ms before the first token and 400 ms more before the last: each
    # is timed when it arrives (a late first token still leaves 250 ms between the two)
    assert out.ttft_ms >= 150.0 and out.ttlt_ms >= 550.0
    assert out.ttlt_ms - out.ttft_ms >= 150.0
