"""Work stops upstream when nobody waits for it: the proxy's deadline, or its client leaving,
closes the hop's connection, and the prefill or decode worker it reached cancels the
request (its engine takes no further step; the cancel is counted there).

Real `disagg proxy` and `disagg worker serve` processes with NIXL between them; the clients
are raw sockets closed mid-request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.worker.serve.conftest import Workers, get, metric, post, wait_until
from tests.worker.serve.test_cancel import RUNNING, STEPS, cancelled, page, prompt, send

DEADLINE_S = 2.0
PACE = 100.0  # tokens/s: a 2000-token prefill holds its engine 20 s
# How long a stop may take: far below the work it stops (20 s of prefill, ~12 s or more of
# decode; the step counts say it stopped early), far above a loaded host's delays.
STOP_S = 10.0


@dataclass
class Stack:
    prefill: str
    decode: str
    proxy: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    group = Workers(tmp_path_factory.mktemp("cancel"))
    try:
        children = [
            group.spawn("prefill", prefill_pace_tokens_per_s=PACE),
            group.spawn("decode"),
        ]
        group.ready(*children)
        p, d = (c.url for c in children)  # type: ignore[attr-defined]
        proxy = group.proxy([p], [d], "--timeout-s", str(DEADLINE_S))
        # the first P/D request sets up NIXL between the two (not what is timed here)
        status, out = post(proxy + "/v1/completions", {"prompt": prompt(8), "max_tokens": 2})
        assert status == 200, out
        yield Stack(p, d, proxy)
    finally:
        group.stop()


def _idle(url: str) -> None:
    wait_until(lambda: metric(page(url), RUNNING) == 0, 15, f"{url} to be idle")


def test_the_deadline_cancels_the_decode_hop(stack: Stack) -> None:
    _idle(stack.decode)
    before = page(stack.decode)
    body = {"prompt": prompt(16), "max_tokens": 4000, "ignore_eos": True}  # ~12 s of decode
    began = time.monotonic()
    status, out = post(stack.proxy + "/v1/completions", body)
    assert status == 504, out
    assert "decode" in out["error"]["message"]
    assert time.monotonic() - began < DEADLINE_S + 5
    # the decode notices its connection closed and stops at a step
    wait_until(lambda: metric(page(stack.decode), RUNNING) == 0, STOP_S, "the decode to stop")
    after = page(stack.decode)
    key = cancelled("decode", "running")
    assert metric(after, key) - metric(before, key) == 1
    assert metric(after, STEPS) - metric(before, STEPS) < 4000 / 2
    time.sleep(0.5)
    assert metric(page(stack.decode), STEPS) == metric(after, STEPS)
    assert get(stack.decode + "/debug/blocks")["used"] == 0


def test_a_client_that_leaves_cancels_the_prefill_hop(stack: Stack) -> None:
    _idle(stack.prefill)
    before_prefill, before_decode = page(stack.prefill), page(stack.decode)
    sock = send(stack.proxy, {"prompt": prompt(2000, 7), "max_tokens": 2})
    wait_until(lambda: metric(page(stack.prefill), RUNNING) == 1, STOP_S, "the prefill hop")
    sock.close()
    # the paced prefill would hold its engine 20 s: it stops at its next step instead
    wait_until(lambda: metric(page(stack.prefill), RUNNING) == 0, STOP_S, "the prefill to stop")
    key = cancelled("prefill", "running")
    assert metric(page(stack.prefill), key) - metric(before_prefill, key) == 1
    assert get(stack.prefill + "/debug/blocks")["used"] == 0
    time.sleep(0.5)  # and no decode hop was sent for it
    requests = 'disagg_requests_total{kind="decode",outcome="ok"}'
    assert metric(page(stack.decode), requests) == metric(before_decode, requests)


def test_a_client_that_leaves_a_stream_cancels_the_decode(stack: Stack) -> None:
    _idle(stack.decode)
    before = page(stack.decode)
    body = {"prompt": prompt(16, 3), "max_tokens": 4000, "ignore_eos": True, "stream": True}
    sock = send(stack.proxy, body)
    sock.recv(4096)  # decode's stream has begun
    sock.close()
    wait_until(lambda: metric(page(stack.decode), RUNNING) == 0, STOP_S, "the decode to stop")
    after = page(stack.decode)
    key = cancelled("decode", "running")
    assert metric(after, key) - metric(before, key) == 1
    assert metric(after, STEPS) - metric(before, STEPS) < 4000 / 2
