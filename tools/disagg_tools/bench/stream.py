"""A streamed completion timed as its client sees it, and the spread of a figure: what
every benchmark reports a first token with.

Benchmark tool (I/O: one HTTP request per call; the event parsing computes only). First
tokens are timed from the stream of a request that generates at least :data:`MIN_TOKENS`
tokens, never from a ``max_tokens: 1`` answer: a reference decode answers that with the
prefill's first token without an engine step of its own, and a one-token request never
waits for the decode steps it competes with. :func:`spread` and :func:`percentile` are
re-exported from :mod:`.spread`, which imports no I/O, for pure modules to use.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.bench.rules.spread import percentile, spread
from disagg_worker.serve.proxy.hops import route_of

__all__ = ["MIN_TOKENS", "StreamError", "Streamed", "percentile", "read_events", "spread",
           "stream_completion"]  # fmt: skip

MIN_TOKENS = 16  # tokens a timed request generates at least
EVIDENCE_KEYS = ("disagg", "kv_transfer_params")


class StreamError(RuntimeError):
    """A stream that broke, said it failed, or ended without a token."""


@dataclass(frozen=True)
class Streamed:
    """One streamed completion as its client received it (times in ms from the send).

    ``ttft_ms``: send → the first event carrying a token; ``ttlt_ms``: send → the last one;
    ``tokens``: tokens received; ``token_ids`` and ``text`` as the events carry them
    (``token_ids`` empty when they carry none: vLLM without ``return_token_ids``);
    ``top_logprobs``: each position's ``logprobs.top_logprobs`` (vLLM with ``logprobs``,
    else empty). The path evidence: ``route``, what the router's stream headers say
    (:func:`disagg_worker.serve.proxy.hops.route_of`; empty from a worker), and
    ``evidence``, the ``disagg`` and ``kv_transfer_params`` objects any event carried (later
    ones win; the reference worker's streams carry none: whether its decode read the KV is
    in its whole answers and its counters)."""

    ttft_ms: float
    ttlt_ms: float
    tokens: int
    token_ids: list[int]
    text: str
    evidence: dict[str, Any] = field(default_factory=dict)
    route: dict[str, Any] = field(default_factory=dict)
    top_logprobs: list[dict[str, float]] = field(default_factory=list)


def stream_completion(url: str, body: dict[str, Any], timeout_s: float = 300.0) -> Streamed:
    """POST ``body`` with ``"stream": true`` to ``url`` (an OpenAI ``/v1/completions`` or
    ``/v1/chat/completions``) and time its server-sent events as they arrive. An ``{"error":
    ...}`` event, or a stream that ends before ``data: [DONE]`` or without a token, raises
    :class:`StreamError`; an HTTP error status raises urllib's HTTPError."""
    data = json.dumps({**body, "stream": True}).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        # each line is timed as it arrives: http.client reads chunked bodies line by line
        lines = [(time.perf_counter(), raw) for raw in resp]
        route = route_of(resp.headers)
    return read_events(lines, start, route)


def _choice_text(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return str(delta.get("content") or "")
    return str(choice.get("text") or "")


class _Received:
    """What the events carried so far."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.ids: list[int] = []
        self.text: list[str] = []
        self.tops: list[dict[str, float]] = []
        self.evidence: dict[str, Any] = {}

    def add(self, at: float, event: dict[str, Any]) -> None:
        if "error" in event:
            raise StreamError(f"the stream reported an error: {event['error']}")
        self.evidence.update({k: event[k] for k in EVIDENCE_KEYS if k in event})
        for choice in event.get("choices") or []:
            piece, carried = _choice_text(choice), choice.get("token_ids") or []
            if piece or carried:
                self.times.append(at)
                self.text.append(piece)
                self.ids.extend(carried)
            self.tops.extend((choice.get("logprobs") or {}).get("top_logprobs") or [])

    def streamed(self, start: float, route: dict[str, Any]) -> Streamed:
        if not self.times:
            raise StreamError("the stream ended without a token")
        # ids when the events carry them (one event may carry several), else one per event
        tokens = len(self.ids) if self.ids else len(self.times)
        ms = 1000.0
        return Streamed((self.times[0] - start) * ms, (self.times[-1] - start) * ms, tokens,
                        self.ids, "".join(self.text), self.evidence, route, self.tops)  # fmt: skip


def read_events(
    lines: Iterable[tuple[float, bytes]], start: float, route: dict[str, Any] | None = None
) -> Streamed:
    """:class:`Streamed` from the stream's (arrival time, raw line) pairs; ``route``: what
    its headers said of its path."""
    got = _Received()
    for at, raw in lines:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue  # blank separators, comments
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return got.streamed(start, route or {})
        got.add(at, json.loads(payload))
    raise StreamError("the stream ended before data: [DONE]")
