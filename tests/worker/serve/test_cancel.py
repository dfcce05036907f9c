"""A request whose client leaves stops on the worker: the engine takes no further step for
it (its step counter stops), requests queued behind the engine never start, the blocks come
back only once the engine let go of them, and each cancel is counted by kind and stage.

Real `disagg worker serve` processes; the clients are raw sockets closed mid-request, as a
client that gives up (or a proxy at its deadline) closes its connection.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from disagg_worker.model.model import BOS
from tests.worker.serve.conftest import StartWorker, get, metric, post, wait_until

STEPS = "disagg_engine_steps_total"
RUNNING = "disagg_requests_running"
WAITING = "disagg_requests_waiting"
LONG_PROMPT = 2000  # one prompt forward of ~1 s on the tiny model here: a cancel lands in it


def cancelled(kind: str, stage: str) -> str:
    return f'disagg_requests_cancelled_total{{kind="{kind}",stage="{stage}"}}'


def send(url: str, body: dict[str, object], path: str = "/v1/completions") -> socket.socket:
    """POST ``body`` over a socket of our own and leave it open (unread): closing it is the
    client leaving."""
    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=30)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def page(url: str) -> str:
    text = get(url + "/metrics")
    assert isinstance(text, str)
    return text


def prompt(n: int, salt: int = 0) -> list[int]:
    return [BOS, *((salt + i) % 200 + 2 for i in range(n - 1))]


def test_a_client_that_leaves_mid_prefill_stops_the_prefill(start_worker: StartWorker) -> None:
    worker = start_worker("prefill")
    assert post(worker.url + "/v1/completions", _prefill_body(prompt(8)))[0] == 200  # warm
    before, blocks = metric(page(worker.url), STEPS), get(worker.url + "/debug/blocks")
    socks = [send(worker.url, _prefill_body(prompt(LONG_PROMPT, salt))) for salt in range(3)]

    def one_computing_two_queued() -> bool:
        text = page(worker.url)
        return metric(text, RUNNING) == 3 and metric(text, WAITING) == 2

    wait_until(one_computing_two_queued, 10, "one prefill in the engine, two waiting")
    for sock in socks:
        sock.close()
    wait_until(lambda: metric(page(worker.url), RUNNING) == 0, 5, "the prefills to stop")
    text = page(worker.url)
    # the prompt forward in flight at the close finishes (a step is not interrupted); the
    # first-token step after it and both queued prompts never run
    assert metric(text, STEPS) - before <= 1
    assert metric(text, cancelled("prefill", "running")) == 1
    assert metric(text, cancelled("prefill", "queued")) == 2
    assert get(worker.url + "/debug/blocks") == blocks  # the warm-up's hold for its decode
    time.sleep(0.5)  # nothing still runs on the engine for them
    assert metric(page(worker.url), STEPS) == metric(text, STEPS)
    status, out = post(worker.url + "/v1/completions", _prefill_body(prompt(64)))
    assert status == 200, out


def test_a_client_that_leaves_a_stream_stops_the_generation(start_worker: StartWorker) -> None:
    worker = start_worker("both")
    body = {"prompt": prompt(16), "max_tokens": 4000, "ignore_eos": True, "stream": True}
    before = metric(page(worker.url), STEPS)
    sock = send(worker.url, body)
    sock.recv(4096)  # the head and the first events: it is generating
    sock.close()
    wait_until(lambda: metric(page(worker.url), RUNNING) == 0, 5, "the generation to stop")
    text = page(worker.url)
    steps = metric(text, STEPS) - before
    assert 0 < steps < 1000, steps  # 4000 steps (~12 s) had it run out
    assert metric(text, cancelled("completion", "running")) == 1
    assert get(worker.url + "/debug/blocks")["used"] == 0
    time.sleep(0.5)
    assert metric(page(worker.url), STEPS) == metric(text, STEPS)


def test_a_whole_answer_whose_client_left_stops_too(start_worker: StartWorker) -> None:
    worker = start_worker("both")
    body = {"prompt": prompt(16), "max_tokens": 4000, "ignore_eos": True}
    sock = send(worker.url, body)
    wait_until(lambda: metric(page(worker.url), STEPS) > 50, 10, "the generation to run")
    sock.close()
    wait_until(lambda: metric(page(worker.url), RUNNING) == 0, 5, "the generation to stop")
    text = page(worker.url)
    assert metric(text, cancelled("completion", "running")) == 1
    assert get(worker.url + "/debug/blocks")["used"] == 0


def _prefill_body(tokens: list[int]) -> dict[str, object]:
    return {"prompt": tokens, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
